"""Which prompt and media rows a step carries beside its generating streams: the step budget's
policy over the slots reading their prompts. ``StepBudget`` says how many rows a step may take (its
measured costs); this says whose: stall-free chunks beside the streams (whole short prompts, then
the fewest tokens left first, a quarter kept for the oldest), a crowd's burst read whole or at the
full width while the streams hold (``HoldRun``), and media items in pieces, one a step. Pure, as
the scheduler that owns it (``Scheduler.plan`` lays the rows out): no llama.cpp, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from .media import Media
from .request import Request
from .slot import Slot
from .step_budget import StepBudget, oldest_share

# Generating streams hold while a burst of prompts is read (``HoldRun``) for at most the rows of this
# many full-width steps, however narrow its steps (``StepBudget.burst``); then they get a step
# before the next run.
HOLD_STEPS = 4


class MediaPiece(NamedTuple):
    """Rows ``rows`` of a media item's embeddings (``embd``, all of its rows) to decode into
    ``slot``'s sequence in this step, in a call of their own (``media_feed``), or, one row that
    ``rides``, in the generating streams' call, their tokens as embeddings (``PromptRows.ride``)."""

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


class StepRows(NamedTuple):
    """A step's prompt rows: chunks by sequence id, media pieces, and whether the generating streams
    hold for it (a ``HoldRun``'s step: they are left out of its batch)."""

    chunks: dict[int, list[int]]
    media: list[MediaPiece]
    held: bool = False


class PromptRows:
    """The prompt and media rows of each step, as the module docstring says.

    ``budget`` is the step budget (``StepBudget``; the runner measures its costs). ``embeddings``
    gives a media item's encoded embeddings, or None while they are being encoded (the slot then
    waits at that item). ``max_rows`` caps one prompt's tokens in a step (the deterministic mode:
    ``invariance.MAX_ROWS``). ``ride``: a media piece of one row may share the generating streams'
    call (``binding.token_rows``; not in the deterministic mode, whose calls have fixed shapes).
    """

    def __init__(
        self,
        n_batch: int,
        budget: StepBudget,
        embeddings: Callable[[Request, Media], object | None],
        max_rows: int | None = None,
        ride: bool = False,
    ) -> None:
        self.n_batch = n_batch
        self.budget = budget
        self.max_rows = max_rows
        self.ride = ride
        self._embeddings = embeddings
        self._hold = HoldRun(n_batch, lambda: HOLD_STEPS * budget.full_width(n_batch))

    def step(self, prefilling: list[Slot], n_generating: int, n_waiting: int) -> StepRows:
        """The rows of a step with ``prefilling`` (in arrival order) reading their prompts,
        ``n_generating`` streams and ``n_waiting`` requests queued for a slot."""
        if self._hold.holds(prefilling, n_generating):
            rows = self._rows(prefilling, 0, self.n_batch, n_waiting, held=n_generating)
            if rows.chunks or rows.media:
                self._hold.read(prefilling, sum(map(len, rows.chunks.values())) + sum(len(m.rows) for m in rows.media))
                return rows._replace(held=True)
            self._hold.cancel()  # nothing to read yet (its media is being encoded): the streams go on
        if not prefilling:
            return StepRows({}, [])
        return self._rows(prefilling, n_generating, self.n_batch - n_generating, n_waiting)

    def _rows(self, prefilling: list[Slot], n_generating: int, room: int, n_waiting: int, held: int = 0) -> StepRows:
        """The step's prompt chunks by sequence and its media piece, within the step budget: the
        full width (``StepBudget.full_width``), or a burst's (``_burst``), when more requests wait for
        their first token (in slots, and ``n_waiting`` queued) than streams run; ``held``: streams
        holding for it."""
        crowd = len(prefilling) + n_waiting > n_generating
        whole = [] if crowd else whole_prompts(prefilling, self.budget, n_generating, room, self.max_rows)
        extra = sum(s.prompt_left for s in whole)
        if crowd:
            budget = self.budget.full_width(room)
        else:
            budget = min(room, self.budget.prefill_rows(n_generating, room) + extra)
        media = self._media(prefilling, budget)
        if crowd and media is None:
            whole, budget = self._burst(prefilling, room, budget, held + n_generating + n_waiting)
        if media is not None and not media.item.whole and not crowd:  # a piece: the target without its floor
            budget = min(room, self.budget.prefill_rows(n_generating, room, media=True) + extra)
        pieces = []
        if media is not None and media.item.whole:  # one piece, out of the budget first
            pieces.append(media)
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
                pieces.append(media._replace(rows=range(first, first + n), rides=rides))
            else:
                chunks[slot.seq_id] = slot.prompt_chunk(rows)
        return StepRows(chunks, pieces)

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
