"""The token-level batching policy, pure: no llama.cpp, no threads, no clock of its own.

A step has two phases. ``admit`` puts waiting requests into free slots, in arrival order
(a request whose prefix is cached may go first, a bounded number of times), and asks the
prefix-reuse component (``prefix.PrefixReuse``) where each prompt's start comes from and which
KV operations bring it (save, copy, restore, trim); the runner performs them in order and
reports any that failed. ``plan`` then lays out the batch: one token for every generating slot and prompt
chunks of admitted ones, rows in sequence-id order, and at most one piece of a media item's
embeddings, decoded in a call of its own, or one row riding in the streams' call (``media_feed``).
The runner decodes it, samples the rows marked for output, and hands the tokens back to ``update``.

Doing less work than anyone else is the point of this policy: a prompt's start is taken from
wherever its KV already is (the slot's own cache, any other slot, busy or idle, or the host
cache), and requests that arrive together sharing a start no slot holds yet wait for one of
them to compute it (``SlotState.WAITING``), then copy it.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from .blocks import BLOCK
from .compaction import closing_move, worth_moving
from .disk_cache import DiskCache, Read
from .frontdoor import Occupancy
from .media import Media
from .prefix import Copy, KvOp, Move, PrefixReuse, PrefixStats, Restore, Save, Trim, copied_cells
from .prompt_cache import PromptCache
from .request import Event, FinishReason, Request
from .slot import Slot, SlotState, now_ns
from .step_budget import StepBudget, oldest_share

# How many waiting requests admission looks at when it prefers one whose prefix is cached.
ADMIT_WINDOW = 8
# A request is passed over for better-cached ones at most this many times.
MAX_PASSED_OVER = 4
# Generating streams hold while a burst of prompts is read (``HoldRun``) for at most the rows of this
# many full-width steps, however narrow its steps (``StepBudget.burst``); then they get a step
# before the next run.
HOLD_STEPS = 4


class MediaPiece(NamedTuple):
    """Rows ``rows`` of a media item's embeddings (``embd``, all of its rows) to decode into
    ``slot``'s sequence in this step, in a call of their own (``media_feed``), or, one row that
    ``rides``, in the generating streams' call, their tokens as embeddings (``Scheduler.ride``)."""

    slot: Slot
    item: Media
    embd: object
    rows: range
    rides: bool = False


def shares(
    prefilling: list[Slot], budget: int, cap: int, media: MediaPiece | None, whole: Sequence[Slot] = ()
) -> dict[Slot, int]:
    """Prompt rows per prefilling slot (in arrival order) within ``budget``, at most ``cap`` each:
    the ``whole`` prompts' rest first, then prompts with the fewest tokens left first (a short chat
    is not stuck behind a long document; among equals, arrival order), with a quarter of what is
    left kept for the oldest prompt (none starves). ``media``'s slot takes part, the rows left in its
    item as its room: an image or an audio window shares a step's prompt rows with other prompts'
    text as text does."""
    text = [s for s in prefilling if s.media_due() is None or (media is not None and s is media.slot)]
    if not text:
        return {}
    free = {s: s.chunk_room(cap) if media is None or s is not media.slot else min(len(media.rows), cap) for s in text}
    granted = dict.fromkeys(text, 0)

    def grant(slot: Slot, rows: int) -> None:
        nonlocal budget
        n = max(0, min(rows, free[slot] - granted[slot], budget))
        granted[slot] += n
        budget -= n

    for slot in whole:
        grant(slot, budget)
    oldest, shortest = text[0], sorted(text, key=lambda s: s.prompt_left)  # stable: arrival among equals
    reserve = min(budget // 4, free[oldest]) if len(text) > 1 else 0
    budget -= reserve
    for slot in shortest:
        grant(slot, budget)
    budget += reserve
    for slot in (oldest, *shortest):  # the oldest's quarter, then what it could not take
        grant(slot, budget)
    return {slot: n for slot, n in granted.items() if n}


def piece_rows(left: int, share: int, cap: int) -> int:
    """Rows of the next piece of a media item with ``left`` rows to decode, given a ``share`` of
    the step's prompt rows: at most ``cap`` (and the share), but never a lone row where more are
    left, nor a lone row left behind (a one-row call takes other CPU kernels than the rest, which
    the deterministic mode avoids; and a call's fixed cost is not worth one row)."""
    n = max(min(left, share, cap), min(left, 2))
    if left - n == 1:
        n = n - 1 if n > 2 else left
    return n


def readable_whole(prefilling: list[Slot], room: int, max_rows: int | None) -> list[Slot]:
    """The prompts one chunk can hold to their end (text only), shortest first."""
    cap = room if max_rows is None else min(room, max_rows)
    return sorted((s for s in prefilling if s.chunk_room(cap) == s.prompt_left), key=lambda s: s.prompt_left)


def whole_prompts(
    prefilling: list[Slot], budget: StepBudget, n_generating: int, room: int, max_rows: int | None
) -> list[Slot]:
    """The prompts read whole in a step beside ``n_generating`` streams, shortest first
    (``StepBudget.whole``)."""
    text = readable_whole(prefilling, room, max_rows)
    return text[: budget.whole(n_generating, [s.prompt_left for s in text], room)]


def requests(slots: Iterable[Slot]) -> set[int]:
    """The ids of the requests in ``slots``."""
    return {s.request.id for s in slots if s.request is not None}


class HoldRun:
    """Whether a step reads prompts alone while the generating streams hold.

    A burst of arrivals (more prompts in slots waiting for their first token, each of at most a
    batch, than streams running) is read in a run of steps that nothing else shares (at the full
    width, or a few prompts a step where one step would read them all: ``StepBudget.burst``), at
    most the rows of ``HOLD_STEPS`` full-width steps, and each stream waits once for the whole run
    instead of at every step of it. A stream's inter-token gaps then have one long one per burst
    rather than many (a trickle of prompt rows beside the streams stretched a third of the gaps of
    32 distinct clients to 2-3 steps), and the burst's prompts come without decode calls beside
    them. The run goes on while a prompt it read is unfinished (arrivals meanwhile join it); after
    it the streams get a step before the next. A prompt longer than a batch never starts a run: a
    40k-token document is read within the step budget and the streams keep going.
    """

    def __init__(self, n_batch: int, most: Callable[[], int]) -> None:
        """``most``: the rows a run may read, asked only while one goes on (it searches the
        measured costs, which a step with no run need not pay)."""
        self.n_batch = n_batch
        self.most = most
        self.steps = 0  # steps of the current run; -1: one has just ended
        self.rows = 0  # prompt rows the current run read
        self.members: set[int] = set()  # the requests it read (a slot may take another meanwhile)

    def holds(self, prefilling: list[Slot], n_generating: int) -> bool:
        """Whether this step, with these prompts and ``n_generating`` streams, is a run's."""
        if not n_generating or not prefilling:
            self.steps, self.rows, self.members = 0, 0, set()
            return False
        if self.steps < 0:  # the step after a run was the streams'
            self.steps = 0
        elif self.steps and (self.rows >= self.most() or self.members.isdisjoint(requests(prefilling))):
            self.steps, self.rows, self.members = -1, 0, set()  # over: the streams get a step before the next
            return False
        if not self.steps and sum(s.prompt_left <= self.n_batch for s in prefilling) <= n_generating:
            return False
        self.steps += 1
        return True

    def read(self, prefilling: list[Slot], rows: int) -> None:
        """The step held and read ``rows`` prompt rows: the short ones of ``prefilling`` belong to
        the run (a long document read beside them does not keep it going)."""
        self.members |= requests(s for s in prefilling if s.prompt_left <= self.n_batch)
        self.rows += rows

    def cancel(self) -> None:
        """Nothing could be read in the step ``holds`` granted (media being encoded): no run."""
        self.steps, self.rows, self.members = 0, 0, set()


@dataclass
class StepPlan:
    """One step: KV operations to perform first, then one llama.cpp batch as parallel arrays."""

    tokens: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    seq_ids: list[int] = field(default_factory=list)
    # (slot, row in the batch) for every row whose logits are sampled after the decode.
    outputs: list[tuple[Slot, int]] = field(default_factory=list)
    # (slot, number of prompt tokens in this batch) for slots still prefilling.
    prefills: list[tuple[Slot, int]] = field(default_factory=list)
    # KV operations (prefix.KvOp), performed in this order before the batch is laid out.
    ops: list[KvOp] = field(default_factory=list)
    # Slots that took a new request in this step (the runner sets up their samplers).
    admitted: list[Slot] = field(default_factory=list)
    # A piece of a media item (image or audio window) to decode into its slot before the batch.
    media: list[MediaPiece] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.tokens)

    # Views of ``ops`` by kind (tests and logs read them; the runner performs ``ops`` in order).
    @property
    def saves(self) -> list[Save]:
        return [op for op in self.ops if isinstance(op, Save)]

    @property
    def copies(self) -> list[Copy]:
        return [op for op in self.ops if isinstance(op, Copy)]

    @property
    def restores(self) -> list[Restore]:
        return [op for op in self.ops if isinstance(op, Restore)]

    @property
    def trims(self) -> list[Trim]:
        return [op for op in self.ops if isinstance(op, Trim)]

    def add(self, slot: Slot, tokens: Sequence[int], output: bool) -> None:
        start = slot.pos
        n = len(tokens)
        self.tokens.extend(tokens)
        self.positions.extend(range(start, start + n))
        self.seq_ids.extend([slot.seq_id] * n)
        if output:
            self.outputs.append((slot, len(self.tokens) - 1))


class Scheduler:
    """Admits, plans and advances requests over a fixed pool of slots.

    ``piece`` and ``is_eog`` come from the model's vocabulary; ``paused`` says whether a
    request's reader is too far behind (its slot then skips steps instead of blocking the
    engine). ``cache`` is the host-RAM prompt cache, ``disk`` the disk one (None: none). ``share`` allows copying
    KV between sequences and reusing part of one; recurrent models cannot do either.
    ``windowed``: the model slides a window over some layers (``PrefixReuse``).
    ``budget`` says how many prompt tokens a step may carry beside generating slots, so they
    keep their pace (``step_budget.StepBudget``; the runner measures its costs). ``embeddings``
    gives a media item's encoded embeddings, or None while they are being encoded (the slot then
    waits at that item). ``max_rows`` caps one prompt's tokens in a step (the deterministic mode:
    ``invariance.MAX_ROWS``). ``ride``: a media piece of one row may share the generating streams'
    call (``binding.token_rows``; not in the deterministic mode, whose calls have fixed shapes).
    """

    def __init__(
        self,
        n_slots: int,
        n_ctx_slot: int,
        n_batch: int,
        piece: Callable[[int], bytes],
        is_eog: Callable[[int], bool],
        paused: Callable[[int], bool] = lambda request_id: False,
        clock: Callable[[], int] = now_ns,
        *,
        cache: PromptCache | None = None,
        disk: DiskCache | None = None,
        share: bool = True,
        windowed: bool = False,
        budget: StepBudget | None = None,
        embeddings: Callable[[Request, Media], object | None] = lambda request, item: None,
        max_rows: int | None = None,
        ride: bool = False,
        compact: bool = False,
    ) -> None:
        self.slots = [Slot(i, n_ctx_slot) for i in range(n_slots)]
        assert n_batch >= n_slots, "every generating slot needs room in each batch"
        self.n_batch = n_batch
        self.waiting: deque[Request] = deque()
        self.prefix = PrefixReuse(self.slots, cache, share, disk, windowed)
        self.budget = budget if budget is not None else StepBudget()
        self.max_rows = max_rows
        self.ride = ride
        # Whether a generating stream moves into a gap between the batch's sequences (``compaction``),
        # and how many have (the engine's summary at unload).
        self.compact = compact
        self.moves = 0
        self._piece = piece
        self._is_eog = is_eog
        self._paused = paused
        self._embeddings = embeddings
        self._clock = clock
        self._by_request: dict[int, Slot] = {}
        self._enqueued: dict[int, int] = {}  # request id -> when it joined ``waiting``
        self._passed: dict[int, int] = {}
        self._pending: StepPlan | None = None
        self._hold = HoldRun(n_batch, lambda: HOLD_STEPS * self.budget.full_width(n_batch))

    @property
    def stats(self) -> PrefixStats:
        return self.prefix.stats

    def has_work(self) -> bool:
        return bool(self.waiting) or bool(self._by_request)

    def running_ids(self) -> list[int]:
        return list(self._by_request)

    def add(self, request: Request) -> None:
        self._enqueued[request.id] = self._clock()
        self.waiting.append(request)

    def occupancy(self) -> Occupancy:
        """Requests in slots and waiting for one, and KV cells the running ones hold.

        Read from other threads (a metrics scrape) without a lock: it only takes lengths and a
        snapshot of the running slots, each of them atomic under the GIL.
        """
        running = tuple(self._by_request.values())
        return Occupancy(
            running=len(running),
            waiting=len(self.waiting),
            cells_used=sum(slot.n_past for slot in running),
            cells_total=sum(slot.n_ctx for slot in self.slots),
        )

    def abort(self, request_ids: Iterable[int]) -> list[Event]:
        """Drop requests wherever they are; running ones free their slot now."""
        events: list[Event] = []
        ids = set(request_ids)
        if not ids:
            return events
        now = self._clock()
        for rid in ids:
            slot = self._by_request.pop(rid, None)
            if slot is not None:
                events.append(slot.abort(now))
        if any(r.id in ids for r in self.waiting):
            kept: deque[Request] = deque()
            for r in self.waiting:
                if r.id in ids:
                    events.append(Event(r.id, "", (), FinishReason.CANCELED))
                    self._passed.pop(r.id, None)
                    self._enqueued.pop(r.id, None)
                else:
                    kept.append(r)
            self.waiting = kept
        return events

    def fail_all(self, message: str) -> list[Event]:
        """End every running request with an error and forget every slot's cached prefix:
        the caller clears the KV cache, whose state after a failed decode is unknown."""
        now = self._clock()
        events = [slot.fail(message, now) for slot in self._by_request.values()]
        self._by_request.clear()
        for slot in self.slots:
            slot.forget()
        self.prefix.cleared()
        return events

    def fail(self, slot: Slot, message: str) -> Event:
        """End ``slot``'s request with an error (its media item could not be encoded or decoded); the
        caller clears the sequence, whose KV is then unknown."""
        assert slot.request is not None
        del self._by_request[slot.request.id]
        slot.forget()
        return slot.fail(message, self._clock())

    # -- phase 1: admission and the KV operations it takes ------------------------------

    def admit(self) -> StepPlan:
        """Admit what can start; the returned plan's KV operations must be performed next."""
        plan = StepPlan()
        now = self._clock()
        sources: set[int] = set()  # sequences read by a copy in this step: they must not change
        plan.ops += self.prefix.resolve_waits(sources)
        while self.waiting:
            idle = [s for s in self.slots if not s.busy and s.seq_id not in sources]
            if not idle:
                break
            request = self._next_request()
            self._place(request, idle, plan, now, sources)
        if self.compact:
            self._close_gap(plan, sources)
        self._pending = plan
        return plan

    def _close_gap(self, plan: StepPlan, sources: set[int]) -> None:
        """Move one generating stream into a gap between the batch's sequences, if one can close
        it (``compaction``): not a sequence this step's other operations read or write, nor one a
        waiting slot counts on, nor a stream that is nearly done or whose reader is behind."""
        rows = {s.seq_id for s in self.slots if s.state is SlotState.PREFILL or self._stepping(s)}
        if len(rows) < 2 or max(rows) - min(rows) + 1 == len(rows):  # every step: cheap when no gap
            return
        taken = sources | {s.seq_id for s in plan.admitted}
        taken |= {s.wait.source.seq_id for s in self.slots if s.wait is not None and s.wait.source is not None}
        movable = [s.seq_id for s in self.slots if s.seq_id not in taken and self._movable(s)]
        prefix = self.prefix
        idle = sorted(
            (s for s in self.slots if not s.busy and s.seq_id not in taken),
            key=lambda s: (bool(s.cached), s.seq_id),  # an empty one first: nothing to save
        )
        # A row's span counts the cell this step's token takes (the sequence's next one).
        move = closing_move(rows, movable, [s.seq_id for s in idle], lambda seq_id: len(self.slots[seq_id].cached) + 1)
        if move is None:
            return
        src, dst = move
        tokens = prefix.to_save(self.slots[dst], 0)
        if tokens:
            plan.ops.append(Save(dst, tokens))
        prefix.reused(self.slots[dst], 0)
        plan.ops.append(Move(src, dst))

    def _stepping(self, slot: Slot) -> bool:
        """Whether ``slot`` generates in this step (its reader is not behind)."""
        return slot.state is SlotState.GENERATING and slot.request is not None and not self._paused(slot.request.id)

    def _movable(self, slot: Slot) -> bool:
        """Whether moving ``slot``'s stream pays: it generates now and has enough tokens left."""
        request = slot.request
        if request is None or not self._stepping(slot):
            return False
        left = slot.limit - slot.n_past
        if request.num_predict >= 0:
            left = min(left, request.num_predict - slot.n_generated)
        return worth_moving(left, copied_cells(len(slot.cached), slot.n_ctx))

    def moved(self, src: int, dst: int) -> None:
        """Sequence ``dst`` holds ``src``'s KV now (a ``Move`` was done): ``src``'s stream goes on there."""
        source, target = self.slots[src], self.slots[dst]
        request = source.request
        assert request is not None
        source.hand_over(target)
        self._by_request[request.id] = target
        self.moves += 1

    def loaded(self, request_id: int, state: Read | None) -> None:
        """A disk read the runner did for ``request_id`` is done (None: a miss); ``admit`` uses it."""
        self.prefix.loaded(request_id, state)

    def loading(self, request_id: int) -> bool:
        """Whether ``request_id`` waits for a disk read (nothing of it to decode until then)."""
        return self.prefix.loading(request_id)

    def lost_prefix(self, seq_id: int) -> None:
        """A KV operation of this step failed for ``seq_id``: its slot computes its prompt anew."""
        self.prefix.lost(self.slots[seq_id])

    def kept_prefix(self, seq_id: int, n: int) -> None:
        """``seq_id`` holds only its prompt's first ``n`` tokens (a sliding-window checkpoint was
        restored below the planned cut): its slot computes the rest."""
        self.prefix.cut_back(self.slots[seq_id], n)

    def _next_request(self) -> Request:
        """FIFO, except that a request whose prefix is cached may go first, a bounded number of times."""
        head = self.waiting[0]
        if len(self.waiting) == 1 or self._passed.get(head.id, 0) >= MAX_PASSED_OVER:
            chosen = 0
        else:
            window = list(itertools.islice(self.waiting, ADMIT_WINDOW))
            scores = [self.prefix.best_now(r).n for r in window]
            best = max(scores)
            # Only a clear gain (a block or more) is worth passing the head over.
            chosen = 0 if best - scores[0] < BLOCK else scores.index(best)
        for skipped in itertools.islice(self.waiting, chosen):
            self._passed[skipped.id] = self._passed.get(skipped.id, 0) + 1
        request = self.waiting[chosen]
        del self.waiting[chosen]
        self._passed.pop(request.id, None)
        return request

    def _place(self, request: Request, idle: list[Slot], plan: StepPlan, now: int, sources: set[int]) -> None:
        prefix = self.prefix
        spare = not self._by_request
        # llama.cpp cuts a split-KV batch at gaps in the active ids (``split_equal`` takes a run of
        # consecutive ids), and each cut re-reads the weights: decoding sequences 0, 3, 6 of the
        # real 0.5B took 61 ms a step against 44 for 0, 1, 2 (0, 2, 4, 6: 81 against 48), for as
        # long as they generate. So beside running requests a slot next to one goes first, even
        # where the request's own KV sits in a lone slot: ``prefix.find`` then copies it over,
        # once. A distinct-prompt load spread over free slots had run 12% slower.
        pool = idle
        if not spare:
            busy = {s.seq_id for s in self.slots if s.busy}
            pool = [s for s in idle if busy & {s.seq_id - 1, s.seq_id + 1}] or idle
        own = {s.seq_id: prefix.own(s, request) for s in pool}
        # The free slot whose own KV goes furthest; among equals the lowest id (no gap forms). With
        # nothing running, none can: then a slot whose content need not be saved first (empty, or
        # held elsewhere) goes before a long prompt that would be serialised.
        best_own = max(own.values())
        ties = [s for s in pool if own[s.seq_id] == best_own]
        dst = min(ties, key=lambda s: (spare and bool(prefix.to_save(s, best_own)), s.seq_id))
        exclude = frozenset(s.seq_id for s in plan.admitted) | {dst.seq_id}
        kept, source = prefix.find(request, dst, own[dst.seq_id], exclude)
        tokens = prefix.to_save(dst, kept)
        if tokens:
            plan.ops.append(Save(dst.seq_id, tokens))
        prefix.reused(dst, kept)
        dst.assign(request, kept, now, now - self._enqueued.pop(request.id, now))
        self._by_request[request.id] = dst
        plan.admitted.append(dst)
        plan.ops += prefix.take(dst, kept, source)
        if source.slot is not None and not source.pending:
            sources.add(source.slot.seq_id)

    # -- phase 2: the batch -------------------------------------------------------------

    def plan(self) -> StepPlan:
        """Lay out the step's batch (after ``admit`` and its KV operations): a token for each
        generating slot, then prompt chunks and media within the step budget."""
        plan = self._pending if self._pending is not None else StepPlan()
        self._pending = None
        generating = {
            s
            for s in self.slots
            if s.state is SlotState.GENERATING and not self._paused(s.request.id)  # type: ignore[union-attr]
        }
        prefilling = sorted(
            (s for s in self.slots if s.state is SlotState.PREFILL),
            key=lambda s: s.request.arrival_ns,  # type: ignore[union-attr]
        )
        chunks: dict[int, list[int]] = {}
        if self._hold.holds(prefilling, len(generating)):
            chunks = self._chunks(prefilling, 0, self.n_batch, plan, held=len(generating))
            if chunks or plan.media:
                generating = set()  # they hold for this step
                self._hold.read(prefilling, sum(map(len, chunks.values())) + sum(len(m.rows) for m in plan.media))
            else:  # nothing to read yet (its media is being encoded): the streams go on
                self._hold.cancel()
        if prefilling and not (chunks or plan.media):  # no hold
            chunks = self._chunks(prefilling, len(generating), self.n_batch - len(generating), plan)
        # Rows in sequence-id order: llama.cpp cuts a split-KV batch into ubatches along runs of
        # consecutive ids, and any other order costs extra passes over the weights.
        for slot in self.slots:
            if slot in generating:
                plan.add(slot, (slot.last_token,), output=True)
            elif slot.seq_id in chunks:
                chunk = chunks[slot.seq_id]
                done = slot.n_past + len(chunk) == len(slot.request.prompt)  # type: ignore[union-attr]
                plan.add(slot, chunk, output=done)
                plan.prefills.append((slot, len(chunk)))
        return plan

    def _chunks(
        self, prefilling: list[Slot], n_generating: int, room: int, plan: StepPlan, held: int = 0
    ) -> dict[int, list[int]]:
        """The step's prompt chunks by sequence (and its media piece, into ``plan``), within the step
        budget: the full width (``StepBudget.full_width``), or a burst's (``_burst``), when more
        requests wait for their first token than streams run; ``held``: streams holding for it."""
        crowd = len(prefilling) + len(self.waiting) > n_generating
        whole = [] if crowd else whole_prompts(prefilling, self.budget, n_generating, room, self.max_rows)
        extra = sum(s.prompt_left for s in whole)
        if crowd:
            budget = self.budget.full_width(room)
        else:
            budget = min(room, self.budget.prefill_rows(n_generating, room) + extra)
        media = self._media(prefilling, budget)
        if crowd and media is None:
            whole, budget = self._burst(prefilling, room, budget, held + n_generating + len(self.waiting))
        if media is not None and not media.item.whole and not crowd:  # a piece: the target without its floor
            budget = min(room, self.budget.prefill_rows(n_generating, room, media=True) + extra)
        if media is not None and media.item.whole:  # one piece, out of the budget first
            plan.media.append(media)
            budget = max(0, budget - len(media.rows))
            media = None
        chunks = {}
        cap = room if self.max_rows is None else min(room, self.max_rows)
        granted = shares(prefilling, budget, cap, media, whole)
        for slot, rows in granted.items():
            if media is not None and slot is media.slot:
                first = slot.media_rows
                # The budget leaves a row at most: it rides in the streams' call, alone in the step.
                rides = rows == 1 and self.ride and n_generating > 0 and len(granted) == 1
                n = 1 if rides else piece_rows(media.item.n_tokens - first, rows, self._media_cap())
                plan.media.append(media._replace(rows=range(first, first + n), rides=rides))
            else:
                chunks[slot.seq_id] = slot.prompt_chunk(rows)
        return chunks

    def _burst(self, prefilling: list[Slot], room: int, width: int, others: int) -> tuple[list[Slot], int]:
        """A crowd's step without media, with ``others`` (streams, queued requests) waiting for the
        whole read: the short prompts it reads whole where that is sooner than the full width
        filled (``StepBudget.burst``) and its rows, the oldest prompt taking the longest one's
        place where it is short too (none starves, none is cut), else (a long document, say) its
        share (``oldest_share``). Else none and the full ``width``, shared as any step's prompt
        rows are (``shares``): also where another prompt's chunk ends short of its end (a shared
        start its followers wait for, a kept length), which a narrow step would leave waiting."""
        text = readable_whole(prefilling, room, self.max_rows)
        whole = set(text)
        oldest = prefilling[0]
        if any(s is not oldest and s not in whole and s.media_due() is None for s in prefilling):
            return [], width
        share = oldest.media_due() is None and oldest not in whole
        burst = text[: self.budget.burst([s.prompt_left for s in text], room, others, share)]
        if not burst:
            return [], width
        rows = sum(s.prompt_left for s in burst)
        if oldest in burst or oldest.media_due() is not None:
            return burst, rows
        if oldest in whole and (swapped := rows - burst[-1].prompt_left + oldest.prompt_left) <= width:
            return [*burst[:-1], oldest], swapped  # short, passed over by shorter ones: whole, not cut
        if rows + oldest_share(rows) > width:  # the oldest is short but not among them: no room for its share
            return [], width
        return [*burst, oldest], rows + oldest_share(rows)

    def _media(self, prefilling: list[Slot], budget: int) -> MediaPiece | None:
        """The media item that may have a piece decoded in this step (one a step, in a call of its
        own): the oldest prompt's whose item is encoded, its remaining rows. An item whose tokens
        attend both ways (``whole``: Gemma 3's images) is one piece whatever its size: the oldest
        prompt's always, another's only within ``budget``. Any other item's piece is its share of
        the budget, as a prompt's text would get (``shares``)."""
        for i, slot in enumerate(prefilling):
            item = slot.media_due()
            if item is None or (i and item.whole and item.n_tokens > budget):
                continue
            embd = self._embeddings(slot.request, item)  # type: ignore[arg-type]
            if embd is not None:
                return MediaPiece(slot, item, embd, range(slot.media_rows, item.n_tokens))
        return None

    def _media_cap(self) -> int:
        """The most rows of a media piece: a batch (its call is its own), 63 in the deterministic mode."""
        return self.n_batch if self.max_rows is None else min(self.n_batch, self.max_rows)

    def schedule(self) -> StepPlan:
        """Both phases at once, for callers with no KV operations to perform in between."""
        self.admit()
        return self.plan()

    def update(self, plan: StepPlan, sampled: Sequence[int]) -> list[Event]:
        """Apply a decoded step: ``sampled[i]`` is the token drawn for ``plan.outputs[i]``."""
        now = self._clock()
        for slot, n in plan.prefills:
            slot.advance_prompt(n)
        for piece in plan.media:
            piece.slot.advance_media(piece.item, len(piece.rows))
        events: list[Event] = []
        for (slot, _row), token in zip(plan.outputs, sampled, strict=True):
            request = slot.request
            if request is None:
                continue  # aborted while the step ran
            event = slot.accept_token(token, self._piece(token), self._is_eog(token), now)
            if event.finish is not None:
                del self._by_request[request.id]
            events.append(event)
        return events
