"""Embeddings of a generative model: averaged here a chunk at a time, as llama.cpp's mean pooling would."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import numpy as np
import pytest

from cllm_ollama.engine.binding import Batch, Context, Model
from cllm_ollama.engine.embedder import CHUNK, POOLING_MEAN, Embedder
from cllm_ollama.errors import EngineError

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


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b) / float(np.linalg.norm(a) * np.linalg.norm(b))


def test_concurrent_calls_share_decodes_and_get_their_own_vectors(tiny_gguf: Path) -> None:
    """Ollama #6214: eight clients' one-input calls, queued together, are one round of one decode,
    where one at a time they are eight; each gets the vector it gets alone; an input too long
    for the batch fails its own call only."""
    model = Model(tiny_gguf)
    embedder = Embedder(model, n_seq_max=8, n_ctx_seq=64, n_batch=512, n_threads=2)
    try:
        texts = ["the sea", "hello world", "a sky of stars", "rain", "one two three", "blue", "green hills", "x"]
        inputs = [model.tokenize(t) for t in texts]
        alone = [asyncio.run(embedder.embed([seq]))[0] for seq in inputs]
        assert (embedder.rounds, embedder.decodes, embedder.calls) == (8, 8, 8)

        gate = threading.Event()
        embedder._executor.submit(gate.wait)  # the thread busy: every call below queues

        async def together() -> list[object]:
            async def open_gate() -> None:
                gate.set()  # runs after every embed task has queued its call (tasks start in order)

            calls = [embedder.embed([seq]) for seq in inputs]
            too_long = embedder.embed([model.tokenize("word " * 100)])
            return await asyncio.gather(*calls, too_long, open_gate(), return_exceptions=True)

        *shared, refused, _ = asyncio.run(together())
        assert isinstance(refused, EngineError)
        assert (embedder.rounds, embedder.decodes, embedder.calls) == (9, 9, 17)
        for (vector,), single in zip(shared, alone, strict=True):  # type: ignore[misc]
            assert _cosine(vector, single) > 0.99999
            assert abs(float(np.linalg.norm(vector)) - 1) < 1e-5
    finally:
        embedder.close()
        model.close()
