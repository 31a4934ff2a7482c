"""How many prompt tokens a step may carry so that running streams keep their pace.

Sarathi-Serve's stall-free batching over costs measured on this model and device: every
generating stream's token goes into each step; prompt chunks fill what is left of a target step
time (the inter-token latency a stream sees). With nothing generating, or a crowd of prompts
waiting for their first token, a step reads as many prompts whole as bring their first tokens
soonest (``StepBudget.burst``), at most the full width (calls of up to a few seconds:
``FULL_WIDTH_NS``).

The runner times each ``llama_decode`` call (``StepBudget.observe``); a step that carries prompt
rows is two calls where a reproducible prompt ends in it (the prompt rows, then the rows whose
logits are sampled: ``runner._decode``), else one, so its time is taken as the cost of the prompt
call plus the cost of the decode call (an upper bound for one call); a piece of a media
item's embeddings is a third call, before them (``media_feed``), whose rows come out of the same
prompt rows and are timed as a prompt call. The costs are kept apart
for the two kinds of call: prompt rows attend over their whole chunk and can sit deep in a long
context, decode rows do not.

Streams also wait for the KV work the engine thread does between steps (a state saved after a
step, a state restored or copied at admission): ~0.1 ms per MiB from host or device memory, 21 ms
for the 2k-token state (224 MiB) of the GPU check's model on an H200, several of its decode steps. The runner reports
that time (``StepBudget.stalled``), and the next step's prompt chunks make room for it, so that a
stream's gap stays within the target (a short prompt read whole, ``StepBudget.whole``, is not cut).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

# Weight of a new observation in a bucket's moving average.
ALPHA = 0.25
# The target step time, when none is set, is this many times a decode-only step ...
AUTO_SLACK = 2.0
# ... and a step that decodes a piece of a media item this many times where a lone media row can
# ride in the streams' call (``StepBudget.media_slack``): an image or an audio window takes tens to
# hundreds of steps, and every stream's gaps through all of them are kept well within AUTO_SLACK
# (issue 32: their p95 at most twice their p95 without it), not at it. Without riding, a piece's
# own call costs a small model's whole decode step, so a tighter target would only shrink pieces.
MEDIA_SLACK = 1.5
# ... and never under this (ns): below ~10 tokens/s a stream's pace is plain to see, above it a
# newcomer's prompt may take its share.
AUTO_FLOOR_NS = 100_000_000
# Prompt rows a step may always carry, so that no prompt starves whatever the costs say.
MIN_PREFILL_ROWS = 16
# Rows of a media piece a step may always carry. Its cost on a CPU grows with its rows from the
# first (a 16-row piece took twice a small model's decode step), and a call of its own costs about
# a small model's whole decode step however few its rows, so where the budget leaves a row at most
# that row rides in the streams' call (``prompt_rows.MediaPiece.rides``); a piece in a call of its
# own is never a lone row (``prompt_rows.piece_rows``) but the last one a riding piece left behind
# (never in the deterministic mode, where nothing rides).
MIN_MEDIA_ROWS = 1
# Before the first prompt call is measured: prompt rows per step beside generating streams.
UNMEASURED_PREFILL_ROWS = 256
# A prompt whose call is predicted to take at most this long (ns), or what the target step leaves,
# is read whole in one step rather than in the budget's chunks (``StepBudget.whole``).
WHOLE_NS = 500_000_000


# A step that nothing waits on beside it (no stream generating, or a crowd of prompts waiting for
# their first token while the streams hold: ``prompt_rows.HoldRun``) reads prompts at most at the
# batch's full width (``StepBudget.burst`` may read fewer): all of it, unless a call that wide is
# predicted to take longer than this (ns). On the bench's 0.5-0.6B models a 512-row call takes
# 2.0-3.3 s on two cores (the same AMX Xeon, hours apart), so this leaves them as they are: at 3 s
# a slower hour's steps held 7 of 32 clients' 64-token prompts where 8 fit, and the 17th first
# token came a step later. A 7B model there would take over a minute a call, and every stream
# holding for a burst, every request arriving meanwhile and every client that gave up would
# wait for it.
FULL_WIDTH_NS = 5_000_000_000
# ... but a full-width step carries at least this many rows, where even they take longer (a large
# model on a CPU): a call's fixed cost, the weights read once, must stay small beside its rows.
MIN_FULL_WIDTH_ROWS = 64


# A burst's prompts are read a few a step where that brings their first tokens soonest
# (``StepBudget.burst``), but a wider step is kept where its prompts wait at most this much longer
# on average: fewer calls leave the held streams a shorter wait, and a call's measured fixed cost
# is noisy (the load generator and the HTTP edge share a CPU's cores with llama.cpp).
BURST_SLACK = 0.05


# Calls of up to this many rows are averaged by their exact count: a decode call has a row per
# stream, and one more stream can cost a small model a third more (a power-of-two bucket took the
# 3-row calls of a step with a media row riding in it for 2-row ones, and thought the streams' own
# step 60% dearer than it was).
EXACT_ROWS = 16


@dataclass
class _Bucket:
    rows: float
    ns: float


@dataclass
class CallCosts:
    """Nanoseconds of one ``llama_decode`` call by its number of rows: a moving average per row
    count up to ``EXACT_ROWS``, then per power-of-two bucket of rows, interpolated between them
    (CPU kernels get cheaper per row as calls grow, so one straight line fits badly)."""

    buckets: dict[int, _Bucket] = field(default_factory=dict)
    # The buckets in order of rows, made again only when a bucket is added (each one's averages
    # move in place): ``cost`` runs a dozen times a step.
    points: list[_Bucket] = field(default_factory=list)

    def observe(self, rows: int, ns: int) -> None:
        if rows <= 0 or ns <= 0:
            return
        key = rows if rows <= EXACT_ROWS else EXACT_ROWS + rows.bit_length()
        b = self.buckets.get(key)
        if b is None:
            self.buckets[key] = _Bucket(float(rows), float(ns))
            self.points = [self.buckets[k] for k in sorted(self.buckets)]
        else:
            b.rows += ALPHA * (rows - b.rows)
            b.ns += ALPHA * (ns - b.ns)

    def measured(self) -> bool:
        return bool(self.buckets)

    def cost(self, rows: int) -> float:
        """Predicted ns of a call of ``rows`` rows (0 before any observation)."""
        points = self.points
        if not points or rows <= 0:
            return 0.0
        i = bisect.bisect_left(points, float(rows), key=lambda p: p.rows)
        if i == 0:  # below the smallest measured call: proportional, a lower bound
            return points[0].ns * rows / points[0].rows
        if i == len(points):  # above the largest: at the largest one's cost per row
            return points[-1].ns * rows / points[-1].rows
        lo, hi = points[i - 1], points[i]
        return lo.ns + (hi.ns - lo.ns) * (rows - lo.rows) / (hi.rows - lo.rows)

    def rows_within(self, ns: float, most: int) -> int:
        """The most rows (at most ``most``) whose call is predicted to take ``ns`` or less."""
        lo, hi = 0, most
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.cost(mid) <= ns:
                lo = mid
            else:
                hi = mid - 1
        return lo


def oldest_share(rows: int) -> int:
    """The rows a crowd's step narrower than the full width (``StepBudget.burst``) gives the
    oldest prompt beside ``rows`` of short ones, where it is not among them (a long document): a
    quarter of the step, never under ``MIN_PREFILL_ROWS``, so that no burst starves it."""
    return max(rows // 3, MIN_PREFILL_ROWS)


def _whole_steps(ends: list[int], k: int, width: int, step_rows: Callable[[int], int]) -> list[tuple[int, int]]:
    """The steps (rows, prompts ending in it) of reading the prompts ending at ``ends`` (the
    running sum of their rows) at most ``k`` whole a step within ``width``; none where one
    prompt alone does not fit."""
    steps, i, n = [], 0, len(ends) - 1
    while i < n:
        j = i
        while j < min(i + k, n) and step_rows(ends[j + 1] - ends[i]) <= width:
            j += 1
        if j == i:
            return []
        steps.append((ends[j] - ends[i], j - i))
        i = j
    return steps


def _filled_steps(ends: list[int], width: int, step_rows: Callable[[int], int]) -> list[tuple[int, int]]:
    """The steps (rows, prompts ending in it) of reading the prompts ending at ``ends`` at the
    full ``width``, a prompt cut where a step ends."""
    per = width
    while per > 1 and step_rows(per) > width:
        per -= 1
    steps, done = [], 0
    for start in range(0, ends[-1], per):
        stop = min(start + per, ends[-1])
        ended = bisect.bisect_right(ends, stop) - 1
        steps.append((stop - start, ended - done))
        done = ended
    return steps


class StepBudget:
    """The prompt rows a step may carry beside ``decode_rows`` generating streams.

    ``target_ns`` is the step time to keep to while streams generate; 0 picks it from the measured
    decode-only step: ``AUTO_SLACK`` times it, at least ``AUTO_FLOOR_NS``. ``cap`` (0: none) is a
    fixed ceiling on prompt rows beside generating streams (``CLLM_PREFILL_CHUNK``).
    ``media_slack``: the multiple of the decode step a step with a media piece keeps to
    (``MEDIA_SLACK`` where a media row can ride in the streams' call).
    """

    def __init__(self, target_ns: int = 0, cap: int = 0, media_slack: float = AUTO_SLACK) -> None:
        self.target_ns = target_ns
        self.cap = cap
        self.media_slack = media_slack
        self.decode = CallCosts()
        self.prompt = CallCosts()
        # The engine thread's KV work since the last step's tokens went out (ns): the coming
        # step's streams have waited that long already.
        self.stall_ns = 0

    def observe(self, rows: int, prompt: bool, ns: int) -> None:
        """One ``llama_decode`` call: its rows, whether it carried prompt rows (rows without logits), its time."""
        (self.prompt if prompt else self.decode).observe(rows, ns)

    def stalled(self, ns: int) -> None:
        """The engine thread spent ``ns`` on KV work (saves, restores, copies) since the last step."""
        self.stall_ns += ns

    def stepped(self) -> None:
        """A step's tokens went out, or the engine rests with no stream waiting: no stall is owed."""
        self.stall_ns = 0

    def target(self, decode_rows: int, media: bool = False) -> float:
        """The step time to keep to with ``decode_rows`` generating streams (ns): when picked
        automatically, at least ``AUTO_FLOOR_NS``; ``media``: a step with a media piece's
        (``media_slack`` times the decode step, no floor)."""
        if self.target_ns:
            return float(self.target_ns)
        if media:
            return self.media_slack * self.decode.cost(decode_rows)
        return max(AUTO_SLACK * self.decode.cost(decode_rows), AUTO_FLOOR_NS)

    def prefill_rows(self, decode_rows: int, room: int, media: bool = False) -> int:
        """Prompt rows for a step with ``decode_rows`` generating streams and ``room`` rows left in the
        batch: the full width with nothing generating (the scheduler takes such a step as a crowd's:
        ``full_width``, ``burst``), else what the target step time leaves. A step
        that decodes a piece of a media item (``media``) keeps to ``media_slack`` times the decode
        step, without the floor: an image or an audio window takes tens of steps, and at the floor
        a fast model's streams (6-15 ms steps) ran at 7-16x their pace through all of them."""
        if decode_rows == 0:
            return self.full_width(room)
        most = min(room, self.cap) if self.cap else room
        if not (self.decode.measured() and self.prompt.measured()):
            return min(most, UNMEASURED_PREFILL_ROWS)
        left = self.target(decode_rows, media) - self.decode.cost(decode_rows) - self.stall_ns
        return min(most, max(MIN_MEDIA_ROWS if media else MIN_PREFILL_ROWS, self.prompt.rows_within(left, most)))

    def full_width(self, room: int) -> int:
        """The most prompt rows of a step that nothing waits on beside it: all of ``room``, or as
        many as a call predicted to take ``FULL_WIDTH_NS`` holds, never under ``MIN_FULL_WIDTH_ROWS``."""
        if not self.prompt.measured():
            return room
        return min(room, max(MIN_FULL_WIDTH_ROWS, self.prompt.rows_within(FULL_WIDTH_NS, room)))

    def burst(self, lefts: list[int], room: int, others: int = 0, share: bool = False) -> int:
        """How many of the prompts with ``lefts`` rows left (shortest first, each read whole) a
        crowd's step reads; 0 where the full width, shared as any step's prompt rows are
        (``prompt_rows.shares``), is as soon (or nothing is measured yet). Each way of reading them
        is weighed by their summed wait for their first tokens plus the whole read's time for each
        of them and each of ``others``: the prompts' streams hold for the rest of the burst before
        their second tokens, and ``others`` wait for all of it too (streams holding for it, or
        stretched by its steps, and requests queued for a slot). A way within ``BURST_SLACK`` of
        the least is kept if it has fewer calls (in as many, whole prompts rather than a cut one).
        ``share``: each step also carries the oldest prompt's share (``oldest_share``).

        Where one full-width step holds them all, the ways are ``k`` a step for every ``k``: a
        prompt's first token goes out after the step that reads its end, so one wide step makes all
        of its prompts wait for the last of them. On two cores a 512-row call (eight 64-token
        prompts) took 1.74 s where a 64-row one took 233 ms, the same 3.4-3.6 ms a row, and 8
        clients' first tokens came after 1.3-1.8 s (p50; mean 1.3-1.5 s) read a few a step against
        1.9-2.2 s (mean 1.7-1.9 s) read together. Where a call's fixed cost dominates (a GPU: the
        weights read once a call), the widest step wins.

        A longer burst gets its first tokens a step at a time already, and narrower steps there
        only spread them (32 clients, 4 alternating runs: mean 3% sooner, median 9% later), so
        its steps go at the full width: filled, a prompt cut where a step ends, or as many whole
        prompts as it holds. Where a call costs its rows, a cut prompt's rows delay the first
        tokens of every prompt in its step (three 300-row prompts: whole, they come after 300, 600
        and 900 rows' time; filled, after 512, 900 and 900)."""

        def step_rows(rows: int) -> int:
            return rows + oldest_share(rows) if share else rows

        n = len(lefts)
        if n < 2 or not self.prompt.measured():
            return 0
        width = self.full_width(room)
        ends = [0, *itertools.accumulate(lefts)]
        if step_rows(ends[-1]) > width:  # longer than a step: at the full width, whole prompts or filled
            widest, full = _whole_steps(ends, n, width, step_rows), _filled_steps(ends, width, step_rows)
            # Fewer calls first; in as many, whole first: a cut prompt's few rows cost llama.cpp a
            # pass of their own (``sorted`` is stable).
            ways = sorted((way for way in (widest, full) if way), key=len)
        else:  # one step holds them: k a step, widest (the full width) first
            ways = [_whole_steps(ends, k, width, step_rows) for k in range(n, 0, -1)]
            full = ways[0]
        waits = [self._summed_wait(way, step_rows, others + n) for way in ways]
        least = min(waits)
        way = next(way for way, w in zip(ways, waits, strict=True) if w <= least * (1 + BURST_SLACK))
        return 0 if way is full else way[0][1]

    def _summed_wait(self, way: list[tuple[int, int]], step_rows: Callable[[int], int], waiting: int) -> float:
        """The prompts' summed wait for their first tokens, reading ``way``'s steps ((rows, first
        tokens out of it) each), plus its whole time for each of ``waiting``."""
        t = total = 0.0
        for rows, done in way:
            t += self.prompt.cost(step_rows(rows))
            total += t * done
        return total + waiting * t

    def whole(self, decode_rows: int, lefts: list[int], room: int) -> int:
        """How many of the prompts with ``lefts`` rows left (shortest first) are read whole in a step
        beside ``decode_rows`` generating streams: as many as fit the batch's ``room`` in a prompt
        call predicted to take what the target step leaves, or ``WHOLE_NS``.

        A prompt call has a large fixed cost on a CPU (the weights are read once a call: a 16-row
        call of a 0.5B model took 120 ms there, a 40-row one 200 ms), so a short chat's 40 tokens
        cut into the budget's chunks stretched three steps of every stream to 2.3x where one step
        whole stretches one to 3x, and came a step later. A stream's gap percentiles count
        stretched steps, so one is the better trade until the stall is long enough to see."""
        if not decode_rows or not (self.decode.measured() and self.prompt.measured()):
            return 0
        most = min(room, self.cap) if self.cap else room
        limit = max(self.target(decode_rows) - self.decode.cost(decode_rows), WHOLE_NS)
        rows = n = 0
        for left in lefts:
            if rows + left > most or self.prompt.cost(rows + left) > limit:
                break
            rows, n = rows + left, n + 1
        return n
