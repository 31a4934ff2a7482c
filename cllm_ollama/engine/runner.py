"""The engine thread: the one thread that drives a model's llama.cpp context.

Its loop drains the inbox (aborts before adds), plans a step, decodes it, samples, and
publishes the step's events; it sleeps on a condition variable only when no slot has work.
Other threads only post to the inbox; nothing here ever waits on a client.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from ..errors import EngineError
from .binding import STATE_FORMAT, Batch, Context, Lora, Model, Sampler, StateBuffers, with_adapters
from .blocks import BLOCK
from .disk_cache import DiskCache, identity_digest, weights_id
from .encoder import ENCODE_AHEAD, EncodeFailed, MediaEncoder
from .frontdoor import LoadSpec, Occupancy
from .invariance import MAX_ROWS, shape
from .media import Media
from .prefix import Copy, Load, Restore, Save, Trim
from .prompt_cache import PromptCache
from .request import Event, FinishReason, MediaInput, Request, TokenLogprob
from .scheduler import Scheduler, StepPlan
from .slot import Slot, SlotState

log = logging.getLogger("cllm.engine")

# A reader more than this many events behind pauses its own slot (not the others).
MAX_BUFFERED_EVENTS = 256
# A cross-slot copy serialises the source's state when it holds fewer tokens than
# n_ctx_seq / this, and copies the whole KV stream otherwise. Measured with bench/kv_copy.py
# (Qwen2.5-0.5B Q4_K_M, 4096 cells, 2 cores): the stream copy costs 10-16 ms at any prefix
# length, the state copy about 10x more per token (11 ms at 1024 tokens, 171 ms at 4000).
STATE_COPY_FACTOR = 10
# What a saved state holds beyond its cells' K and V rows (headers, each cell's position and
# sequence), bounded from above: a prepared buffer must not be short (``state_buffers``).
STATE_BYTES_PER_CELL = 64
STATE_HEADER_BYTES = 64 << 10


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
        adapters: Sequence[Lora] = (),
    ) -> None:
        """``spec`` as the load resolved it (``LoadedModel._resolve``): the context it asks for is made
        here, with ``adapters`` (loaded for ``spec.adapters``, owned by the caller) set on it.
        ``context`` and ``batch`` make the llama.cpp objects; tests pass fakes (no llama.cpp)."""
        self.model = model
        self.spec = spec
        # Set when the engine thread stopped for good: why. The pool then loads the model again.
        self.dead: str | None = None
        # Every generating slot puts a token in each batch: a batch smaller than the slot count
        # would trip llama.cpp's n_batch assertion (a process abort), whatever num_batch says.
        # The deterministic mode pads a step by up to a row a slot, and keeps it to one ubatch.
        self.invariant = spec.deterministic
        n_batch = min(max(spec.n_batch, 2 * spec.n_slots), 512) if self.invariant else max(spec.n_batch, spec.n_slots)
        self.ctx = with_adapters(
            context(
                model,
                n_seq_max=spec.n_slots,
                n_ctx_seq=spec.n_ctx_slot,
                n_batch=n_batch,
                n_threads=spec.n_threads,
                cache_type=spec.kv_cache_type,
                flash_attn=spec.flash_attention,
            ),
            adapters,
        )
        # Recurrent state cannot be cut at a position or shared: such models recompute prompts.
        share = not model.is_recurrent
        self._cell_bytes = model.kv_bytes_per_token(spec.kv_cache_type) + STATE_BYTES_PER_CELL if share else 0
        # Saved states' memory, made ready and freed off this thread: a save only copies. Made
        # ready at most: two full slots' states, or one when the host cache holds less.
        full = self._state_bytes(spec.n_ctx_slot)
        limit = max(full, min(spec.cache_bytes, 2 * full))
        self.buffers = StateBuffers(limit, f"cllm-state-{model.path.name}") if share else None
        self._expected: dict[int, tuple[int | None, int]] = {}  # slot -> (its request, its next save's tokens)
        self.cache = PromptCache(spec.cache_bytes, spec.cache_min_tokens) if spec.cache_bytes > 0 and share else None
        self.disk = self._disk_cache(model, spec, self._alloc(None)) if share else None
        self.scheduler = Scheduler(
            n_slots=spec.n_slots,
            n_ctx_slot=self.ctx.n_ctx_seq,
            n_batch=self.ctx.n_batch - spec.n_slots if self.invariant else self.ctx.n_batch,
            piece=model.piece,
            is_eog=model.is_eog,
            paused=self._paused,
            cache=self.cache,
            disk=self.disk,
            share=share,
            max_prefill=spec.max_prefill or None,
            embeddings=self._embeddings,
            max_rows=MAX_ROWS if self.invariant else None,
        )
        self.batch = batch(self.ctx.n_batch)
        self._cv = threading.Condition()
        self._adds: list[tuple[Request, Sampler | None, Sink]] = []
        self._reserved = 0  # requests counted as queued before their submit (``reserve``)
        self._aborts: list[int] = []
        self._loaded: list[tuple[int, bytearray | None]] = []  # disk reads done (request id, state)
        self._sinks: dict[int, Sink] = {}
        self._samplers: dict[int, Sampler] = {}
        # Prompts with media, by request id: released to the encoder when their request ends.
        self._media: dict[int, MediaInput] = {}
        self.encoder = MediaEncoder(self.wake, f"cllm-media-{model.path.name}") if spec.projector else None
        self._closing = False
        self.times = StepTimes()
        self._thread = threading.Thread(target=self._loop, name=f"cllm-engine-{model.path.name}", daemon=True)
        self._thread.start()

    @property
    def n_ctx_slot(self) -> int:
        return self.ctx.n_ctx_seq

    @staticmethod
    def _disk_cache(model: Model, spec: LoadSpec, alloc: Callable[[int], Any] | None = None) -> DiskCache | None:
        """The disk tier for this load: its identity is everything that changes a state's bytes.
        A model whose memory is one KV cache keeps its states without the slot count
        (``state_streams``), so a load with another ``num_parallel`` reads them; for the others
        (sliding-window ones write two caches) the slot count is part of the identity, as
        llama.cpp refuses a state with another stream count ("n_stream mismatch")."""
        if spec.cache_dir is None or spec.cache_disk_bytes <= 0:
            return None
        # Image cells are the projector's output: another projector over the same weights differs.
        projector = weights_id(spec.projector) if spec.projector else ""
        streams = spec.n_slots if model.n_swa == 0 else None
        # A LoRA changes every layer's KV: an adapted model's states are its own.
        adapters = ",".join(weights_id(path) for path in spec.adapters)
        identity = identity_digest(
            weights_id(model.path),
            spec.kv_cache_type,
            spec.flash_attention,
            "any slot count" if streams else spec.n_slots,
            STATE_FORMAT,
            projector,
            *([adapters] if adapters else []),
        )
        return DiskCache(
            spec.cache_dir, identity, spec.cache_disk_bytes, spec.cache_min_tokens, streams, alloc or bytearray
        )

    def _state_bytes(self, n_tokens: int) -> int:
        """At least the size of a saved state of ``n_tokens`` cells (their K, V and metadata)."""
        return n_tokens * self._cell_bytes + STATE_HEADER_BYTES

    def _alloc(self, seq_id: int | None) -> Callable[[int], Any] | None:
        """Where a state of sequence ``seq_id`` (None: not a slot's expected save) is written."""
        return None if self.buffers is None else functools.partial(self.buffers.take, seq_id)

    def _prepare_saves(self, slots: Sequence[Slot] | None = None) -> None:
        """Have each of ``slots``' (None: every slot's) next expected save find its buffer ready
        (``state_buffers``): asked again only when what the slot expects changes (an idle slot's,
        once)."""
        buffers, prefix = self.buffers, self.scheduler.prefix
        if buffers is None:
            return
        for slot in self.scheduler.slots if slots is None else slots:
            request, last = slot.request, self._expected.get(slot.seq_id)
            if request is None and last is not None and last[0] is None:
                continue
            expected = (None if request is None else request.id, prefix.next_save(slot))
            if expected == last:
                continue
            self._expected[slot.seq_id] = expected
            if expected[1]:
                buffers.prepare(slot.seq_id, self._state_bytes(expected[1]))
            else:
                buffers.discard(slot.seq_id)

    def _read_done(self, request_id: int) -> Callable[[bytearray | None], None]:
        """What the disk cache's IO thread calls with a read state: it wakes the engine thread."""

        def done(state: bytearray | None) -> None:
            with self._cv:
                self._loaded.append((request_id, state))
                self._cv.notify()

        return done

    def reserve(self) -> None:
        """Count a request as queued before it is submitted (its sampler is still being built)."""
        with self._cv:
            self._reserved += 1

    def unreserve(self) -> None:
        """A reserved request will not be submitted after all."""
        with self._cv:
            self._reserved -= 1

    def submit(self, request: Request, sampler: Sampler | None, sink: Sink, *, reserved: bool = False) -> None:
        """Queue ``request``; with ``reserved`` it takes the place ``reserve`` held for it.

        Once queued, its ``media`` is the runner's to close; a refused one stays the caller's."""
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
        self._save_to_disk()
        if self.encoder is not None:
            self.encoder.close()
        for media in self._media.values():  # requests the loop never saw end (it died)
            media.close()
        self._media.clear()
        self.ctx.close()
        stats = self.scheduler.stats
        log.info(
            "engine for %s: %s; prompt tokens %d, not computed %d (own slot %d, copied %d, restored %d, loaded %d)",
            self.model.path.name,
            self.times.summary(),
            stats.prompt_tokens,
            stats.cached,
            stats.own,
            stats.copied,
            stats.restored,
            stats.loaded,
        )
        if self.cache is not None:
            self.cache.clear()
        if self.buffers is not None:
            self.buffers.close()

    def _save_to_disk(self) -> None:
        """At unload, what the slots hold goes to disk unless it is there nearly all (the engine
        thread has stopped: reading the KV here is safe), and the writes finish before the model
        is freed. The host cache's states went to disk when they were saved."""
        disk = self.disk
        if disk is None:
            return
        try:
            for slot in self.scheduler.slots:
                chain = slot.chain
                if len(chain) >= disk.index.min_tokens and disk.lookup(chain.tokens, chain.keys)[1] + BLOCK <= len(
                    chain
                ):
                    disk.save(chain.tokens, self.ctx.state_get(slot.seq_id, self._alloc(slot.seq_id)))
        except Exception:
            log.exception("could not save prompt states to disk")
        finally:
            disk.close()

    def _paused(self, request_id: int) -> bool:
        sink = self._sinks.get(request_id)
        return sink is not None and sink.behind

    def _embeddings(self, request: Request, item: Media) -> object | None:
        """The scheduler's question: is ``item`` encoded? Asking queues it on the media thread."""
        if self.encoder is None or request.media is None:
            return EncodeFailed("this model was loaded without its projector")
        return self.encoder.want(request.media, item)

    def _idle(self, request_id: int) -> bool:
        """Nothing to do for this request until its reader catches up, its media item is encoded (each
        wakes the loop: ``wake``), or the slot whose prefix it waits for gets on (that slot's work)."""
        if self._paused(request_id):
            return True
        slot = next((s for s in self.scheduler.slots if s.request is not None and s.request.id == request_id), None)
        if slot is None or slot.state is SlotState.GENERATING:
            return False
        if slot.state is SlotState.WAITING:
            return True
        item = slot.media_due()
        return item is not None and self._embeddings(slot.request, item) is None  # type: ignore[arg-type]

    def _encode_ahead(self, slots: list[Slot]) -> None:
        """Queue the encodes of the next media items (images, audio windows) these prompts still need, at most
        ``ENCODE_AHEAD``, so that they run while the text and media before them are decoded, not
        after; called as a prompt is admitted and as each of its media items is decoded."""
        for slot in slots:
            request = slot.request
            if request is not None and request.media is not None:
                ahead = [item for start, item in request.media_items.items() if start >= slot.n_past]
                for item in ahead[:ENCODE_AHEAD]:
                    self._embeddings(request, item)

    def _release_media(self, request_id: int) -> None:
        media = self._media.pop(request_id, None)
        if media is None:
            return
        if self.encoder is not None:
            self.encoder.release(media)
        else:
            media.close()

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
            if request.media is not None:
                self._media[request.id] = request.media
        events = [Event(rid, "", (), FinishReason.ERROR, None, message) for rid in self._sinks]
        with contextlib.suppress(Exception):
            self._emit(events)

    def _iteration(self) -> bool:
        """One pass: drain the inbox, plan, decode, publish. False once the runner is closing."""
        sched = self.scheduler
        with self._cv:
            if not (self._adds or self._aborts or self._closing or self._loaded or sched.has_work()):
                if self.disk is not None:
                    self.disk.engine_busy(False)  # nothing to decode: the disk cache may write now
                while not (self._adds or self._aborts or self._closing or self._loaded or sched.has_work()):
                    self._cv.wait()
                if self.disk is not None:
                    self.disk.engine_busy(True)
            adds, self._adds = self._adds, []
            aborts, self._aborts = self._aborts, []
            loaded, self._loaded = self._loaded, []
            closing = self._closing
            # Into the scheduler under the lock ``occupancy`` reads with: none is between the two.
            for request, sampler, sink in adds:
                self._sinks[request.id] = sink
                if sampler is not None:
                    self._samplers[request.id] = sampler
                if request.media is not None:
                    self._media[request.id] = request.media
                sched.add(request)
        t_busy = time.perf_counter_ns()
        if closing:
            aborts.extend(self._sinks)  # the new ones too
        # Published at once: a step that fails below must not lose them (their sinks and
        # samplers would never be released).
        self._emit(sched.abort(aborts))
        if closing:
            return False
        for request_id, state in loaded:
            sched.loaded(request_id, state)
        admitted = sched.admit()
        self._apply_kv(admitted)
        self._prepare_saves(admitted.admitted)  # the rest at the step's end
        self._encode_ahead(admitted.admitted)
        plan = sched.plan()
        if len(plan) == 0 and not plan.media:
            # Every running slot's reader is behind, its state is being read from disk or its media item
            # is being encoded: sleep until one catches up, a read is done or the encode ends. The
            # check runs under the lock that ``wake`` and the reads' ``done`` take, so a wake-up
            # cannot slip past it.
            with self._cv:
                if not (self._adds or self._aborts or self._closing or self._loaded) and all(
                    self._idle(rid) or sched.loading(rid) for rid in sched.running_ids()
                ):
                    self._cv.wait()
            return True
        self._emit(self._step(plan))
        # After the step's tokens are out: copying a long prompt's state (~400 MB at 32k tokens of
        # a 0.5B model) must not hold back its first token.
        self._checkpoint(plan)
        self._prepare_saves()
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
                    self._keep(seq_id, tokens, host=True, disk=True)
                case Copy(src, dst):
                    if src in lost:  # it copied (or was to copy) a prefix it does not hold
                        lost.add(dst)
                    elif len(self.scheduler.slots[src].cached) * STATE_COPY_FACTOR < ctx.n_ctx_seq:
                        try:
                            copied = ctx.state_set(dst, ctx.state_get(src, self._alloc(None)))
                        except EngineError:  # the source's state could not be read: as a refused set
                            copied = False
                        if not copied:
                            lost.add(dst)
                    else:
                        ctx.seq_copy(src, dst)
                case Restore(seq_id, entry):
                    if not ctx.state_set(seq_id, entry.payload):
                        lost.add(seq_id)
                case Load(request_id, entry):
                    assert self.disk is not None
                    self.disk.load(entry, self._read_done(request_id))
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

    def _decode_media(self, plan: StepPlan) -> list[Event]:
        """The media step: each item's embeddings into its slot's sequence, one decode each,
        before the batch (an embedding batch carries no tokens; Gemma 3's non-causal attention
        switches the whole context). One that fails ends only its own request."""
        failed: list[Event] = []
        for slot, item, embd in list(plan.media):
            request = slot.request
            assert request is not None and request.media is not None
            try:
                if isinstance(embd, EncodeFailed):
                    raise EngineError(embd.message)
                request.media.decode(self.ctx, item, embd, slot.pos, slot.seq_id)
            except EngineError as exc:
                plan.media.remove((slot, item, embd))
                self.ctx.seq_clear(slot.seq_id)
                failed.append(self.scheduler.fail(slot, str(exc)))
        self._encode_ahead([slot for slot, _, _ in plan.media])  # the items after these, next
        return failed

    def _step(self, plan: StepPlan) -> list[Event]:
        for slot in plan.admitted:
            sampler = self._samplers.get(slot.request.id)  # type: ignore[union-attr]
            if sampler is not None:
                request = slot.request
                assert request is not None
                window = request.sampling.repeat_last_n
                prompt = request.prompt[-window:] if window > 0 else request.prompt
                # A media item's cells are no tokens: they take no part in penalties.
                sampler.prime([t for t in prompt if t >= 0] if request.media is not None else prompt)
        failed = self._decode_media(plan) if plan.media else []
        if len(plan) == 0:
            return failed + self.scheduler.update(plan, ())
        rows = [row for _, row in plan.outputs]
        picks, n_logits, pads = list(range(len(rows))), len(rows), []
        if self.invariant:
            shaped = shape(plan.tokens, plan.positions, plan.seq_ids, rows, self.ctx.n_ctx_seq)
            self.batch.fill(shaped.tokens, shaped.positions, shaped.seq_ids, shaped.outputs)
            rows, picks, n_logits, pads = shaped.rows, shaped.logits, len(shaped.outputs), shaped.pads
        else:
            self.batch.fill(plan.tokens, plan.positions, plan.seq_ids, rows)
        t0 = time.perf_counter_ns()
        try:
            self.ctx.decode(self.batch)
        finally:
            for seq_id, pos in pads:  # the mode's throw-away rows leave nothing in the KV
                self.ctx.seq_rm(seq_id, pos)
        t1 = time.perf_counter_ns()
        sampled = self._sample(plan, rows, picks, n_logits)
        times = self.times
        times.sample_ns += time.perf_counter_ns() - t1
        times.decode_ns += t1 - t0
        times.steps += 1
        logprobs = self._logprobs(plan, sampled, picks, n_logits)
        events = failed + self.scheduler.update(plan, sampled)
        if logprobs:
            events = [replace(e, logprob=logprobs[e.request_id]) if e.request_id in logprobs else e for e in events]
        return events

    def _checkpoint(self, plan: StepPlan) -> None:
        """Prefixes a request asked to keep, and long prompts finished in this step, are saved now
        (disk writes run on the IO thread)."""
        for slot, _ in plan.prefills:
            checkpoint = self.scheduler.prefix.to_checkpoint(slot)
            if checkpoint is not None:
                self._keep(slot.seq_id, checkpoint.tokens, host=checkpoint.host, disk=checkpoint.disk)

    def _keep(self, seq_id: int, tokens: tuple[int, ...], *, host: bool, disk: bool) -> None:
        """Save sequence ``seq_id``'s state (it holds ``tokens``) to the host cache and/or disk."""
        try:
            state = self.ctx.state_get(seq_id, self._alloc(seq_id))
        except EngineError:
            log.warning("could not save the prompt state of sequence %d", seq_id)
            return
        if host and self.cache is not None:
            self.cache.add(tokens, state, len(state))
        if disk and self.disk is not None:  # written on the disk cache's IO thread
            self.disk.save(tokens, state)

    def _logprobs(
        self, plan: StepPlan, sampled: Sequence[int], picks: Sequence[int], n_logits: int
    ) -> dict[int, TokenLogprob]:
        """Log-softmax of the raw logits, only for the requests that asked for it (``picks[j]``: the
        logits row of ``plan.outputs[j]`` among ``n_logits``)."""
        out: dict[int, TokenLogprob] = {}
        logits: np.ndarray | None = None
        for j, ((slot, _row), token) in enumerate(zip(plan.outputs, sampled, strict=True)):
            request = slot.request
            if request is None or request.logprobs < 0:
                continue
            if logits is None:
                logits = self.ctx.logits(n_logits)
            row = logits[picks[j]].astype(np.float64)
            peak = row.max()
            log_z = peak + np.log(np.exp(row - peak).sum())
            top: tuple[tuple[int, float], ...] = ()
            if request.logprobs > 0:
                best = np.argpartition(row, -request.logprobs)[-request.logprobs :]
                best = best[np.argsort(-row[best])]
                top = tuple((int(t), float(row[t] - log_z)) for t in best)
            out[request.id] = TokenLogprob(int(token), float(row[token] - log_z), top)
        return out

    def _sample(self, plan: StepPlan, rows: Sequence[int], picks: Sequence[int], n_logits: int) -> Sequence[int]:
        """A token for each of ``plan.outputs``: ``rows[j]`` is its row in the decoded batch,
        ``picks[j]`` its logits row among ``n_logits`` (they differ in the deterministic mode)."""
        outputs = plan.outputs
        if not outputs:
            return ()
        chains = [self._samplers.get(slot.request.id) for slot, _ in outputs]  # type: ignore[union-attr]
        if not any(chains):
            # All greedy: one argmax over the logits rows, no per-vocabulary Python work.
            best = np.argmax(self.ctx.logits(n_logits), axis=1)
            return best.tolist() if n_logits == len(outputs) else best[list(picks)].tolist()  # type: ignore[no-any-return]
        logits: np.ndarray | None = None
        tokens: list[int] = []
        for j, sampler in enumerate(chains):
            if sampler is not None:
                tokens.append(sampler.sample(self.ctx, rows[j]))
            else:
                if logits is None:
                    logits = self.ctx.logits(n_logits)
                tokens.append(int(logits[picks[j]].argmax()))
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
                self._release_media(event.request_id)
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
