"""A stream for a model that must load first gets its headers while the load goes on (issue 32):
clients with read timeouts see an answer begin, and a load that fails then ends the stream with
an error object. Forced, not timed: the scripted model's load blocks until the test lets it go."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import gguf
import httpx
import pytest
from scripted import ScriptedModel, scripted_pool
from serving import serve_in_thread

from cllm_ollama.api.services import services
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.errors import InsufficientMemory
from cllm_ollama.store.create import import_gguf
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_qwen3

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "think": False}


class Gate:
    """Loads that wait until ``open``; with ``fail``, the load then fails for want of memory."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.fail = False

    def load(self, spec: LoadSpec, script: list[str | BaseException]) -> ScriptedModel:
        assert self.opened.wait(60)
        if self.fail:
            raise InsufficientMemory("model requires more system memory (9.0 GiB) than is available (1.0 GiB)")
        return ScriptedModel(spec, script)


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[tuple[httpx.Client, Gate]]:
    path = write_qwen3(tmp_path / "tiny.gguf", qtype=gguf.GGMLQuantizationType.Q8_0)
    import_gguf(ModelStore(tmp_path / "models"), "tiny", path)
    settings = Settings(models_dir=tmp_path / "models", num_parallel=2, context_length=256, num_thread=1)
    app = create_app(replace(settings, load_headers=0.2))
    gate = Gate()
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        services(app).pool = scripted_pool(["Hello", "."], make=gate.load)
        try:
            yield client, gate
        finally:
            gate.opened.set()


def test_a_stream_gets_its_headers_while_its_model_loads(gated: tuple[httpx.Client, Gate]) -> None:
    client, gate = gated
    with client.stream("POST", "/api/chat", json=CHAT) as r:
        assert r.status_code == 200 and not gate.opened.is_set()  # the load has not ended
        gate.opened.set()
        lines = [json.loads(line) for line in r.iter_lines() if line]
    assert "".join(x["message"]["content"] for x in lines) == "Hello." and lines[-1]["done"]


def test_a_load_that_fails_after_the_headers_ends_the_stream_with_its_error(gated: tuple[httpx.Client, Gate]) -> None:
    client, gate = gated
    gate.fail = True
    with client.stream("POST", "/api/chat", json=CHAT) as r:
        assert r.status_code == 200
        gate.opened.set()
        lines = [json.loads(line) for line in r.iter_lines() if line]
    assert lines == [{"error": "model requires more system memory (9.0 GiB) than is available (1.0 GiB)"}]
    # Not streamed: the status, as before.
    r2 = client.post("/api/chat", json=CHAT | {"stream": False})
    assert r2.status_code == 500 and "more system memory" in r2.json()["error"]
