"""Pulls through the real huggingface_hub code, with the Hub's HTTP API answered by respx."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from fakehub import FakeHub
from huggingface_hub import constants

from cllm_ollama.errors import PullError, RequestCanceled
from cllm_ollama.store import manifests as mt
from cllm_ollama.store import pull as pull_module
from cllm_ollama.store.catalog import Catalog
from cllm_ollama.store.pull import NOT_FOUND, pick_gguf, pull_model
from cllm_ollama.store.registry_pull import RegistryOptions
from cllm_ollama.store.store import ModelStore

REPO = "test/Tiny-GGUF"
FILE = "tiny-Q8_0.gguf"


def catalog(**source: Any) -> Catalog:
    return Catalog(
        {
            "families": {
                "tiny": {
                    "license": "MIT License",
                    "params": {"stop": ["<|im_end|>"], "temperature": 0.6},
                    "aliases": {"latest": "1m"},
                    "tags": {"1m": {"repo": REPO, "file": FILE, **source}},
                }
            }
        }
    )


def pull(store: ModelStore, name: str, cat: Catalog | None = None) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    pull_model(store, name, events.append, catalog=cat or catalog())
    return events


@pytest.fixture
def gguf_bytes(tiny_gguf: Path) -> bytes:
    return tiny_gguf.read_bytes()


def test_pull_from_catalog(model_store: ModelStore, fake_hub: FakeHub, gguf_bytes: bytes) -> None:
    fake_hub.add(REPO, FILE, gguf_bytes)
    sha = hashlib.sha256(gguf_bytes).hexdigest()
    events = pull(model_store, "tiny")

    statuses = [e["status"] for e in events]
    assert statuses[0] == "pulling manifest"
    assert statuses[-3:] == ["pulling " + events[-3]["digest"][7:19], "writing manifest", "success"]
    model_events = [e for e in events if e.get("digest") == f"sha256:{sha}"]
    assert model_events[0] == {"status": f"pulling {sha[:12]}", "digest": f"sha256:{sha}", "total": len(gguf_bytes)}
    assert model_events[-1]["completed"] == len(gguf_bytes)
    assert all(e["total"] == len(gguf_bytes) and e["status"] == f"pulling {sha[:12]}" for e in model_events)
    assert statuses.index("verifying sha256 digest") > statuses.index(model_events[-1]["status"])

    record = model_store.get("tiny")
    assert record.short_name == "tiny:latest"
    assert record.model_path == model_store.blob_path(f"sha256:{sha}")
    assert record.params == {"stop": ["<|im_end|>"], "temperature": 0.6}
    assert record.license == ["MIT License"]
    assert record.config["model_family"] == "qwen3" and record.config["file_type"] == "F32"
    assert [layer.media_type for layer in record.manifest.layers] == [mt.MODEL, mt.PARAMS, mt.LICENSE]
    assert sorted(p.name for p in model_store.blobs_dir.iterdir() if p.name.startswith(".")) == []
    assert len(fake_hub.downloads) == 1

    # Pulling again downloads nothing and reports the blob as complete.
    again = pull(model_store, "TINY:1M")
    assert len(fake_hub.downloads) == 1
    assert {
        "status": f"pulling {sha[:12]}",
        "digest": f"sha256:{sha}",
        "total": len(gguf_bytes),
        "completed": len(gguf_bytes),
    } in again
    assert {r.short_name for r in model_store.list_models()} == {"tiny:latest", "TINY:1M"}


def test_pull_hf_name_picks_the_quant(model_store: ModelStore, fake_hub: FakeHub, gguf_bytes: bytes) -> None:
    fake_hub.add(REPO, "tiny-Q8_0.gguf", gguf_bytes)
    fake_hub.add(REPO, "sub/tiny-Q4_K_M.gguf", gguf_bytes + b"\0")
    fake_hub.add(REPO, "mmproj-tiny-Q4_K_M.gguf", b"projector")
    fake_hub.add(REPO, "README.md", b"# tiny")

    pull(model_store, f"hf.co/{REPO}")
    record = model_store.get(f"hf.co/{REPO}")
    assert record.short_name == f"hf.co/{REPO}:latest"
    assert record.model_path.read_bytes() == gguf_bytes + b"\0"  # type: ignore[union-attr]
    assert (model_store.manifests_dir / "hf.co" / "test" / "Tiny-GGUF" / "latest").is_file()

    pull(model_store, f"hf.co/{REPO}:q8_0")
    assert model_store.get(f"hf.co/{REPO}:Q8_0").model_path.read_bytes() == gguf_bytes  # type: ignore[union-attr]
    with pytest.raises(PullError, match=f"^{NOT_FOUND}$"):
        pull(model_store, f"hf.co/{REPO}:IQ2_XXS")


@pytest.mark.parametrize("noprune", [False, True])
def test_a_new_version_removes_the_blobs_only_the_old_one_used(
    model_store: ModelStore, fake_hub: FakeHub, gguf_bytes: bytes, noprune: bool
) -> None:
    """As a registry pull does (and Ollama's): the old version's model goes once the new manifest
    is written, unless OLLAMA_NOPRUNE; the layers both use stay."""
    fake_hub.add(REPO, FILE, gguf_bytes)
    pull(model_store, "tiny")
    old = model_store.get("tiny").manifest.layers
    fake_hub.add(REPO, FILE, gguf_bytes + b"\0")  # the repo's file replaced
    events: list[dict[str, Any]] = []
    pull_model(model_store, "tiny", events.append, catalog=catalog(), options=RegistryOptions(noprune=noprune))
    new = model_store.get("tiny")
    assert new.model_path is not None and new.model_path.read_bytes() == gguf_bytes + b"\0"
    removing = [] if noprune else ["removing unused layers"]
    assert [e["status"] for e in events][-2 - len(removing) :] == ["writing manifest", *removing, "success"]
    assert model_store.has_blob(old[0].digest) is noprune
    assert all(model_store.has_blob(layer.digest) for layer in old[1:])  # params and license: still used


@pytest.mark.parametrize(
    ("tag", "chosen"),
    [
        ("latest", "m-Q4_K_M.gguf"),
        ("Q8_0", "m.Q8_0.gguf"),
        ("q4_k_m", "m-Q4_K_M.gguf"),
        ("M-Q4_K_M.GGUF", "m-Q4_K_M.gguf"),
        ("Q4_K", None),
        ("f16", None),
    ],
)
def test_pick_gguf(tag: str, chosen: str | None) -> None:
    files = ["m.Q8_0.gguf", "m-Q4_K_M.gguf", "mmproj-m-f16.gguf", "m-f16-00001-of-00002.gguf"]
    assert pick_gguf(files, tag) == chosen


def test_pick_gguf_default_falls_back() -> None:
    assert pick_gguf(["m-Q6_K.gguf", "m-Q8_0.gguf"], "latest") == "m-Q8_0.gguf"
    assert pick_gguf(["m-IQ3_M.gguf"], "latest") == "m-IQ3_M.gguf"
    assert pick_gguf(["mmproj-f16.gguf"], "latest") is None


def test_resume_after_an_interrupted_transfer(
    model_store: ModelStore, fake_hub: FakeHub, gguf_bytes: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # http_get writes in DOWNLOAD_CHUNK_SIZE pieces (10 MB); the tiny model needs smaller ones.
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 50_000)
    file = fake_hub.add(REPO, FILE, gguf_bytes)
    file.cut_after = 100_000
    with pytest.raises(PullError, match=r"interrupted .*pull again to resume"):
        pull(model_store, "tiny")
    sha = hashlib.sha256(gguf_bytes).hexdigest()
    partial = model_store.partial_path(f"sha256:{sha}")
    assert partial.read_bytes() == gguf_bytes[:100_000]
    assert not model_store.has_blob(f"sha256:{sha}") and model_store.list_models() == []

    events = pull(model_store, "tiny")
    assert fake_hub.downloads[-1].headers["Range"] == "bytes=100000-"
    assert events[-1] == {"status": "success"}
    assert model_store.blob_path(f"sha256:{sha}").read_bytes() == gguf_bytes
    assert not partial.exists()


def test_checksum_mismatch_deletes_the_download(model_store: ModelStore, fake_hub: FakeHub, gguf_bytes: bytes) -> None:
    claimed = hashlib.sha256(b"what the hub says").hexdigest()
    fake_hub.add(REPO, FILE, gguf_bytes, sha256=claimed)
    with pytest.raises(PullError, match=f"^digest mismatch, file must be downloaded again: want sha256:{claimed}"):
        pull(model_store, "tiny")
    assert not model_store.blobs_dir.exists() or [p.name for p in model_store.blobs_dir.iterdir()] == []
    assert model_store.list_models() == []


def test_catalog_pin_must_match_the_hub(model_store: ModelStore, fake_hub: FakeHub, gguf_bytes: bytes) -> None:
    fake_hub.add(REPO, FILE, gguf_bytes)
    with pytest.raises(PullError, match="the catalog expects"):
        pull(model_store, "tiny", catalog(sha256="0" * 64, size=len(gguf_bytes)))
    assert fake_hub.downloads == []


@pytest.mark.parametrize("name", ["tiny", "hf.co/test/missing-GGUF", "not-in-catalog", "tiny:9b", "me/tiny"])
def test_unknown_repo_file_or_name(model_store: ModelStore, fake_hub: FakeHub, name: str) -> None:
    fake_hub.add("other/repo", "x.gguf", b"GGUF")  # the catalog's repo and file do not exist
    with pytest.raises(PullError, match=f"^{NOT_FOUND}$"):
        pull(model_store, name)


def test_missing_file_in_existing_repo(model_store: ModelStore, fake_hub: FakeHub) -> None:
    fake_hub.add(REPO, "another.gguf", b"GGUF")
    with pytest.raises(PullError, match=f"^{NOT_FOUND}$"):
        pull(model_store, "tiny")


def test_offline_mode(model_store: ModelStore, fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # what HF_HUB_OFFLINE=1 sets at import
    with pytest.raises(PullError, match="offline mode is enabled"):
        pull(model_store, "tiny")
    assert not fake_hub.router.calls.called


def test_offline_with_a_pinned_blob_present(
    model_store: ModelStore, fake_hub: FakeHub, gguf_bytes: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    digest = model_store.write_blob_from([gguf_bytes])
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    pull(model_store, "tiny", catalog(sha256=digest[7:], size=len(gguf_bytes)))
    assert model_store.get("tiny").model_path == model_store.blob_path(digest)
    assert not fake_hub.router.calls.called


@respx.mock
def test_connection_error(model_store: ModelStore) -> None:
    respx.route(host="huggingface.co").mock(side_effect=httpx.ConnectError("[Errno -2] Name or service not known"))
    with pytest.raises(
        PullError,
        match=r"^pull model manifest: cannot reach the Hugging Face Hub at https://huggingface.co: \[Errno -2\]",
    ):
        pull(model_store, "hf.co/u/r")


def test_two_pulls_at_once_download_once(model_store: ModelStore, fake_hub: FakeHub, gguf_bytes: bytes) -> None:
    fake_hub.add(REPO, FILE, gguf_bytes)
    release, downloading, second_waiting = threading.Event(), threading.Event(), threading.Event()

    def hold_download() -> None:
        downloading.set()
        assert release.wait(30)

    fake_hub.before_download = hold_download
    errors: list[BaseException] = []

    def run(name: str, on_event: Any) -> None:
        try:
            pull_model(model_store, name, on_event, catalog=catalog())
        except BaseException as exc:
            errors.append(exc)

    first = threading.Thread(target=run, args=("tiny:1m", lambda e: None))
    first.start()
    assert downloading.wait(30)
    second = threading.Thread(target=run, args=("tiny", lambda e: "total" in e and second_waiting.set()))
    second.start()
    assert second_waiting.wait(30)
    release.set()
    first.join(30)
    second.join(30)
    assert errors == []
    assert len(fake_hub.downloads) == 1
    assert {r.short_name for r in model_store.list_models()} == {"tiny:1m", "tiny:latest"}
    assert model_store.get("tiny").model_path.read_bytes() == gguf_bytes  # type: ignore[union-attr]


def test_a_raising_report_cancels_and_keeps_the_partial(
    model_store: ModelStore, fake_hub: FakeHub, gguf_bytes: bytes
) -> None:
    fake_hub.add(REPO, FILE, gguf_bytes)

    def report(event: dict[str, Any]) -> None:
        if "completed" in event:
            raise RequestCanceled()

    with pytest.raises(RequestCanceled):
        pull_model(model_store, "tiny", report, catalog=catalog())
    assert model_store.list_models() == []
    assert model_store.partial_path("sha256:" + hashlib.sha256(gguf_bytes).hexdigest()).exists()


def test_progress_is_throttled(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(pull_module.time, "monotonic", lambda: now[0])
    events: list[dict[str, Any]] = []
    throttle = pull_module._Throttle(events.append, "ab" * 32, 100)
    for completed, at in [(10, 1000.0), (20, 1000.05), (30, 1000.11), (40, 1000.12), (100, 1000.13)]:
        now[0] = at
        throttle(completed)
    assert [e["completed"] for e in events] == [10, 30, 100]
