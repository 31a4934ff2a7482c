"""What saving and restoring a prompt state costs the engine thread, and what the other streams feel
(issue 18).

    python bench/save_stall.py [MODEL.gguf] [--tokens 2048,8192,16384] [--threads 2]
    python bench/save_stall.py --itl [--tokens 16384] [--streams 3] [--rounds 4] [--window 60]

Without ``--itl``: for each state size, where the engine thread's time goes in a save (the size
query; a fresh zeroed buffer as ``ctypes.create_string_buffer`` makes it; llama.cpp's copy into
ready pages, and into a fresh mapping whose pages fault in during the copy; freeing the buffer
later), in a restore from RAM (``state_set``) and in the caches' indexing of the tokens (host
and disk), beside what runs off it (the one-stream view and checksum of a disk write, a disk
read with its checks).

With ``--itl``: ``--streams`` sequences decode a token each per step while, in windows of
``--window`` steps taken in turn (rounds interleave them, so machine noise falls on all alike),
another sequence's state is saved as before this change (a zeroed buffer, freed on the engine
thread), as after it (``StateBuffers``: a buffer prepared at the window's start, freed by its
worker), restored from RAM, or read from disk and restored (the reader allocating as before and
after). Prints the steps' inter-token latency p50/p95/max per kind of window, and the step that
held the save or restore.

The long sequence's cells are not computed (minutes on a laptop CPU): a real state of a few
tokens gives the layout, and a state of as many zero-valued cells is restored in its place. The
bytes moved are the real model's.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import gc
import hashlib
import queue
import statistics
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import llama_cpp as ll
import numpy as np
from real_model import real_model_path  # tests/harness/real_model.py, through bench/real_model.py

from cllm_ollama.engine.binding import Batch, Context, Model, StateBuffers
from cllm_ollama.engine.disk_cache import DiskCache, identity_digest
from cllm_ollama.engine.prompt_cache import PromptCache
from cllm_ollama.engine.state_streams import one_stream

MB = 1 << 20


def synth_state(small: Any, n_cells: int) -> bytearray:
    """A state of ``n_cells`` zero-valued cells at positions 0.. in the layout of ``small`` (a
    real state of one sequence of the same context: llama_kv_cache::state_write's, V not
    transposed, no per-cell extension)."""
    view = memoryview(small).cast("B")
    magic, seq, n_stream = struct.unpack_from("<IiI", view, 0)
    at, before = 12, 0
    while struct.unpack_from("<I", view, at)[0] == 0:
        at, before = at + 4, before + 1
    (count,) = struct.unpack_from("<I", view, at)
    at += 4 + 12 * count
    v_trans, n_layer = struct.unpack_from("<II", view, at)
    assert v_trans == 0, "a transposed V cache (flash attention off) is not synthesised"
    at += 8
    rows = []
    for _ in range(2 * n_layer):
        kind, row = struct.unpack_from("<iQ", view, at)
        rows.append((kind, row))
        at += 12 + count * row
    assert len(view) - at == 4 * (n_stream - 1 - before), "not a one-sequence state of this layout"
    size = 12 + 4 * n_stream + 12 * n_cells + 8 + sum(12 + n_cells * row for _, row in rows)
    out = bytearray(size)
    struct.pack_into("<IiI", out, 0, magic, seq, n_stream)
    at = 12 + 4 * before
    struct.pack_into("<I", out, at, n_cells)
    at += 4
    meta = np.zeros((n_cells, 3), np.int32)
    meta[:, 0], meta[:, 1], meta[:, 2] = np.arange(n_cells), 1, seq
    out[at : at + meta.nbytes] = meta.tobytes()
    at += meta.nbytes
    struct.pack_into("<II", out, at, 0, n_layer)
    at += 8
    for kind, row in rows:
        struct.pack_into("<iQ", out, at, kind, row)
        at += 12 + n_cells * row
    return out


def clock() -> Callable[[], float]:
    """Milliseconds since this call, when the returned function is called."""
    t0 = time.perf_counter()
    return lambda: (time.perf_counter() - t0) * 1e3


def fill(ctx: Context, seq: int, n_cells: int, small: Any) -> None:
    assert ctx.state_set(seq, synth_state(small, n_cells)), "llama.cpp refused the synthesised state"


def small_state(model: Model, ctx: Context, batch: Batch) -> Any:
    tokens = model.tokenize("def f(x):\n    return x + 1\n")[:16]
    batch.fill(tokens, range(len(tokens)), [0] * len(tokens), [len(tokens) - 1])
    ctx.decode(batch)
    state = ctx.state_get(0)
    ctx.seq_clear(0)
    return state


def profile(model: Model, sizes: list[int], threads: int) -> None:
    buffers = StateBuffers(1 << 40)
    ctx = Context(model, n_seq_max=4, n_ctx_seq=max(sizes) + 256, n_batch=512, n_threads=threads)
    batch = Batch(512)
    small = small_state(model, ctx, batch)
    print(
        "tokens  MiB  | engine thread, ms: size  zeroed-alloc  copy(ready)  copy(fresh)  old-total  free-old"
        "  restore  index | off it: one-stream  checksum  disk-read"
    )
    with tempfile.TemporaryDirectory() as root:
        for n in sizes:
            fill(ctx, 0, n, small)
            t = clock()
            size = ll.llama_state_seq_get_size_ext(ctx.ptr, 0, 0)
            t_size, t = t(), clock()
            zeroed = ctypes.create_string_buffer(size)
            t_zero = t()
            del zeroed
            buffers.prepare(1, size)
            while not buffers.ready(1):
                time.sleep(0.01)
            t = clock()
            ready = ctx.state_get(0, functools.partial(buffers.take, 1))
            t_ready = t()
            buffers.flush()  # the spare it asked for is prepared before the next measure
            t = clock()
            fresh = ctx.state_get(0, functools.partial(buffers.take, None))
            t_fresh, t = t(), clock()
            old = ctx.state_get(0)
            t_old, t = t(), clock()
            del old
            t_free, t = t(), clock()
            pieces = one_stream(ready)
            assert pieces is not None
            t_one, t = t(), clock()
            for piece in pieces:
                hashlib.blake2b(piece, digest_size=32)
            t_sum, t = t(), clock()
            assert ctx.state_set(1, ready)
            t_restore = t()
            alloc = functools.partial(buffers.take, None)
            disk = DiskCache(Path(root), identity_digest("bench", n), 1 << 40, 32, 4, alloc)
            tokens = tuple(range(n))
            t = clock()
            PromptCache(1 << 40).add(tokens, ready, len(ready))
            disk.save(tokens, ready)
            t_books = t()
            disk.close()
            disk = DiskCache(Path(root), identity_digest("bench", n), 1 << 40, 32, 4, alloc)
            entry, _ = disk.lookup(tokens)
            assert entry is not None
            got: queue.SimpleQueue[Any] = queue.SimpleQueue()
            t = clock()
            disk.load(entry, got.put)
            read = got.get()
            t_read = t()
            assert read is not None and bytes(read.payload) == bytes(ready)
            disk.close()
            del pieces, ready, fresh, read
            buffers.flush()
            mib = size / MB
            print(
                f"{n:6d} {mib:5.0f} | {t_size:6.1f} {t_zero:10.1f} {t_ready:10.1f} {t_fresh:11.1f} {t_old:10.1f}"
                f" {t_free:8.1f} {t_restore:8.1f} {t_books:6.1f} | {t_one:8.2f} {t_sum:9.1f} {t_read:9.1f}"
            )
            print(
                f"         per MB: copy into ready pages {t_ready / mib:.3f} ms, old save {t_old / mib:.3f} ms,"
                f" restore {t_restore / mib:.3f} ms"
            )
            ctx.seq_clear(0)
            ctx.seq_clear(1)
    ctx.close()
    buffers.close()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def itl(model: Model, n_cells: int, streams: int, rounds: int, window: int, threads: int) -> None:
    long_seq = streams
    ctx = Context(model, n_seq_max=streams + 1, n_ctx_seq=n_cells + 256, n_batch=512, n_threads=threads)
    batch = Batch(512)
    small = small_state(model, ctx, batch)
    fill(ctx, long_seq, n_cells, small)
    buffers = StateBuffers(1 << 40)
    state = ctx.state_get(long_seq, functools.partial(buffers.take, None))
    root = tempfile.TemporaryDirectory()
    identity = identity_digest("bench-itl")
    disk = DiskCache(Path(root.name), identity, 1 << 40, 32, streams + 1)
    tokens = tuple(range(n_cells))
    disk.save(tokens, state)
    disk.close()
    readers = {
        "load-old": DiskCache(Path(root.name), identity, 1 << 40, 32, streams + 1),
        "load-new": DiskCache(
            Path(root.name), identity, 1 << 40, 32, streams + 1, functools.partial(buffers.take, None)
        ),
    }
    pos = [0] * streams
    token = model.tokenize("x")[0]

    def step() -> float:
        batch.fill([token] * streams, list(pos), list(range(streams)), list(range(streams)))
        t0 = time.perf_counter()
        ctx.decode(batch)
        np.argmax(ctx.logits(streams), axis=1)
        for i in range(streams):
            pos[i] += 1
        return t0

    kinds = ["none", "save-old", "save-new", "restore", "load-old", "load-new"]
    gaps: dict[str, list[float]] = {k: [] for k in kinds}
    held: dict[str, list[float]] = {k: [] for k in kinds}  # the save or restore, on the engine thread
    freed: dict[str, list[float]] = {k: [] for k in kinds}  # the saved state dropped
    for _ in range(5):
        step()
    for r in range(rounds):
        for kind in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]:
            gc.collect()
            kept: Any = None
            read: queue.SimpleQueue[Any] = queue.SimpleQueue()
            waiting = False
            if kind == "save-new":
                buffers.prepare(long_seq, len(state))
            last = time.perf_counter()
            for i in range(window):
                t0 = time.perf_counter()
                op = i == window // 3 and kind in ("save-old", "save-new", "restore")
                if i == window // 3:
                    if kind == "save-old":
                        kept = ctx.state_get(long_seq)
                    elif kind == "save-new":
                        kept = ctx.state_get(long_seq, functools.partial(buffers.take, long_seq))
                    elif kind == "restore":
                        assert ctx.state_set(long_seq, state)
                    elif kind.startswith("load"):
                        entry, _ = readers[kind].lookup(tokens)
                        assert entry is not None
                        readers[kind].load(entry, read.put)
                        waiting = True
                if waiting and not read.empty():
                    t0, op = time.perf_counter(), True
                    assert ctx.state_set(long_seq, read.get())
                    waiting = False
                if op:
                    held[kind].append((time.perf_counter() - t0) * 1e3)
                if i == 2 * window // 3 and kept is not None:
                    t0 = time.perf_counter()
                    kept = None  # the save's buffer goes (evicted)
                    freed[kind].append((time.perf_counter() - t0) * 1e3)
                step()
                now = time.perf_counter()
                gaps[kind].append((now - last) * 1e3)
                last = now
            assert not waiting, "a disk read took longer than the window"
            del kept
            buffers.flush()  # what the worker still has to do is not left to the next window
    print(
        f"{streams} streams decoding; another sequence's state: {n_cells} tokens, {len(state) / MB:.0f} MiB; "
        f"{rounds} rounds of {window}-step windows; prepared buffers ready in time: {buffers.stats.hits}/{rounds}"
    )
    base = statistics.median(gaps["none"])
    for kind in kinds:
        g = gaps[kind]
        stall = f", the operation {statistics.median(held[kind]):.1f} ms" if held[kind] else ""
        stall += f", its free {statistics.median(freed[kind]):.1f} ms" if freed[kind] else ""
        print(
            f"  {kind:9s} ITL p50 {statistics.median(g):6.1f} ms  p95 {pct(g, 0.95):6.1f} ms"
            f" ({pct(g, 0.95) / base:.2f}x the quiet p50)  max {max(g):6.1f} ms{stall}"
        )
    for reader in readers.values():
        reader.close()
    del state
    buffers.close()
    root.cleanup()
    ctx.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", type=Path, help="[default: the real-weight model]")
    parser.add_argument("--tokens", default=None, help="state sizes in tokens, comma-separated")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--itl", action="store_true", help="the other streams' inter-token latency")
    parser.add_argument("--streams", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--window", type=int, default=60)
    args = parser.parse_args()
    model = Model(args.model or real_model_path())
    if args.itl:
        itl(model, int(args.tokens or 16384), args.streams, args.rounds, args.window, args.threads)
    else:
        profile(model, [int(t) for t in (args.tokens or "2048,8192,16384").split(",")], args.threads)
    model.close()


if __name__ == "__main__":
    main()
