"""Embeddings of a generative model: averaged here a chunk at a time, as llama.cpp's mean pooling would."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from cllm_ollama.engine.binding import Batch, Context, Model
from cllm_ollama.engine.embedder import CHUNK, POOLING_MEAN, Embedder

pytestmark = pytest.mark.model


def test_chunked_means_equal_llama_cpp_mean_pooling_with_bounded_batches(tiny_gguf: Path) -> None:
    model = Model(tiny_gguf)
    try:
        inputs = [model.tokenize("the sea " * 400), model.tokenize("hello world"), model.tokenize("sky " * 90)]
        assert len(inputs[0]) > 2 * CHUNK
        embedder = Embedder(model, n_seq_max=4, n_ctx_seq=1024, n_batch=512, n_threads=2)
        try:
            ours = asyncio.run(embedder.embed(inputs, normalize=False))
            assert embedder._ctx is not None and embedder._ctx.n_batch == CHUNK  # output rows bounded
        finally:
            embedder.close()
        # llama.cpp's own mean pooling, each input in one decode.
        ctx = Context(
            model, n_seq_max=1, n_ctx_seq=1024, n_batch=1024, n_threads=2, embeddings=True, pooling=POOLING_MEAN
        )
        batch = Batch(1024)
        try:
            for seq, vector in zip(inputs, ours, strict=True):
                ctx.clear()
                batch.fill(seq, range(len(seq)), [0] * len(seq), range(len(seq)))
                ctx.decode(batch)
                theirs = ctx.embedding(0)
                # Same math, other batch layout: float rounding differs in the last digits.
                cosine = float(vector @ theirs) / float(np.linalg.norm(vector) * np.linalg.norm(theirs))
                assert cosine > 0.99999
                np.testing.assert_allclose(vector, theirs, atol=5e-3)
        finally:
            ctx.close()
    finally:
        model.close()
