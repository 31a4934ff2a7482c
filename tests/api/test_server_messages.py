"""What the server tells clients and its log: no server paths in errors, Ollama's truncation warning."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from conftest import MODEL
from starlette.requests import Request
from starlette.testclient import TestClient

from cllm_ollama.api.errors import public_message
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.store.create import import_gguf
from cllm_ollama.store.store import ModelStore

pytestmark = pytest.mark.model


@pytest.fixture
def broken_client(tmp_path: Path, qwen3_gguf: Path, settings: Settings) -> TestClient:
    """An app whose model "broken" parses as a GGUF but that llama.cpp cannot load (data cut short)."""
    broken = tmp_path / "broken.gguf"
    data = qwen3_gguf.read_bytes()
    broken.write_bytes(data[: len(data) * 9 // 10])
    import_gguf(ModelStore(settings.models_dir), "broken", broken)
    return TestClient(create_app(settings), base_url="http://localhost")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/generate", {"model": "broken", "prompt": "hi", "stream": False}),
        ("/api/generate", {"model": "broken"}),  # the load sentinel
        ("/api/chat", {"model": "broken", "messages": [{"role": "user", "content": "hi"}]}),
        ("/api/embed", {"model": "broken", "input": "hi"}),
        ("/v1/chat/completions", {"model": "broken", "messages": [{"role": "user", "content": "hi"}]}),
    ],
)
def test_a_load_error_names_the_model_not_the_servers_path(
    broken_client: TestClient, settings: Settings, caplog: pytest.LogCaptureFixture, path: str, body: dict[str, Any]
) -> None:
    with broken_client as client, caplog.at_level(logging.ERROR, logger="cllm.api"):
        r = client.post(path, json=body)
    assert r.status_code == 500
    assert str(settings.models_dir) not in r.text and "/blobs/" not in r.text
    assert "could not load model broken:latest" in r.text
    # The operator still gets the file.
    assert any(str(settings.models_dir) in record.getMessage() for record in caplog.records)


def test_a_prompt_cut_to_fit_is_logged_as_ollama_does(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    body = {"model": MODEL, "prompt": "word " * 1000, "stream": False, "options": {"num_predict": 1}}
    with caplog.at_level(logging.WARNING, logger="cllm.api"):
        out = client.post("/api/generate", json=body).json()
    warnings = [r for r in caplog.records if r.getMessage().startswith("truncating input prompt")]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    fields = dict(item.split("=") for item in warnings[0].getMessage().removeprefix("truncating input prompt ").split())
    assert set(fields) == {"limit", "prompt", "keep", "new"}
    assert fields["limit"] == "256" and int(fields["prompt"]) > 1000 and fields["keep"] == "4"
    assert int(fields["new"]) == out["prompt_eval_count"] < 256


def test_a_prompt_that_fits_logs_nothing(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    body = {"model": MODEL, "prompt": "a short one", "stream": False, "options": {"num_predict": 1}}
    with caplog.at_level(logging.WARNING, logger="cllm.api"):
        assert client.post("/api/generate", json=body).status_code == 200
    assert not [r for r in caplog.records if "truncating" in r.getMessage()]


def test_any_error_loses_the_model_stores_location(settings: Settings) -> None:
    """The error boundary's safety net, for messages no handler rewrote (an OSError's, say)."""
    request = Request({"type": "http", "app": create_app(settings), "method": "POST", "path": "/api/x", "headers": []})
    message = f"internal error: [Errno 2] No such file: '{settings.models_dir}/blobs/sha256-ab'"
    assert public_message(request, message) == "internal error: [Errno 2] No such file: 'blobs/sha256-ab'"
    assert public_message(request, "model 'x' not found") == "model 'x' not found"
