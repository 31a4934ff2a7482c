"""Throw-away rows that close the gaps between a decode call's sequences, so that llama.cpp reads
the weights once for the call rather than once per run of neighbouring sequences.

llama.cpp cuts a batch over split KV streams (``kv_unified`` off) into ubatches of consecutive
sequence ids (``split_equal``, sequential: it takes a row only if its sequence is the last one
taken plus one, scanning the rows in order), and every ubatch is a pass over the weights.
Decoding sequences 0, 2, 4 and 6 is four passes; with a row in each of 1, 3 and 5 (a token at
the position after its sequence's last, removed after the call, as the deterministic mode's pads
are) it is one. A pass costs more than a row on every device, but not by the same factor. On two
CPU cores (real Qwen2.5-Coder-0.5B, ``bench/seq_gaps.py``) a pass costs about a row: with 64
tokens in every sequence, filling gaps of one made steps faster ([0, 2, 4, 6] 79 -> 62 ms,
[0, 1, 2, 4, 5, 6] 85-89 -> 75-77 ms) and gaps of two slower ([0, 3, 6] 59 -> 61 ms); with 2048,
where a row's attention costs as much again, even gaps of one lost ([0, 2, 4, 6] 113 -> 120 ms).
On the H200 (``llama-batched-bench``: 1.48 ms a step for one sequence, 4.24 ms for 32) a pass
costs ~15 rows. So gaps of at most ``most`` idle sequences are closed (``LoadSpec.gap_fill``,
``CLLM_GAP_FILL``): none on a CPU, a few on a GPU (``tuning``).

Every row of a ubatch attends over the same span of cells: its deepest stream's, rounded up to
256 (``llama_kv_cache::get_n_kv``). Joining a shallow run to a deep one would make the shallow
rows read the deep span (CUDA's flash attention skips most of a masked tail, the CPU's skips a
masked cell's products but still visits it; Vulkan and attention without flash do not skip), and a
deep pad would deepen both. So a gap is filled only where
the runs on both sides have the same span and its pads none deeper (``chosen``): no row then
attends over more cells than it did.

Only a call with one row per sequence is filled (a decode step, or the rows sampled after a
prompt's body): with more rows a sequence's ubatches are cut by its own length as well.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence

from .invariance import Shaped

# llama.cpp rounds a ubatch's attention span up to this many cells (and never less).
SPAN = 256


def span(cells: int) -> int:
    """The cells a row attends over in a ubatch whose deepest stream holds ``cells``."""
    return max(SPAN, -(-cells // SPAN) * SPAN)


def gaps(seq_ids: Sequence[int], most: int) -> list[range]:
    """The runs of sequence ids missing between ``seq_ids`` (ascending) that are ``most`` long or
    shorter: each one a pass of the weights saved if all of it is filled."""
    return [range(a + 1, b) for a, b in itertools.pairwise(seq_ids) if 1 < b - a <= most + 1]


def chosen(seq_ids: Sequence[int], most: int, cells: Callable[[int], int], room: Callable[[int], bool]) -> list[range]:
    """The gaps of ``gaps(seq_ids, most)`` worth filling: every sequence of it has ``room`` for a
    row, and the runs it joins have the same attention ``span`` (of ``cells``, a sequence's cells),
    its own sequences no deeper, so that no row reads more cells than it did."""
    runs = [[seq_ids[0]]] if seq_ids else []
    for a, b in itertools.pairwise(seq_ids):
        if b == a + 1:
            runs[-1].append(b)
        else:
            runs.append([b])
    chosen_gaps = []
    for before, after in itertools.pairwise(runs):
        gap = range(before[-1] + 1, after[0])
        if len(gap) > most:
            continue
        deepest = span(max(cells(s) for s in before))
        if deepest == span(max(cells(s) for s in after)) and all(room(s) and span(cells(s)) <= deepest for s in gap):
            chosen_gaps.append(gap)
    return chosen_gaps


def one_row_each(seq_ids: Sequence[int]) -> bool:
    """Whether a call's rows are one per sequence, in ascending order (as steps lay them out)."""
    return all(a < b for a, b in itertools.pairwise(seq_ids))


def fill(
    tokens: Sequence[int],
    positions: Sequence[int],
    seq_ids: Sequence[int],
    outputs: Sequence[int],
    pads: Mapping[int, int],
) -> Shaped:
    """The rows of a call (one per sequence, ascending; ``outputs`` its rows with logits) with a row
    for each sequence of ``pads`` at the position it maps to, all in sequence order: llama.cpp's
    scan takes a sequence into a ubatch only right after the one before it. A pad repeats the
    call's first token (any token of the vocabulary would do: nothing reads its output). The
    logits rows stay the call's own, in order: pads have none."""
    out = Shaped()
    where: dict[int, int] = {}
    for seq, row in sorted([(seq, row) for row, seq in enumerate(seq_ids)] + [(seq, -1) for seq in pads]):
        if row < 0:
            out.pads.append((seq, pads[seq]))
        else:
            where[row] = len(out.tokens)
        out.tokens.append(tokens[max(row, 0)])
        out.positions.append(positions[row] if row >= 0 else pads[seq])
        out.seq_ids.append(seq)
    out.rows = [where[row] for row in outputs]
    out.outputs = sorted(out.rows)
    out.logits = list(range(len(outputs)))
    return out
