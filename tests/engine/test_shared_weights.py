"""A base model and its adapted model hold one ``llama_model`` (``SharedWeights``): the last to
close frees it, and a load that fails gives its hold back (a wrong adapter, too little memory)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.loaded import LoadedModel
from cllm_ollama.engine.weights import SharedWeights
from cllm_ollama.errors import InsufficientMemory, InvalidRequest
from cllm_ollama.testing.ggufs import write_gemma3, write_lora

pytestmark = pytest.mark.model


def spec(path: Path, *adapters: Path) -> LoadSpec:
    return LoadSpec(path, n_slots=1, n_ctx_slot=64, n_gpu_layers=0, n_threads=1, adapters=adapters)


def test_base_and_adapted_share_the_weights_until_the_last_closes(tmp_path: Path) -> None:
    base_path, adapter_path = write_lora(tmp_path)
    weights = SharedWeights()
    base = LoadedModel(spec(base_path), 1, weights=weights)
    tuned = LoadedModel(spec(base_path, adapter_path), 1, weights=weights)
    assert tuned.model is base.model and weights.loaded() == [(base_path, 2)]
    assert [a.path for a in tuned.adapters] == [adapter_path] and not base.adapters
    base.close()
    assert weights.loaded() == [(base_path, 1)] and tuned.model.ptr  # still loaded for the adapted model
    tuned.close()
    assert weights.loaded() == [] and not tuned.model.ptr


def test_a_failed_load_gives_its_hold_on_the_weights_back(tmp_path: Path) -> None:
    base_path, adapter_path = write_lora(tmp_path)
    weights = SharedWeights()
    base = LoadedModel(spec(base_path), 1, weights=weights)
    try:
        # Too little memory for the adapted model's own KV cache: refused, the base keeps its weights.
        with pytest.raises(InsufficientMemory):
            LoadedModel(spec(base_path, adapter_path), 1, weights=weights, host_memory=lambda: 0)
        assert weights.loaded() == [(base_path, 1)]
        # An adapter for another model: a 400 from the child-process probe, the weights untouched.
        other = write_gemma3(tmp_path / "gemma.gguf")
        with pytest.raises(InvalidRequest, match="model arch and LoRA arch mismatch"):
            LoadedModel(spec(other, adapter_path), 1, weights=weights)
        assert weights.loaded() == [(base_path, 1)]
    finally:
        base.close()
    assert weights.loaded() == []


def test_a_variant_takes_the_weights_as_placed_where_a_fit_would_load_a_second_copy(tmp_path: Path) -> None:
    # The base fitted to a large GPU; the GPU then has no room left (the base holds it). Fitted
    # again, the adapted model would ask for no layers: another key, another llama_model.
    base_path, adapter_path = write_lora(tmp_path)
    weights = SharedWeights()
    fitted = LoadSpec(base_path, n_slots=1, n_ctx_slot=64, n_threads=1)  # n_gpu_layers -1: fitted

    def gpu(free: int) -> Callable[[], list[tuple[str, int, int]]]:
        return lambda: [("GPU0", free, 80 << 30)]

    base = LoadedModel(fitted, 1, weights=weights, devices=gpu(64 << 30))
    try:
        tuned = LoadedModel(replace(fitted, adapters=(adapter_path,)), 1, weights=weights, devices=gpu(0))
        try:
            assert tuned.model is base.model and weights.loaded() == [(base_path, 2)]
            assert tuned.spec.n_gpu_layers == base.spec.n_gpu_layers > 0
            assert weights.layout(base_path) == (base.spec.n_gpu_layers, ())
        finally:
            tuned.close()
        # Asked for another count, it gets its own copy: the operator's split, not the held one's.
        other = LoadedModel(replace(fitted, n_gpu_layers=1, adapters=(adapter_path,)), 1, weights=weights)
        try:
            assert other.model is not base.model and other.spec.n_gpu_layers == 1
        finally:
            other.close()
    finally:
        base.close()
    assert weights.layout(base_path) is None
