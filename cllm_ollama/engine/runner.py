"""The engine thread: the one thread that drives a model's llama.cpp context.

Its loop drains the inbox (aborts before adds), plans a step, decodes it, samples, and
publishes the step's events; it sleeps on a condition variable only when no slot has work.
Other threads only post to the inbox; nothing here ever waits on a client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from ..errors import EngineError
from .binding import Batch, Context, Model, Sampler
from .frontdoor import LoadSpec, Occupancy
from .prefix import Copy, Restore, Save, Trim
from .prompt_cache import PromptCache
from .request import Event, FinishReason, Request, TokenLogprob
from .scheduler import Scheduler, StepPlan

log = logging.getLogger("cllm.engine")

# A reader more than this many events behind pauses its own slot (not the others).
MAX_BUFFERED_EVENTS = 256
# A cross-slot copy serialises the source's state when it holds fewer tokens than
# n_ctx_seq / this, and copies the whole KV stream otherwise. Measured with bench/kv_copy.py
# (Qwen2.5-0.5B Q4_K_M, 4096 cells, 2 cores): the stream copy costs 10-16 ms at any prefix
# length, the state copy about 10x more per token (11 ms at 1024 tokens, 171 ms at 4000).
STATE_COPY_FACTOR = 10


class EventQueue(Protocol):
    def put_nowait(self, item: Event, /) -> None: ...


@dataclass(eq=False)
class Sink:
    """Where one request's events go.

    With a ``loop``, events reach ``queue`` through one ``call_soon_threadsafe`` per step (an
    ``asyncio.Queue``); without, they are put directly (a thread-safe queue). ``published``
    and ``consumed`` are each written by one thread only, so their difference safely says
    how far the reader is behind.
    """

    queue: EventQueue
    loop: asyncio.AbstractEventLoop | None = None
    published: int = 0
    consumed: int = 0

    @property
    def backlog(self) -> int:
        return self.published - self.consumed

    @property
    def behind(self) -> bool:
        """Too far behind: the engine pauses this request's slot until the reader catches up."""
        return self.backlog > MAX_BUFFERED_EVENTS

    def consume(self) -> bool:
        """Count one event read; True when that ends a pause (the engine should be woken)."""
        self.consumed += 1
        return self.backlog == MAX_BUFFERED_EVENTS


def _deliver(items: list[tuple[Sink, Event]]) -> None:
    for sink, event in items:
        sink.queue.put_nowait(event)


@dataclass
class StepTimes:
    """Where the engine thread's time goes, in ns: what is not decode or sampling is Python."""

    steps: int = 0
    decode_ns: int = 0
    sample_ns: int = 0
    busy_ns: int = 0

    def summary(self) -> str:
        if not self.steps:
            return "no steps"
        per = 1e6 * self.steps
        python = self.busy_ns - self.decode_ns - self.sample_ns
        return (
            f"{self.steps} steps; per step: decode {self.decode_ns / per:.2f} ms, "
            f"sampling {self.sample_ns / per:.2f} ms, python {python / per:.3f} ms"
        )


class Runner:
    """Continuous batching over one model: ``submit`` and ``abort`` from any thread."""

    def __init__(
        self,
        model: Model,
        spec: LoadSpec,
        *,
        context: Callable[..., Context] = Context,
        batch: Callable[[int], Batch] = Batch,
    ) -> None:
        """``spec`` as the load resolved it (``client.resolve``): the context it asks for is made
        here. ``context`` and ``batch`` make the llama.cpp objects; tests pass fakes (no llama.cpp)."""
        self.model = model
        self.spec = spec
        # Set when the engine thread stopped for good: why. The pool then loads the model again.
        self.dead: str | None = None
        # Every generating slot puts a token in each batch: a batch smaller than the slot count
        # would trip llama.cpp's n_batch assertion (a process abort), whatever num_batch says.
        self.ctx = context(
            model,
            n_seq_max=spec.n_slots,
            n_ctx_seq=spec.n_ctx_slot,
            n_batch=max(spec.n_batch, spec.n_slots),
            n_threads=spec.n_threads,
            cache_type=spec.kv_cache_type,
            flash_attn=spec.flash_attention,
        )
        # Recurrent state cannot be cut at a position or shared: such models recompute prompts.
        share = not model.is_recurrent
        self.cache = PromptCache(spec.cache_bytes, spec.cache_min_tokens) if spec.cache_bytes > 0 and share else None
        self.scheduler = Scheduler(
            n_slots=spec.n_slots,
            n_ctx_slot=self.ctx.n_ctx_seq,
            n_batch=self.ctx.n_batch,
            piece=model.piece,
            is_eog=model.is_eog,
            paused=self._paused,
            cache=self.cache,
            share=share,
            max_prefill=spec.max_prefill or None,
        )
        self.batch = batch(self.scheduler.n_batch)
        self._cv = threading.Condition()
        self._adds: list[tuple[Request, Sampler | None, Sink]] = []
        self._reserved = 0  # requests counted as queued before their submit (``reserve``)
        self._aborts: list[int] = []
        self._sinks: dict[int, Sink] = {}
        self._samplers: dict[int, Sampler] = {}
        self._closing = False
        self.times = StepTimes()
        self._thread = threading.Thread(target=self._loop, name=f"cllm-engine-{model.path.name}", daemon=True)
        self._thread.start()

    @property
    def n_ctx_slot(self) -> int:
        return self.ctx.n_ctx_seq

    def reserve(self) -> None:
        """Count a request as queued before it is submitted (its sampler is still being built)."""
        with self._cv:
            self._reserved += 1

    def unreserve(self) -> None:
        """A reserved request will not be submitted after all."""
        with self._cv:
            self._reserved -= 1

    def submit(self, request: Request, sampler: Sampler | None, sink: Sink, *, reserved: bool = False) -> None:
        """Queue ``request``; with ``reserved`` it takes the place ``reserve`` held for it."""
        request.prefix_keys  # noqa: B018 (hashed here, on the caller's thread, not on the engine's)
        with self._cv:
            if reserved:
                self._reserved -= 1
            if self._closing:
                if sampler is not None:
                    sampler.close()
                if self.dead is not None:
                    raise EngineError(f"the model's engine stopped ({self.dead}); the next request loads it again")
                raise EngineError("model is being unloaded")
            self._adds.append((request, sampler, sink))
            self._cv.notify()

    def occupancy(self) -> Occupancy:
        """Requests in slots, requests queued (reserved, submitted, not yet in a slot) and KV in use.

        Under the lock that also covers a request's move from the inbox into the scheduler, so
        none is counted twice or missed on its way; the move from the queue into a slot is
        read without it (two atomic reads a few bytecodes apart).
        """
        with self._cv:
            inbox = len(self._adds) + self._reserved
            now = self.scheduler.occupancy()
        return replace(now, waiting=now.waiting + inbox)

    def abort(self, request_id: int) -> None:
        with self._cv:
            self._aborts.append(request_id)
            self._cv.notify()

    def wake(self) -> None:
        """A paused reader caught up: let the loop plan its slot again."""
        with self._cv:
            self._cv.notify()

    def close(self) -> None:
        with self._cv:
            self._closing = True
            self._cv.notify()
        self._thread.join()
        self.ctx.close()
        stats = self.scheduler.stats
        log.info(
            "engine for %s: %s; prompt tokens %d, not computed %d (own slot %d, copied %d, restored %d)",
            self.model.path.name,
            self.times.summary(),
            stats.prompt_tokens,
            stats.cached,
            stats.own,
            stats.copied,
            stats.restored,
        )
        if self.cache is not None:
            self.cache.clear()

    def _paused(self, request_id: int) -> bool:
        sink = self._sinks.get(request_id)
        return sink is not None and sink.behind

    def _loop(self) -> None:
        while True:
            try:
                if not self._iteration():
                    return
            except Exception as exc:  # the engine thread must not die: fail what runs instead
                log.exception("engine step failed")
                try:
                    events = self.scheduler.fail_all(str(exc))
                    self.ctx.clear()
                    self._emit(events)
                except Exception as fatal:
                    self._stop_dead(fatal)
                    return

    def _stop_dead(self, exc: BaseException) -> None:
        """The loop cannot go on: say why, end every request it knew of, refuse new ones."""
        log.exception("engine thread stops")
        with self._cv:
            self.dead = f"{type(exc).__name__}: {exc}"
            self._closing = True  # submit() now refuses instead of queueing forever
            adds, self._adds = self._adds, []
        message = f"the model's engine stopped ({self.dead})"
        for request, sampler, sink in adds:
            self._sinks[request.id] = sink
            if sampler is not None:
                self._samplers[request.id] = sampler
        events = [Event(rid, "", (), FinishReason.ERROR, None, message) for rid in self._sinks]
        with contextlib.suppress(Exception):
            self._emit(events)

    def _iteration(self) -> bool:
        """One pass: drain the inbox, plan, decode, publish. False once the runner is closing."""
        sched = self.scheduler
        with self._cv:
            while not (self._adds or self._aborts or self._closing or sched.has_work()):
                self._cv.wait()
            adds, self._adds = self._adds, []
            aborts, self._aborts = self._aborts, []
            closing = self._closing
            # Into the scheduler under the lock ``occupancy`` reads with: none is between the two.
            for request, sampler, sink in adds:
                self._sinks[request.id] = sink
                if sampler is not None:
                    self._samplers[request.id] = sampler
                sched.add(request)
        t_busy = time.perf_counter_ns()
        if closing:
            aborts.extend(self._sinks)  # the new ones too
        # Published at once: a step that fails below must not lose them (their sinks and
        # samplers would never be released).
        self._emit(sched.abort(aborts))
        if closing:
            return False
        self._apply_kv(sched.admit())
        plan = sched.plan()
        if len(plan) == 0:
            # Every running slot's reader is behind: sleep until one catches up. The check
            # runs under the lock that ``wake`` takes, so a wake-up cannot slip past it.
            with self._cv:
                if not (self._adds or self._aborts or self._closing) and all(
                    self._paused(rid) for rid in sched.running_ids()
                ):
                    self._cv.wait()
            return True
        self._emit(self._step(plan))
        self.times.busy_ns += time.perf_counter_ns() - t_busy
        return True

    def _apply_kv(self, plan: StepPlan) -> None:
        """Perform admission's KV operations in the order planned (``prefix`` says what each means).

        One that cannot be done costs only its own request a recomputed prompt; it never
        fails the others in the batch.
        """
        ctx, lost = self.ctx, set()
        for op in plan.ops:
            match op:
                case Save(seq_id, tokens):
                    assert self.cache is not None
                    try:
                        state = ctx.state_get(seq_id)
                    except EngineError:
                        log.warning("could not save the prompt state of sequence %d", seq_id)
                        continue
                    self.cache.add(tokens, state, len(state))
                case Copy(src, dst):
                    if src in lost:  # it copied (or was to copy) a prefix it does not hold
                        lost.add(dst)
                    elif len(self.scheduler.slots[src].cached) * STATE_COPY_FACTOR < ctx.n_ctx_seq:
                        try:
                            copied = ctx.state_set(dst, ctx.state_get(src))
                        except EngineError:  # the source's state could not be read: as a refused set
                            copied = False
                        if not copied:
                            lost.add(dst)
                    else:
                        ctx.seq_copy(src, dst)
                case Restore(seq_id, entry):
                    if not ctx.state_set(seq_id, entry.payload):
                        lost.add(seq_id)
                case Trim(seq_id, pos):
                    if seq_id in lost or not ctx.seq_rm(seq_id, pos) or not self._window_held(seq_id, pos):
                        lost.add(seq_id)
        for seq_id in lost:
            log.warning("KV of sequence %d could not be reused: its prompt is computed again", seq_id)
            ctx.seq_clear(seq_id)
            self.scheduler.lost_prefix(seq_id)

    def _window_held(self, seq_id: int, pos: int) -> bool:
        """Whether a sliding-window sequence cut at ``pos`` still holds the window before it.

        A live sequence keeps every cell (``swa_full``), but a saved state keeps only the last
        window of its SWA layers: restored (or state-copied) and cut below that, the window the
        next token attends to is gone. Full attention and recurrent memory keep what ``seq_rm``
        left (for recurrent state ``seq_pos_min`` is the last position, not a start).
        """
        n_swa = self.model.n_swa
        if pos == 0 or n_swa == 0:
            return True
        low = self.ctx.seq_pos_min(seq_id)
        return 0 <= low <= max(0, pos - n_swa)  # llama-server's rule

    def _step(self, plan: StepPlan) -> list[Event]:
        for slot in plan.admitted:
            sampler = self._samplers.get(slot.request.id)  # type: ignore[union-attr]
            if sampler is not None:
                request = slot.request
                assert request is not None
                window = request.sampling.repeat_last_n
                sampler.prime(request.prompt[-window:] if window > 0 else request.prompt)
        self.batch.fill(plan.tokens, plan.positions, plan.seq_ids, [row for _, row in plan.outputs])
        t0 = time.perf_counter_ns()
        self.ctx.decode(self.batch)
        t1 = time.perf_counter_ns()
        sampled = self._sample(plan)
        times = self.times
        times.sample_ns += time.perf_counter_ns() - t1
        times.decode_ns += t1 - t0
        times.steps += 1
        logprobs = self._logprobs(plan, sampled)
        events = self.scheduler.update(plan, sampled)
        if logprobs:
            events = [replace(e, logprob=logprobs[e.request_id]) if e.request_id in logprobs else e for e in events]
        return events

    def _logprobs(self, plan: StepPlan, sampled: Sequence[int]) -> dict[int, TokenLogprob]:
        """Log-softmax of the raw logits, only for the requests that asked for it."""
        out: dict[int, TokenLogprob] = {}
        logits: np.ndarray | None = None
        for j, ((slot, _row), token) in enumerate(zip(plan.outputs, sampled, strict=True)):
            request = slot.request
            if request is None or request.logprobs < 0:
                continue
            if logits is None:
                logits = self.ctx.logits(len(plan.outputs))
            row = logits[j].astype(np.float64)
            peak = row.max()
            log_z = peak + np.log(np.exp(row - peak).sum())
            top: tuple[tuple[int, float], ...] = ()
            if request.logprobs > 0:
                best = np.argpartition(row, -request.logprobs)[-request.logprobs :]
                best = best[np.argsort(-row[best])]
                top = tuple((int(t), float(row[t] - log_z)) for t in best)
            out[request.id] = TokenLogprob(int(token), float(row[token] - log_z), top)
        return out

    def _sample(self, plan: StepPlan) -> Sequence[int]:
        outputs = plan.outputs
        if not outputs:
            return ()
        chains = [self._samplers.get(slot.request.id) for slot, _ in outputs]  # type: ignore[union-attr]
        if not any(chains):
            # All greedy: one argmax over the logits rows, no per-vocabulary Python work.
            return np.argmax(self.ctx.logits(len(outputs)), axis=1).tolist()  # type: ignore[no-any-return]
        logits: np.ndarray | None = None
        tokens: list[int] = []
        for j, ((_, row), sampler) in enumerate(zip(outputs, chains, strict=True)):
            if sampler is not None:
                tokens.append(sampler.sample(self.ctx, row))
            else:
                if logits is None:
                    logits = self.ctx.logits(len(outputs))
                tokens.append(int(logits[j].argmax()))
        return tokens

    def _emit(self, events: list[Event]) -> None:
        if not events:
            return
        by_loop: dict[asyncio.AbstractEventLoop | None, list[tuple[Sink, Event]]] = {}
        for event in events:
            if event.finish is not None:
                sink = self._sinks.pop(event.request_id, None)
                sampler = self._samplers.pop(event.request_id, None)
                if sampler is not None:
                    sampler.close()
            else:
                sink = self._sinks.get(event.request_id)
            if sink is not None:
                sink.published += 1
                by_loop.setdefault(sink.loop, []).append((sink, event))
        for loop, items in by_loop.items():
            if loop is None:
                _deliver(items)
            else:
                # A closed loop means nobody is listening any more.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_deliver, items)
