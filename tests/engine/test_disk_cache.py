"""The disk tier's store on its own (no model): files found again by a new process's index, the
size limit over every identity, least recently used first, and failures that are misses."""

from __future__ import annotations

import errno
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from polling import until

from cllm_ollama.engine import disk_cache
from cllm_ollama.engine.disk_cache import DiskCache, Read, identity_digest, weights_id
from cllm_ollama.engine.swa_windows import window_of

ME = identity_digest("weights-a", "f16")
OTHER = identity_digest("weights-b", "f16")
PAYLOAD = 1000  # bytes of a fake state


def tokens(start: int, n: int = 64) -> tuple[int, ...]:
    return tuple(range(start, start + n))


def read(cache: DiskCache, prompt: tuple[int, ...]) -> bytearray | None:
    """The state the cache gives for ``prompt`` (through its IO thread), or None."""
    got = read_whole(cache, prompt)
    return None if got is None else got.payload


def read_whole(cache: DiskCache, prompt: tuple[int, ...]) -> Read | None:
    """The state and checkpoints the cache gives for ``prompt``, or None."""
    entry, _n = cache.lookup(prompt)
    if entry is None:
        return None
    got: queue.SimpleQueue[Read | None] = queue.SimpleQueue()
    cache.load(entry, got.put)
    return got.get(timeout=10)


def state(seed: int) -> bytes:
    return bytes((seed + i) % 256 for i in range(PAYLOAD))


def reopen(cache: DiskCache, limit: int = 1 << 20) -> DiskCache:
    """Stop ``cache`` (its writes finish) and open its directory again, as a restarted server would."""
    cache.close()
    return DiskCache(cache.root, cache.identity, limit, 32)


def test_states_are_found_again_after_a_restart(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, ME, 1 << 20, 32)
    cache.save(tokens(0), state(1))
    cache = reopen(cache)
    try:
        assert cache.lookup((*tokens(0), 7, 8))[1] == 64
        assert read(cache, (*tokens(0), 7, 8)) == state(1)
        assert read(cache, tokens(1)) is None  # another prompt: nothing
    finally:
        cache.close()


def test_another_identity_never_sees_the_files(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, ME, 1 << 20, 32)
    cache.save(tokens(0), state(1))
    cache.close()
    other = DiskCache(tmp_path, OTHER, 1 << 20, 32)
    try:
        assert other.lookup(tokens(0))[0] is None
        # Even copied into its directory, a file whose header names another identity is ignored.
        for path in (tmp_path / ME.hex()[:32]).iterdir():
            os.link(path, other.dir / path.name)
        other = reopen(other)
        assert other.lookup(tokens(0))[0] is None
    finally:
        other.close()


def test_the_size_limit_holds_and_the_least_recently_used_go_first(tmp_path: Path) -> None:
    file_size = disk_cache._HEAD.size + 8 * 64 + PAYLOAD + disk_cache._SUM
    limit = 3 * file_size
    cache = DiskCache(tmp_path, ME, limit, 32)
    other = DiskCache(tmp_path, OTHER, limit, 32)  # another model sharing the directory and its limit
    try:
        for i in range(3):
            cache.save(tokens(1000 * i), state(i))
        cache = reopen(cache, limit)  # the writes are done
        assert read(cache, tokens(0)) == state(0)  # used: now the most recent
        other.save(tokens(5000), state(5))
        other = reopen(other, limit)
        cache = reopen(cache, limit)
        files = list(tmp_path.glob("*/*" + disk_cache.SUFFIX))
        assert sum(p.stat().st_size for p in files) <= limit and len(files) == 3
        assert read(cache, tokens(0)) == state(0)
        assert read(cache, tokens(1000)) is None  # the least recently used went
        assert read(cache, tokens(2000)) == state(2)
        assert read(other, tokens(5000)) == state(5)
        cache.save(tokens(9000, 4096), bytes(limit))  # larger than the whole limit: never written
        cache = reopen(cache, limit)
        assert cache.lookup(tokens(9000, 4096))[0] is None
    finally:
        cache.close()
        other.close()


def test_a_longer_state_supersedes_its_prefix(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, ME, 1 << 20, 32)
    cache.save(tokens(0), state(1))
    cache.save(tokens(0, 128), state(2))
    cache = reopen(cache)
    try:
        assert len(list(cache.dir.iterdir())) == 1
        assert read(cache, tokens(0)) == state(2)
    finally:
        cache.close()


def test_a_failed_write_is_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(src: object, dst: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    cache = DiskCache(tmp_path, ME, 1 << 20, 32)
    monkeypatch.setattr(disk_cache.os, "replace", full)
    cache.save(tokens(0), state(1))
    assert cache.lookup(tokens(0))[0] is not None  # offered while the write is queued
    got: queue.SimpleQueue[Read | None] = queue.SimpleQueue()
    cache.load(cache.lookup(tokens(0))[0], got.put)  # type: ignore[arg-type]
    try:
        # Read on its own thread: the state from memory while its write waits, else a miss.
        assert got.get(timeout=10) in (None, Read(state(1)))
        until(lambda: cache.lookup(tokens(0))[0] is None)  # once the write failed, no longer offered
        assert list(cache.dir.iterdir()) == []  # no temporary file left behind
    finally:
        cache.close()


def test_a_read_does_not_wait_behind_the_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writes run below llama.cpp's threads and may lag: a read of a state not yet written takes
    it from memory instead of waiting for the writer."""
    release = threading.Event()
    real_write = DiskCache._write

    def stuck(self: DiskCache, path: Path, toks: tuple[int, ...], payload: object, windows: tuple = ()) -> None:
        release.wait(10)
        real_write(self, path, toks, payload, windows)

    monkeypatch.setattr(DiskCache, "_write", stuck)
    cache = DiskCache(tmp_path, ME, 1 << 20, 32)
    try:
        cache.save(tokens(0), state(1))
        got: queue.SimpleQueue[Read | None] = queue.SimpleQueue()
        cache.load(cache.lookup(tokens(0))[0], got.put)  # type: ignore[arg-type]
        assert got.get(timeout=5) == Read(state(1))  # while the writer is still stuck
    finally:
        release.set()
        cache.close()
    assert len(list(cache.dir.glob("*.kv"))) == 1  # and the write still happened


def test_writes_wait_while_the_engine_decodes(tmp_path: Path) -> None:
    """On a machine with few cores the writer's checksum and copy stall a decode: it writes when
    the engine has nothing to decode (or at close), and a read meanwhile comes from memory."""
    cache = DiskCache(tmp_path, ME, 1 << 20, 32)
    try:
        cache.engine_busy(True)
        cache.save(tokens(0), state(1))
        got: queue.SimpleQueue[Read | None] = queue.SimpleQueue()
        cache.load(cache.lookup(tokens(0))[0], got.put)  # type: ignore[arg-type]
        assert got.get(timeout=5) == Read(state(1))
        assert list(cache.dir.glob("*.kv")) == []  # the writer waits for the engine
        cache.engine_busy(False)
        until(lambda: len(list(cache.dir.glob("*.kv"))) == 1)
    finally:
        cache.close()


def test_an_unusable_directory_turns_the_disk_tier_off(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = DiskCache(blocker, ME, 1 << 20, 32)
    cache.save(tokens(0), state(1))
    cache.close()
    assert cache.lookup(tokens(0))[0] is None


def test_models_made_from_the_same_weights_share_an_identity(tmp_path: Path) -> None:
    blob = tmp_path / ("sha256-" + "ab" * 32)
    blob.write_bytes(b"weights")
    assert weights_id(blob) == blob.name  # content-addressed: every model FROM it names it alike
    plain = tmp_path / "model.gguf"
    plain.write_bytes(b"weights")
    assert weights_id(plain) != weights_id(blob)


def test_half_written_states_of_a_killed_writer_are_removed_at_start(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that no process has now
    folder = tmp_path / ME.hex()[:32]
    folder.mkdir(parents=True)
    dead_process = folder / f".tmp-{gone.pid}-1-aaaa.part"
    dead_thread = folder / f".tmp-{os.getpid()}-1-bbbb.part"  # this pid, by a predecessor (a container)
    writing = folder / f".tmp-{os.getpid()}-{threading.get_ident()}-cccc.part"  # a live writer's
    for path in (dead_process, dead_thread, writing):
        path.write_bytes(bytes(100))
    cache = DiskCache(tmp_path, ME, 1 << 20, 32)
    try:
        assert not dead_process.exists() and not dead_thread.exists() and writing.exists()
    finally:
        cache.close()


def test_states_being_written_count_against_the_limit(tmp_path: Path) -> None:
    file_size = disk_cache._HEAD.size + 8 * 64 + PAYLOAD + disk_cache._SUM
    limit = 3 * file_size
    cache = DiskCache(tmp_path, ME, limit, 32)
    try:
        for i in range(2):
            cache.save(tokens(1000 * i), state(i))
        cache = reopen(cache, limit)
        # Another writer's state in progress takes the room of one file and a half.
        (cache.dir / f".tmp-{os.getpid()}-{threading.get_ident()}-dddd.part").write_bytes(bytes(file_size * 3 // 2))
        cache.save(tokens(2000), state(2))
        cache = reopen(cache, limit)
        on_disk = sum(p.stat().st_size for p in cache.dir.iterdir())
        assert on_disk <= limit and read(cache, tokens(0)) is None and read(cache, tokens(2000)) == state(2)
    finally:
        cache.close()


def test_a_folder_that_cannot_be_written_is_said_once_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cache = DiskCache(tmp_path, ME, 1 << 20, 32)
    cache.save(tokens(0), state(1))
    cache.close()
    (cache.dir / "0123.kv").write_bytes(b"not a state")  # removed at the next start, if it can be

    def read_only(self: Path, missing_ok: bool = False) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(Path, "unlink", read_only)
    cache = DiskCache(tmp_path, ME, 1 << 20, 32)
    try:
        cache.save(tokens(0, 128), state(2))  # supersedes the first: its removal fails too
        cache = reopen(cache)
    finally:
        cache.close()
    said = [r for r in caplog.records if "cannot be written" in r.getMessage()]
    assert len(said) <= 2 and all(r.exc_info is None for r in caplog.records)  # once per DiskCache opened
    assert said and "Read-only file system" in said[0].getMessage()


def test_a_states_window_checkpoints_come_back_with_it(tmp_path: Path) -> None:
    """A sliding-window model's state is written with its checkpoints (``swa_windows``) and read
    back with them, from memory while its write waits and from the file after a restart; a file
    whose checkpoints are damaged is a miss."""
    prompt = tokens(0, 128)
    windows = (window_of(prompt[:40], 40, state(7)[:100]), window_of(prompt[:96], 96, state(8)[:60]))
    expected = [(40, 40, state(7)[:100], 100), (96, 96, state(8)[:60], 60)]

    def read_back(cache: DiskCache) -> list[tuple[int, int, bytes, int]]:
        got = read_whole(cache, prompt)
        assert got is not None and got.payload == state(1)
        assert all(w.follows(prompt) for w in got.windows)
        return [(w.n, w.pos, bytes(w.payload), w.size) for w in got.windows]

    cache = DiskCache(tmp_path, ME, 1 << 20, 32)
    cache.save(prompt, state(1), windows)
    assert read_back(cache) == expected  # from the pending write, or the file
    cache = reopen(cache)
    try:
        assert read_back(cache) == expected
    finally:
        cache.close()
    (path,) = cache.dir.glob("*.kv")
    data = bytearray(path.read_bytes())
    data[-disk_cache._SUM - 10] ^= 0xFF  # a byte of the last checkpoint: only the checksum sees it
    path.write_bytes(data)
    cache = reopen(cache)
    try:
        assert read_whole(cache, prompt) is None and list(cache.dir.glob("*.kv")) == []
    finally:
        cache.close()
