"""Defaults chosen for the device a model runs on: slots, batch and flash attention.

cllm's defaults (8 slots, batches of 512) were chosen on CPUs, where decode is compute-bound: a
step's cost grows with its rows. On a GPU decode is bound by reading the weights, so 32 rows cost
little more than one: more slots multiply throughput (batches stay 512: see ``GPU_BATCH``).
How many prompt tokens a step carries beside running streams is not a default per device: the
step budget measures it on the device (``step_budget``). So when a model is wholly on GPUs, the
settings the operator left unset (``LoadSpec.tunable``: slots, batch, ``gap_fill``) take ``GPU`` values; a model that is
partly on the CPU keeps the CPU ones, since its CPU layers set the pace of each step.

Slots come before the GPU defaults: the KV cache of every slot is part of each layer's cost, so
the GPU slot counts are tried largest first and the first that keeps every layer on the GPUs is
taken; when none does (8 slots or fewer would not gain), the CPU defaults and Ollama's fitting
decide (``offload.place``). Micro-batches stay 512 (llama.cpp's default on every device: the
binding caps ``n_ubatch`` at 512).

Flash attention, left unset, is off for a model wholly on the CPU whose slots can go deep
(``cpu_flash_attention``) and llama.cpp's "auto" elsewhere, which turns it on on every backend
that has the kernel for the model's head sizes (forcing it on would run it on the CPU where a GPU
lacks the kernel).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .frontdoor import LoadSpec
from .offload import Device, Placement, place, placed, trained_context

log = logging.getLogger("cllm.engine")

# The LoadSpec fields a device may choose, and their values on a GPU.
# Batches of 512 (one ubatch), not llama-server's 2048: with 32 slots and 2048-token batches the
# server died silently on the H200 (CUDA: not explained yet) and of heap corruption inside
# llama_decode on Vulkan (bench/vulkan_crash.py: 5 of 8 runs), which points to Debian 12's lavapipe
# (Mesa 22.3): Mesa 25.0 ran 11 bursts without a crash, and Khronos' validation layer found no
# misuse. A ubatch is 512 either way, so the GPU computes the same; a longer prompt takes more calls.
GPU_BATCH = 512
GPU_SLOTS = (32, 16)  # tried in turn; below them, the CPU default
# Gaps of up to 4 idle slots closed with throw-away rows (``gap_fill``): on the H200 a pass over
# a small model's weights cost ~15 decode rows (llama-batched-bench: 1.48 ms a step for one
# sequence, 4.24 for 32); a quarter of that, as a pad in a deep sequence also reads its KV.
GPU_GAP_FILL = 4


# A slot of at most this many cells keeps flash attention (llama.cpp's "auto") on the CPU: its
# sequences never pass the depth (~600 tokens) where the matrix products start to pay
# (``cpu_flash_attention``).
SHALLOW_SLOT = 512


def cpu_flash_attention(spec: LoadSpec) -> bool | None:
    """Flash attention for ``spec`` wholly on the CPU: off where the operator left it unset, a
    slot holds more than ``SHALLOW_SLOT`` cells, the cache is f16 and the deterministic mode is
    off; else as set (None: llama.cpp's "auto").

    llama.cpp's "auto" turns it on on the CPU too (as Ollama's and llama-server's defaults run),
    but ggml's CPU kernel walks a query's KV one cell at a time (a dot, an exp and a
    multiply-add in f16 per cell), where without it two matrix products do the work. On the
    real Qwen2.5-Coder-0.5B (``llama-batched-bench``, 2 threads, Xeon with AVX-512) decode ran
    1.7x faster without it at 600 tokens deep (8 sequences), 2.2-2.8x at 2,000 and 3.6x at 8,000
    (one), prompts within ~20% either way (faster without it below ~1,000 tokens); the chat
    workload served 1.6x the tokens a second.

    Shallow, it loses: without it the products run over every cell up to the deepest sequence's,
    at least 256 (llama.cpp pads the KV range so), where its kernel skips the masked ones. On the
    random Qwen3-0.6B (head size 128; ``bench/flash_cpu.py --ctx 512``) 32 sequences 64 tokens
    deep decoded 1.2-1.7x faster with it and 8 sequences 1.15-1.24x; at 300 and 600 tokens deep
    the two were about even (0.9-1.2x), at 1,000 it was 1.4-1.5x slower. The distinct workload
    (32 slots of 512) served 53-55 tokens a second with it against 46-53. So a slot too small to
    pass ~600 tokens keeps it. The real Qwen2.5-0.5B's small heads make the products cheap: 32
    sequences 64 deep ran 1.14x faster without it, which such a model's small slots give up.

    The products' cells are the deepest sequence's for every sequence of the step, so streams of
    mixed depths pay too: eight, one 2,000-3,000 deep and seven 100-500, decoded 1.2-1.6x faster
    with it, where one or two 3,000 deep decoded 1.75-1.9x faster without. A model is loaded for
    whatever comes; one user's few deep streams are the CPU's common case. A quantized V cache
    needs it; the deterministic mode's batch invariance was measured with it (``invariance``); an
    embedding model never decodes (``as_set``)."""
    tunable = "flash_attention" in dict(spec.tunable)
    kept = spec.kv_cache_type != "f16" or spec.deterministic or spec.embedding_only or spec.n_ctx_slot <= SHALLOW_SLOT
    return spec.flash_attention if not tunable or kept else False


def as_set(spec: LoadSpec, name: str) -> Any:
    """``name`` as the operator set it, or the server's default where they left it to the device
    (an embedding context keeps flash attention so: a long input is one micro-batch there, whose
    scores without it would take heads x rows x rows floats, gigabytes at 8k)."""
    return dict(spec.tunable).get(name, getattr(spec, name))


def on_the_cpu(spec: LoadSpec) -> LoadSpec:
    """``spec`` with what a model wholly on the CPU takes where the operator left it unset."""
    flash_attention = cpu_flash_attention(spec)
    if flash_attention is not spec.flash_attention:
        log.info("%s is wholly on the CPU: flash attention off (OLLAMA_FLASH_ATTENTION=1 turns it on)", spec.path.name)
    return replace(spec, flash_attention=flash_attention)


def pinned(spec: LoadSpec, **values: Any) -> LoadSpec:
    """``spec`` with ``values`` set and no longer chosen per device (a request or retry set them)."""
    tunable = tuple((name, value) for name, value in spec.tunable if name not in values)
    return replace(spec, tunable=tunable, **values)


def raised(spec: LoadSpec, name: str, value: int) -> LoadSpec:
    """``spec`` with ``name`` set to ``value``, which stays a floor under its device default
    (a request's num_batch: never below what the device would have chosen)."""
    tunable = tuple((n, max(v or 0, value) if n == name else v) for n, v in spec.tunable)
    values: dict[str, Any] = {name: value}
    return replace(spec, tunable=tunable, **values)


def cpu_values(spec: LoadSpec) -> LoadSpec:
    """``spec`` with its unset settings at their CPU defaults (what the server was started with)."""
    values: dict[str, Any] = dict(spec.tunable)
    return replace(spec, **values)


def gpu_candidates(spec: LoadSpec) -> list[LoadSpec]:
    """The GPU choices for ``spec``, most slots first; none when nothing is left to choose."""
    names = {name for name, _ in spec.tunable}
    if not names:
        return []
    base = cpu_values(spec)
    values: dict[str, Any] = {}
    if "n_batch" in names:
        values["n_batch"] = max(GPU_BATCH, base.n_batch)
    if "gap_fill" in names:
        values["gap_fill"] = GPU_GAP_FILL
    tuned = replace(base, **values)
    if "n_slots" not in names or spec.embedding_only:
        return [tuned]
    return [replace(tuned, n_slots=n) for n in GPU_SLOTS if n > base.n_slots]


def choose(spec: LoadSpec, devices: Sequence[Device]) -> tuple[LoadSpec, Placement | None]:
    """``spec`` placed on ``devices`` (``offload.placed``), with the GPU defaults where they keep
    the whole model on the GPUs, else the CPU ones (and a model left wholly on the CPU takes its
    flash attention default: ``on_the_cpu``). Slots are first cut to the weights' trained
    context, as the load will cut them."""
    spec = spec.within_training(trained_context(spec.path))
    if not devices:
        return on_the_cpu(cpu_values(spec)), None
    for candidate in gpu_candidates(spec):
        tuned, placement = place(candidate, devices)
        if placement.cpu_bytes == 0:
            log.info(
                "%s is wholly on the GPUs: GPU defaults for what was left unset (%s)",
                spec.path.name,
                ", ".join(f"{name} {getattr(tuned, name)}" for name, _ in spec.tunable),
            )
            return placed(candidate, devices)
    fitted, fitting = placed(cpu_values(spec), devices)
    return (on_the_cpu(fitted) if fitted.n_gpu_layers == 0 else fitted), fitting
