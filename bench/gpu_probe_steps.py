"""The probe's load and first decode (``engine/probe.py``'s child) through the binding, one stage a
line, with the context's settings as arguments: on the H200 (2026-12-04) the probe's child died
with SIGSEGV where ``bench/save_stall.py`` (another context shape, no progress callback) ran, so a
run per setting says which one it is, and the last line printed says which stage.

    python bench/gpu_probe_steps.py MODEL.gguf [--seqs 1] [--ctx 64] [--batch 16] [--threads 1]
        [--flash auto|on|off] [--progress] [--gpu-layers 999] [--tokens 2] [--no-output] [--every-seq]
"""

from __future__ import annotations

import argparse
import faulthandler
import time
from pathlib import Path

from cllm_ollama.engine.binding import Batch, Context, Model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", type=Path)
    p.add_argument("--seqs", type=int, default=1)
    p.add_argument("--ctx", type=int, default=64, help="tokens per sequence")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--flash", choices=("auto", "on", "off"), default="auto")
    p.add_argument("--progress", action="store_true", help="a load progress callback, as the probe passes")
    p.add_argument("--gpu-layers", type=int, default=999)
    p.add_argument("--tokens", type=int, default=2, help="prompt tokens decoded (the last one's logits read)")
    p.add_argument("--no-output", action="store_true", help="no logits asked for (as a prompt's chunk, seq_gaps')")
    p.add_argument("--every-seq", action="store_true", help="the prompt decoded into each sequence in turn (seq_gaps')")
    a = p.parse_args()
    faulthandler.enable()
    t0 = time.perf_counter()

    def say(what: str) -> None:
        print(f"[{time.perf_counter() - t0:7.2f}s] {what}", flush=True)

    say(f"settings {vars(a)}")
    say("Model ...")
    model = Model(a.model, n_gpu_layers=a.gpu_layers, progress=(lambda share: True) if a.progress else None)
    say("Context ...")
    flash = {"auto": None, "on": True, "off": False}[a.flash]
    ctx = Context(model, n_seq_max=a.seqs, n_ctx_seq=a.ctx, n_batch=a.batch, n_threads=a.threads, flash_attn=flash)
    say(f"Context: n_ctx_seq {ctx.n_ctx_seq}, n_batch {ctx.n_batch}, n_ubatch {ctx.n_ubatch}; decode ...")
    batch = Batch(ctx.n_batch)
    first = model.bos if model.bos >= 0 else 0
    tokens = [(first + i) % model.n_vocab for i in range(a.tokens)]
    for seq in range(a.seqs if a.every_seq else 1):
        batch.fill(tokens, range(len(tokens)), [seq] * len(tokens), [] if a.no_output else [len(tokens) - 1])
        ctx.decode(batch)
    if not a.no_output:
        say("logits ...")
        rows = ctx.logits(1)
        say(f"logits read ({rows.shape[1]} values, first {float(rows[0, 0]):.3f})")
    say("closing the context ...")
    ctx.close()
    say("closing the model ...")
    model.close()
    say("done")


if __name__ == "__main__":
    main()
