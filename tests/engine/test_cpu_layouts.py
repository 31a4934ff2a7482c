"""llama.cpp's AMX weight layout is left out: the pinned llama.cpp's AMX kernels, as GCC builds them
natively on an AMX CPU, die with SIGILL at their first tile instruction (llama.cpp PR 26954)."""

from __future__ import annotations

from pathlib import Path

import gguf
import llama_cpp
import numpy as np
import pytest

from cllm_ollama.engine.binding import Batch, Context, Model, cpu_weight_layouts
from cllm_ollama.testing.ggufs import write_qwen3

pytestmark = pytest.mark.model


def test_the_weights_never_take_the_amx_layout() -> None:
    layouts = cpu_weight_layouts()
    assert "AMX" not in layouts
    if "REPACK = 1" in llama_cpp.llama_print_system_info().decode():
        assert "CPU_REPACK" in layouts  # only AMX went: the repacked layouts stay


def test_a_quantized_model_computes_on_this_cpu(tmp_path: Path) -> None:
    """Q8_0 weights were AMX's (a whole prompt's product on an AMX CPU was the SIGILL)."""
    model = Model(write_qwen3(tmp_path / "q8.gguf", qtype=gguf.GGMLQuantizationType.Q8_0))
    ctx = Context(model, n_seq_max=1, n_ctx_seq=64, n_batch=32, n_threads=2)
    try:
        batch = Batch(ctx.n_batch)
        tokens = [(7 * i) % model.n_vocab for i in range(32)]
        batch.fill(tokens, range(len(tokens)), [0] * len(tokens), [len(tokens) - 1])
        ctx.decode(batch)
        logits = ctx.logits(1)
        assert logits.shape == (1, model.n_vocab) and np.isfinite(logits).all()
    finally:
        ctx.close()
        model.close()
