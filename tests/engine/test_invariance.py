"""The deterministic mode's step shapes (``engine.invariance``), against llama.cpp's split rules."""

from __future__ import annotations

import queue
import random

import pytest
from fake_binding import FakeContext, drain, fake_runner

from cllm_ollama.engine.invariance import MAX_ROWS, shape, ubatches
from cllm_ollama.engine.request import Request, SamplingParams
from cllm_ollama.engine.runner import Sink


def test_ubatches_follow_llama_cpps_equal_split_over_runs_of_consecutive_ids() -> None:
    assert ubatches([(0, 1), (1, 1), (2, 1)]) == [([0, 1, 2], 1)]
    assert ubatches([(0, 2), (1, 1)]) == [([0, 1], 1), ([0], 1)]
    assert ubatches([(0, 1), (2, 1)]) == [([0], 1), ([2], 1)]  # a gap in the ids cuts the ubatch
    assert ubatches([(1, 5), (2, 1), (3, 3)]) == [([1, 2, 3], 1), ([1], 4), ([3], 2)]


def test_a_lone_decode_row_gets_a_throw_away_row_and_a_second_output() -> None:
    shaped = shape([7], [40], [0], [0], n_ctx_seq=512)
    assert shaped.tokens == [7, 7] and shaped.positions == [40, 41] and shaped.seq_ids == [0, 0]
    assert shaped.outputs == [0, 1] and shaped.rows == [0] and shaped.logits == [0]
    assert shaped.pads == [(0, 41)]


def test_consecutive_decode_rows_need_nothing() -> None:
    shaped = shape([5, 6, 7], [3, 9, 4], [0, 1, 2], [0, 1, 2], n_ctx_seq=512)
    assert shaped.tokens == [5, 6, 7] and shaped.outputs == [0, 1, 2] and not shaped.pads


def test_rows_cut_apart_by_a_gap_are_padded_and_their_logits_found() -> None:
    shaped = shape([5, 6], [3, 9], [0, 2], [0, 1], n_ctx_seq=512)
    assert shaped.seq_ids == [0, 0, 2, 2] and shaped.pads == [(0, 4), (2, 10)]
    assert shaped.rows == [0, 2] and [shaped.outputs[i] for i in shaped.logits] == [0, 2]


def test_a_prompt_chunk_beside_a_decode_row_gives_the_shared_ubatch_a_second_output() -> None:
    # Seq 0: a 4-token chunk with no output; seq 1: one decode row. ubatches [0,1]x1 then [0]x3.
    shaped = shape([1, 2, 3, 4, 9], [0, 1, 2, 3, 20], [0, 0, 0, 0, 1], [4], n_ctx_seq=512)
    assert not shaped.pads and shaped.outputs == [0, 4] and shaped.logits == [1]


def test_no_pad_past_the_end_of_a_sequences_context() -> None:
    shaped = shape([7], [511], [0], [0], n_ctx_seq=512)
    assert not shaped.pads and shaped.tokens == [7]


@pytest.mark.parametrize("seed", range(40))
def test_every_ubatch_has_two_rows_or_more_and_no_lone_output(seed: int) -> None:
    rng = random.Random(seed)
    seqs = sorted(rng.sample(range(12), rng.randint(1, 8)))
    tokens, positions, seq_ids, outputs = [], [], [], []
    for seq in seqs:
        n = rng.choice([1, 1, 2, rng.randint(1, MAX_ROWS)])
        start = rng.randint(0, 400)
        for i in range(n):
            tokens.append(100 + seq)
            positions.append(start + i)
            seq_ids.append(seq)
        if rng.random() < 0.7:
            outputs.append(len(tokens) - 1)
    shaped = shape(tokens, positions, seq_ids, outputs, n_ctx_seq=1024)
    counts: dict[int, int] = {}
    for seq in shaped.seq_ids:
        counts[seq] = counts.get(seq, 0) + 1
    offset = {seq: sum(n for s, n in counts.items() if s < seq) for seq in counts}
    taken = dict.fromkeys(counts, 0)
    flagged = set(shaped.outputs)
    for run, n in ubatches(list(counts.items())):
        members = [offset[s] + taken[s] + i for s in run for i in range(n)]
        for s in run:
            taken[s] += n
        assert len(members) >= 2
        assert sum(m in flagged for m in members) != 1
    # Every row of the plan is there, in order, with its output where it was asked.
    assert [shaped.tokens[r] for r in shaped.rows] == [tokens[r] for r in outputs]
    assert [shaped.outputs[i] for i in shaped.logits] == shaped.rows
    assert len(shaped.tokens) - len(tokens) == len(shaped.pads) <= len(seqs)


class RemovingContext(FakeContext):
    """Records the cells the runner removes."""

    def __init__(self, *args: object, **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self.removed: list[tuple[int, int]] = []

    def seq_rm(self, seq_id: int, p0: int, p1: int = -1) -> bool:
        self.removed.append((seq_id, p0))
        return True


def test_the_runner_pads_a_lone_row_removes_the_pad_and_samples_the_real_row() -> None:
    runner = fake_runner(RemovingContext, n_slots=2, deterministic=True)
    try:
        sink = Sink(queue.SimpleQueue())
        runner.submit(Request((3, 4, 5), SamplingParams(temperature=0), num_predict=3), None, sink)
        events = drain(runner, sink)
        ctx: RemovingContext = runner.ctx  # type: ignore[assignment]
    finally:
        runner.close()
    # The fake predicts token + 1: the pads (a copy of the row before them) never reach the answer.
    assert [t for e in events for t in e.tokens] == [6, 7, 8]
    # Prompt [3, 4] (two rows, no pad), then 5 alone with its pad, then each generated token with one.
    assert ctx.batches == [
        [(3, 0, 0), (4, 1, 0)],
        [(5, 2, 0), (5, 3, 0)],
        [(6, 3, 0), (6, 4, 0)],
        [(7, 4, 0), (7, 5, 0)],
    ]
    assert ctx.removed == [(0, 0), (0, 3), (0, 4), (0, 5)]  # (0, 0): admission trims the empty slot
