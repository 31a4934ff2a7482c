"""Fixtures for inference over HTTP: a store holding the tiny qwen3 model, and an app on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import gguf
import pytest
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.store.create import import_gguf
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_qwen3

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
