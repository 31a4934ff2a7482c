"""The serve crash reduced to the binding (issue 31): on a GPU build, decode a wide batch of many
sequences' prompt rows with no logits at all (cllm's first call of a step that ends prompts:
``runner._decode``), then their last rows with logits, as ``cllm serve`` does at its GPU defaults
(32 slots, batches of 2048 tokens, micro-batches of 512). ``N_BATCH=512`` for the narrow batch,
``OUTPUT=1`` to give the wide call one logits row. 2026-11-28, lavapipe, two shared cores: 3 rounds
(400 s) and 2 rounds (300 s) without a crash, where bench/vulkan_crash.py died in its first or
second burst (3 runs of 3): not yet a reduction, a start for one.

    eval "$(bash bench/vulkan_build.sh --env)" && PYTHONFAULTHANDLER=1 .venv/bin/python bench/vulkan_nooutput.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from vulkan_crash import model

from cllm_ollama.engine.binding import Batch, Context, Model, gpu_devices

SEQS, PROMPT = 32, 60


def main() -> None:
    n_batch = int(os.environ.get("N_BATCH", "2048"))
    one_output = os.environ.get("OUTPUT") == "1"
    print("devices:", gpu_devices(), "n_batch", n_batch, "one output" if one_output else "no outputs", flush=True)
    m = Model(model(), n_gpu_layers=999)
    ctx = Context(m, n_seq_max=SEQS, n_ctx_seq=512, n_batch=n_batch, n_threads=8)
    batch = Batch(n_batch)
    for rnd in range(int(os.environ.get("ROUNDS", "6"))):
        base = rnd * (PROMPT + 1)
        rows = [(s, base + p) for s in range(SEQS) for p in range(PROMPT)]
        for start in range(0, len(rows), n_batch):  # the prompt bodies: no logits
            chunk = rows[start : start + n_batch]
            tokens = [(7 * s + p) % 200 + 10 for s, p in chunk]
            outputs = [len(chunk) - 1] if one_output else []
            batch.fill(tokens, [p for _, p in chunk], [s for s, _ in chunk], outputs)
            ctx.decode(batch)
        heads = list(range(SEQS))  # each sequence's last prompt row, with logits
        batch.fill([11] * SEQS, [base + PROMPT] * SEQS, heads, heads)
        ctx.decode(batch)
        print(f"round {rnd}: logits row 0 max {float(ctx.logits(SEQS)[0].max()):.3f}", flush=True)
    ctx.close()
    m.close()
    print("no crash")


if __name__ == "__main__":
    main()
