"""The engine thread: the one thread that drives a model's llama.cpp context.

Its loop drains the inbox (adds, then aborts: an abort may name a request added in the same
drain), plans a step, decodes it, samples, and publishes the step's events; it sleeps on the
inbox's condition variable only when no slot has work. Other threads only post to the inbox;
nothing here ever waits on a client.

The parts, split as vLLM v1 splits its engine core: ``inbox.Inbox`` (what other threads post),
``scheduler.Scheduler`` (the batching policy), ``kv_store.KvStore`` (the plan's KV operations,
saved states), ``sampling.Sampling``, ``media_feed.MediaFeed`` and ``outbox.Outbox`` (events
to their readers). ``Runner`` is the loop that wires them.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import ParamSpec

import numpy as np

from ..errors import EngineError
from .binding import Batch, Context, DecodeError, Lora, Model, Sampler, TokenRows, token_rows, with_adapters
from .compaction import runs
from .frontdoor import LoadSpec, Occupancy
from .gap_fill import chosen, fill, one_row_each
from .inbox import Add, Inbox
from .invariance import MAX_ROWS, shape, shapes_steps
from .kv_store import KvStore
from .media_feed import MediaFeed
from .outbox import Outbox, Sink
from .request import Event, FinishReason, Request
from .sampling import Sampling
from .scheduler import Scheduler, StepPlan
from .slot import SlotState
from .step_budget import AUTO_SLACK, MEDIA_SLACK, StepBudget

__all__ = ["Runner", "Sink", "StepTimes"]

log = logging.getLogger("cllm.engine")

P = ParamSpec("P")


@dataclass
class StepTimes:
    """Where the engine thread's time goes, in ns: what is not decode or sampling is Python."""

    steps: int = 0
    decode_ns: int = 0
    sample_ns: int = 0
    kv_ns: int = 0  # KV work between steps: states saved, restored, copied; sequences cut
    busy_ns: int = 0

    def summary(self) -> str:
        if not self.steps:
            return "no steps"
        per = 1e6 * self.steps
        python = self.busy_ns - self.decode_ns - self.sample_ns - self.kv_ns
        return (
            f"{self.steps} steps; per step: decode {self.decode_ns / per:.2f} ms, "
            f"sampling {self.sample_ns / per:.2f} ms, KV operations {self.kv_ns / per:.2f} ms, "
            f"python {python / per:.3f} ms"
        )


def log_step(plan: StepPlan, ns: int, kv_ns: int) -> None:
    """The step log (debug): what a step carried beside its generating streams, its time, and the
    KV work the engine thread did since the step before (``StepBudget.stall_ns``)."""
    prompt = {slot.seq_id: n for slot, n in plan.prefills}
    media = {piece.slot.seq_id: len(piece.rows) for piece in plan.media}
    log.debug(
        "step: %d decode rows, prompt rows %s, media rows %s, sequences in %d runs, %.1f ms "
        "(KV operations before it %.1f ms)",
        len(plan) - sum(prompt.values()),
        prompt,
        media,
        len(runs(plan.seq_ids)),
        ns / 1e6,
        kv_ns / 1e6,
    )


def _rows(plan: StepPlan, rows: list[int]) -> tuple[list[int], list[int], list[int]]:
    """The tokens, positions and sequences of ``rows`` of ``plan``'s batch."""
    return [plan.tokens[i] for i in rows], [plan.positions[i] for i in rows], [plan.seq_ids[i] for i in rows]


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
        """``spec`` as the load resolved it (``LoadedModel._resolve``): the context it asks for is
        made here, with ``adapters`` (loaded for ``spec.adapters``, owned by the caller) set on it.
        ``context`` and ``batch`` make the llama.cpp objects; tests pass fakes (no llama.cpp).
        A part that cannot be made releases the parts made before it (their memory, threads)."""
        self.model = model
        self.spec = spec
        # Every generating slot puts a token in each batch: a batch smaller than the slot count
        # would trip llama.cpp's n_batch assertion (a process abort), whatever num_batch says.
        # The deterministic mode pads a step by up to a row a slot, and keeps it to one ubatch.
        self.invariant = shapes_steps(spec.deterministic, recurrent=model.is_recurrent, name=model.path.name)
        n_batch = min(max(spec.n_batch, 2 * spec.n_slots), 512) if self.invariant else max(spec.n_batch, spec.n_slots)
        # Gaps between a decode call's sequences closed with throw-away rows (``gap_fill``): not in
        # the deterministic mode (it shapes its steps itself), nor where a recurrent state could not
        # drop the row again.
        self.gap_fill = 0 if self.invariant or model.is_recurrent else spec.gap_fill
        self.inbox = Inbox()
        self.times = StepTimes()
        with contextlib.ExitStack() as undo:
            self.ctx = with_adapters(
                context(
                    model,
                    n_seq_max=spec.n_slots,
                    n_ctx_seq=spec.n_ctx_slot,
                    n_batch=n_batch,
                    n_threads=spec.n_threads,
                    cache_type=spec.kv_cache_type,
                    flash_attn=spec.flash_attention,
                    outputs_per_seq=2 if self.invariant else 1,
                ),
                adapters,
            )
            undo.callback(self.ctx.close)
            self.kv = KvStore(model, spec, self.ctx, self.inbox.read_done)
            undo.callback(self.kv.close)
            self.feed = MediaFeed(spec.projector is not None, self.inbox.wake, f"cllm-media-{model.path.name}")
            undo.callback(self.feed.close)
            # A media row may ride in the streams' call (``MediaPiece.rides``): not where the mode
            # fixes the calls' shapes, nor with adapters (one on the embedding table would be
            # skipped), nor where gaps between the streams are filled (a ride call has no pads, so
            # there it could cost passes that a piece's own call does not: a GPU's default).
            ride = spec.projector is not None and not self.invariant and not adapters and not self.gap_fill
            self.token_rows: TokenRows | None = token_rows(model) if ride else None
            if self.token_rows is not None:
                undo.callback(self.token_rows.close)
            self.sampling = Sampling(self.ctx)
            self.outbox = Outbox(self._release)
            self.budget = StepBudget(
                spec.target_itl_ns, spec.max_prefill, MEDIA_SLACK if self.token_rows is not None else AUTO_SLACK
            )
            self.scheduler = self._scheduler()
            self.batch = batch(self.ctx.n_batch)
            self._thread = threading.Thread(target=self._loop, name=f"cllm-engine-{model.path.name}", daemon=True)
            self._closed, self._closing = False, threading.Lock()
            self._thread.start()
            undo.pop_all()

    def _scheduler(self) -> Scheduler:
        spec, kv = self.spec, self.kv
        return Scheduler(
            n_slots=spec.n_slots,
            n_ctx_slot=self.ctx.n_ctx_seq,
            n_batch=self.ctx.n_batch - spec.n_slots if self.invariant else self.ctx.n_batch,
            piece=self.model.piece,
            is_eog=self.model.is_eog,
            paused=self.outbox.paused,
            cache=kv.cache,
            disk=kv.disk,
            share=kv.share,
            windowed=self.model.n_swa > 0,
            budget=self.budget,
            embeddings=self.feed.embeddings,
            max_rows=MAX_ROWS if self.invariant else None,
            ride=self.token_rows is not None,
            # A stream moves into a gap between the batch's sequences (``compaction``) where no
            # throw-away row fills it, nor the mode fixes the steps' shapes, and its KV can be
            # copied whole: not a recurrent state, nor a sliding window (its checkpoints are kept
            # by sequence: ``swa_windows``).
            compact=kv.share and not self.invariant and not self.gap_fill and self.model.n_swa == 0,
        )

    @property
    def n_ctx_slot(self) -> int:
        return self.ctx.n_ctx_seq

    @property
    def dead(self) -> str | None:
        """Set when the engine thread stopped for good: why. The pool then loads the model again."""
        return self.inbox.dead

    # -- any thread -------------------------------------------------------------------------

    def reserve(self) -> None:
        """Count a request as queued before it is submitted (its sampler is still being built)."""
        self.inbox.reserve()

    def unreserve(self) -> None:
        """A reserved request will not be submitted after all."""
        self.inbox.unreserve()

    def submit(self, request: Request, sampler: Sampler | None, sink: Sink, *, reserved: bool = False) -> None:
        """Queue ``request``; with ``reserved`` it takes the place ``reserve`` held for it.

        Once queued, its ``media`` is the runner's to close; a refused one stays the caller's."""
        request.prefix_keys  # noqa: B018 (hashed here, on the caller's thread, not on the engine's)
        self.inbox.submit((request, sampler, sink), reserved=reserved)

    def occupancy(self) -> Occupancy:
        """Requests in slots, requests queued (reserved, submitted, not yet in a slot) and KV in use.

        The inbox's count and the scheduler's are read under the lock that also covers a
        request's move from the one into the other, so none is counted twice or missed on its
        way; the move from the queue into a slot is read without it (two atomic reads a few
        bytecodes apart).
        """
        queued, now = self.inbox.queued(self.scheduler.occupancy)
        return replace(now, waiting=now.waiting + queued)

    def abort(self, request_id: int) -> None:
        self.inbox.abort(request_id)

    def wake(self) -> None:
        """A paused reader caught up: let the loop plan its slot again."""
        self.inbox.wake()

    def close(self) -> None:
        """Blocking: stops the engine thread and frees the context; again, nothing (a dead
        engine's is closed when the pool retires it, and once more with its model, maybe at once
        from another thread as its last request ends: that call waits for the first)."""
        with self._closing:
            if not self._closed:
                self._closed = True
                self._close()

    def _close(self) -> None:
        self.inbox.close()
        self._thread.join()
        if self.dead is None:  # a dead engine's KV is not trusted to hold what its slots say
            self.kv.save_to_disk(self.scheduler.slots)
        self.feed.close()
        self.ctx.close()
        stats = self.scheduler.stats
        log.info(
            "engine for %s: %s; prompt tokens %d, not computed %d (own slot %d, copied %d, restored %d, loaded %d); "
            "streams moved into gaps %d",
            self.model.path.name,
            self.times.summary(),
            stats.prompt_tokens,
            stats.cached,
            stats.own,
            stats.copied,
            stats.restored,
            stats.loaded,
            self.scheduler.moves,
        )
        self.kv.close()
        if self.token_rows is not None:
            self.token_rows.close()

    # -- the engine thread ------------------------------------------------------------------

    def _register(self, add: Add) -> None:
        """Take charge of a submitted request: its sink, sampler and media (released at its end)."""
        request, sampler, sink = add
        self.outbox.sinks[request.id] = sink
        self.sampling.add(request.id, sampler)
        self.feed.add(request)

    def _admit(self, add: Add) -> None:
        """An add drained from the inbox (under its lock): registered, and queued for a slot."""
        self._register(add)
        self.scheduler.add(add[0])

    def _release(self, request_id: int) -> None:
        """A request's last event went out: what it held goes."""
        self.sampling.release(request_id)
        self.feed.release(request_id)

    def _disk_idle(self, idle: bool) -> None:
        """The disk cache writes while the engine has nothing to decode."""
        if self.kv.disk is not None:
            self.kv.disk.engine_busy(not idle)

    def _loop(self) -> None:
        while True:
            try:
                if not self._iteration():
                    return
            except Exception as exc:  # the engine thread must not die: fail what runs instead
                log.exception("engine step failed")
                try:
                    events = self.scheduler.fail_all(str(exc))
                    self.ctx.reset()
                    self.feed.forget_partial()
                    self.outbox.emit(events)
                except Exception as fatal:
                    self._stop_dead(fatal)
                    return

    def _stop_dead(self, exc: BaseException) -> None:
        """The loop cannot go on: say why, end every request it knew of, refuse new ones."""
        log.exception("engine thread stops")
        for add in self.inbox.stop(f"{type(exc).__name__}: {exc}"):
            self._register(add)
        message = f"the model's engine stopped ({self.inbox.dead})"
        events = [Event(rid, "", (), FinishReason.ERROR, None, message) for rid in self.outbox.sinks]
        with contextlib.suppress(Exception):
            self.outbox.emit(events)

    def _iteration(self) -> bool:
        """One pass: drain the inbox, plan, decode, publish. False once the runner is closing."""
        sched, kv = self.scheduler, self.kv
        drained = self.inbox.take(sched.has_work, self._admit, self._disk_idle)
        t_busy = time.perf_counter_ns()
        aborts = drained.aborts
        if drained.closing:
            aborts.extend(self.outbox.sinks)  # the new ones too
        # Published at once: a step that fails below must not lose them (their sinks and
        # samplers would never be released).
        self.outbox.emit(sched.abort(aborts))
        self.feed.drop_partial(self.ctx, sched.slots)  # before a slot left half-way is saved or reused
        if drained.closing:
            return False
        for request_id, state in drained.loaded:
            sched.loaded(request_id, state)
        admitted = sched.admit()
        self._kv_work(kv.apply, admitted, sched)
        # At admission, not at the request's first step: a pass whose plan has no rows (the slot
        # waits on a disk read, or its first item is still encoding) would leave penalties blind
        # to the prompt.
        self.sampling.prime(admitted.admitted)
        kv.prepare_saves(admitted.admitted, sched.prefix)  # the rest at the step's end
        self.feed.encode_ahead(admitted.admitted)
        plan = sched.plan()
        if len(plan) == 0 and not plan.media:
            self._rest(t_busy)
            return True
        self.outbox.emit(self._step(plan))
        self.budget.stepped()  # the streams got their tokens
        # After the step's tokens are out: copying a long prompt's state (~400 MB at 32k tokens of
        # a 0.5B model) must not hold back its first token.
        self._kv_work(kv.checkpoint, plan, sched.prefix, self.inbox.quiet)
        kv.prepare_saves(sched.slots, sched.prefix)
        self.times.busy_ns += time.perf_counter_ns() - t_busy
        return True

    def _rest(self, t_busy: int) -> None:
        """A pass with nothing to decode. No slot is busy (the last stream was aborted: the
        checkpoints that waited for it are taken now, unless a request came meanwhile), or every
        running slot's reader is behind, its state is being read from disk or its media item is
        being encoded: sleep until one catches up, a read is done or the encode ends. No stream
        waits on this pass's KV work."""
        sched = self.scheduler
        self._kv_work(self.kv.save_deferred, sched.prefix, self.inbox.quiet)
        self.budget.stepped()
        self.times.busy_ns += time.perf_counter_ns() - t_busy
        if sched.has_work():  # else the next pass waits in ``take``, which lets the disk cache write
            self.inbox.sleep_unless(self._all_idle)

    def _kv_work(self, op: Callable[P, None], *args: P.args, **kwargs: P.kwargs) -> None:
        """Run KV work ``op`` between steps, timed: the next step's streams wait for it
        (``StepBudget.stalled``)."""
        t0 = time.perf_counter_ns()
        op(*args, **kwargs)
        ns = time.perf_counter_ns() - t0
        self.times.kv_ns += ns
        self.budget.stalled(ns)

    def _all_idle(self) -> bool:
        sched = self.scheduler
        return all(self._idle(rid) or sched.loading(rid) for rid in sched.running_ids())

    def _idle(self, request_id: int) -> bool:
        """Nothing to do for this request until its reader catches up, its media item is encoded
        (each wakes the loop: ``wake``), or the slot whose prefix it waits for gets on (that
        slot's work)."""
        if self.outbox.paused(request_id):
            return True
        slot = next((s for s in self.scheduler.slots if s.request is not None and s.request.id == request_id), None)
        if slot is None or slot.state is SlotState.GENERATING:
            return False
        if slot.state is SlotState.WAITING:
            return True
        return self.feed.waiting(slot)

    def _step(self, plan: StepPlan) -> list[Event]:
        """Decode ``plan`` (its media first), sample its outputs: the step's events."""
        decoded_ns = self.times.decode_ns
        # A riding media row is decoded with the streams' rows in the feed's call (a failure there
        # ends only the media's request, and the streams' rows go again without it).
        ridden: list[tuple[Sequence[int], Sequence[int], int]] = []
        if plan.media:  # no callback made for the steps without media

            def ride(embd: np.ndarray, positions: np.ndarray, seq_id: int) -> None:
                ridden.append(self._ride(plan, embd, positions, seq_id))

            # Out at once: their slots are freed already, so were the streams' call to fail next,
            # the loop's ``fail_all`` would no longer know of them and they would never end.
            self.outbox.emit(self.feed.decode(plan, self.ctx, self.scheduler.fail, self._media_call, ride))
        if ridden:
            rows, picks, n_logits = ridden[0]
        else:
            rows, picks, n_logits = self._decode(plan) if len(plan) else ((), (), 0)  # none: a media piece alone
        t1 = time.perf_counter_ns()
        if log.isEnabledFor(logging.DEBUG):
            log_step(plan, self.times.decode_ns - decoded_ns, self.budget.stall_ns)
        if len(plan) == 0:
            return self.scheduler.update(plan, ())
        sampled = self.sampling.sample(plan, rows, picks, n_logits)
        times = self.times
        times.sample_ns += time.perf_counter_ns() - t1
        times.steps += 1
        logprobs = self.sampling.logprobs(plan, sampled, picks, n_logits)
        events = self.scheduler.update(plan, sampled)
        if logprobs:
            events = [replace(e, logprob=logprobs[e.request_id]) if e.request_id in logprobs else e for e in events]
        return events

    def _media_call(self, rows: int, ns: int) -> None:
        """A media piece's decode: timed as a prompt call (rows without logits) for the budget."""
        self.times.decode_ns += ns
        self.budget.observe(rows, True, ns)

    def _ride(
        self, plan: StepPlan, embd: np.ndarray, positions: np.ndarray, seq_id: int
    ) -> tuple[Sequence[int], Sequence[int], int]:
        """One call for the step's generating streams and the media row riding with them
        (``MediaPiece.rides``: ``embd``, ``positions`` into ``seq_id``): the streams' tokens as
        their embedding rows, every row in sequence order (one ubatch where the ids run on). Each
        output's batch row, its logits row, and the number of logits rows."""
        assert self.token_rows is not None
        at = bisect.bisect_left(plan.seq_ids, seq_id)  # the plan's rows are in sequence order
        rows = np.insert(self.token_rows.rows(plan.tokens), at, embd, axis=0)
        text = np.tile(np.asarray(plan.positions, dtype=np.int32), (len(positions), 1))
        if len(positions) == 4:  # M-RoPE: a token's t, y and x are its position, z is 0 (as llama.cpp makes them)
            text[3] = 0
        outputs = [row + (row >= at) for _, row in plan.outputs]
        seq_ids = [*plan.seq_ids[:at], seq_id, *plan.seq_ids[at:]]
        t0 = time.perf_counter_ns()
        self.ctx.decode_embeddings(rows, np.insert(text, at, positions[:, 0], axis=1), seq_ids, outputs)
        # Not a cost for the budget: as a decode call of one more row it would stand for one more
        # stream's step, which costs no host lookup of rows.
        self.times.decode_ns += time.perf_counter_ns() - t0
        return outputs, list(range(len(outputs))), len(outputs)

    def _decode(self, plan: StepPlan) -> tuple[Sequence[int], Sequence[int], int]:
        """Decode ``plan``'s batch, in two calls where a prompt that ends in this step is
        reproducible (``SamplingParams.reproducible``, or the deterministic mode): the prompt rows
        without logits first, then the rows whose logits are sampled (each generating slot's token
        and the last token of each prompt that ends here). Such a prompt's last token is so
        computed beside decode rows only, as it is when the rest of its prompt comes from a cache:
        llama.cpp's CPU kernels round a token inside a chunk differently from one alone, and a
        re-sent request then answers as it did cold. An unseeded draw is not the same twice
        anyway, and is spared the second call's cost (13-47 ms on a CPU for a lone prompt). Returns,
        for the last call: each output's batch row, its logits row, and the number of logits rows."""
        heads = [row for _, row in plan.outputs]  # ascending: rows are laid out in slot order
        if len(heads) == len(plan) or not self._ends_reproducible(plan):  # one call, no copies
            return self._call(plan.tokens, plan.positions, plan.seq_ids, heads)
        wanted = set(heads)
        body = [i for i in range(len(plan)) if i not in wanted]
        self._call(*_rows(plan, body), [])
        return self._call(*_rows(plan, heads), list(range(len(heads)))) if heads else ((), (), 0)

    def _ends_reproducible(self, plan: StepPlan) -> bool:
        """Whether a prompt that ends in ``plan`` must answer as it would cached (the mode, or a
        reproducible request): a prefilling slot's output row is its prompt's last token. Asked
        only of steps with prompt rows, not of every decode step."""
        if self.invariant:
            return True
        ending = {slot for slot, _ in plan.prefills}
        return any(s in ending and s.request is not None and s.request.sampling.reproducible for s, _ in plan.outputs)

    def _call(
        self, tokens: list[int], positions: list[int], seq_ids: list[int], outputs: list[int]
    ) -> tuple[Sequence[int], Sequence[int], int]:
        """One ``llama_decode`` of these rows (shaped in the deterministic mode, ``invariance``):
        each output's batch row, its logits row, and the number of logits rows."""
        rows, picks, n_logits, pads = outputs, list(range(len(outputs))), len(outputs), []
        # Throw-away rows: the deterministic mode's (``invariance``), or a gap's (``gap_fill``).
        fills = {} if self.invariant else self._gap_pads(seq_ids)
        if self.invariant or fills:
            shaped = (
                shape(tokens, positions, seq_ids, outputs, self.ctx.n_ctx_seq)
                if self.invariant
                else fill(tokens, positions, seq_ids, outputs, fills)
            )
            self.batch.fill(shaped.tokens, shaped.positions, shaped.seq_ids, shaped.outputs)
            rows, picks, n_logits, pads = shaped.rows, shaped.logits, len(shaped.outputs), shaped.pads
        else:
            self.batch.fill(tokens, positions, seq_ids, outputs)
        t0 = time.perf_counter_ns()
        try:
            self.ctx.decode(self.batch)
        except DecodeError as exc:
            if self.invariant or not pads or exc.rc != 1:
                raise
            # No cell for a gap's row after all (a slot's count was short): llama.cpp put back what
            # the failed fit took, and the call goes again without them rather than fail every stream.
            log.warning("a throw-away row found no KV cell (%s): the step is decoded without them", exc)
            self._remove(pads)
            pads, rows = [], outputs
            self.batch.fill(tokens, positions, seq_ids, outputs)
            self.ctx.decode(self.batch)
        finally:
            self._remove(pads)
        ns = time.perf_counter_ns() - t0
        self.times.decode_ns += ns
        self.budget.observe(len(tokens), len(outputs) < len(tokens), ns)
        return rows, picks, n_logits

    def _remove(self, pads: list[tuple[int, int]]) -> None:
        """Take the throw-away rows (the mode's, a gap's) out of the KV again. A memory that cannot
        drop them fails the step: the loop then clears the context, the one state known to be whole."""
        for seq_id, pos in pads:
            if not self.ctx.seq_rm(seq_id, pos):
                raise EngineError(f"a throw-away row at position {pos} of sequence {seq_id} could not be removed")

    def _gap_pads(self, seq_ids: list[int]) -> dict[int, int]:
        """The idle sequences whose throw-away row closes a gap between a decode call's sequences
        (``gap_fill.chosen``), each with the position after its last. A sequence's cells are the
        larger of what llama.cpp holds by position and what its slot counts (an M-RoPE image
        takes more cells than positions; a prompt chunk of this step's first call is not counted
        by its slot yet)."""
        if not self.gap_fill or len(seq_ids) < 2 or not one_row_each(seq_ids):
            return {}
        slots, ctx = self.scheduler.slots, self.ctx
        nxt: dict[int, int] = {}

        def cells(s: int) -> int:
            if s not in nxt:
                nxt[s] = ctx.seq_pos_max(s) + 1
            return max(nxt[s], slots[s].n_past + slots[s].media_rows)

        def room(s: int) -> bool:
            return cells(s) + 1 < slots[s].n_ctx

        return {s: nxt[s] for gap in chosen(seq_ids, self.gap_fill, cells, room) for s in gap}
