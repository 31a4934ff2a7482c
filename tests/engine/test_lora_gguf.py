"""The test-model writer's ``lora`` kind is a LoRA llama.cpp accepts for its base and refuses for
another: the groundwork of adapters (issue 20), checked at llama.cpp's own API."""

from __future__ import annotations

import ctypes
from pathlib import Path

import llama_cpp as ll
import numpy as np
import pytest

from cllm_ollama.engine.binding import Batch, Context, Model
from cllm_ollama.testing.ggufs import Shape, write_gemma3, write_lora, write_qwen3

pytestmark = pytest.mark.model


def _last_logits(model: Model, adapter: object | None) -> np.ndarray:
    ctx = Context(model, n_seq_max=1, n_ctx_seq=64, n_batch=64, n_threads=2)
    try:
        if adapter is not None:
            adapters = (type(adapter) * 1)(adapter)  # type: ignore[operator]
            scales = (ctypes.c_float * 1)(1.0)
            assert ll.llama_set_adapters_lora(ctypes.c_void_p(ctx.ptr), adapters, 1, scales) == 0
        tokens = model.tokenize("the sea and the sky", add_special=False)
        batch = Batch(64)
        batch.fill(tokens, range(len(tokens)), [0] * len(tokens), [len(tokens) - 1])
        ctx.decode(batch)
        return ctx.logits(1)[0].copy()
    finally:
        ctx.close()


def test_the_adapter_applies_to_its_base_and_not_to_another(tmp_path: Path) -> None:
    base_path, adapter_path = write_lora(tmp_path)
    base = Model(base_path, n_gpu_layers=0)
    try:
        adapter = ll.llama_adapter_lora_init(base.ptr, str(adapter_path).encode())
        assert adapter
        try:
            plain, adapted = _last_logits(base, None), _last_logits(base, adapter)
            assert not np.allclose(plain, adapted, atol=1e-3)  # the adapter changes the output
            np.testing.assert_allclose(_last_logits(base, None), plain, atol=1e-5)  # the weights themselves unchanged
        finally:
            ll.llama_adapter_lora_free(adapter)
    finally:
        base.close()
    # A wrong base is refused: another architecture, or the same one with other shapes.
    others = (write_gemma3(tmp_path / "gemma.gguf"), write_qwen3(tmp_path / "wide.gguf", shape=Shape(n_ff=96)))
    for other_path in others:
        other = Model(other_path, n_gpu_layers=0)
        try:
            assert not ll.llama_adapter_lora_init(other.ptr, str(adapter_path).encode())
        finally:
            other.close()
