"""The placement (``engine.offload.fit``) against llama.cpp's own assignment of layers to devices
(``llama_model::load_tensors``), simulated here in float32: what each device is told to hold is
what llama.cpp puts there, and that fits the device's free memory."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from cllm_ollama.engine.offload import DEVICE_RESERVE, Device, ModelSizes, Placement, fit

MIB = 1 << 20
GIB = 1 << 30
# A 7B-like model (as in test_offload.py): 32 blocks of 200 MiB, a 500 MiB output layer, 16 MiB
# of KV per block, a 300 MiB graph.
SEVEN_B = ModelSizes(layers=(200 * MIB,) * 32, output=500 * MIB, kv_per_layer=16 * MIB, graph=300 * MIB)
# 40 blocks of 600 MiB: 24 GB of parts, more than a 24 GiB GPU holds with its graph and reserve.
BIG = ModelSizes(layers=(600 * MIB,) * 40, output=500 * MIB, kv_per_layer=0, graph=300 * MIB)


def llama_cpp_devices(n_layer: int, n_gpu_layers: int, split: Sequence[float]) -> list[int | None]:
    """The device llama.cpp gives each block and the output layer (index ``n_layer``), None for
    the CPU: ``i_gpu_start = n_layer + 1 - n_gpu_layers``, then ``upper_bound`` of the part's
    float32 position in the cumulative float32 split (one device: no split)."""
    splits = np.cumsum(np.asarray(split or [1.0], dtype=np.float32), dtype=np.float32)
    splits = splits / splits[-1]
    start = max(n_layer + 1 - n_gpu_layers, 0)
    act = min(n_gpu_layers, n_layer + 1)
    where: list[int | None] = []
    for il in range(n_layer + 1):
        if il < start or il - start >= act:
            where.append(None)
            continue
        position = np.float32(il - start) / np.float32(act)
        where.append(int(np.searchsorted(splits, position, side="right")))
    return where


def llama_cpp_bytes(sizes: ModelSizes, placement: Placement, n_devices: int) -> tuple[list[int], list[int]]:
    """Layers and bytes per device where llama.cpp would put ``placement``'s ``n_gpu_layers`` and
    ``tensor_split``: the parts, a reserve and graph on each device used, the projector on the first."""
    where = llama_cpp_devices(sizes.n_layers, placement.n_gpu_layers, placement.tensor_split)
    parts = [sizes.layers[i] + sizes.kv_per_layer for i in range(sizes.n_layers)] + [sizes.output]
    counts, held = [0] * n_devices, [0] * n_devices
    for device, size in zip(where, parts, strict=True):
        if device is not None:
            counts[device] += 1
            held[device] += size
    used = [d for d in range(n_devices) if counts[d]]
    for d in used:
        held[d] += DEVICE_RESERVE + sizes.graph + (sizes.projector if d == used[0] else 0)
    return counts, held


def test_a_partial_fit_budgets_the_output_layer_llama_cpp_offloads_first() -> None:
    """llama.cpp's k GPU layers are the output and the last k - 1 blocks: budgeted as k blocks, the
    500 MiB output left the 4 GiB GPU 280 MiB short."""
    devices = [Device("CUDA0", 4 * GIB)]
    placed = fit(devices, SEVEN_B)
    counts, held = llama_cpp_bytes(SEVEN_B, placed, 1)
    assert counts == list(placed.per_device) and held == list(placed.device_bytes)
    assert held[0] <= 4 * GIB < held[0] + 216 * MIB  # and one block more would not fit


@pytest.mark.parametrize(
    ("devices", "sizes", "num_gpu", "spread"),
    [
        ([Device("CUDA0", 4 * GIB)], SEVEN_B, None, False),
        ([Device("CUDA0", 5 * GIB), Device("CUDA1", 5 * GIB)], SEVEN_B, None, False),
        ([Device("CUDA0", 24 * GIB), Device("CUDA1", 4 * GIB)], BIG, None, False),
        ([Device("CUDA0", 24 * GIB), Device("CUDA1", 4 * GIB)], BIG, 41, False),
        ([Device("CUDA0", 8 * GIB), Device("CUDA1", 3 * GIB), Device("CUDA2", 6 * GIB)], BIG, None, True),
        ([Device("CUDA0", 3 * GIB), Device("CUDA1", 2 * GIB)], SEVEN_B, None, True),
    ],
)
def test_each_device_holds_what_llama_cpp_puts_there_and_it_fits(
    devices: list[Device], sizes: ModelSizes, num_gpu: int | None, spread: bool
) -> None:
    placed = fit(devices, sizes, num_gpu=num_gpu, spread=spread)
    counts, held = llama_cpp_bytes(sizes, placed, len(devices))
    assert counts == list(placed.per_device) and held == list(placed.device_bytes)
    assert all(h <= d.free for h, d in zip(held, devices, strict=True))


def test_three_devices_get_their_exact_layer_counts() -> None:
    """Fractions (17/49, 16/49, 16/49) summed in float32 load as (17, 17, 15); counts do not shift."""
    sizes = ModelSizes(layers=(200 * MIB,) * 48, output=500 * MIB, kv_per_layer=0, graph=300 * MIB)
    placed = fit([Device(f"CUDA{i}", 24 * GIB) for i in range(3)], sizes, spread=True)
    assert placed.per_device == (17, 16, 16)
    assert llama_cpp_bytes(sizes, placed, 3)[0] == [17, 16, 16]


def test_num_gpu_fills_by_free_memory_not_round_robin_regardless() -> None:
    """41 layers asked of a 24 GiB and a 4 GiB GPU: split evenly, the small one got 12 GiB."""
    devices = [Device("CUDA0", 24 * GIB), Device("CUDA1", 4 * GIB)]
    placed = fit(devices, BIG, num_gpu=41)
    assert placed.n_gpu_layers == 41 and placed.cpu_bytes == 0
    assert placed.per_device == (36, 5)  # the small one: the output and 4 blocks, (4096 - 757) MiB
    assert all(b <= d.free for b, d in zip(placed.device_bytes, devices, strict=True))


def test_num_gpu_a_single_gpu_holds_goes_on_that_gpu() -> None:
    """As Ollama's scheduler: one GPU where the layers asked for fit on one."""
    sizes = ModelSizes(layers=(400 * MIB,) * 32, output=500 * MIB, kv_per_layer=0, graph=300 * MIB)
    placed = fit([Device("CUDA0", 24 * GIB), Device("CUDA1", 8 * GIB)], sizes, num_gpu=33)
    assert placed.per_device == (33, 0)


def test_num_gpu_beyond_memory_puts_the_rest_in_proportion_to_free_memory() -> None:
    devices = [Device("CUDA0", 8 * GIB), Device("CUDA1", 4 * GIB)]
    fitted = fit(devices, BIG)
    placed = fit(devices, BIG, num_gpu=41)
    assert placed.n_gpu_layers == 41 and sum(placed.per_device) == 41 and placed.cpu_bytes == 0
    extra = [n - m for n, m in zip(placed.per_device, fitted.per_device, strict=True)]
    assert sum(extra) == 41 - fitted.n_gpu_layers and extra[0] == pytest.approx(2 * extra[1], abs=1)
