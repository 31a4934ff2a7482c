"""Store safety: no reads or writes through links out of the store, broken manifests stay deletable,
unreferenced blobs are pruned at start (unless OLLAMA_NOPRUNE), a rejected create leaves nothing."""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.errors import InvalidRequest, NotFound
from cllm_ollama.store import manifests as mt
from cllm_ollama.store.create import CreateRequest, create_model, import_gguf
from cllm_ollama.store.locking import exclusive
from cllm_ollama.store.store import PRUNE_GRACE_S, ModelStore, OutsideStore

LIBRARY = "manifests/registry.ollama.ai/library"
LONG_AGO = time.time() - 2 * PRUNE_GRACE_S


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def blob_name(data: bytes) -> str:
    return "sha256-" + hashlib.sha256(data).hexdigest()


def age(path: Path) -> None:
    os.utime(path, (LONG_AGO, LONG_AGO), follow_symlinks=False)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret").write_bytes(b"keep me")
    return path


@pytest.fixture
def store(model_store: ModelStore, tiny_gguf: Path) -> ModelStore:
    import_gguf(model_store, "tiny", tiny_gguf)
    return model_store


# -- links out of the store ----------------------------------------------------------------------


def test_manifest_writes_do_not_follow_a_directory_link_out(store: ModelStore, outside: Path) -> None:
    (store.root / LIBRARY / "evil").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OutsideStore, match=r"^manifests/registry.ollama.ai/library/evil leads out of the model store"):
        store.copy("tiny", "evil:latest")
    record = store.get("tiny")
    with pytest.raises(OutsideStore):
        store.write_manifest("evil:v2", record.config, list(record.manifest.layers))
    with pytest.raises(NotFound):  # names behind the link are not the store's: outside/secret stays
        store.delete("evil:secret")
    assert files(outside) == {"secret"}
    assert [r.short_name for r in store.list_models()] == ["tiny:latest"]


def test_blob_writes_do_not_follow_a_blobs_dir_link_out(model_store: ModelStore, outside: Path) -> None:
    model_store.root.mkdir()
    (model_store.root / "blobs").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OutsideStore, match=r"^blobs leads out"):
        model_store.write_blob_from([b"data"])
    with pytest.raises(OutsideStore):
        model_store.add_layer(b"a system prompt", mt.SYSTEM)
    with pytest.raises(OutsideStore):
        model_store.blob_writer()
    (outside / blob_name(b"orphan")).write_bytes(b"orphan")
    age(outside / blob_name(b"orphan"))
    assert model_store.prune() == []
    assert files(outside) == {"secret", blob_name(b"orphan")}


def test_a_manifest_link_out_is_not_read_but_can_be_deleted(store: ModelStore, outside: Path) -> None:
    real = store.root / LIBRARY / "tiny/latest"
    (outside / "manifest").write_bytes(real.read_bytes())
    link = store.root / LIBRARY / "tiny/linked"
    link.symlink_to(outside / "manifest")
    with pytest.raises(OutsideStore, match=r"^manifests/registry.ollama.ai/library/tiny/linked leads out"):
        store.get("tiny:linked")
    assert [r.short_name for r in store.list_models()] == ["tiny:latest"]
    blobs = files(store.blobs_dir)
    store.delete("tiny:linked")
    assert not link.is_symlink() and (outside / "manifest").is_file()
    assert files(store.blobs_dir) == blobs


def test_a_blob_link_out_is_not_read_and_an_upload_replaces_it(model_store: ModelStore, outside: Path) -> None:
    data = b"the real blob"
    model_store.blobs_dir.mkdir(parents=True)
    link = model_store.blobs_dir / blob_name(data)
    link.symlink_to(outside / "secret")
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    age(outside / "secret")
    assert not model_store.has_blob(digest)
    model_store.touch_blob(digest)
    assert (outside / "secret").stat().st_mtime == pytest.approx(LONG_AGO)
    assert model_store.write_blob_from([data], digest) == digest
    assert not link.is_symlink() and link.read_bytes() == data
    assert (outside / "secret").read_bytes() == b"keep me"


def test_a_partial_download_link_out_is_refused(model_store: ModelStore, outside: Path) -> None:
    digest = "sha256:" + "1" * 64
    model_store.blobs_dir.mkdir(parents=True)
    (model_store.blobs_dir / f".partial-sha256-{'1' * 64}").symlink_to(outside / "secret")
    with pytest.raises(OutsideStore, match=r"^blobs/.partial-sha256-1+ leads out"):
        model_store.partial_path(digest)
    (model_store.blobs_dir / f".partial-sha256-{'1' * 64}").unlink()
    (model_store.blobs_dir / f".partial-sha256-{'1' * 64}.lock").symlink_to(outside / "lock")
    with pytest.raises(OutsideStore):
        model_store.partial_path(digest)
    assert files(outside) == {"secret"}


def test_api_copy_through_a_link_out_is_refused(store: ModelStore, outside: Path, store_settings: Settings) -> None:
    (store.root / LIBRARY / "evil").symlink_to(outside, target_is_directory=True)
    with TestClient(create_app(store_settings), base_url="http://localhost") as c:
        r = c.post("/api/copy", json={"source": "tiny", "destination": "evil"})
        assert r.status_code == 500
        error = "manifests/registry.ollama.ai/library/evil leads out of the model store: refusing to follow the link"
        assert r.json() == {"error": error}
    assert files(outside) == {"secret"}


# -- broken manifests ------------------------------------------------------------------------------


@pytest.mark.parametrize("breakage", ["garbage", "truncated", "dangling link", "unreadable"])
def test_a_broken_manifest_is_skipped_and_deletable_through_the_api(
    store: ModelStore, tiny_gguf: Path, store_settings: Settings, breakage: str
) -> None:
    import_gguf(store, "broken", tiny_gguf, system="a system prompt only this model uses")
    path = store.root / LIBRARY / "broken/latest"
    if breakage == "garbage":
        path.write_bytes(b"\x00not json")
    elif breakage == "truncated":
        path.write_bytes(path.read_bytes()[:50])
    elif breakage == "dangling link":
        path.unlink()
        path.symlink_to(store.root / "nowhere")
    else:
        path.chmod(0)
        if os.access(path, os.R_OK):
            pytest.skip("running as root: permissions do not stop reads")
    with TestClient(create_app(store_settings), base_url="http://localhost") as c:
        r = c.get("/api/tags")
        assert r.status_code == 200
        assert [m["name"] for m in r.json()["models"]] == ["tiny:latest"]
        assert c.request("DELETE", "/api/delete", json={"model": "broken"}).status_code == 200
        assert not path.exists() and not path.is_symlink()
        assert not (store.root / LIBRARY / "broken").exists()
        r = c.request("DELETE", "/api/delete", json={"model": "broken"})
        assert (r.status_code, r.json()) == (404, {"error": "model 'broken' not found"})
        # With the broken manifest gone, deleting collects blobs again.
        assert c.request("DELETE", "/api/delete", json={"model": "tiny"}).status_code == 200
    assert store.list_models() == []
    blobs = files(store.blobs_dir)
    assert f"blobs/{blob_name(tiny_gguf.read_bytes())}" not in {f"blobs/{b}" for b in blobs}
    assert blob_name(b"a system prompt only this model uses") in blobs  # left for the next prune


def test_a_manifest_in_a_newer_layout_still_protects_its_blobs(store: ModelStore) -> None:
    gguf = store.get("tiny").manifest.layers[0]
    path = store.root / LIBRARY / "future/latest"
    path.parent.mkdir()
    path.write_bytes(b'{"schemaVersion": 3, "parts": [{"blob": "%s"}]}' % gguf.digest.encode())
    for p in store.blobs_dir.iterdir():
        age(p)
    store.delete("tiny")
    assert store.has_blob(gguf.digest)
    store.prune()
    assert store.has_blob(gguf.digest)


# -- pruning at start ------------------------------------------------------------------------------


def leftovers(store: ModelStore) -> dict[str, Path]:
    """An orphan blob and the files interrupted work leaves, all older than the grace period."""
    blobs = store.blobs_dir
    made = {
        "orphan": blobs / blob_name(b"uploaded, never used"),
        "temp": blobs / ".tmp-upload-1234abcd",
        "partial": blobs / f".partial-sha256-{'2' * 64}",
        "stale lock": blobs / f".partial-sha256-{'2' * 64}.lock",
        "ollama partial": blobs / f"sha256-{'3' * 64}-partial-0",
        "manifest temp": store.root / LIBRARY / "tiny/.tmp-latest-5678",
    }
    made["orphan"].write_bytes(b"uploaded, never used")
    for name, path in made.items():
        if name != "orphan":
            path.write_bytes(b"")
        age(path)
    for blob in store.blobs_dir.glob("sha256-*"):
        age(blob)  # the referenced ones too: age alone never condemns a blob
    (store.root / "manifests/registry.ollama.ai/emptied/model").mkdir(parents=True)
    return made


def test_prune_at_start_removes_what_nothing_references(store: ModelStore, store_settings: Settings) -> None:
    made = leftovers(store)
    recent = store.blobs_dir / blob_name(b"uploaded a second ago")
    recent.write_bytes(b"uploaded a second ago")
    foreign = store.blobs_dir / "README"
    foreign.write_bytes(b"not ours")
    age(foreign)
    referenced = {f"sha256-{layer.hex}" for layer in store.get("tiny").manifest.all_layers}
    with TestClient(create_app(store_settings), base_url="http://localhost") as c:
        assert [m["name"] for m in c.get("/api/tags").json()["models"]] == ["tiny:latest"]
    assert not any(path.exists() for path in made.values())
    assert {p.name for p in store.blobs_dir.iterdir()} == referenced | {recent.name, foreign.name}
    assert not (store.root / "manifests/registry.ollama.ai/emptied").exists()
    assert store.get("tiny").model_path.is_file()  # type: ignore[union-attr]


def test_prune_spares_a_download_in_progress(store: ModelStore) -> None:
    made = leftovers(store)
    with exclusive(made["stale lock"]):  # another process is still downloading into it
        age(made["stale lock"])
        removed = store.prune()
        assert made["partial"].exists() and made["stale lock"].exists()
    assert made["orphan"].name in removed
    assert store.prune() == [made["partial"].name]  # the lock file went with its holder


def test_prune_removes_nothing_while_a_manifest_is_unreadable(store: ModelStore) -> None:
    made = leftovers(store)
    (store.root / LIBRARY / "half").mkdir()
    (store.root / LIBRARY / "half/latest").write_bytes(b'{"schemaVersion": 2, "config": {"dig')
    assert store.prune() == []
    assert made["orphan"].exists()


def test_noprune_keeps_everything(store: ModelStore, store_settings: Settings) -> None:
    made = leftovers(store)
    before = files(store.root)
    with TestClient(create_app(replace(store_settings, noprune=True)), base_url="http://localhost") as c:
        assert c.get("/api/tags").status_code == 200
    assert files(store.root) == before
    assert all(path.exists() for path in made.values())


@pytest.mark.parametrize(
    ("value", "noprune"),
    [(None, False), ("1", True), ("true", True), ("0", False), ("false", False), ("F", False), ("yes", True)],
)
def test_noprune_from_the_environment(value: str | None, noprune: bool) -> None:
    env = {} if value is None else {"OLLAMA_NOPRUNE": value}
    assert Settings.from_env(env).noprune is noprune


# -- a rejected create -----------------------------------------------------------------------------


def test_a_rejected_create_leaves_no_blob_behind(store: ModelStore, store_settings: Settings) -> None:
    passwd = b"root:x:0:0:root:/root:/bin/bash\n"
    digest = "sha256:" + hashlib.sha256(passwd).hexdigest()
    before = files(store.root)
    with TestClient(create_app(store_settings), base_url="http://localhost") as c:
        assert c.post(f"/api/blobs/{digest}", content=passwd).status_code == 201
        r = c.post("/api/create", json={"model": "passwd", "files": {"passwd": digest}, "stream": False})
        assert r.status_code == 400
        assert "invalid file magic" in r.json()["error"]
        assert c.head(f"/api/blobs/{digest}").status_code == 404
    assert files(store.root) == before


def test_a_rejected_create_keeps_a_blob_a_model_uses(store: ModelStore) -> None:
    # The same bytes are a license layer of another model: rejecting them as weights must not delete them.
    text = b"Apache License 2.0"
    license_layer, _ = store.add_layer(text, mt.LICENSE)
    record = store.get("tiny")
    store.write_manifest("licensed", record.config, [*record.manifest.layers, license_layer])
    req = CreateRequest.from_json({"model": "x", "files": {"LICENSE": license_layer.digest}})
    with pytest.raises(InvalidRequest, match="invalid file magic"):
        create_model(store, req, lambda status: None)
    assert store.has_blob(license_layer.digest)
