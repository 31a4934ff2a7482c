"""The GPU offload policy (``engine.offload``) against fake device lists, with Ollama's decisions
as the reference (``llm/memory.go``, ``server/sched.go``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cllm_ollama.engine import loaded as loaded_module
from cllm_ollama.engine.binding import Model
from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.loaded import LoadedModel
from cllm_ollama.engine.offload import (
    DEVICE_RESERVE,
    Device,
    ModelSizes,
    fit,
    kv_bytes_per_token,
    model_sizes,
    projector_device,
)
from cllm_ollama.testing.ggufs import write_qwen3

MIB = 1 << 20
GIB = 1 << 30
# A 7B-like model: 32 blocks of 200 MiB, a 500 MiB output layer, 16 MiB of KV per layer, a
# 300 MiB compute graph: 7.2 GiB of parts, about 7.9 GiB with the graph and the device's reserve.
SEVEN_B = ModelSizes(layers=(200 * MIB,) * 32, output=500 * MIB, kv_per_layer=16 * MIB, graph=300 * MIB)


def test_no_gpu_keeps_everything_on_the_cpu() -> None:
    placed = fit([], SEVEN_B)
    assert placed.n_gpu_layers == 0 and placed.processor() == "100% CPU"
    assert placed.cpu_bytes == 32 * 216 * MIB + 500 * MIB


def test_a_gpu_that_holds_the_model_takes_every_layer_and_the_output() -> None:
    placed = fit([Device("CUDA0", 24 * GIB)], SEVEN_B)
    assert placed.n_gpu_layers == 33 and placed.per_device == (33,) and placed.processor() == "100% GPU"
    assert placed.device_bytes == (DEVICE_RESERVE + 300 * MIB + 32 * 216 * MIB + 500 * MIB,)


def test_a_smaller_gpu_takes_what_fits_and_the_cpu_the_rest() -> None:
    placed = fit([Device("CUDA0", 4 * GIB)], SEVEN_B)
    # (4096 - 457 - 300) MiB hold the output layer (offloaded first) and 13 layers of 216 MiB.
    assert placed.n_gpu_layers == 14 and placed.cpu_bytes == 19 * 216 * MIB
    gpu = sum(placed.device_bytes) - DEVICE_RESERVE
    share = round(100 * gpu / (gpu + placed.cpu_bytes))
    assert 0 < share < 100 and placed.processor() == f"{100 - share}%/{share}% CPU/GPU"


def test_the_processor_column_counts_the_model_not_the_devices_own_reserve() -> None:
    """3 of 9 small layers on the GPU: the graph (20 MiB) and 3 layers there, 6 and the output here."""
    small = ModelSizes(layers=(4 * MIB,) * 9, output=4 * MIB, kv_per_layer=0, graph=20 * MIB)
    placed = fit([Device("CUDA0", 24 * GIB)], small, num_gpu=3)
    assert placed.processor() == "47%/53% CPU/GPU"  # (20 + 12) MiB there against 28 MiB here


def test_the_gpu_overhead_is_kept_free() -> None:
    plain = fit([Device("CUDA0", 4 * GIB)], SEVEN_B)
    less = fit([Device("CUDA0", 4 * GIB)], SEVEN_B, overhead=1 * GIB)
    assert less.n_gpu_layers == plain.n_gpu_layers - 5  # 1024 MiB / 216 MiB


def test_a_gpu_too_small_for_the_graph_and_two_layers_gets_nothing() -> None:
    placed = fit([Device("CUDA0", 1 * GIB)], SEVEN_B)
    assert placed.n_gpu_layers == 0 and placed.processor() == "100% CPU"


@pytest.mark.parametrize("num_gpu", [0, 5, 33, 99])
def test_num_gpu_gives_exactly_that_many_layers_whatever_the_memory(num_gpu: int) -> None:
    placed = fit([Device("CUDA0", 1 * GIB)], SEVEN_B, num_gpu=num_gpu)
    assert placed.n_gpu_layers == min(num_gpu, 33)


def test_two_gpus_one_of_which_holds_the_model_use_that_one_alone() -> None:
    placed = fit([Device("CUDA0", 6 * GIB), Device("CUDA1", 12 * GIB)], SEVEN_B)
    assert placed.per_device == (0, 33) and placed.processor() == "100% GPU"


def test_the_projector_runs_on_the_device_it_was_budgeted_on() -> None:
    # The second GPU alone holds model and projector: clip.cpp must be told, or it takes the first.
    with_projector = ModelSizes(SEVEN_B.layers, SEVEN_B.output, SEVEN_B.kv_per_layer, SEVEN_B.graph, 800 * MIB)
    placed = fit([Device("CUDA0", 6 * GIB), Device("CUDA1", 12 * GIB)], with_projector)
    assert placed.per_device == (0, 33) and projector_device(placed.n_gpu_layers, placed.tensor_split) == 1
    assert placed.device_bytes[1] == DEVICE_RESERVE + 300 * MIB + 800 * MIB + 32 * 216 * MIB + 500 * MIB
    nothing = fit([Device("CUDA0", 1 * GIB)], with_projector)
    assert projector_device(nothing.n_gpu_layers, ()) is None and projector_device(5, ()) == 0  # one GPU: it


def test_a_model_no_single_gpu_holds_is_split_by_layer_count() -> None:
    placed = fit([Device("CUDA0", 5 * GIB), Device("CUDA1", 5 * GIB)], SEVEN_B)
    assert placed.n_gpu_layers == 33 and all(n > 10 for n in placed.per_device)
    assert placed.tensor_split == tuple(float(n) for n in placed.per_device)


def test_main_gpu_takes_every_offloaded_layer_on_that_device_alone() -> None:
    """Ollama's ``main_gpu`` (its runner's ``--split-mode none --main-gpu N``): the layers go to
    GPU N only, as many as its own memory holds, even where another GPU has more room."""
    two = [Device("CUDA0", 24 * GIB), Device("CUDA1", 4 * GIB)]
    placed = fit(two, SEVEN_B, main_gpu=1)
    assert placed.per_device == (0, 14) and placed.cpu_bytes == 19 * 216 * MIB
    assert placed.tensor_split == (0.0, 14.0)  # llama.cpp's layer split then gives CUDA0 none
    assert fit(two, SEVEN_B, main_gpu=1, num_gpu=20).per_device == (0, 20)
    assert fit(two, SEVEN_B, main_gpu=0).per_device == (33, 0)


def test_sched_spread_uses_every_gpu_even_where_one_would_do() -> None:
    placed = fit([Device("CUDA0", 24 * GIB), Device("CUDA1", 24 * GIB)], SEVEN_B, spread=True)
    assert placed.per_device == (17, 16)


def test_sizes_come_from_the_gguf_tensor_table(tmp_path: Path) -> None:
    path = write_qwen3(tmp_path / "m.gguf")
    sizes = model_sizes(path, n_ctx_total=1024, kv_bytes_per_token=4096, n_ubatch=512)
    assert sizes.n_layers >= 1 and all(layer > 0 for layer in sizes.layers) and sizes.output > 0
    assert sizes.kv_per_layer * sizes.n_layers == pytest.approx(1024 * 4096, abs=sizes.n_layers)
    total = sum(sizes.layers) + sizes.output
    assert total <= path.stat().st_size


@pytest.mark.model
def test_kv_bytes_per_token_from_the_gguf_match_llama_cpps(tmp_path: Path) -> None:
    path = write_qwen3(tmp_path / "m.gguf")
    model = Model(path)
    try:
        for cache_type in ("f16", "q8_0", "q4_0"):
            assert kv_bytes_per_token(path, cache_type) == model.kv_bytes_per_token(cache_type)
    finally:
        model.close()


@pytest.mark.model
def test_a_load_fits_its_layers_to_the_gpus_it_is_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A CPU build runs them on the CPU whatever it is told; what the load decided is in its spec.
    # The probe's child is told whether layers go to a GPU (it leaves faulthandler off there).
    path = write_qwen3(tmp_path / "m.gguf")
    on_gpu: list[bool] = []
    probe = loaded_module.probe

    def told(*args: Any, **kwargs: Any) -> str | None:
        on_gpu.append(kwargs["on_gpu"])
        return probe(*args, **kwargs)

    monkeypatch.setattr(loaded_module, "probe", told)
    spec = LoadSpec(path=path, n_slots=2, n_ctx_slot=256)
    loaded = LoadedModel(spec, 4, devices=lambda: [("GPU0", 64 * GIB, 80 * GIB)])
    try:
        assert loaded.placement is not None and loaded.placement.processor() == "100% GPU"
        assert loaded.spec.n_gpu_layers == sizes_of(path).n_layers + 1 and loaded.spec.tensor_split == ()
        assert loaded.runner is not None
    finally:
        loaded.close()
    tiny_gpu = LoadedModel(spec, 4, devices=lambda: [("GPU0", 1 * MIB, 80 * GIB), ("GPU1", 1 * MIB, 80 * GIB)])
    try:
        assert tiny_gpu.spec.n_gpu_layers == 0 and tiny_gpu.placement is not None
        assert tiny_gpu.placement.processor() == "100% CPU"
    finally:
        tiny_gpu.close()
    no_gpu = LoadedModel(spec, 4, devices=list)
    try:
        assert no_gpu.placement is None and no_gpu.spec.n_gpu_layers == -1
    finally:
        no_gpu.close()
    assert on_gpu == [True, False, False]


def sizes_of(path: Path) -> ModelSizes:
    return model_sizes(path, 0, 0, 512)
