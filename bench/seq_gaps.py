"""What a gap in the active sequence ids costs a decode step (split KV streams, as cllm runs them).

    python bench/seq_gaps.py MODEL.gguf [--threads 2]

llama.cpp cuts a batch over per-sequence KV streams (``kv_unified`` off) into ubatches of
consecutive sequence ids (``llama_batch_allocr::split_equal``, sequential), and each ubatch reads
the weights again. Eight sequences get a 64-token prompt each; then one-token decode steps over
sets of sequences with and without gaps, median of 8 steps each (the scheduler's slot choice,
``Scheduler._place``, is why: 2026-11-29 on two cores, real Qwen2.5-Coder-0.5B Q4_K_M,
[0, 1, 2] 44 ms, [0, 3, 6] 61 ms, [0, 1, 2, 3] 48 ms, [0, 2, 4, 6] 81 ms, all eight 80 ms).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from cllm_ollama.engine.binding import Batch, Context, Model

SETS = ([0, 1, 2], [0, 3, 6], [0, 1, 2, 3], [0, 2, 4, 6], list(range(8)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", type=Path)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    model = Model(a.model, n_gpu_layers=0)
    ctx = Context(model, n_seq_max=8, n_ctx_seq=512, n_batch=512, n_threads=a.threads)
    batch = Batch(512)
    for s in range(8):
        batch.fill(list(range(100, 164)), list(range(64)), [s] * 64, [])
        ctx.decode(batch)
    pos = [64] * 8

    def step(seqs: list[int]) -> float:
        batch.fill([42] * len(seqs), [pos[s] for s in seqs], seqs, list(range(len(seqs))))
        t0 = time.perf_counter()
        ctx.decode(batch)
        for s in seqs:
            pos[s] += 1
        return (time.perf_counter() - t0) * 1000

    for seqs in SETS:
        print(f"sequences {seqs}: {statistics.median(step(seqs) for _ in range(8)):.1f} ms a step")
    ctx.close()
    model.close()


if __name__ == "__main__":
    main()
