"""Fixtures for inference over HTTP: a store holding the tiny qwen3 model, and an app on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import gguf
import pytest
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.store import manifests as mt
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_qwen3

MODEL = "tiny"


@pytest.fixture(scope="session")
def qwen3_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer qwen3 with Qwen3's chat template; Q8_0 weights of scale 0.5 (peaked logits)."""
    return write_qwen3(tmp_path_factory.mktemp("gguf") / "tiny-qwen3.gguf", qtype=gguf.GGMLQuantizationType.Q8_0)


def install(store: ModelStore, name: str, path: Path, params: bytes | None = None) -> None:
    with open(path, "rb") as f:
        digest = store.write_blob_from(f)
    layers = [mt.Layer(mt.MODEL, digest, path.stat().st_size)]
    if params is not None:
        layers.append(store.add_layer(params, mt.PARAMS)[0])
    store.write_manifest(name, {"model_format": "gguf", "model_family": "qwen3"}, layers)


@pytest.fixture
def settings(tmp_path: Path, qwen3_gguf: Path) -> Settings:
    store = ModelStore(tmp_path / "models")
    install(store, MODEL, qwen3_gguf)
    return Settings(models_dir=tmp_path / "models", num_parallel=4, context_length=256, num_thread=2)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as c:
        yield c
