"""The KV cache and recurrent state a load costs, from the GGUF's header (``offload.cache_shape``),
are what llama.cpp allocates: K and V for the layers that have a KV cache only (a hybrid's
attention layers, Gemma's layers before the shared ones, a sliding layer's own head size), K
alone with multi-head latent attention, and a recurrent layer's r and s rows per sequence. The
load check, the fit and /api/ps all count that, not layer 0's heads times every layer."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from cllm_ollama.engine.binding import Context, Model
from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.loaded import LoadedModel, context_compute_bytes, host_fixed_bytes, resolved_spec
from cllm_ollama.engine.offload import Device, cache_shape, fit, model_sizes, place
from cllm_ollama.errors import InsufficientMemory
from cllm_ollama.testing.deepseek2_ggufs import write_deepseek2
from cllm_ollama.testing.gemma3n_ggufs import write_gemma3n
from cllm_ollama.testing.gemma4_ggufs import write_gemma4_text
from cllm_ollama.testing.ggufs import write_jamba, write_mamba, write_qwen3
from cllm_ollama.testing.nemotron_h_ggufs import write_nemotron_h
from cllm_ollama.testing.ollama_ggufs import write_lfm2
from cllm_ollama.testing.tower_ggufs import write_qwen35_text

pytestmark = pytest.mark.model

MIB = 2**20
WRITERS: dict[str, Callable[[Path], Path]] = {
    "qwen3": write_qwen3,
    "mamba": write_mamba,
    "jamba": write_jamba,
    "lfm2": write_lfm2,
    "deepseek2": write_deepseek2,
    "gemma4": write_gemma4_text,
    "gemma3n": write_gemma3n,
    "nemotron_h": write_nemotron_h,
    "qwen35": write_qwen35_text,
}
# (f16 KV bytes a token, recurrent state bytes a sequence), worked out by hand:
EXPECTED = {
    "qwen3": (256, 0),  # 2 layers x 2 KV heads x (16 + 16) values x 2 bytes
    "mamba": (0, 19456),  # no KV; 2 layers x (3 x 128 conv + 16 x 128 scan) f32
    "jamba": (128, 9728),  # its one attention layer; its one Mamba layer
    "lfm2": (128, 512),  # its attention layer; its convolution's 64 x 2 f32
    "deepseek2": (240, 0),  # 3 layers x one latent K of 32 + 8 (rotary), no V
    "gemma4": (256, 0),  # the 2 layers before the 2 sharing theirs, at their own head sizes
    "gemma3n": (2560, 0),  # the 20 layers before the shared ones
    "nemotron_h": (128, 20992),  # its attention block; its Mamba-2 blocks (none for the MLP)
    "qwen35": (128, 2816),  # every second layer attends (full_attention_interval 2), the rest recur
}


@pytest.fixture(scope="module")
def ggufs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("kinds")
    return {name: write(folder / f"{name}.gguf") for name, write in WRITERS.items()}


def buffers(lines: list[str], kind: str) -> float:
    """The MiB llama.cpp says it allocated for ``kind`` (``KV``, ``RS``), over every buffer."""
    return sum(float(m) for line in lines for m in re.findall(rf"{kind} buffer size = +([\d.]+) MiB", line))


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_the_estimate_is_what_llama_cpp_allocates(
    ggufs: dict[str, Path], name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Against the KV and RS buffers llama.cpp reports (MiB to two places) for 256 sequences."""
    shape = cache_shape(ggufs[name])
    assert (shape.kv_bytes_per_token(), shape.state_bytes) == EXPECTED[name]
    model = Model(ggufs[name])
    caplog.set_level(logging.INFO, logger="cllm.llama")
    ctx = Context(model, n_seq_max=256, n_ctx_seq=16, n_batch=16, n_threads=1, flash_attn=True)
    cells, seqs = ctx.n_ctx_seq * ctx.n_seq_max, ctx.n_seq_max
    ctx.close()
    model.close()
    said = [r.getMessage() for r in caplog.records]
    assert buffers(said, "KV") == pytest.approx(shape.kv_bytes_per_token() * cells / MIB, abs=0.006)
    assert buffers(said, "RS") == pytest.approx(shape.state_bytes * seqs / MIB, abs=0.006)


def test_quantized_caches_scale_the_kv_not_the_state(ggufs: dict[str, Path]) -> None:
    shape = cache_shape(ggufs["lfm2"])
    assert (shape.kv_bytes_per_token("q8_0"), shape.kv_bytes_per_token("q4_0")) == (68, 36)
    assert shape.state_bytes == 512  # f32 whatever the cache type


def fixed(spec: LoadSpec, model: Model) -> int:
    return host_fixed_bytes(resolved_spec(spec, model), model, offloaded=False)


def test_a_hybrid_is_checked_for_its_attention_layers_kv_and_its_state(ggufs: dict[str, Path]) -> None:
    """LFM2: layer 0's 0 KV heads once made every layer count the attention layer's 2 (512 bytes
    a token, 4x): memory for the true cache was refused."""
    spec = LoadSpec(path=ggufs["lfm2"], n_slots=4, n_ctx_slot=256, n_batch=64, n_threads=1)
    model = Model(spec.path)
    room = fixed(spec, model) + 4 * (128 * 256 + 512)
    model.close()
    loaded = LoadedModel(spec, 4, host_memory=lambda: room)
    try:
        assert loaded.spec.n_slots == 4
    finally:
        loaded.close()
    with pytest.raises(InsufficientMemory) as e:
        LoadedModel(spec, 4, host_memory=lambda: room - 1)
    assert e.value.fits == 2


def test_a_recurrent_models_state_is_a_cost_per_slot(ggufs: dict[str, Path]) -> None:
    """Mamba: 19 KiB of state a slot, whatever its context; nothing a token (it was 512 bytes)."""
    spec = LoadSpec(path=ggufs["mamba"], n_slots=4, n_ctx_slot=16, n_batch=16, n_threads=1)
    model = Model(spec.path)
    room = fixed(spec, model) + 3 * 19456
    model.close()
    with pytest.raises(InsufficientMemory, match="model requires more system memory") as e:
        LoadedModel(spec, 4, host_memory=lambda: room)
    assert e.value.fits == 2


def test_the_size_ollama_shows_counts_what_llama_cpp_holds(ggufs: dict[str, Path]) -> None:
    spec = LoadSpec(path=ggufs["nemotron_h"], n_slots=2, n_ctx_slot=128, n_batch=64, n_threads=1)
    loaded = LoadedModel(spec, 4)
    try:
        model = loaded.model
        cache = 2 * (128 * 128 + 20992)
        assert loaded.size_bytes == model.size_bytes + cache + context_compute_bytes(loaded.spec, model)
    finally:
        loaded.close()


def test_the_gpu_fit_counts_every_slots_state(ggufs: dict[str, Path]) -> None:
    """A device that holds the weights, the graph and 8 slots' state takes every layer; a byte
    less, not: the state is part of the layers' cost."""
    path = ggufs["mamba"]
    spec = LoadSpec(path=path, n_slots=8, n_ctx_slot=64, n_batch=64, n_threads=1, n_gpu_layers=-1)
    sizes = model_sizes(path, 8 * 64, 0, 64, state_bytes=8 * 19456)
    (need,) = fit([Device("GPU0", 1 << 40)], sizes).device_bytes
    assert place(spec, [Device("GPU0", need)])[0].n_gpu_layers == sizes.n_layers + 1
    assert place(spec, [Device("GPU0", need - 1)])[0].n_gpu_layers < sizes.n_layers + 1


def test_weights_placed_already_keep_their_split_where_a_fresh_fit_would_move_them(ggufs: dict[str, Path]) -> None:
    """A variant over held weights (``SharedWeights.layout``) reports them where they are: the base
    filled the first GPU, so a fit now would put every layer on the second."""
    path = ggufs["mamba"]
    sizes = model_sizes(path, 64, 0, 64, state_bytes=19456)
    parts = sizes.n_layers + 1
    held = (float(parts - 1), 1.0)
    spec = LoadSpec(path=path, n_slots=1, n_ctx_slot=64, n_batch=64, n_threads=1, n_gpu_layers=parts)
    devices = [Device("GPU0", 0), Device("GPU1", 1 << 40)]
    assert place(spec, devices)[1].per_device == (0, parts)  # fitted afresh
    placed_spec, placement = place(replace(spec, tensor_split=held), devices)
    assert placement.per_device == (parts - 1, 1) and placed_spec.tensor_split == held
