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

from .blocks import BLOCK
from .compaction import closing_move, worth_moving
from .disk_cache import DiskCache, Read
from .frontdoor import Occupancy
from .media import Media
from .prefix import Copy, KvOp, Move, PrefixReuse, PrefixStats, Restore, Save, Trim, copied_cells
from .prompt_cache import PromptCache
from .prompt_rows import MediaPiece, PromptRows
from .request import Event, FinishReason, Request
from .slot import Slot, SlotState, now_ns
from .step_budget import StepBudget

# How many waiting requests admission looks at when it prefers one whose prefix is cached.
ADMIT_WINDOW = 8
# A request is passed over for better-cached ones at most this many times.
MAX_PASSED_OVER = 4


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
    ``budget``, ``embeddings``, ``max_rows`` and ``ride`` are for ``rows``, which chooses each
    step's prompt and media rows (``prompt_rows.PromptRows``) for ``plan`` to lay out.
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
        self.rows = PromptRows(n_batch, self.budget, embeddings, max_rows, ride)
        # Whether a generating stream moves into a gap between the batch's sequences (``compaction``),
        # and how many have (the engine's summary at unload).
        self.compact = compact
        self.moves = 0
        self._piece = piece
        self._is_eog = is_eog
        self._paused = paused
        self._clock = clock
        self._by_request: dict[int, Slot] = {}
        self._enqueued: dict[int, int] = {}  # request id -> when it joined ``waiting``
        self._passed: dict[int, int] = {}
        self._pending: StepPlan | None = None

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
        rows = self.rows.step(prefilling, len(generating), len(self.waiting))
        if rows.held:
            generating = set()  # they hold for this step
        plan.media += rows.media
        chunks = rows.chunks
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
