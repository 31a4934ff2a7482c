"""The async face of a loaded model: ``generate()`` yields a request's events on the event loop.

A loaded model is a ``Model`` plus the ``Runner`` thread that batches over it. Leaving the
``generate`` iterator early (client gone, task cancelled) aborts the request, which frees
its slot at the next step.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import anyio.to_thread

from ..errors import ContextOverflow, EngineError, InvalidRequest, QueueFull
from .binding import Model, Sampler, physical_cores
from .embedder import Embedder
from .probe import probe
from .request import Event, Request, SamplingParams
from .runner import Runner, RunnerConfig, Sink
from .scheduler import Occupancy


@dataclass(frozen=True)
class LoadSpec:
    """Everything that fixes how a model is loaded; a change in any field means a reload."""

    path: Path
    n_slots: int
    n_ctx_slot: int
    n_batch: int = 512
    n_gpu_layers: int = -1
    n_threads: int = 0
    # Encoder models (BERT-like) embed only: no generation slots, no KV cache for them.
    embedding_only: bool = False
    # Host RAM for saved prompt states, and prompt tokens per step beside generation (0: off).
    cache_bytes: int = 0
    max_prefill: int = 0


def fit_prompt(tokens: list[int], limit: int, *, num_keep: int, num_predict: int, truncate: bool) -> list[int]:
    """Make a prompt fit its context as Ollama does: keep the first ``num_keep`` tokens and
    the end, dropping from the middle, or refuse with Ollama's message when ``truncate`` is off.

    Truncation leaves room to generate (``num_predict`` tokens, at most half the context, or a
    quarter of it when unbounded) instead of filling the context with prompt.
    """
    if len(tokens) < limit:
        return tokens
    if not truncate:
        raise ContextOverflow()
    room = min(num_predict, limit // 2) if num_predict > 0 else limit // 4
    keep_total = max(1, limit - max(1, room))
    keep_head = max(0, min(num_keep, keep_total - 1))
    return tokens[:keep_head] + tokens[len(tokens) - (keep_total - keep_head) :]


def available_memory() -> int | None:
    """Bytes the kernel says can be allocated without swapping (Linux); None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class LoadedModel:
    """A model in memory with its engine thread; safe to call from the event loop."""

    def __init__(self, spec: LoadSpec, max_queue: int) -> None:
        """Blocking (reads weights, allocates the KV cache): call it from a worker thread."""
        self.spec = spec
        probe(spec.path, n_gpu_layers=spec.n_gpu_layers, embedding_only=spec.embedding_only)
        self.model = Model(spec.path, n_gpu_layers=spec.n_gpu_layers)
        n_ctx_slot = max(16, min(spec.n_ctx_slot, self.model.n_ctx_train or spec.n_ctx_slot))
        # A client's num_thread must not be able to spawn thousands of threads.
        n_threads = min(spec.n_threads, 4 * (os.cpu_count() or 1)) if spec.n_threads > 0 else physical_cores()
        try:
            self._check_memory(n_ctx_slot * spec.n_slots)
        except Exception:
            self.model.close()
            raise
        # A client's num_batch beyond the whole context buys nothing (llama.cpp clamps its own
        # contexts to n_ctx), but the embedder sizes its context by it: 3M asked for 1.2 TB.
        n_batch = min(spec.n_batch, n_ctx_slot * spec.n_slots)
        self.runner: Runner | None = None
        if not spec.embedding_only:
            try:
                self.runner = Runner(
                    self.model,
                    RunnerConfig(spec.n_slots, n_ctx_slot, n_batch, n_threads, spec.cache_bytes, spec.max_prefill),
                )
            except Exception:
                self.model.close()
                raise
        self.embedder = Embedder(
            self.model, n_seq_max=spec.n_slots, n_ctx_seq=n_ctx_slot, n_batch=n_batch, n_threads=n_threads
        )
        self._n_ctx_slot = self.runner.n_ctx_slot if self.runner else n_ctx_slot
        self.max_queue = max_queue
        self.in_flight = 0
        self._submitting = 0  # accepted, their sampler still being built (not yet in the runner)

    def occupancy(self) -> Occupancy:
        """Requests in slots, requests queued for one, and the KV cells in use, at this moment."""
        if self.runner is None:
            return Occupancy(running=0, waiting=0, cells_used=0, cells_total=0)
        now = self.runner.occupancy()
        return replace(now, waiting=now.waiting + self._submitting)

    def _check_memory(self, n_cells: int) -> None:
        """Refuse a KV cache the machine cannot hold: allocating it would get the process killed."""
        need = self.model.kv_bytes_per_token() * n_cells
        if self.model.n_gpu_layers == 0:
            need += self.model.size_bytes
        available = available_memory()
        if available is not None and need > available:
            raise EngineError(
                f"model requires more system memory ({need / 2**30:.1f} GiB) than is available "
                f"({available / 2**30:.1f} GiB)"
            )

    @property
    def n_ctx_slot(self) -> int:
        return self._n_ctx_slot

    @property
    def dead(self) -> str | None:
        """Why the engine thread stopped for good (None while it runs): the pool reloads then."""
        return self.runner.dead if self.runner is not None else None

    @property
    def n_ctx_train(self) -> int:
        return self.model.n_ctx_train or self.n_ctx_slot

    @property
    def n_slots(self) -> int:
        return self.spec.n_slots

    @property
    def size_bytes(self) -> int:
        return self.model.size_bytes

    @property
    def size_vram(self) -> int:
        """Bytes of weights offloaded to a GPU, pro rata of the offloaded layers (+1: the output)."""
        n = self.model.n_layer + 1
        return self.size_bytes * min(self.model.n_gpu_layers, n) // n

    @property
    def bos_text(self) -> str:
        return self.model.token_text(self.model.bos) if self.model.bos >= 0 else ""

    @property
    def eos_text(self) -> str:
        return self.model.token_text(self.model.eos) if self.model.eos >= 0 else ""

    def tokenize(self, text: str, *, add_special: bool = True) -> list[int]:
        return self.model.tokenize(text, add_special=add_special, parse_special=True)

    def fim_tokens(self) -> tuple[int, int, int] | None:
        return self.model.fim_tokens()

    def token_piece(self, token: int) -> bytes:
        return self.model.piece(token)

    def _sampler_for(self, params: SamplingParams) -> Sampler | None:
        """A native chain, or None when plain argmax in the runner gives the same token."""
        penalized = params.repeat_penalty != 1.0 or params.presence_penalty or params.frequency_penalty
        if params.greedy and not penalized:
            return None
        try:
            return Sampler(self.model, params)
        except EngineError as exc:
            raise InvalidRequest(str(exc)) from exc

    def _check(self, request: Request) -> Runner:
        """Refuse what the engine thread must never see: it would fail the whole batch."""
        if self.runner is None:
            raise InvalidRequest("this model only computes embeddings")
        if not request.prompt:
            raise InvalidRequest("prompt is empty")
        if min(request.prompt) < 0 or max(request.prompt) >= self.model.n_vocab:
            raise InvalidRequest("invalid token id in the prompt or context")
        if self.in_flight >= self.n_slots + self.max_queue:
            raise QueueFull()
        return self.runner

    async def generate(self, request: Request) -> AsyncIterator[Event]:
        """Events of one request until its final one; raises QueueFull beyond the queue limit.

        The engine builds the request's sampler from ``request.sampling`` and owns it: it is
        freed when the request ends, however it ends.
        """
        runner = self._check(request)
        queue: asyncio.Queue[Event] = asyncio.Queue()
        sink = Sink(queue, asyncio.get_running_loop())
        self.in_flight += 1
        lock = threading.Lock()
        submitted = abandoned = finished = False

        def submit() -> None:
            nonlocal submitted
            sampler = self._sampler_for(request.sampling)
            with lock:
                if abandoned:  # the caller is gone (cancelled while the chain was built)
                    if sampler is not None:
                        sampler.close()
                    return
                runner.submit(request, sampler, sink)
                submitted = True

        try:
            if request.sampling.grammar is None:
                submit()  # a chain without a grammar takes microseconds
            else:
                # llama.cpp parses the grammar while building the chain: neither on the event loop
                # nor on the engine thread, where it would stall every other request's step.
                self._submitting += 1
                try:
                    await anyio.to_thread.run_sync(submit)
                finally:
                    self._submitting -= 1
            while True:
                event = await queue.get()
                if sink.consume():
                    runner.wake()  # it may have paused this slot
                if event.finish is not None:
                    finished = True
                yield event
                if finished:
                    return
        finally:
            self.in_flight -= 1
            with lock:
                # A cancelled task does not wait for the thread: whichever of the two comes
                # second, it or this, sees the other and no request is left without a reader.
                abandoned = True
                if submitted and not finished:
                    runner.abort(request.id)

    def close(self) -> None:
        """Blocking: stops the engine threads (cancelling what runs) and frees the model."""
        if self.runner is not None:
            self.runner.close()
        self.embedder.close()
        self.model.close()
