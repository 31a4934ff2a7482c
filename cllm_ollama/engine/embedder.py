"""Embeddings: a second llama.cpp context with pooling, driven by its own single thread.

Inputs are packed several sequences to a decode; vectors come back L2-normalised, as Ollama's
/api/embed returns them (the legacy /api/embeddings asks for them raw).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..errors import EngineError
from .binding import Batch, Context, Model

POOLING_UNSPECIFIED = -1
POOLING_NONE = 0
POOLING_MEAN = 1


class Embedder:
    """Owns the embedding context; every call runs on one worker thread, in order."""

    def __init__(self, model: Model, *, n_seq_max: int, n_ctx_seq: int, n_batch: int, n_threads: int) -> None:
        self._model = model
        self._n_ctx = n_ctx_seq
        # The cache is cleared between decodes, so it only needs to hold one batch (one KV
        # stream shared by the batch's sequences), not n_seq_max full contexts.
        batch = max(n_batch, n_ctx_seq)
        self._args = {"n_seq_max": n_seq_max, "n_ctx_seq": -(-batch // n_seq_max), "n_batch": batch}
        self._n_threads = n_threads
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"cllm-embed-{model.path.name}")
        self._ctx: Context | None = None
        self._batch: Batch | None = None

    @property
    def n_ctx(self) -> int:
        """The longest input, in tokens."""
        return self._n_ctx

    async def embed(self, inputs: Sequence[Sequence[int]], *, normalize: bool = True) -> list[np.ndarray]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._embed_all, inputs, normalize)

    def _context(self) -> tuple[Context, Batch]:
        if self._ctx is None:

            def make(pooling: int) -> Context:
                return Context(self._model, n_threads=self._n_threads, embeddings=True, pooling=pooling, **self._args)

            ctx = make(POOLING_UNSPECIFIED)
            if ctx.pooling == POOLING_NONE:
                # A generative model has no pooling of its own: average its token states.
                ctx.close()
                ctx = make(POOLING_MEAN)
            self._ctx, self._batch = ctx, Batch(ctx.n_batch)
        assert self._batch is not None
        return self._ctx, self._batch

    def _embed_all(self, inputs: Sequence[Sequence[int]], normalize: bool) -> list[np.ndarray]:
        ctx, batch = self._context()
        out: list[np.ndarray] = []
        i = 0
        while i < len(inputs):
            # Pack as many whole inputs as fit one decode.
            group: list[Sequence[int]] = []
            n_tokens = 0
            while i < len(inputs) and len(group) < ctx.n_seq_max and n_tokens + len(inputs[i]) <= ctx.n_batch:
                if not inputs[i]:
                    raise EngineError("cannot embed an empty input")
                group.append(inputs[i])
                n_tokens += len(inputs[i])
                i += 1
            if not group:
                raise EngineError("input is longer than the embedding batch")
            ctx.clear()
            tokens = [t for seq in group for t in seq]
            positions = [p for seq in group for p in range(len(seq))]
            seq_ids = [s for s, seq in enumerate(group) for _ in seq]
            batch.fill(tokens, positions, seq_ids, range(len(tokens)))
            ctx.decode(batch)
            for s in range(len(group)):
                vector = ctx.embedding(s).astype(np.float32)
                if normalize:
                    norm = float(np.linalg.norm(vector))
                    vector = vector / norm if norm > 0 else vector
                out.append(vector)
        return out

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        if self._ctx is not None:
            self._ctx.close()
            self._ctx = None
