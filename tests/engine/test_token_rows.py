"""A token's embedding row read on the host (``binding.TokenRows``) is the row llama.cpp's graph
fetches for it: tokens decoded as their rows, in an embedding batch over several sequences, give
the logits they give decoded as tokens. Exact: with the weights as stored (batch-invariant
loading), a call's rows take the same kernels whatever its input, so the two differ only if the
rows (or the M-RoPE positions of a text row) do.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from cllm_ollama.engine.binding import (
    Batch,
    Context,
    Model,
    TokenRows,
    batch_invariant_kernels,
    quantize,
    token_rows,
)
from cllm_ollama.testing.core_ggufs import write_gemma3, write_qwen2vl, write_qwen3

pytestmark = pytest.mark.model

PROMPTS = ([5, 6, 7, 8], [9, 10], [11, 12, 13])  # one per sequence, of different lengths
STEP = [20, 21, 22]  # then a token for each, in one call


def decode_step(model: Model, as_rows: TokenRows | None, sections: int) -> np.ndarray:
    """The logits of ``STEP`` after ``PROMPTS``, each in its own sequence: as tokens, or as their rows."""
    ctx = Context(model, n_seq_max=3, n_ctx_seq=64, n_batch=16, n_threads=2)
    try:
        batch = Batch(16)
        for seq, prompt in enumerate(PROMPTS):
            batch.fill(prompt, range(len(prompt)), [seq] * len(prompt), [])
            ctx.decode(batch)
        positions = [len(p) for p in PROMPTS]
        if as_rows is None:
            batch.fill(STEP, positions, [0, 1, 2], [0, 1, 2])
            ctx.decode(batch)
        else:
            pos = np.tile(np.asarray(positions, dtype=np.int32), (sections, 1))
            if sections == 4:
                pos[3] = 0  # what llama.cpp makes of a text token's position under M-RoPE
            ctx.decode_embeddings(as_rows.rows(STEP), pos, [0, 1, 2], [0, 1, 2])
        return ctx.logits(3).copy()
    finally:
        ctx.close()


@pytest.mark.parametrize("ftype", [None, "Q8_0"], ids=["f32-table", "q8_0-table"])
@pytest.mark.parametrize(("writer", "sections"), [(write_qwen3, 1), (write_qwen2vl, 4)], ids=["qwen3", "qwen2vl"])
def test_tokens_decoded_as_their_rows_give_the_tokens_logits(
    tmp_path: Path, writer: Callable[[Path], Path], sections: int, ftype: str | None
) -> None:
    batch_invariant_kernels()
    path = writer(tmp_path / "model.gguf")
    if ftype is not None:  # the table quantized: its rows come through ggml's own dequantizer
        quantize(path, tmp_path / "quantized.gguf", ftype)
        path = tmp_path / "quantized.gguf"
    model = Model(path, batch_invariant=True)
    rows = token_rows(model)
    try:
        assert rows is not None
        np.testing.assert_array_equal(decode_step(model, rows, sections), decode_step(model, None, sections))
    finally:
        if rows is not None:
            rows.close()
        model.close()


def test_a_model_whose_graph_treats_token_input_apart_has_no_rows_to_ride(tmp_path: Path) -> None:
    """Gemma scales a token's row by sqrt(n_embd) and an embedding row not: its tokens never ride."""
    model = Model(write_gemma3(tmp_path / "gemma.gguf"))
    try:
        assert token_rows(model) is None
    finally:
        model.close()


def test_a_token_outside_the_vocabulary_is_refused(tmp_path: Path) -> None:
    model = Model(write_qwen3(tmp_path / "model.gguf"))
    rows = token_rows(model)
    try:
        assert rows is not None
        with pytest.raises(ValueError, match="outside the vocabulary"):
            rows.rows([1, model.n_vocab])
    finally:
        if rows is not None:
            rows.close()
        model.close()
