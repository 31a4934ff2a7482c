"""Closing a gap between the batch's sequences by moving a generating stream into it.

llama.cpp cuts a batch over split KV streams into ubatches of consecutive sequence ids
(``split_equal``, sequential), and every ubatch is a pass over the weights (``gap_fill``). On a
CPU a pass costs about a row, so a gap costs every step a row's worth: on two cores with the real
Qwen2.5-Coder-0.5B, sequences [0, 3, 6] took 59 ms a step against 43 for [0, 1, 2], and
[0, 2, 4, 6] 79 against 48 for [0, 1, 2, 3] (``bench/seq_gaps.py``). Admission already puts a
request beside a running one (``Scheduler._place``); a gap opens when a stream between others
ends first, and stays for as long as the others generate. Filling it with throw-away rows
(``gap_fill``) pays on a GPU but not on a CPU, where a pad costs what it saves.

So where gaps are not filled, the scheduler moves one stream a step into a gap: its KV is copied
into the idle sequence (``prefix.Move``: the whole KV stream, 10-16 ms for 4096 cells of the
0.5B, about one step's saving, or its state where it is short), the request goes on there
(``Slot.hand_over``), and its old sequence keeps a copy as a cached prefix. What the idle
sequence held is saved to the host cache first where it exists nowhere else, as before any reuse.

A move must join runs without making any row attend over more cells: every row of a ubatch
attends over its deepest stream's span (``gap_fill.span``), so the runs it joins and the moved
stream must share one span, as a filled gap's must.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from .gap_fill import span

# A stream with fewer tokens left than this (by its request's num_predict, or its context) is not
# moved: the copy would cost more than the steps it saves ...
MIN_TOKENS_LEFT = 8
# ... nor, where its copy moves more than this many cells' worth (``prefix.copied_cells``: a
# stream of 4096 cells of the 0.5B cost 10-16 ms on two cores, about the pass a step saves), one
# with fewer than that many times as many tokens left. A model's KV cells and its passes grow
# together, so the rule holds across sizes: a 32k-token slot asks for 64 tokens left.
CELLS_PER_PASS = 4096
# The sources tried for each idle sequence, farthest first.
SOURCES_TRIED = 4


def worth_moving(tokens_left: int, cells: int) -> bool:
    """Whether a stream with ``tokens_left`` to generate saves more than moving ``cells`` costs."""
    return tokens_left >= MIN_TOKENS_LEFT * max(1.0, cells / CELLS_PER_PASS)


def runs(seq_ids: Iterable[int]) -> list[list[int]]:
    """The runs of consecutive ids in ``seq_ids``, in order."""
    out: list[list[int]] = []
    for s in sorted(set(seq_ids)):
        if out and out[-1][-1] == s - 1:
            out[-1].append(s)
        else:
            out.append([s])
    return out


def closing_move(
    rows: set[int],
    movable: Sequence[int],
    idle: Sequence[int],
    cells: Callable[[int], int],
) -> tuple[int, int] | None:
    """The move (source, destination) that joins runs of ``rows`` (the sequences with rows in the
    batch): one of the ``movable`` streams into one of the ``idle`` sequences between the rows (in
    their order of preference), with no row reading more cells (``cells``: the cells a sequence
    holds once this step's row is in). For each idle sequence, the streams farthest from it on the
    side with more of them are tried first. None: no such move."""
    before = len(runs(rows))
    if before < 2 or not movable:
        return None
    lo, hi = min(rows), max(rows)
    for dst in (d for d in idle if lo < d < hi):
        below = sorted(s for s in movable if s < dst)
        above = sorted((s for s in movable if s > dst), reverse=True)
        sources = above + below if len(above) >= len(below) else below + above
        for src in sources[:SOURCES_TRIED]:
            after = runs((rows - {src}) | {dst})
            if len(after) >= before:
                continue
            merged = next(run for run in after if dst in run)
            parts = runs(set(merged) - {dst, src})
            spans = {span(max(cells(s) for s in part)) for part in parts} | {span(cells(src))}
            if len(spans) == 1:
                return src, dst
    return None
