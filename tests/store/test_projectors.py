"""Models that see, as users get them: a projector (``mmproj`` GGUF) pulled beside its model from
the Hub, or created from uploaded files or a Modelfile's two FROM lines, kept as Ollama's
``projector`` layer (which is what makes ``/api/show`` say ``vision``)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from fakehub import FakeHub
from fakeregistry import fake_registry

from cllm_ollama.errors import InvalidRequest, PullError
from cllm_ollama.store import manifests as mt
from cllm_ollama.store.catalog import Catalog, default_catalog
from cllm_ollama.store.create import CreateRequest, create_model
from cllm_ollama.store.modelfile import create_body, parse_modelfile
from cllm_ollama.store.names import parse_name
from cllm_ollama.store.pull import pick_projector, pull_model
from cllm_ollama.store.registry_pull import RegistryOptions
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_gemma3, write_gemma3_projector, write_vision

REPO = "test/Eyes-GGUF"
FILE = "eyes-Q8_0.gguf"
MMPROJ = "mmproj-eyes-f16.gguf"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    text, mmproj = write_vision(tmp_path_factory.mktemp("vision"))
    return text.read_bytes(), mmproj.read_bytes()


def catalog(**source: Any) -> Catalog:
    tag = {"repo": REPO, "file": FILE, **source}
    return Catalog({"families": {"eyes": {"license": "MIT", "aliases": {"latest": "1m"}, "tags": {"1m": tag}}}})


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_a_catalog_model_that_sees_is_pulled_with_its_projector(
    model_store: ModelStore, fake_hub: FakeHub, pair: tuple[bytes, bytes]
) -> None:
    text, mmproj = pair
    fake_hub.add(REPO, FILE, text)
    fake_hub.add(REPO, MMPROJ, mmproj)
    fake_hub.add(REPO, "mmproj-eyes-f32.gguf", mmproj + b"\0")  # not named by the catalog: not pulled
    events: list[dict[str, Any]] = []
    pull_model(model_store, "eyes", events.append, catalog=catalog(projector=MMPROJ))

    record = model_store.get("eyes")
    assert [layer.media_type for layer in record.manifest.layers] == [mt.MODEL, mt.PROJECTOR, mt.LICENSE]
    assert record.projector_paths == (model_store.blob_path(sha(mmproj)),)
    assert "vision" in record.capabilities
    assert {e.get("digest") for e in events} >= {sha(text), sha(mmproj)}  # progress for both files
    assert len(fake_hub.downloads) == 2


def test_a_catalog_projector_that_is_no_projector_fails_the_pull(
    model_store: ModelStore, fake_hub: FakeHub, pair: tuple[bytes, bytes]
) -> None:
    text, _ = pair
    fake_hub.add(REPO, FILE, text)
    fake_hub.add(REPO, MMPROJ, text)  # a text model where the projector should be
    with pytest.raises(PullError, match=rf"{REPO}/{MMPROJ} is no projector \(architecture gemma3\)"):
        pull_model(model_store, "eyes", lambda e: None, catalog=catalog(projector=MMPROJ))
    assert model_store.list_models() == []


def test_a_missing_catalog_projector_is_not_found(model_store: ModelStore, fake_hub: FakeHub, pair: tuple) -> None:
    fake_hub.add(REPO, FILE, pair[0])
    with pytest.raises(PullError):
        pull_model(model_store, "eyes", lambda e: None, catalog=catalog(projector=MMPROJ))
    assert fake_hub.downloads == []  # resolved before any byte moved


def test_an_hf_pull_takes_the_repos_projector(model_store: ModelStore, fake_hub: FakeHub, pair: tuple) -> None:
    text, mmproj = pair
    fake_hub.add(REPO, "eyes-Q4_K_M.gguf", text)
    fake_hub.add(REPO, "mmproj-eyes-f32.gguf", mmproj + b"\0")
    fake_hub.add(REPO, MMPROJ, mmproj)
    pull_model(model_store, f"hf.co/{REPO}", lambda e: None, catalog=catalog())
    record = model_store.get(f"hf.co/{REPO}")
    assert record.model_path == model_store.blob_path(sha(text))
    assert record.projector_paths == (model_store.blob_path(sha(mmproj)),)  # f16 preferred
    assert "vision" in record.capabilities


def test_an_hf_repo_without_a_projector_pulls_a_model_that_does_not_see(
    model_store: ModelStore, fake_hub: FakeHub, pair: tuple
) -> None:
    fake_hub.add(REPO, "eyes-Q4_K_M.gguf", pair[0])
    pull_model(model_store, f"hf.co/{REPO}", lambda e: None, catalog=catalog())
    record = model_store.get(f"hf.co/{REPO}")
    assert record.projector_paths == () and "vision" not in record.capabilities


@pytest.mark.parametrize(
    ("paths", "chosen"),
    [
        (["m-Q4_K_M.gguf", "mmproj-m-f32.gguf", "mmproj-m-F16.gguf", "mmproj-m-Q8_0.gguf"], "mmproj-m-F16.gguf"),
        (["mmproj-m-BF16.gguf", "mmproj-m-q8_0.gguf"], "mmproj-m-BF16.gguf"),
        (["sub/mmproj-model-f16.gguf"], "sub/mmproj-model-f16.gguf"),
        (["mmproj-b.gguf", "mmproj-a.gguf"], "mmproj-a.gguf"),
        (["m-Q4_K_M.gguf", "README.md", "mmproj-notes.txt"], None),
    ],
)
def test_pick_projector(paths: list[str], chosen: str | None) -> None:
    assert pick_projector(paths) == chosen


@pytest.mark.parametrize("name", ["gemma3:4b", "gemma3", "qwen2.5vl:3b", "qwen2.5vl:7b", "qwen2.5vl"])
def test_the_catalog_has_models_that_see(name: str) -> None:
    entry = default_catalog().lookup(parse_name(name))
    assert entry is not None and entry.projector is not None
    assert "mmproj" in entry.projector.lower() and entry.projector.endswith(".gguf")
    assert entry.file != entry.projector


def test_gemma3_1b_does_not_see() -> None:
    entry = default_catalog().lookup(parse_name("gemma3:1b"))
    assert entry is not None and entry.projector is None


def create(store: ModelStore, body: dict[str, Any]) -> None:
    create_model(store, CreateRequest.from_json(body), lambda e: None)


def upload(store: ModelStore, path: Path) -> str:
    with open(path, "rb") as f:
        return store.write_blob_from(f)


def test_a_modelfile_with_two_froms_creates_a_model_with_a_projector(model_store: ModelStore, tmp_path: Path) -> None:
    write_vision(tmp_path)
    mf = parse_modelfile("FROM ./text.gguf\nFROM ./mmproj.gguf\nPARAMETER temperature 0\n")
    body = create_body("eyes", mf, tmp_path, lambda p: upload(model_store, p))
    assert set(body["files"]) == {"text.gguf", "mmproj.gguf"}
    create(model_store, body)
    record = model_store.get("eyes")
    assert [layer.media_type for layer in record.manifest.layers] == [mt.MODEL, mt.PROJECTOR, mt.PARAMS]
    assert record.config["model_family"] == "gemma3"  # the config is the text model's
    assert "vision" in record.capabilities


def test_projector_detection_follows_ollama(model_store: ModelStore, tmp_path: Path) -> None:
    text = write_gemma3(tmp_path / "text.gguf")
    mmproj = write_gemma3_projector(tmp_path / "mmproj.gguf")
    files = {"mmproj.gguf": upload(model_store, mmproj)}
    with pytest.raises(InvalidRequest, match="expected one GGUF model file, got 0"):
        create(model_store, {"model": "only-eyes", "files": files})
    other = write_gemma3(tmp_path / "other.gguf", seed=1)
    files |= {"a.gguf": upload(model_store, text), "b.gguf": upload(model_store, other)}
    with pytest.raises(InvalidRequest, match="expected one GGUF model file, got 2"):  # the projector is no model
        create(model_store, {"model": "two", "files": files})


def test_a_registry_model_keeps_its_projector_layer(model_store: ModelStore, pair: tuple[bytes, bytes]) -> None:
    """Ollama's registry ships older vision models as a model layer and a projector layer."""
    text, mmproj = pair
    config = {"model_format": "gguf", "model_family": "gemma3", "model_families": ["gemma3", "clip"]}
    with fake_registry() as registry:
        registry.add_model("library/eyes", "latest", [(mt.MODEL, text), (mt.PROJECTOR, mmproj)], config)
        pull_model(model_store, "eyes", lambda e: None, options=RegistryOptions(registry_url=registry.url))
    record = model_store.get("eyes")
    assert record.model_path == model_store.blob_path(sha(text))
    assert record.projector_paths == (model_store.blob_path(sha(mmproj)),)
    assert "vision" in record.capabilities
