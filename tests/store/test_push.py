"""Push to Ollama's registry, against the loopback stand-in (tests/fakeregistry.py): the HEAD check,
the upload (PATCH parts, or PUT to where a 307 sends them, as ollama.com does), the commit with the
digest, the manifest, the token, Ollama's statuses. tests/test_docker_registry.py pushes to a real
registry server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from fakeregistry import TOKEN, FakeRegistry, fake_registry, statuses

from cllm_ollama.errors import CllmError, NotFound
from cllm_ollama.store import download
from cllm_ollama.store.create import CreateRequest, create_model, import_gguf
from cllm_ollama.store.push import push_model
from cllm_ollama.store.registry_pull import RegistryOptions
from cllm_ollama.store.store import ModelStore


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeRegistry]:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with fake_registry() as state:
        yield state


@pytest.fixture
def model(model_store: ModelStore, tiny_gguf: Path) -> bytes:
    """``me/tiny`` with a template and parameters; returns its manifest."""
    import_gguf(model_store, "base", tiny_gguf)
    body = {"model": "me/tiny", "from": "base", "template": "{{ .Prompt }}", "parameters": {"temperature": 0.2}}
    record = create_model(model_store, CreateRequest.from_json(body), lambda e: None)
    return model_store.manifest_bytes(record.name)


def push(store: ModelStore, registry: FakeRegistry, name: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    push_model(store, name, events.append, options=RegistryOptions(registry_url=registry.url))
    return events


@pytest.mark.parametrize("redirect", [False, True], ids=["patch", "redirected-to-storage"])
def test_push_uploads_each_blob_then_the_manifest(
    model_store: ModelStore, registry: FakeRegistry, model: bytes, redirect: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(download, "MIN_PART_SIZE", 100_000)  # the GGUF goes in several parts
    registry.require_token = True
    registry.redirect_uploads = redirect
    events = push(model_store, registry, "me/tiny")

    layers = [*orjson.loads(model)["layers"], orjson.loads(model)["config"]]
    assert statuses(events) == [
        "retrieving manifest",
        *(f"pushing {layer['digest'][7:19]}" for layer in layers),
        "pushing manifest",
        "success",
    ]
    assert registry.manifests[("me/tiny", "latest")] == model  # byte for byte, so the same digest
    for layer in layers:
        path = model_store.blob_path(layer["digest"])
        assert registry.blobs[layer["digest"]] == path.read_bytes()
    gguf = layers[0]
    progress = [e for e in events if e.get("digest") == gguf["digest"]]
    assert progress[-1] == {
        "status": f"pushing {gguf['digest'][7:19]}",
        "digest": gguf["digest"],
        "total": gguf["size"],
        "completed": gguf["size"],
    }
    patches = registry.seen("PATCH")
    assert len(patches) == len(download.plan_parts(gguf["size"])) + len(layers) - 1
    assert patches[0].headers["Content-Range"] == "0-99999" and patches[0].headers["X-Redirect-Uploads"] == "1"
    assert all(r.headers.get("Authorization") == f"Bearer {TOKEN}" for r in patches)
    parts = registry.seen("PUT", server="cdn")
    assert len(parts) == (len(patches) if redirect else 0)
    assert not any("Authorization" in r.headers for r in parts)  # storage never sees the registry's token

    # Pushed again: every blob is there (HEAD), so only the manifest goes.
    registry.requests.clear()
    again = push(model_store, registry, "me/tiny")
    assert [(e["status"], e.get("completed")) for e in again if "digest" in e] == [
        (f"pushing {layer['digest'][7:19]}", layer["size"]) for layer in layers
    ]
    assert registry.seen("POST") == [] and len(registry.seen("PUT")) == 1


def test_pushing_a_model_that_is_not_here(model_store: ModelStore, registry: FakeRegistry) -> None:
    events: list[dict[str, Any]] = []
    with pytest.raises(NotFound, match=r"^model 'me/nothing:latest' not found$"):
        push_model(model_store, "me/nothing", events.append, options=RegistryOptions(registry_url=registry.url))
    assert statuses(events) == ["retrieving manifest", "couldn't retrieve manifest"]
    assert registry.requests == []


def test_a_registry_that_refuses_is_one_line(model_store: ModelStore, registry: FakeRegistry, model: bytes) -> None:
    url = registry.url
    registry.url = url.replace("127.0.0.1", "localhost")  # its token realm is on another host
    registry.require_token = True
    with pytest.raises(CllmError) as err:
        push_model(model_store, "me/tiny", lambda e: None, options=RegistryOptions(registry_url=url))
    assert err.value.message.startswith('realm host "localhost:') and "\n" not in err.value.message
