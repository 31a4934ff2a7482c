"""What a gap in the active sequence ids costs a decode step (split KV streams, as cllm runs them).

    python bench/seq_gaps.py MODEL.gguf [--threads 2] [--depth 64] [--seqs 8|32] [--gpu-layers 999]

llama.cpp cuts a batch over per-sequence KV streams (``kv_unified`` off) into ubatches of
consecutive sequence ids (``llama_batch_allocr::split_equal``, sequential), and each ubatch reads
the weights again. Eight sequences get a 64-token prompt each; then one-token decode steps over
sets of sequences with and without gaps, median of 8 steps each (the scheduler's slot choice,
``Scheduler._place``, is why: 2026-11-29 on two cores, real Qwen2.5-Coder-0.5B Q4_K_M,
[0, 1, 2] 44 ms, [0, 3, 6] 61 ms, [0, 1, 2, 3] 48 ms, [0, 2, 4, 6] 81 ms, all eight 80 ms).
Each set with gaps is measured again with the gaps filled by throw-away rows, removed after each
step, as ``engine/gap_fill.py`` does (``CLLM_GAP_FILL``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from cllm_ollama.engine.binding import Batch, Context, Model
from cllm_ollama.engine.gap_fill import fill, gaps

SETS = ([0, 1, 2], [0, 3, 6], [0, 1, 2, 3], [0, 2, 4, 6], [0, 1, 2, 4, 5, 6], [0, 1, 2, 3, 4, 5, 6], list(range(8)))
# With --seqs 32 (a GPU's default slots): half the slots busy, together, every other one, every
# fourth, and every slot but one in four.
WIDE = (
    list(range(16)),
    list(range(0, 32, 2)),
    list(range(0, 32, 4)),
    list(range(8)),
    [s for s in range(32) if s % 4 != 3],
    list(range(32)),
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", type=Path)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--depth", type=int, default=64, help="prompt tokens in each sequence before the steps")
    p.add_argument("--seqs", type=int, choices=(8, 32), default=8, help="sequences (32: the wide sets)")
    p.add_argument("--gpu-layers", type=int, default=0, help="layers on the GPU (999: all)")
    a = p.parse_args()
    model = Model(a.model, n_gpu_layers=a.gpu_layers)
    ctx = Context(model, n_seq_max=a.seqs, n_ctx_seq=a.depth + 256, n_batch=512, n_threads=a.threads)
    batch = Batch(512)
    for s in range(a.seqs):
        for start in range(0, a.depth, 512):
            n = min(512, a.depth - start)
            batch.fill([100 + (start + i) % 1000 for i in range(n)], list(range(start, start + n)), [s] * n, [])
            ctx.decode(batch)
    pos = [a.depth] * a.seqs

    def step(seqs: list[int], most: int = 0) -> float:
        pads = {s: ctx.seq_pos_max(s) + 1 for run in gaps(seqs, most) for s in run}
        rows = fill([42] * len(seqs), [pos[s] for s in seqs], seqs, list(range(len(seqs))), pads)
        batch.fill(rows.tokens, rows.positions, rows.seq_ids, rows.outputs)
        t0 = time.perf_counter()
        ctx.decode(batch)
        for s, p in rows.pads:
            ctx.seq_rm(s, p)
        ms = (time.perf_counter() - t0) * 1000
        for s in seqs:
            pos[s] += 1
        return ms

    for seqs in SETS if a.seqs == 8 else WIDE:
        label = f"sequences {seqs} ({len(seqs)} in {len(gaps(seqs, a.seqs)) + 1} runs)"
        print(f"{label}: {statistics.median(step(seqs) for _ in range(8)):.1f} ms a step", flush=True)
        if gaps(seqs, 8):
            most = max(len(run) for run in gaps(seqs, 8))
            ms = statistics.median(step(seqs, most) for _ in range(8))
            print(f"{label}, gaps of up to {most} filled: {ms:.1f} ms a step", flush=True)
    ctx.close()
    model.close()


if __name__ == "__main__":
    main()
