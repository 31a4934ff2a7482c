"""The probe's load and first decode (``engine/probe.py``'s child) through the binding, one stage a
line, with the context's settings as arguments: on the H200 (2026-12-04) the probe's child died
with SIGSEGV where ``bench/save_stall.py`` (another context shape, no progress callback) ran, so a
run per setting says which one it is, and the last line printed says which stage. Later on the
same H200 the load itself died (``Model``) with and without the callback, so the load's own
settings have switches too: ``--raw`` loads through llama_cpp alone (no cllm binding: its log
callback, device list, AMX check), ``--no-devices`` leaves the device list to llama.cpp,
``--no-mmap`` reads the file into memory, ``--no-extra-bufts`` keeps the CPU's weights unrepacked,
``--imports`` first imports what ``bench/save_stall.py`` (which survived there) imports,
``--no-faulthandler`` leaves Python's fault handler off: every load that died there had it on
(the probe's child through the server's ``PYTHONFAULTHANDLER``), none that survived did;
``--no-log-callback`` leaves llama.cpp's log to its own default (stderr), so that no Python runs
inside the load (llama_cpp and cllm's binding each set a Python callback).

    python bench/gpu_probe_steps.py MODEL.gguf [--seqs 1] [--ctx 64] [--batch 16] [--threads 1]
        [--flash auto|on|off] [--progress] [--gpu-layers 999] [--tokens 2] [--no-output] [--every-seq]
        [--raw] [--no-devices] [--no-mmap] [--no-extra-bufts] [--imports] [--no-faulthandler]
        [--no-log-callback]
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import time
from pathlib import Path

import llama_cpp as ll

from cllm_ollama.engine.binding import Batch, Context, Model, core

# What bench/save_stall.py's process holds before its load (besides the binding).
SAVE_STALL_IMPORTS = ("orjson", "cllm_ollama.engine.disk_cache", "cllm_ollama.engine.prompt_cache",
                      "cllm_ollama.engine.state_streams")  # fmt: skip


def raw_load(path: Path, gpu_layers: int, use_mmap: bool) -> bool:
    """llama.cpp's load through llama_cpp alone, its default parameters but the layers and the
    mode: whether the crash needs anything of cllm's binding."""
    ll.llama_backend_init()
    params = ll.llama_model_default_params()
    params.n_gpu_layers = gpu_layers
    params.load_mode = ll.LLAMA_LOAD_MODE_AUTO if use_mmap else ll.LLAMA_LOAD_MODE_NONE
    ptr = ll.llama_model_load_from_file(str(path).encode(), params)
    if ptr:
        ll.llama_model_free(ptr)
    return bool(ptr)


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
    p.add_argument("--raw", action="store_true", help="only a load, through llama_cpp alone")
    p.add_argument("--no-devices", action="store_true", help="no device list: llama.cpp's own choice")
    p.add_argument("--no-mmap", action="store_true", help="the file read into memory, not mapped")
    p.add_argument("--no-extra-bufts", action="store_true", help="no repacked CPU weight layouts")
    p.add_argument("--imports", action="store_true", help="save_stall.py's imports first")
    p.add_argument("--no-faulthandler", action="store_true", help="Python's fault handler left off")
    p.add_argument("--no-log-callback", action="store_true", help="llama.cpp's own log, no Python callback")
    a = p.parse_args()
    if not a.no_faulthandler:
        faulthandler.enable()
    t0 = time.perf_counter()

    def say(what: str) -> None:
        print(f"[{time.perf_counter() - t0:7.2f}s] {what}", flush=True)

    say(f"settings {vars(a)}")
    if a.imports:
        for name in SAVE_STALL_IMPORTS:
            importlib.import_module(name)
    if a.no_log_callback:
        core.log_callback()  # the binding's first call sets its callback: set before it is undone
        ll.llama_log_set(ll.llama_log_callback(), None)  # NULL: llama.cpp's default, straight to stderr
    if a.raw:
        say("llama_model_load_from_file (llama_cpp alone) ...")
        say(f"loaded: {raw_load(a.model, a.gpu_layers, not a.no_mmap)}; done")
        return
    if a.no_devices:
        core.offload_devices = list  # Model names no devices: llama.cpp's default selection
    say("Model ...")
    model = Model(
        a.model, n_gpu_layers=a.gpu_layers, use_mmap=not a.no_mmap, batch_invariant=a.no_extra_bufts,
        progress=(lambda share: True) if a.progress else None,
    )  # fmt: skip
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
