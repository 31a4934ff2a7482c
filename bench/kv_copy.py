"""How much a cross-slot prefix copy costs, by method and size (issue 7: "measure both, pick by size").

    python bench/kv_copy.py [MODEL.gguf] [--n-ctx 4096]

For a prefix of N tokens held by sequence 0, times giving it to sequence 1 and decoding one
token there: (a) ``llama_memory_seq_cp`` of the whole stream (deferred to that decode) then a
trim, (b) ``llama_state_seq_get_data_ext`` / ``set_data_ext`` then a trim, and (c) computing
the prefix again. The decode of one token alone is measured too and subtracted.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from cllm_ollama.engine.binding import Batch, Context, Model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", type=Path)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    path = args.model
    if path is None:
        from real_model import real_model_path  # tests/harness, through bench/real_model.py

        path = real_model_path()
    model = Model(path)
    ctx = Context(model, n_seq_max=2, n_ctx_seq=args.n_ctx, n_batch=512, n_threads=args.threads)
    batch = Batch(512)

    def decode(tokens: list[int], start: int, seq: int) -> None:
        for i in range(0, len(tokens), 512):
            part = tokens[i : i + 512]
            batch.fill(part, range(start + i, start + i + len(part)), [seq] * len(part), [len(part) - 1])
            ctx.decode(batch)

    def timed(fn) -> float:  # type: ignore[no-untyped-def]
        samples = []
        for _ in range(args.reps):
            ctx.seq_clear(1)
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
        return statistics.median(samples) * 1000

    print(f"model {path.name}, n_ctx_seq {ctx.n_ctx_seq}, threads {args.threads}; ms, median of {args.reps}")
    print("| prefix tokens | one-token decode | seq_cp + trim | state get/set + trim | recompute |")
    print("|---|---|---|---|---|")
    for n in (64, 256, 1024, 2048, min(4000, ctx.n_ctx_seq - 8)):
        row(ctx, n, decode, timed)
    print(f"state bytes per token: {len(ctx.state_get(0)) / n:.0f}")
    ctx.close()
    model.close()


def row(ctx: Context, n: int, decode: Callable[[list[int], int, int], None], timed: Callable[..., float]) -> None:
    prompt = [(i * 7919) % 1000 + 100 for i in range(n + 1)]
    ctx.clear()
    decode(prompt[:n], 0, 0)
    one = timed(lambda: decode([prompt[0]], 0, 1))

    def by_copy() -> None:
        ctx.seq_copy(0, 1)
        ctx.seq_rm(1, n)
        decode([prompt[n]], n, 1)

    def by_state() -> None:
        ctx.state_set(1, ctx.state_get(0))
        ctx.seq_rm(1, n)
        decode([prompt[n]], n, 1)

    copy_ms, state_ms = timed(by_copy), timed(by_state)
    recompute_ms = timed(lambda: decode(prompt[: n + 1], 0, 1)) if n <= 1024 else float("nan")
    print(f"| {n} | {one:.1f} | {copy_ms - one:.1f} | {state_ms - one:.1f} | {recompute_ms - one:.0f} |")


if __name__ == "__main__":
    main()
