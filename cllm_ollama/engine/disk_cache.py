"""Saved prompt states on disk, under the host-RAM cache: what lets an agent's long preamble
outlive an unload, a reload and a restart.

A state's file lives under ``root/<identity>/``, where the identity digests everything that
changes a state's bytes (the weights, the KV cache type, flash attention, the llama.cpp state
format; the slot count only where a state cannot be stored as one KV stream: ``state_streams``),
so models made ``FROM`` the same weights share files and no other model ever sees them. Its
name is a stable digest of its tokens (not Python's ``hash``, which is free to change).

A file is: ``MAGIC``, the identity digest, the token count, the payload length, the length of
the window checkpoints, the tokens (int64: image cells carry negative keys), the payload, the
checkpoints, then a BLAKE2b checksum of all of it. A sliding-window model's state takes its
checkpoints along (``swa_windows``: the count, then each one's token count, position, length and
bytes; its tokens are the state's first ones), as in the host cache, so that a follow-up cut
below the window a state loaded from disk holds restores the nearest one instead of computing
its whole prompt again.
It is written to a temporary name and renamed, so a reader sees a whole file or none; a file
that is short, corrupt, foreign or not for these tokens is a miss (and is removed), never a
wrong answer. Past ``limit_bytes`` (over every identity) the least recently used files go.

Threads: the in-memory index (a ``PromptCache`` whose payloads are paths) belongs to the
engine thread. Writes and removals run on a writer thread in the order asked, below llama.cpp's
threads (nice 19): on a machine with few cores, a checksum and a copy of tens of megabytes beside a
decode stall llama.cpp's threads, which wait for each other at every step; so the writer also waits
until the engine has nothing to decode (``engine_busy``), and what is waiting to be written is
bounded (``MAX_PENDING_BYTES``: past it a state is not written). Reads are what a waiting
request needs, so they run on a reader thread of their own at the normal priority; a read of a
state still waiting for its write takes that state itself (states are never changed once made).
A read's buffer comes from ``alloc`` (``KvStore``'s ``StateBuffers``: a fresh mapping, whose pages
the read faults in with the GIL released, where ``bytearray(n)`` zeroes them holding it).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import queue
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from .prompt_cache import CacheEntry, PromptCache
from .state_streams import one_stream, widen
from .swa_windows import Window, window_of

log = logging.getLogger("cllm.engine")

MAGIC = b"CLLMKV02"  # 02: with the window checkpoints
_HEAD = struct.Struct("<8s32sIQQ")  # magic, identity digest, n_tokens, payload bytes, checkpoint bytes
_COUNT = struct.Struct("<I")  # window checkpoints
_WINDOW = struct.Struct("<IqQ")  # one's token count, position, bytes
_SUM = 32  # blake2b digest size
SUFFIX = ".kv"
# A state being written: ``.tmp-<pid>-<thread>-<name>.part``, renamed to ``<name>.kv`` when whole.
PART_GLOB = ".tmp-*.part"
# States waiting for the writer, at most (they wait while the engine decodes): past it, a new
# state is not written (the host-RAM tier may still hold it).
MAX_PENDING_BYTES = 1 << 30


def identity_digest(*parts: object) -> bytes:
    """The identity of what produced a state's bytes, as a digest of its parts."""
    return hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=32).digest()


def weights_id(path: Path) -> str:
    """The weights' identity: a store blob is named by its sha256 (shared by every model made
    ``FROM`` it); any other file by its resolved path, size and modification time."""
    name = path.name
    if name.startswith("sha256-") and len(name) == 71:
        return name
    st = path.stat()
    return f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}"


def _writer_alive(part: Path) -> bool:
    """Whether the writer named in a half-written file's name still runs (it may be writing it):
    another process by its pid, this one by its thread (a restarted server in a container often
    gets the pid its killed predecessor had)."""
    try:
        pid, thread = (int(field) for field in part.name.split("-")[1:3])
    except ValueError:
        return False
    if pid == os.getpid():
        return any(t.ident == thread for t in threading.enumerate())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _token_bytes(tokens: Sequence[int]) -> bytes:
    return struct.pack(f"<{len(tokens)}q", *tokens)


def _windows_bytes(windows: tuple[Window, ...]) -> int:
    return (_COUNT.size + sum(_WINDOW.size + w.size for w in windows)) if windows else 0


def _with_windows(pieces: list[memoryview], windows: tuple[Window, ...]) -> list[memoryview]:
    """A state's pieces to write, then its window checkpoints (``_read_windows`` reads them)."""
    if not windows:
        return pieces
    out = [*pieces, memoryview(_COUNT.pack(len(windows)))]
    for w in windows:
        out += [memoryview(_WINDOW.pack(w.n, w.pos, w.size)), memoryview(w.payload).cast("B")]
    return out


def _read_windows(f: Any, n_bytes: int, tokens: tuple[int, ...], check: Any) -> tuple[Window, ...] | None:
    """The window checkpoints stored after a payload (``n_bytes`` of them), read into
    ``check``; None if they do not add up or do not lie along ``tokens``."""
    if n_bytes == 0:
        return ()
    raw = f.read(n_bytes)
    if len(raw) != n_bytes or n_bytes < _COUNT.size:
        return None
    check.update(raw)
    (count,), at, windows = _COUNT.unpack_from(raw), _COUNT.size, []
    for _ in range(count):
        if at + _WINDOW.size > n_bytes:
            return None
        n, pos, size = _WINDOW.unpack_from(raw, at)
        at += _WINDOW.size
        if n > len(tokens) or at + size > n_bytes:
            return None
        windows.append(window_of(tokens[:n], pos, bytearray(raw[at : at + size])))
        at += size
    return tuple(windows) if at == n_bytes else None


class Read(NamedTuple):
    """A state read back: its payload and the window checkpoints saved with it."""

    payload: Any
    windows: tuple[Window, ...] = ()


@dataclass(frozen=True)
class _Job:
    """One piece of IO work, done on the IO thread in the order queued."""

    kind: str  # "write", "read", "remove"
    path: Path
    tokens: tuple[int, ...] = ()
    payload: Any = None
    done: Callable[[Read | None], None] | None = None
    windows: tuple[Window, ...] = ()


class DiskCache:
    """Prompt states in files, found by token prefix like the host cache; IO on its own thread."""

    def __init__(
        self,
        root: Path,
        identity: bytes,
        limit_bytes: int,
        min_tokens: int,
        streams: int | None = None,
        alloc: Callable[[int], Any] = bytearray,
        *,
        max_tokens: int | None = None,
    ) -> None:
        """``streams``: the context's KV stream count, when its states are kept without it
        (``state_streams``: files then serve any slot count); None keeps them as they are.
        ``alloc(n)``: a zeroed writable buffer of ``n`` bytes, for what a read returns.
        ``max_tokens``: the cells of a slot's context. A file of more (saved by a load with a larger
        context) is left out of the index: this load can neither restore it nor count it as
        holding its prefixes, and it stays on disk for a larger load, aging out of the LRU unread."""
        self.root = root
        self._alloc = alloc
        self.streams = streams
        self.identity = identity
        self.limit_bytes = limit_bytes
        self.dir = root / identity.hex()[:32]
        # The index: what is on disk for this identity. Its LRU never evicts (the IO thread
        # keeps the limit over every identity), but a state superseded by a longer one goes.
        self.index = PromptCache(1 << 62, min_tokens, on_remove=self._removed, max_tokens=max_tokens)
        self._gone: list[Path] = []  # files the IO thread found missing or bad (engine drops them)
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()  # writes and removals
        self._reads: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._pending: dict[Path, tuple[tuple[int, ...], Any, tuple[Window, ...], int]] = {}  # for the writer
        self._pending_lock = threading.Lock()
        self._pending_bytes = 0
        self._idle = threading.Event()  # the engine has nothing to decode: the writer may run
        self._idle.set()
        self._usable = True
        self._unwritable = False  # said once: the directory cannot be written (read-only, full)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._scan()
        except OSError as exc:
            log.warning("prompt cache directory %s is unusable (%s): no disk cache", self.dir, exc)
            self._usable = False
        self._thread = threading.Thread(target=self._work, name="cllm-disk-cache", daemon=True)
        self._reader = threading.Thread(target=self._read_jobs, name="cllm-disk-cache-read", daemon=True)
        self._thread.start()
        self._reader.start()

    # -- the engine thread's side ------------------------------------------------------------

    def lookup(self, prompt: Sequence[int], keys: Sequence[int] | None = None) -> tuple[CacheEntry | None, int]:
        """The file sharing the longest prefix with ``prompt``, and that length (0: none)."""
        self._drop_gone()
        return self.index.lookup(prompt, keys)

    def covers(self, tokens: Sequence[int], keys: Sequence[int] | None = None) -> bool:
        self._drop_gone()
        return self.index.covers(tokens, keys)

    def save(self, tokens: Sequence[int], payload: Any, windows: tuple[Window, ...] = ()) -> None:
        """Write a state (bytes-like; not changed afterwards) and its window checkpoints (those
        along ``tokens``) unless the disk holds it already."""
        tokens = tuple(tokens)
        size = _HEAD.size + 8 * len(tokens) + len(payload) + _windows_bytes(windows) + _SUM
        if not self._usable or size > self.limit_bytes or self.covers(tokens):
            return
        path = self.dir / (hashlib.blake2b(_token_bytes(tokens), digest_size=16).hexdigest() + SUFFIX)
        with self._pending_lock:
            if self._pending_bytes + size > MAX_PENDING_BYTES:
                return
        if self.index.add(tokens, path, size) is not None:
            with self._pending_lock:
                self._pending[path] = (tokens, payload, windows, size)
                self._pending_bytes += size
            self._jobs.put(_Job("write", path, tokens, payload, windows=windows))

    def engine_busy(self, busy: bool) -> None:
        """The engine thread says whether it decodes: writes wait while it does."""
        if busy:
            self._idle.clear()
        else:
            self._idle.set()

    def load(self, entry: CacheEntry, done: Callable[[Read | None], None]) -> None:
        """Read ``entry``'s payload on the reader thread; ``done`` gets it there (None: a miss)."""
        self._reads.put(_Job("read", entry.payload, entry.tokens, done=done))

    def forget(self, entry: CacheEntry) -> None:
        """A load of ``entry`` failed: it is no longer offered (its file goes)."""
        self.index.remove(entry)

    def forget_state(self, tokens: Sequence[int]) -> None:
        """llama.cpp refused a state of ``tokens`` (read from here, or from RAM): the file of those
        tokens, if any, is no longer offered (it goes). A lookup, but only at a refusal."""
        entry, n = self.lookup(tokens)
        if entry is not None and n == len(entry.tokens) == len(tokens):
            self.forget(entry)

    def close(self) -> None:
        """Finish the IO queued so far (writes included), then stop the IO threads."""
        self._idle.set()
        self._reads.put(None)
        self._jobs.put(None)
        self._reader.join()
        self._thread.join()
        self.index.clear()

    def _removed(self, entry: CacheEntry) -> None:
        self._jobs.put(_Job("remove", entry.payload))

    def _drop_gone(self) -> None:
        while self._gone:
            path = self._gone.pop()
            for entry in self.index.entries():
                if entry.payload == path:
                    self.index.remove(entry)

    def _scan(self) -> None:
        """Index the files a previous run left (headers and tokens only; payloads are checked on
        read), and remove the half-written ones of a process that is gone (killed during a save)."""
        for sub in (d for d in self.root.iterdir() if d.is_dir()):
            for part in sub.glob(PART_GLOB):
                if not _writer_alive(part):
                    self._unlink(part)
        for path in sorted(self.dir.glob("*" + SUFFIX), key=lambda p: p.stat().st_mtime_ns):
            tokens = self._read_head(path)
            if tokens is None:
                self._unlink(path)
            else:
                self.index.add(tokens, path, path.stat().st_size)

    # -- the IO thread's side ----------------------------------------------------------------

    def _work(self) -> None:
        """The writer: writes and removals in order, below llama.cpp's threads (module docstring)."""
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        self._serve(self._jobs)

    def _read_jobs(self) -> None:
        self._serve(self._reads)

    def _serve(self, jobs: queue.SimpleQueue[_Job | None]) -> None:
        while (job := jobs.get()) is not None:
            try:
                match job.kind:
                    case "write":
                        self._idle.wait()
                        try:
                            self._write(job.path, job.tokens, job.payload, job.windows)
                        finally:
                            with self._pending_lock:
                                done = self._pending.pop(job.path, None)
                                if done is not None:
                                    self._pending_bytes -= done[3]
                    case "read":
                        data = self._read_pending(job.path, job.tokens)
                        if data is None:
                            data = self._read(job.path, job.tokens)
                        if data is None:
                            self._gone.append(job.path)
                        assert job.done is not None
                        job.done(data)
                    case "remove":
                        self._unlink(job.path)
            except Exception:  # the IO thread must not die: a failed job is a miss
                log.exception("prompt cache IO failed on %s", job.path)
                if job.kind == "read" and job.done is not None:
                    job.done(None)

    def _read_pending(self, path: Path, tokens: tuple[int, ...]) -> Read | None:
        """A state whose write has not happened yet, from memory: the state itself, not a copy
        (nobody changes a state once made), in this context's own layout already."""
        with self._pending_lock:
            pending = self._pending.get(path)
        if pending is None or pending[0] != tokens:
            return None
        return Read(pending[1], pending[2])

    def _write(self, path: Path, tokens: tuple[int, ...], payload: Any, windows: tuple[Window, ...] = ()) -> None:
        pieces = [memoryview(payload).cast("B")] if self.streams is None else one_stream(payload)
        if pieces is None:
            log.warning("a prompt state of an unknown layout is not written to disk")
            self._gone.append(path)
            return
        # Not named *.kv: a scan (another process starting on this directory) or the limit's sweep
        # would take a file still being written for a bad one and remove it.
        tmp = path.with_name(f".tmp-{os.getpid()}-{threading.get_ident()}-{path.stem}.part")
        n_payload = sum(map(len, pieces))
        pieces = _with_windows(pieces, windows)
        head = _HEAD.pack(MAGIC, self.identity, len(tokens), n_payload, _windows_bytes(windows)) + _token_bytes(tokens)
        check = hashlib.blake2b(head, digest_size=_SUM)
        for piece in pieces:
            check.update(piece)
        try:
            with open(tmp, "wb") as f:
                f.write(head)
                for piece in pieces:
                    f.write(piece)
                f.write(check.digest())
            os.replace(tmp, path)
        except OSError as exc:  # a full disk, a read-only directory: the request is not failed
            self._cannot_write(exc)
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            self._gone.append(path)
            return
        self._keep_limit(path)

    def _read_head(self, path: Path) -> tuple[int, ...] | None:
        try:
            with open(path, "rb") as f:
                head = f.read(_HEAD.size)
                if len(head) != _HEAD.size:
                    return None
                magic, identity, n_tokens, n_payload, n_windows = _HEAD.unpack(head)
                if magic != MAGIC or identity != self.identity:
                    return None
                raw = f.read(8 * n_tokens)
                whole = _HEAD.size + len(raw) + n_payload + n_windows + _SUM
                if len(raw) != 8 * n_tokens or path.stat().st_size != whole:
                    return None
                return struct.unpack(f"<{n_tokens}q", raw)
        except OSError:
            return None

    def _read(self, path: Path, tokens: tuple[int, ...]) -> Read | None:
        """The state and checkpoints if the file is whole, ours and for ``tokens``; else None (removed)."""
        try:
            with open(path, "rb") as f:
                head = f.read(_HEAD.size)
                if len(head) != _HEAD.size:
                    return self._bad(path, "short")
                magic, identity, n_tokens, n_payload, n_windows = _HEAD.unpack(head)
                if magic != MAGIC or identity != self.identity or n_tokens != len(tokens):
                    return self._bad(path, "foreign")
                if os.fstat(f.fileno()).st_size != _HEAD.size + 8 * n_tokens + n_payload + n_windows + _SUM:
                    return self._bad(path, "short")  # also before a length read from it is allocated
                raw = f.read(8 * n_tokens)
                if raw != _token_bytes(tokens):
                    return self._bad(path, "other tokens")
                # Room for the context's empty streams after a one-stream state (``widen``).
                payload = self._alloc(n_payload + (4 * (self.streams - 1) if self.streams else 0))
                stored = memoryview(payload).cast("B")[:n_payload]
                if f.readinto(stored) != n_payload:
                    return self._bad(path, "short")
                check = hashlib.blake2b(head, digest_size=_SUM)
                check.update(raw)
                check.update(stored)
                stored.release()
                windows = _read_windows(f, n_windows, tokens, check)
                if windows is None:
                    return self._bad(path, "checkpoints")
                if f.read(_SUM + 1) != check.digest():
                    return self._bad(path, "checksum")
                if self.streams is not None and not widen(payload, self.streams):
                    return self._bad(path, "layout")
            os.utime(path)  # the LRU order is the files' modification times
            return Read(payload, windows)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("could not read prompt state %s: %s", path, exc)
            return None

    def _bad(self, path: Path, why: str) -> Read | None:
        log.warning("prompt state %s is unusable (%s): computing the prompt instead", path.name, why)
        self._unlink(path)
        return None

    def _unlink(self, path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            self._cannot_write(exc)

    def _cannot_write(self, exc: OSError) -> None:
        """A write or removal failed (a read-only folder, a full disk): said once, not per file."""
        if not self._unwritable:
            self._unwritable = True
            log.warning(
                "the prompt cache folder %s cannot be written (%s): states are not kept on disk", self.root, exc
            )

    def _keep_limit(self, just_written: Path) -> None:
        """Remove the least recently used files (any identity) until the total fits the limit."""
        files: list[tuple[int, int, Path]] = []
        writing = 0  # states other writers are writing now: they count, and are not ours to remove
        for sub in self.root.iterdir():
            if not sub.is_dir():
                continue
            for path in sub.glob("*" + SUFFIX):
                with contextlib.suppress(OSError):
                    st = path.stat()
                    files.append((st.st_mtime_ns, st.st_size, path))
            for part in sub.glob(PART_GLOB):
                with contextlib.suppress(OSError):
                    writing += part.stat().st_size
        total = writing + sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.limit_bytes:
                break
            if path == just_written:
                continue
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size
                if path.parent == self.dir:
                    self._gone.append(path)
