"""Embeddings: a second llama.cpp context with pooling, driven by its own single thread.

Inputs are packed several sequences to a decode; vectors come back L2-normalised, as Ollama's
/api/embed returns them (the legacy /api/embeddings asks for them raw).

Requests share decodes (Ollama #6214): each call queues its inputs, and the thread takes every
queued call at once, packing their inputs together, so many clients embedding at once (a RAG
ingest, several users) cost the decodes of one large request, not one round trip each.

A generative model has no pooling of its own, so its token states are averaged here. In
embedding mode llama.cpp keeps an output row (a logits row of the whole vocabulary, too) for
every token of a batch, so such inputs are decoded ``CHUNK`` tokens at a time: a 3000-token
input would otherwise reserve 1.8 GB of logits for a 150k vocabulary, kept until unload.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..errors import EngineError
from .binding import Batch, Context, Lora, Model, with_adapters

POOLING_UNSPECIFIED = -1
POOLING_NONE = 0
POOLING_MEAN = 1
# Tokens per decode when token states are averaged here (bounds the per-token output buffers).
CHUNK = 256


@dataclass
class _Call:
    """One caller's inputs, waiting for the thread; its future is resolved on its own loop."""

    inputs: Sequence[Sequence[int]]
    normalize: bool
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[list[np.ndarray]]

    def resolve(self, vectors: list[np.ndarray] | None, error: BaseException | None = None) -> None:
        def settle() -> None:
            if self.future.done():  # the caller was cancelled meanwhile
                return
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(vectors or [])

        # A closed loop has nobody waiting on it: the other calls of the round still get theirs.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(settle)


class Embedder:
    """Owns the embedding context; its one worker thread serves every queued call together."""

    def __init__(
        self,
        model: Model,
        *,
        n_seq_max: int,
        n_ctx_seq: int,
        n_batch: int,
        n_threads: int,
        flash_attn: bool | None = None,
        adapters: Sequence[Lora] = (),
    ) -> None:
        """``flash_attn`` follows OLLAMA_FLASH_ATTENTION as set (not generation's CPU default:
        ``tuning.as_set``); the cache stays f16: it is small and cleared after every batch.
        ``adapters`` (the caller's) apply to every context made here, as they do to an adapted
        model's generation context."""
        self._model = model
        self._adapters = tuple(adapters)
        self._flash_attn = flash_attn
        self._n_ctx = n_ctx_seq
        self._n_seq_max = n_seq_max
        self._n_batch = n_batch
        self._n_threads = n_threads
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"cllm-embed-{model.path.name}")
        self._ctx: Context | None = None
        self._batch: Batch | None = None
        self._mean_here = False
        self._queued: list[_Call] = []
        self._lock = threading.Lock()
        # What the thread did: rounds (each serving every call then queued), decodes, calls served.
        self.rounds = 0
        self.decodes = 0
        self.calls = 0

    @property
    def n_ctx(self) -> int:
        """The longest input, in tokens."""
        return self._n_ctx

    async def embed(self, inputs: Sequence[Sequence[int]], *, normalize: bool = True) -> list[np.ndarray]:
        """Vectors of ``inputs``, decoded with whatever other calls are queued at the time."""
        if any(not seq for seq in inputs):
            raise EngineError("cannot embed an empty input")
        if not inputs:
            return []
        loop = asyncio.get_running_loop()
        call = _Call(inputs, normalize, loop, loop.create_future())
        with self._lock:
            self._queued.append(call)
        # One round per call submitted; a round that finds the queue emptied by an earlier one does nothing.
        self._executor.submit(self._round)
        return await call.future

    async def rank(self, query: str, documents: Sequence[str]) -> tuple[list[float], int]:
        """A reranker's relevance score of each document to ``query``, and the tokens evaluated.

        Each pair is one sequence, as llama-server builds it (``rerank_tokens``), its document cut
        to fit the longest input; the pairs of every concurrent call share decodes as embeddings do.
        """

        def tokenize() -> list[list[int]]:
            return [_fitted_pair(self._model, query, d, self._n_ctx) for d in documents]

        pairs = await asyncio.to_thread(tokenize)
        scores = await self.embed(pairs, normalize=False)
        return [float(v[0]) for v in scores], sum(len(p) for p in pairs)

    def _round(self) -> None:
        """Every queued call, served by one packing of all their inputs."""
        with self._lock:
            calls, self._queued = self._queued, []
        if not calls:
            return
        self.rounds += 1
        self.calls += len(calls)
        try:
            ctx, batch = self._context()
        except BaseException as exc:
            for call in calls:
                call.resolve(None, exc)
            return
        limit = self._n_ctx if self._mean_here else ctx.n_batch
        too_long = [c for c in calls if any(len(seq) > limit for seq in c.inputs)]
        for call in too_long:  # refused alone: the others still share the round
            call.resolve(None, EngineError("input is longer than the embedding batch"))
        calls = [c for c in calls if c not in too_long]
        inputs = [seq for call in calls for seq in call.inputs]
        try:
            vectors = self._means(ctx, batch, inputs) if self._mean_here else self._pooled(ctx, batch, inputs)
        except BaseException as exc:
            for call in calls:
                call.resolve(None, exc)
            return
        start = 0
        for call in calls:
            mine = vectors[start : start + len(call.inputs)]
            start += len(call.inputs)
            call.resolve(_normalized(mine) if call.normalize else mine)

    def _context(self) -> tuple[Context, Batch]:
        if self._ctx is None:
            # The cache is cleared between decodes: one stream shared by the packed sequences.
            # The model's pooling decides the context's shape; ask a small context, as a pooled one
            # (the whole context in one ubatch) cannot even be allocated for a long num_ctx.
            probe = self._make(POOLING_UNSPECIFIED, CHUNK, -(-CHUNK // self._n_seq_max))
            pooling = probe.pooling
            probe.close()
            if pooling != POOLING_NONE:
                batch = max(self._n_batch, self._n_ctx)
                ctx = self._make(POOLING_UNSPECIFIED, batch, -(-batch // self._n_seq_max))
            else:
                # Whole inputs stay in the cache while their chunks are decoded.
                ctx = self._make(POOLING_NONE, CHUNK, -(-self._n_ctx // self._n_seq_max) + 1)
                self._mean_here = True
            self._ctx, self._batch = ctx, Batch(ctx.n_batch)
        assert self._batch is not None
        return self._ctx, self._batch

    def _make(self, pooling: int, n_batch: int, n_ctx_seq: int) -> Context:
        ctx = Context(
            self._model,
            n_seq_max=self._n_seq_max,
            n_ctx_seq=n_ctx_seq,
            n_batch=n_batch,
            n_threads=self._n_threads,
            embeddings=True,
            pooling=pooling,
            flash_attn=self._flash_attn,
        )
        return with_adapters(ctx, self._adapters)

    def _pooled(self, ctx: Context, batch: Batch, inputs: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """llama.cpp pools: whole inputs, as many as fit one decode."""
        out: list[np.ndarray] = []
        for group in self._groups(inputs, ctx.n_batch, ctx.n_seq_max):
            ctx.clear()
            self._fill(batch, group)
            ctx.decode(batch)
            self.decodes += 1
            out += [ctx.embedding(s).astype(np.float32) for s in range(len(group))]
        return out

    def _means(self, ctx: Context, batch: Batch, inputs: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """Mean of the token states, decoding long inputs a chunk at a time."""
        out: list[np.ndarray] = []
        for group in self._groups(inputs, self._n_ctx, ctx.n_seq_max):
            ctx.clear()
            sums = [np.zeros(self._model.n_embd, np.float64) for _ in group]
            # Rows of (sequence, position, token), cut into decodes of at most CHUNK tokens.
            rows = [(s, p, t) for s, seq in enumerate(group) for p, t in enumerate(seq)]
            for start in range(0, len(rows), ctx.n_batch):
                part = rows[start : start + ctx.n_batch]
                batch.fill([t for _, _, t in part], [p for _, p, _ in part], [s for s, _, _ in part], range(len(part)))
                ctx.decode(batch)
                self.decodes += 1
                states = ctx.token_embeddings(len(part))
                seq_of = np.fromiter((s for s, _, _ in part), np.int64, len(part))
                for s in np.unique(seq_of):
                    sums[s] += states[seq_of == s].sum(axis=0, dtype=np.float64)
            out += [(total / len(seq)).astype(np.float32) for total, seq in zip(sums, group, strict=True)]
        return out

    @staticmethod
    def _groups(inputs: Sequence[Sequence[int]], max_tokens: int, max_seqs: int) -> list[list[Sequence[int]]]:
        """Consecutive inputs packed while they fit ``max_tokens`` and ``max_seqs`` together."""
        groups: list[list[Sequence[int]]] = []
        n_tokens = 0
        for seq in inputs:
            if len(seq) > max_tokens:
                raise EngineError("input is longer than the embedding batch")
            if not groups or len(groups[-1]) >= max_seqs or n_tokens + len(seq) > max_tokens:
                groups.append([])
                n_tokens = 0
            groups[-1].append(seq)
            n_tokens += len(seq)
        return groups

    @staticmethod
    def _fill(batch: Batch, group: list[Sequence[int]]) -> None:
        tokens = [t for seq in group for t in seq]
        positions = [p for seq in group for p in range(len(seq))]
        seq_ids = [s for s, seq in enumerate(group) for _ in seq]
        batch.fill(tokens, positions, seq_ids, range(len(tokens)))

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        if self._ctx is not None:
            self._ctx.close()
            self._ctx = None


def _normalized(vectors: list[np.ndarray]) -> list[np.ndarray]:
    """L2-normalised (a zero vector stays zero)."""
    norms = [float(np.linalg.norm(v)) for v in vectors]
    return [v / n if n > 0 else v for v, n in zip(vectors, norms, strict=True)]


def _fitted_pair(model: Model, query: str, document: str, limit: int) -> list[int]:
    """A pair of at most ``limit`` tokens: a long document loses its end, so the template's end (the
    token a causal reranker scores from) stays; only a query too long on its own is cut itself."""
    tokens = rerank_tokens(model, query, document)
    if len(tokens) <= limit:
        return tokens
    doc = model.tokenize(document, add_special=False, parse_special=False)
    kept = model.detokenize(doc[: max(0, len(doc) - (len(tokens) - limit))])
    return rerank_tokens(model, query, kept)[:limit]


def rerank_tokens(model: Model, query: str, document: str) -> list[int]:
    """One query-document pair as llama-server's ``format_prompt_rerank`` makes it: the GGUF's
    ``rerank`` template filled in (Qwen3-Reranker), else ``[BOS] query [EOS] [SEP] document [EOS]``
    with what the vocabulary adds (BERT-like rerankers: bge, jina)."""
    template = model.chat_template("rerank")
    if template is not None:
        text = template.replace("{query}", query).replace("{document}", document)
        return model.tokenize(text, add_special=False, parse_special=True)
    eos = model.eos if model.eos >= 0 else model.sep
    tokens = [model.bos] if model.adds_bos else []
    tokens += model.tokenize(query, add_special=False, parse_special=False)
    tokens += [eos] if model.adds_eos else []
    tokens += [model.sep] if model.adds_sep else []
    tokens += model.tokenize(document, add_special=False, parse_special=False)
    return tokens + ([eos] if model.adds_eos else [])
