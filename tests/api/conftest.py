"""Fixtures for inference over HTTP: a store holding the tiny qwen3 model, and an app on it; an app
whose store has a model that sees."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import gguf
import pytest
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.store.create import import_gguf
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_qwen3, write_vision

MODEL = "tiny"
ENDLESS = "endless"  # never emits end-of-generation: a request runs until its limit


@pytest.fixture(scope="session")
def qwen3_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer qwen3 with Qwen3's chat template; Q8_0 weights of scale 0.5 (peaked logits)."""
    return write_qwen3(tmp_path_factory.mktemp("gguf") / "tiny-qwen3.gguf", qtype=gguf.GGMLQuantizationType.Q8_0)


@pytest.fixture(scope="session")
def endless_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gguf") / "endless-qwen3.gguf"
    return write_qwen3(path, qtype=gguf.GGMLQuantizationType.Q8_0, endless=True)


@pytest.fixture
def settings(tmp_path: Path, qwen3_gguf: Path, endless_gguf: Path) -> Settings:
    store = ModelStore(tmp_path / "models")
    import_gguf(store, MODEL, qwen3_gguf)
    import_gguf(store, ENDLESS, endless_gguf)
    return Settings(models_dir=tmp_path / "models", num_parallel=4, context_length=256, num_thread=2)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        yield c


@pytest.fixture
def seeing(tmp_path: Path) -> Iterator[TestClient]:
    """An app whose store has "eyes": the tiny gemma3 created with its projector, as a user would."""
    settings = Settings(models_dir=tmp_path / "models")
    text, mmproj = write_vision(tmp_path / "vision")
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        files = {}
        for path in (text, mmproj):
            data = path.read_bytes()
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            assert client.post(f"/api/blobs/{digest}", content=data).status_code == 201
            files[path.name] = digest
        r = client.post("/api/create", json={"model": "eyes", "files": files, "stream": False})
        assert r.status_code == 200, r.text
        yield client
