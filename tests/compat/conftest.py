"""One live cllm for every compat test: the tiny qwen3 imported through the store's create path.

Set ``CLLM_COMPAT_URL`` (as ``compat/run.py`` does) to run the same tests against an already
running server, e.g. a ``cllm serve`` process, that has the tiny model installed as ``tiny``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gguf
import pytest
from harness.codex import RequestLog
from scripted import scripted_turns
from serving import serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.store.create import CreateRequest, create_model
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_qwen3

MODEL = "tiny"
URL_ENV = "CLLM_COMPAT_URL"


def install_tiny(
    models_dir: Path, work_dir: Path, parameters: dict[str, Any] | None = None, *, endless: bool = False
) -> None:
    """Write the tiny qwen3 (Q8_0, peaked logits: greedy output is stable under batching) and create
    ``tiny`` (with the Modelfile ``parameters`` given); ``endless``: one that never ends a generation."""
    path = write_qwen3(work_dir / "tiny-qwen3.gguf", qtype=gguf.GGMLQuantizationType.Q8_0, endless=endless)
    store = ModelStore(models_dir)
    with open(path, "rb") as f:
        digest = store.write_blob_from(f)
    request: dict[str, Any] = {"model": MODEL, "files": {path.name: digest}}
    if parameters:
        request["parameters"] = parameters
    create_model(store, CreateRequest.from_json(request), lambda _: None)


@pytest.fixture(scope="session")
def compat_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL (no trailing slash) of a cllm that serves ``tiny``."""
    external = os.environ.get(URL_ENV)
    if external:
        yield external.rstrip("/")
        return
    root = tmp_path_factory.mktemp("compat")
    install_tiny(root / "models", root)
    settings = Settings(models_dir=root / "models", num_parallel=4, context_length=512, num_thread=2)
    with serve_in_thread(create_app(settings)) as url:
        yield url


@contextmanager
def serve_tiny(root: Path, *, endless: bool = False) -> Iterator[str]:
    """A cllm serving ``tiny`` from a store under ``root``, for one module alone (its tests reload the model)."""
    install_tiny(root / "models", root, endless=endless)
    settings = Settings(models_dir=root / "models", num_parallel=2, context_length=512, num_thread=2)
    with serve_in_thread(create_app(settings)) as url:
        yield url


@pytest.fixture(scope="module")
def own_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a cllm serving ``tiny`` for one module alone (its tests reload the model)."""
    with serve_tiny(tmp_path_factory.mktemp("own")) as url:
        yield url


@pytest.fixture(scope="module")
def keyed_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a cllm serving ``tiny`` that requires one of the keys ``other`` and ``k-compat``."""
    root = tmp_path_factory.mktemp("keyed")
    install_tiny(root / "models", root)
    settings = Settings(models_dir=root / "models", context_length=512, num_thread=2, api_keys=("other", "k-compat"))
    with serve_in_thread(create_app(settings)) as url:
        yield url


@pytest.fixture(scope="module")
def agent_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store for the coding agents' checks: the tiny qwen3 as ``tiny``, its answers kept short
    (random weights ramble, and the agents' prompts are long already)."""
    root = tmp_path_factory.mktemp("agent")
    install_tiny(root / "models", root, {"num_predict": 48})
    return root


@pytest.fixture
def scripted_agent(agent_root: Path) -> Iterator[tuple[str, RequestLog, list[list[str | BaseException]]]]:
    """A live server (the tiny model installed, its engine scripted turn by turn) behind a RequestLog."""
    with scripted_turns(agent_root / "models", RequestLog) as (url, log, turns):
        assert isinstance(log, RequestLog)
        yield url, log, turns
