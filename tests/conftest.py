"""Fixtures shared by every test directory: a tiny GGUF, an empty model store, a fake Hugging Face Hub;
every official SDK client closed when its test module ends."""

from __future__ import annotations

import contextlib
import importlib
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ollama
import pytest
import respx
from fakehub import FakeHub

from cllm_ollama.chatformat import jinja_workers
from cllm_ollama.config import Settings
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_qwen3


@pytest.fixture(autouse=True, scope="session")
def tls_contexts_shared() -> Iterator[None]:
    """One verifying TLS context per CA bundle for the whole run: every HTTP client the suite makes
    (Starlette's TestClient, the SDKs, the CLI's and the store's httpx) loads the bundle into a
    fresh context at 43 ms each, some 13 s of the fast suite, for servers on loopback that speak
    plain HTTP. Nothing here speaks TLS, so a context shared among them is never used."""
    made: dict[tuple[Any, ...], ssl.SSLContext] = {}
    create = ssl.create_default_context

    def shared(
        purpose: ssl.Purpose = ssl.Purpose.SERVER_AUTH, *, cafile: Any = None, capath: Any = None, cadata: Any = None
    ) -> ssl.SSLContext:
        key = (purpose, cafile, capath, cadata)
        if key not in made:
            made[key] = create(purpose, cafile=cafile, capath=capath, cadata=cadata)
        return made[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ssl, "create_default_context", shared)
        yield


@pytest.fixture(autouse=True, scope="module")
def render_workers_closed() -> Iterator[None]:
    """Renders called without an app (whose lifespan closes the shared worker pool) leave idle
    Jinja workers behind: stopped after each module, not left running to the interpreter's exit."""
    yield
    jinja_workers.close_workers()


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer random-weight qwen3 (F32) with Qwen3's chat template, written once per session."""
    return write_qwen3(tmp_path_factory.mktemp("tiny-gguf") / "tiny-qwen3.gguf")


@pytest.fixture
def models_dir(tmp_path: Path) -> Path:
    return tmp_path / "models"


@pytest.fixture
def model_store(models_dir: Path) -> ModelStore:
    return ModelStore(models_dir)


@pytest.fixture
def store_settings(models_dir: Path) -> Settings:
    """Settings for an app over the (initially empty) ``model_store``."""
    return Settings(models_dir=models_dir)


@pytest.fixture
def fake_hub() -> Iterator[FakeHub]:
    """The Hub's HTTP API answered by respx; loopback traffic (test servers) passes through.

    Names the catalog does not know go to Ollama's registry: here it has none of them, and says
    so as registry.ollama.ai does (404, MANIFEST_UNKNOWN). tests/store/test_registry_pull.py
    tests the registry itself.
    """
    with respx.mock(assert_all_called=False) as router:
        router.route(host="127.0.0.1").pass_through()
        router.route(host="registry.ollama.ai").respond(
            404, json={"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]}
        )
        yield FakeHub(router)


def _sdk_clients() -> list[type[Any]]:
    """The official clients' sync classes that pool connections (those installed)."""
    classes: list[type[Any]] = [ollama.Client]
    for module, name in (("openai", "OpenAI"), ("anthropic", "Anthropic")):
        with contextlib.suppress(ImportError):
            classes.append(getattr(importlib.import_module(module), name))
    return classes


@pytest.fixture(autouse=True, scope="module")
def sdk_clients_closed() -> Iterator[None]:
    """Every ``ollama.Client``, ``openai.OpenAI`` and ``anthropic.Anthropic`` a test module makes
    (its fixtures' too), closed when the module ends: the SDKs close their pooled connections only
    when asked, and ``ollama.Client(url).chat(...)`` would otherwise leave its socket to the garbage
    collector (a ResourceWarning, an error here, in whichever test runs then)."""
    made: list[Any] = []
    with pytest.MonkeyPatch.context() as patch:
        for cls in _sdk_clients():
            patch.setattr(cls, "__init__", _tracking(cls.__init__, made))
        yield
    for client in made:
        client.close()


def _tracking(init: Any, made: list[Any]) -> Any:
    def tracked(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    return tracked
