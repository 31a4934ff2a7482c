"""What the disk prompt cache costs, and where (issue 18): for a prompt of N tokens, its cold
prefill against the engine thread's share of a save (``state_get``) and of a restore
(``state_set``), and the IO thread's write (with checksum) and read (with verification).

    python bench/disk_state.py [MODEL.gguf] [--tokens 2048] [--threads 2]

Only ``state_get`` and ``state_set`` stall other requests; the rest runs beside them.
"""

from __future__ import annotations

import argparse
import queue
import tempfile
import time
from pathlib import Path

from real_model import real_model_path  # tests/harness/real_model.py, through bench/real_model.py

from cllm_ollama.engine.binding import Batch, Context, Model
from cllm_ollama.engine.disk_cache import DiskCache, identity_digest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", type=Path, help="[default: the real-weight model]")
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    model = Model(args.model or real_model_path())
    ctx = Context(model, n_seq_max=1, n_ctx_seq=args.tokens + 64, n_batch=512, n_threads=args.threads)
    tokens = (model.tokenize("def f(x):\n    return x + 1\n" * (args.tokens // 8 + 1)))[: args.tokens]
    batch = Batch(512)
    t0 = time.perf_counter()
    for i in range(0, len(tokens), 512):
        part = tokens[i : i + 512]
        batch.fill(part, range(i, i + len(part)), [0] * len(part), [len(part) - 1])
        ctx.decode(batch)
    prefill = time.perf_counter() - t0
    t0 = time.perf_counter()
    state = ctx.state_get(0)
    get = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as root:
        disk = DiskCache(Path(root), identity_digest("bench"), 1 << 40, 32)
        t0 = time.perf_counter()
        disk.save(tokens, state)
        disk.close()  # waits for the write
        write = time.perf_counter() - t0
        disk = DiskCache(Path(root), identity_digest("bench"), 1 << 40, 32)
        entry, _ = disk.lookup(tokens)
        assert entry is not None
        got: queue.SimpleQueue[bytearray | None] = queue.SimpleQueue()
        t0 = time.perf_counter()
        disk.load(entry, got.put)
        data = got.get()
        read = time.perf_counter() - t0
        assert data is not None
        t0 = time.perf_counter()
        ok = ctx.state_set(0, data)
        set_ = time.perf_counter() - t0
        disk.close()
    ctx.close()
    model.close()
    print(
        f"{len(tokens)} tokens, state {len(state) / 2**20:.1f} MiB: cold prefill {prefill:.2f} s; engine thread: "
        f"state_get {get * 1e3:.1f} ms, state_set {set_ * 1e3:.1f} ms (restored: {ok}); IO thread: write "
        f"{write * 1e3:.0f} ms, read {read * 1e3:.0f} ms; a restore from disk is {(read + set_) / prefill:.2%} of "
        "the prefill"
    )


if __name__ == "__main__":
    main()
