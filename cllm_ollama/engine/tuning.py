"""Defaults chosen for the device a model runs on: slots and batch.

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
decide (``offload.place``). Flash attention stays llama.cpp's "auto", which turns it on on every
backend that has the kernel for the model's head sizes (CUDA, Metal, Vulkan and the CPU alike);
forcing it on would run it on the CPU where a GPU lacks the kernel. Micro-batches stay 512
(llama.cpp's default on every device: the binding caps ``n_ubatch`` at 512).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .frontdoor import LoadSpec
from .offload import Device, Placement, place, placed

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


def pinned(spec: LoadSpec, **values: Any) -> LoadSpec:
    """``spec`` with ``values`` set and no longer chosen per device (a request or retry set them)."""
    tunable = tuple((name, value) for name, value in spec.tunable if name not in values)
    return replace(spec, tunable=tunable, **values)


def raised(spec: LoadSpec, name: str, value: int) -> LoadSpec:
    """``spec`` with ``name`` set to ``value``, which stays a floor under its device default
    (a request's num_batch: never below what the device would have chosen)."""
    tunable = tuple((n, max(v, value) if n == name else v) for n, v in spec.tunable)
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
    the whole model on the GPUs, else the CPU ones."""
    if not devices:
        return placed(cpu_values(spec), devices)
    for candidate in gpu_candidates(spec):
        tuned, placement = place(candidate, devices)
        if placement.cpu_bytes == 0:
            log.info(
                "%s is wholly on the GPUs: GPU defaults for what was left unset (%s)",
                spec.path.name,
                ", ".join(f"{name} {getattr(tuned, name)}" for name, _ in spec.tunable),
            )
            return placed(candidate, devices)
    return placed(cpu_values(spec), devices)
