"""The store under concurrent use: pinned blobs outlive deletes, races leave every manifest whole,
and a manifest missing a blob is a broken model that is listed, named once in the log, and deletable."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest
from cllm_ollama.cli.backend import LocalBackend
from cllm_ollama.cli.render import broken_notes, models_table
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.errors import NotFound
from cllm_ollama.store.create import CreateRequest, create_model, import_gguf
from cllm_ollama.store.names import parse_name
from cllm_ollama.store.store import BrokenModel, ModelStore
from tests.store_check import missing_blobs

RACE_S = 2.0


def blob_of(store: ModelStore, data: bytes) -> Path:
    return store.blob_path("sha256:" + hashlib.sha256(data).hexdigest())


def create_from(store: ModelStore, name: str, base: str, system: str) -> None:
    create_model(store, CreateRequest(model=parse_name(name), from_=base, system=system), lambda _: None)


def test_a_blob_pinned_by_work_in_progress_outlives_a_delete(model_store: ModelStore, tiny_gguf: Path) -> None:
    import_gguf(model_store, "tiny", tiny_gguf, system="only tiny says this")
    system_blob = blob_of(model_store, b"only tiny says this")
    with model_store.claim() as claim:
        record = claim.record("tiny")
        model_store.delete("tiny")  # the manifest goes at once ...
        with pytest.raises(NotFound):
            model_store.get("tiny")
        assert system_blob.is_file() and record.model_path is not None and record.model_path.is_file()
    # ... its blobs when the work that relied on them ends.
    assert not system_blob.exists() and not record.model_path.exists()


def test_a_pinned_blob_that_a_manifest_takes_up_meanwhile_stays(model_store: ModelStore, tiny_gguf: Path) -> None:
    import_gguf(model_store, "tiny", tiny_gguf)
    with model_store.claim() as claim:
        claim.record("tiny")
        model_store.copy("tiny", "other")
        model_store.delete("tiny")
    assert model_store.get("other").model_path.is_file()  # type: ignore[union-attr]
    assert missing_blobs(model_store.root) == []


def test_a_create_from_a_model_deleted_under_it_succeeds_whole(model_store: ModelStore, tiny_gguf: Path) -> None:
    """Deleted between the create's read of its base and its manifest write: the create wins, whole."""
    import_gguf(model_store, "base", tiny_gguf, system="the base's system")
    original = ModelStore.write_manifest

    def delete_base_first(self: ModelStore, *args: object, **kwargs: object) -> object:
        self.delete("base")
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    ModelStore.write_manifest = delete_base_first  # type: ignore[method-assign]
    try:
        create_from(model_store, "child", "base", "the child's system")
    finally:
        ModelStore.write_manifest = original  # type: ignore[method-assign]
    assert model_store.get("child").system == "the child's system"
    assert missing_blobs(model_store.root) == []
    assert not blob_of(model_store, b"the base's system").exists()  # nobody uses it any more


def race(store: ModelStore, seconds: float, workers: list) -> tuple[list[str], dict[str, int]]:
    """Run each worker in a loop on its own thread for ``seconds``; returns the unexpected errors and counts."""
    deadline = time.monotonic() + seconds
    errors: list[str] = []
    counts: dict[str, int] = {"ok": 0, "not found": 0}
    lock = threading.Lock()

    def loop(worker, k: int) -> None:  # type: ignore[no-untyped-def]
        i = 0
        while time.monotonic() < deadline:
            i += 1
            try:
                worker(k, i)
                outcome = "ok"
            except NotFound:
                outcome = "not found"
            except Exception as exc:
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
                return
            with lock:
                counts[outcome] += 1

    threads = [threading.Thread(target=loop, args=(w, k)) for k, w in enumerate(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 30)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    return errors, counts


def test_copies_racing_create_and_delete_of_their_source_never_leave_a_manifest_without_blobs(
    model_store: ModelStore, tiny_gguf: Path
) -> None:
    """The issue's first reproducer, in one process: one client creates then deletes ``src``, three copy it."""
    import_gguf(model_store, "tiny", tiny_gguf)

    def churn(_k: int, i: int) -> None:
        create_from(model_store, "src", "tiny", f"unique {i}")
        model_store.delete("src")

    def copy(k: int, _i: int) -> None:
        model_store.copy("src", f"dst{k}")

    def look(_k: int, _i: int) -> None:  # another case: the store scans every name, beside the deletes
        model_store.resolve("SRC")

    errors, counts = race(model_store, RACE_S, [churn, copy, copy, copy, look])
    assert errors == []
    assert counts["ok"] > 0
    assert missing_blobs(model_store.root) == []
    for name in ("dst1", "dst2", "dst3"):
        if model_store.resolve(name) is not None:
            assert model_store.get(name).system is not None  # whole and readable


def test_broken_model_is_listed_reported_once_and_deletable(
    model_store: ModelStore, tiny_gguf: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cllm.store")
    import_gguf(model_store, "tiny", tiny_gguf)
    import_gguf(model_store, "broken", tiny_gguf, system="lost")
    lost = blob_of(model_store, b"lost")
    lost.unlink()  # a crash of an older version, or a hand edit
    digest = "sha256:" + hashlib.sha256(b"lost").hexdigest()

    with pytest.raises(BrokenModel) as exc:
        model_store.get("broken")
    assert exc.value.status_code == 404
    assert exc.value.message == (
        f"model 'broken:latest' is broken: blob {digest} not found; delete it, or pull or create it again"
    )
    assert [r.short_name for r in model_store.list_models()] == ["tiny:latest"]
    (broken,) = [r for r in model_store.list_models(broken=True) if r.broken]
    assert broken.short_name == "broken:latest" and broken.missing == (digest,)

    model_store.report_broken()  # what a server does at start
    model_store.list_models(broken=True)
    with pytest.raises(BrokenModel):
        model_store.get("broken")
    assert [r.getMessage() for r in caplog.records if "is broken" in r.getMessage()] == [exc.value.message]

    tags = LocalBackend(model_store).tags()
    table = models_table(tags, datetime.now().astimezone())
    assert "broken:latest (broken)" in table and exc.value.message not in table  # its rows only: scripts read them
    assert broken_notes(tags) == [exc.value.message]

    model_store.delete("broken")
    assert model_store.resolve("broken") is None
    assert missing_blobs(model_store.root) == []


def test_the_api_lists_a_broken_model_marked_refuses_it_with_a_404_and_deletes_it(
    model_store: ModelStore, tiny_gguf: Path, store_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    import_gguf(model_store, "broken", tiny_gguf, system="lost")
    blob_of(model_store, b"lost").unlink()
    caplog.set_level(logging.WARNING, logger="cllm.store")
    with TestClient(create_app(store_settings), base_url="http://localhost") as c:
        # Startup repair: named in the log at start, and only then.
        (logged,) = [r.getMessage() for r in caplog.records if "is broken" in r.getMessage()]
        (entry,) = c.get("/api/tags").json()["models"]
        assert entry["name"] == "broken:latest" and "is broken: blob sha256:" in entry["broken"]
        r = c.post("/api/show", json={"model": "broken"})
        assert (r.status_code, r.json()["error"]) == (404, entry["broken"])
        assert entry["broken"] == logged
        r = c.post("/api/copy", json={"source": "broken", "destination": "again"})
        assert (r.status_code, r.json()) == (404, {"error": 'model "broken" not found'})
        assert c.request("DELETE", "/api/delete", json={"model": "broken"}).status_code == 200
        assert c.get("/api/tags").json() == {"models": []}
    assert len([r for r in caplog.records if "is broken" in r.getMessage()]) == 1
    assert missing_blobs(model_store.root) == []
