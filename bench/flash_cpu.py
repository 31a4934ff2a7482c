"""What flash attention costs a decode on the CPU, through cllm's binding (split KV streams, as cllm
runs them): why a model wholly on the CPU runs without it by default where its slots can go deep,
and with it where they cannot (``engine/tuning.py``).

    python bench/flash_cpu.py MODEL.gguf [--threads 2] [--depths 64,600,2000] [--seqs 1,8] [--ctx CELLS]
        [--deep N]

For each depth and sequence count, with flash attention on and then off: the sequences get a
prompt of that many tokens (timed: prompt tokens a second), then 16 one-token decode steps over
all of them (the median step, and decoded tokens a second). ``--deep N``: the first sequence's
prompt is N tokens instead (streams of mixed depths). Another llama.cpp build (an AVX2 one,
``bench/avx2_suite.sh``'s) is timed by putting it first on the path:
``PYTHONPATH=.venv-avx2/lib/python3.11/site-packages python bench/flash_cpu.py ...``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from cllm_ollama.engine.binding import Batch, Context, Model

STEPS = 16


def run(
    model: Model, threads: int, depth: int, seqs: int, flash: bool, cells: int = 0, deep: int = 0
) -> tuple[float, float, float]:
    """Prompt tokens a second, the median decode step (ms) and decoded tokens a second; ``cells``: a
    sequence's KV cells (0: its depth and the steps); ``deep``: the first sequence's depth (0: ``depth``)."""
    depths = [deep or depth] + [depth] * (seqs - 1)
    cells = max(cells, max(depths) + 64)
    ctx = Context(model, n_seq_max=seqs, n_ctx_seq=cells, n_batch=512, n_threads=threads, flash_attn=flash)
    batch = Batch(512)
    try:
        t0 = time.perf_counter()
        for s, d in enumerate(depths):
            for start in range(0, d, 512):
                n = min(512, d - start)
                batch.fill([100 + (start + i) % 1000 for i in range(n)], list(range(start, start + n)), [s] * n, [])
                ctx.decode(batch)
        prompt_rate = sum(depths) / (time.perf_counter() - t0)
        steps = []
        for k in range(STEPS):
            batch.fill([42] * seqs, [d + k for d in depths], list(range(seqs)), list(range(seqs)))
            t1 = time.perf_counter()
            ctx.decode(batch)
            steps.append(time.perf_counter() - t1)
        step = statistics.median(steps)
        return prompt_rate, step * 1000, seqs / step
    finally:
        ctx.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", type=Path)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--depths", default="64,600,2000", help="prompt tokens in each sequence before the steps")
    p.add_argument("--seqs", default="1,8", help="sequence counts")
    p.add_argument("--ctx", type=int, default=0, help="KV cells a sequence (a slot's context) [its depth + 64]")
    p.add_argument("--deep", type=int, default=0, help="the first sequence's depth [the others']")
    a = p.parse_args()
    model = Model(a.model, n_gpu_layers=0)
    print("| depth | sequences | flash attention | prompt tok/s | decode step ms | decode tok/s |")
    print("|---|---|---|---|---|---|")
    try:
        for depth in (int(d) for d in a.depths.split(",")):
            for seqs in (int(s) for s in a.seqs.split(",")):
                for flash in (True, False):
                    rate, ms, tps = run(model, a.threads, depth, seqs, flash, a.ctx, a.deep)
                    on = "on" if flash else "off"
                    shown = f"{a.deep}, then {depth}" if a.deep and seqs > 1 else a.deep or depth
                    print(f"| {shown} | {seqs} | {on} | {rate:.1f} | {ms:.1f} | {tps:.1f} |", flush=True)
    finally:
        model.close()


if __name__ == "__main__":
    main()
