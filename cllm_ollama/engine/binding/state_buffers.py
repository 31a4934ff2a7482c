"""Host memory for saved sequence states, made ready and given back off the engine thread (issue 18).

A save of a sequence's KV (``Context.state_get``) runs on the engine thread between two decodes,
so every stream waits for it. Into a fresh buffer, little of that wait is the copy: on the shared
2-core development machine (``bench/save_stall.py``, Qwen2.5-0.5B, 16k tokens, a 192 MiB state)
a save took ~170 ms, of which ~150 ms zeroing and faulting in fresh pages and ~27 ms llama.cpp's
copy, and freeing the buffer later ~12 ms more, GIL held. So state buffers are anonymous
mappings that a worker thread handles, below llama.cpp's threads (nice 19):

- ``prepare(key, n)``: map ``n`` bytes for the save that ``key`` (a slot) is expected to make next,
  and fault the pages in a slice at a time (``ctypes.memset`` releases the GIL);
- ``take(key, n)``: exactly ``n`` bytes, of ``key``'s prepared buffer when it is ready and large
  enough (its unneeded tail is dropped by the worker), else of the spare, a buffer of the last
  save's size prepared after it (a slot reused at once under load had no time to expect its save),
  else of a fresh mapping (whose pages fault in during the copy, but are not zeroed first as
  ``ctypes.create_string_buffer``'s are);
- when the last reference to a buffer goes, on whatever thread, the worker drops its pages a slice
  at a time and unmaps it: no thread frees hundreds of MB in one call with the GIL held.

A buffer is a ctypes char array over its mapping. Every view of it (``memoryview``, a ctypes array
``from_buffer``) holds a reference to it, so its pages are dropped only once nothing can read them.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import mmap
import os
import queue
import threading
import weakref
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("cllm.engine")

# A state's bytes: what ``take`` hands out, ``Context.state_get`` fills and ``state_set`` reads.
StateBuffer = ctypes.Array  # of ctypes.c_char

# Bytes faulted in, or dropped, per call: the worker never holds a core, or the GIL, for long.
SLICE = 4 << 20
# A prepared buffer serves a save at most this many times smaller (its tail is dropped); a
# smaller save gets fresh memory, and the prepared buffer goes.
SLACK = 4


@dataclass
class BufferStats:
    """What the buffers did, over their life (counters, never reset)."""

    prepared: int = 0  # buffers mapped and faulted in ahead of a save
    hits: int = 0  # saves that found their prepared buffer ready
    fresh: int = 0  # saves (and reads) that mapped fresh memory
    freed: int = 0  # buffers whose pages the worker dropped


# The key of the spare buffer: one of the last save's size, for the next save nobody expected.
SPARE = -1


def _fits(size: int, n_bytes: int) -> bool:
    return n_bytes <= size <= SLACK * n_bytes


@dataclass
class _Prepared:
    mm: mmap.mmap
    size: int


def _address(mm: mmap.mmap) -> int:
    anchor = ctypes.c_char.from_buffer(mm)  # an export of the mapping: released below
    try:
        return ctypes.addressof(anchor)
    finally:
        del anchor


class StateBuffers:
    """State buffers prepared, handed out and freed as the module docstring says.

    ``limit_bytes`` bounds the prepared buffers held at once (a ``prepare`` past it is skipped).
    """

    def __init__(self, limit_bytes: int, name: str = "cllm-state-buffers") -> None:
        self.limit_bytes = limit_bytes
        self.stats = BufferStats()
        self._lock = threading.Lock()
        self._wanted: dict[int, int] = {}  # key -> size its next save is expected to need
        self._ready: dict[int, _Prepared] = {}  # key -> its buffer, pages in
        self._jobs: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    # -- any thread (the engine's, mostly) ------------------------------------------------

    def prepare(self, key: int, n_bytes: int) -> None:
        """Have a buffer of ``n_bytes`` ready for ``key``'s next save (it replaces an older one)."""
        with self._lock:
            if self._closed or self._wanted.get(key) == n_bytes:
                return
            others = sum(size for k, size in self._wanted.items() if k != key)
            if others + n_bytes > self.limit_bytes:
                self._discard(key)
                return
            self._wanted[key] = n_bytes
            old = self._ready.pop(key, None)
        if old is not None:
            self._jobs.put(("free", old.mm))
        self._jobs.put(("prepare", key, n_bytes))

    @property
    def held_bytes(self) -> int:
        """Bytes of the buffers prepared or being prepared (at most ``limit_bytes``)."""
        with self._lock:
            return sum(self._wanted.values())

    def ready(self, key: int) -> bool:
        """Whether ``key``'s prepared buffer has its pages in (a ``take`` now only copies)."""
        with self._lock:
            return key in self._ready

    def discard(self, key: int) -> None:
        """``key`` expects no save now: its prepared buffer, if any, goes."""
        with self._lock:
            self._discard(key)

    def take(self, key: int | None, n_bytes: int) -> StateBuffer:
        """A writable buffer of exactly ``n_bytes``: ``key``'s prepared one if it serves, else the
        spare if it does (then a new spare of this size is prepared), else fresh memory."""
        prepared = None
        with self._lock:
            if key is not None and key in self._wanted:
                del self._wanted[key]
                prepared = self._ready.pop(key, None)
            if prepared is not None and not _fits(prepared.size, n_bytes):
                self._jobs.put(("free", prepared.mm))
                prepared = None
            spare = self._ready.get(SPARE)
            if key is not None and prepared is None and spare is not None and _fits(spare.size, n_bytes):
                prepared = self._ready.pop(SPARE)
                del self._wanted[SPARE]
        if key is not None:
            self.prepare(SPARE, n_bytes)  # for a save nobody expected: a slot reused at once, under load
        if prepared is not None:
            mm = prepared.mm
            self.stats.hits += 1
            if prepared.size - n_bytes >= SLICE:
                self._jobs.put(("trim", mm, n_bytes))
        else:
            mm = mmap.mmap(-1, max(n_bytes, 1))
            self.stats.fresh += 1
        buf = (ctypes.c_char * n_bytes).from_buffer(mm)
        weakref.finalize(buf, self._release, mm).atexit = False
        return buf

    def flush(self) -> None:
        """Wait until the worker has done what was asked of it so far (tests, benchmarks)."""
        done = threading.Event()
        self._jobs.put(("flush", done))
        done.wait()

    def close(self) -> None:
        """Stop the worker once the work queued so far is done (buffers still held are unmapped
        when they go, by whichever thread drops them)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._wanted.clear()
            ready, self._ready = list(self._ready.values()), {}
        for prepared in ready:
            self._jobs.put(("free", prepared.mm))
        self._jobs.put(None)
        self._thread.join()

    def _discard(self, key: int) -> None:
        self._wanted.pop(key, None)
        old = self._ready.pop(key, None)
        if old is not None:
            self._jobs.put(("free", old.mm))

    def _release(self, mm: mmap.mmap) -> None:
        """A buffer's last reference went (its finalizer, on the thread that dropped it)."""
        if not self._closed:
            self._jobs.put(("free", mm))

    # -- the worker -----------------------------------------------------------------------

    def _work(self) -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        while (job := self._jobs.get()) is not None:
            try:
                match job:
                    case ("prepare", key, size):
                        self._prepare(key, size)
                    case ("trim", mm, keep):
                        start = -(-keep // mmap.PAGESIZE) * mmap.PAGESIZE
                        self._drop_pages(mm, start)
                    case ("free", mm):
                        self._free(mm)
                        self.stats.freed += 1
                    case ("flush", done):
                        done.set()
            except Exception:  # the worker must not die: a save then maps fresh memory itself
                log.exception("state buffer job %s failed", job[0])

    def _still_wanted(self, key: int, size: int) -> bool:
        with self._lock:
            return self._wanted.get(key) == size and key not in self._ready

    def _prepare(self, key: int, size: int) -> None:
        if not self._still_wanted(key, size):
            return
        mm = mmap.mmap(-1, size)
        address = _address(mm)
        for start in range(0, size, SLICE):
            if not self._still_wanted(key, size):  # taken, replaced or discarded meanwhile
                self._free(mm)
                return
            ctypes.memset(address + start, 0, min(SLICE, size - start))
        with self._lock:
            if self._wanted.get(key) == size and key not in self._ready:
                self._ready[key] = _Prepared(mm, size)
                self.stats.prepared += 1
                return
        self._free(mm)

    @classmethod
    def _free(cls, mm: mmap.mmap) -> None:
        cls._drop_pages(mm, 0)
        with contextlib.suppress(BufferError):  # its owner is still being torn down: it unmaps it
            mm.close()

    @staticmethod
    def _drop_pages(mm: mmap.mmap, start: int) -> None:
        """Give the pages of ``mm`` from ``start`` (page-aligned) back to the system, a slice at a time."""
        if not hasattr(mm, "madvise") or mm.closed:
            return
        size = len(mm)
        for at in range(start, size, SLICE):
            mm.madvise(mmap.MADV_DONTNEED, at, min(SLICE, size - at))
