"""Batch-invariant steps (the deterministic mode): every token takes the same llama.cpp CPU
kernels whatever else shares its step, however its prompt was chunked.

Measured on the real Qwen2.5-Coder-0.5B (AVX2 and AVX-512 builds): a row's result is the same in
any batch as long as each kernel takes one path, and llama.cpp switches path on the shape of a
ubatch: weight repacking (rows in fours, the rest one by one: off, ``Model(batch_invariant)``),
the tiled K-quant product from 8 rows (off: ``batch_invariant_kernels``), llamafile's sgemm from
2 rows (a lone row takes the vector kernel), flash attention tiled from 64 queries of a sequence
and split over the KV for a lone query of a lone sequence. The scheduler keeps a sequence's rows
in a step under 64 (``MAX_ROWS``); this module reproduces llama.cpp's split of a step into
ubatches (``split_equal`` over per-sequence KV streams) and pads every ubatch that would hold a
lone token with a throw-away token after it (removed after the decode), and every ubatch with a
lone output row with a second one: the output product then has two rows as well.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

log = logging.getLogger("cllm.engine")

# One less than ggml's CPU flash-attention query tile (GGML_FA_TILE_Q): the most rows of one
# sequence a step holds in the mode.
MAX_ROWS = 63


def shapes_steps(deterministic: bool, *, recurrent: bool, name: str) -> bool:
    """Whether a runner in the mode shapes its steps. Not for a recurrent or hybrid model: its
    state cannot drop a throw-away pad token (llama.cpp refuses the padded batch: "inconsistent
    sequence positions"), so every request would fail. Such a model still runs its weights as
    stored, but its answers may change with what shares a step, and the log says so."""
    if deterministic and recurrent:
        log.warning(
            "%s has recurrent state, which cannot drop the deterministic mode's pad tokens: "
            "its steps are not shaped, and its answers may vary with what else runs",
            name,
        )
    return deterministic and not recurrent


@dataclass
class Shaped:
    """A step's batch as llama.cpp gets it in the mode, and where the plan's rows went."""

    tokens: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    seq_ids: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)  # rows whose logits llama.cpp computes, ascending
    rows: list[int] = field(default_factory=list)  # per output of the plan: its row here
    logits: list[int] = field(default_factory=list)  # per output of the plan: its logits row
    pads: list[tuple[int, int]] = field(default_factory=list)  # (sequence, position) to remove after


def ubatches(counts: Sequence[tuple[int, int]]) -> list[tuple[list[int], int]]:
    """llama.cpp's ``split_equal(sequential)`` of a batch whose rows are in sequence-id order,
    ``counts`` being (sequence, rows) in that order, when the whole batch fits one ubatch: each
    ubatch takes the run of consecutive ids from the first sequence with rows left, and as many
    rows of each as the fewest any of them has left. Returns (sequences, rows of each)."""
    left = dict(counts)
    order = [seq for seq, _ in counts]
    out: list[tuple[list[int], int]] = []
    while True:
        active = [seq for seq in order if left[seq] > 0]
        if not active:
            return out
        run = [active[0]]
        for seq in active[1:]:
            if seq != run[-1] + 1:
                break
            run.append(seq)
        n = min(left[seq] for seq in run)
        out.append((run, n))
        for seq in run:
            left[seq] -= n


def shape(
    tokens: Sequence[int],
    positions: Sequence[int],
    seq_ids: Sequence[int],
    outputs: Sequence[int],
    n_ctx_seq: int,
) -> Shaped:
    """The plan's rows (in sequence-id order, ``outputs`` its rows with logits) padded as the mode
    needs. A sequence whose next position is past its context gets no pad (it is at its end)."""
    by_seq: dict[int, list[int]] = {}
    for row, seq in enumerate(seq_ids):
        by_seq.setdefault(seq, []).append(row)
    padded: set[int] = set()
    while True:
        counts = [(seq, len(rows) + (seq in padded)) for seq, rows in by_seq.items()]
        lone = [
            run[0]
            for run, n in ubatches(counts)
            if len(run) == 1 and n == 1 and run[0] not in padded and positions[by_seq[run[0]][-1]] + 1 < n_ctx_seq
        ]
        if not lone:
            break
        padded.update(lone)
    shaped = Shaped()
    wanted = set(outputs)
    origin: list[int | None] = []  # per shaped row: the plan's row (None: a pad)
    for seq, rows in by_seq.items():
        for row in rows:
            origin.append(row)
            shaped.tokens.append(tokens[row])
            shaped.positions.append(positions[row])
            shaped.seq_ids.append(seq)
        if seq in padded:
            last = rows[-1]
            origin.append(None)
            shaped.tokens.append(tokens[last])
            shaped.positions.append(positions[last] + 1)
            shaped.seq_ids.append(seq)
            shaped.pads.append((seq, positions[last] + 1))
    flagged = {i for i, row in enumerate(origin) if row is not None and row in wanted}
    # Every ubatch with one output row gets a second one (any other row of it).
    counts = [(seq, len(rows) + (seq in padded)) for seq, rows in by_seq.items()]
    first_row: dict[int, int] = {}
    offset = 0
    for seq, n in counts:
        first_row[seq] = offset
        offset += n
    taken = dict.fromkeys(first_row, 0)
    for run, n in ubatches(counts):
        members = [first_row[seq] + taken[seq] + i for seq in run for i in range(n)]
        for seq in run:
            taken[seq] += n
        if sum(i in flagged for i in members) == 1 and len(members) > 1:
            flagged.add(next(i for i in members if i not in flagged))
    shaped.outputs = sorted(flagged)
    index = {row: i for i, row in enumerate(shaped.outputs)}
    where = {row: i for i, row in enumerate(origin) if row is not None}
    shaped.rows = [where[row] for row in outputs]
    shaped.logits = [index[where[row]] for row in outputs]
    return shaped
