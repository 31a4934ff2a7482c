"""Throw-away rows in the gaps between a decode call's sequences (``engine/gap_fill.py``): where
they go, and, on a real llama.cpp context, that they leave every answer and the idle sequence's
cached KV as they were."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from oracle import (
    GREEDY,
    N,
    close,
    cold,
    cold_tokens,
    drain,
    gguf_path,
    make_runner,
    next_turn,
    shared_prompts,
    tokens_of,
)
from oracle import submit as submit_to

from cllm_ollama.engine.gap_fill import chosen, fill, gaps, one_row_each, span
from cllm_ollama.engine.request import Request

__all__ = ["cold", "gguf_path"]  # fixtures


@pytest.mark.parametrize(
    ("seq_ids", "most", "expected"),
    [
        ([0, 2, 4, 6], 1, [[1], [3], [5]]),
        ([0, 3, 6], 1, []),  # gaps of two stay open at one
        ([0, 3, 6], 2, [[1, 2], [4, 5]]),
        ([0, 1, 2, 5], 3, [[3, 4]]),
        ([2, 3], 8, []),
        ([4], 8, []),
        ([0, 2, 7], 0, []),
    ],
)
def test_gaps_are_the_runs_of_missing_ids_no_longer_than_the_setting(
    seq_ids: list[int], most: int, expected: list[list[int]]
) -> None:
    assert [list(run) for run in gaps(seq_ids, most)] == expected


def test_the_span_is_the_deepest_cells_in_steps_of_256() -> None:
    assert [span(n) for n in (0, 1, 256, 257, 600, 1024)] == [256, 256, 256, 512, 768, 1024]


@pytest.mark.parametrize(
    ("depths", "expected"),
    [
        ({0: 100, 1: 50, 2: 200}, [[1]]),  # one span on both sides, the pad no deeper
        ({0: 100, 1: 50, 2: 300}, []),  # the runs' spans differ: the shallow one would read more
        ({0: 100, 1: 300, 2: 200}, []),  # the pad is deeper than both
        ({0: 600, 1: 700, 2: 700}, [[1]]),  # deep, but one span of 768
        ({0: 100, 1: 50, 2: 200, 3: 600, 4: 0, 5: 700}, [[4]]),  # run 2-3 spans 768: 1 would join 256 to it
    ],
)
def test_a_gap_is_filled_only_where_no_row_reads_more_cells(depths: dict[int, int], expected: list[list[int]]) -> None:
    seq_ids = [s for s in depths if s % 2 == 0] if len(depths) == 3 else [0, 2, 3, 5]
    got = chosen(seq_ids, 4, depths.__getitem__, lambda s: True)
    assert [list(gap) for gap in got] == expected


def test_a_gap_with_a_full_sequence_stays_open() -> None:
    depths = {0: 10, 1: 10, 2: 10, 3: 10, 4: 10}
    assert [list(g) for g in chosen([0, 3, 4], 2, depths.__getitem__, lambda s: s != 2)] == []
    assert [list(g) for g in chosen([0, 3, 4], 2, depths.__getitem__, lambda s: True)] == [[1, 2]]


def test_only_a_call_of_one_row_per_sequence_is_filled() -> None:
    assert one_row_each([0, 2, 5]) and one_row_each([3])
    assert not one_row_each([0, 0, 2])  # a prompt chunk: two rows of sequence 0
    assert not one_row_each([2, 0])


def test_pads_go_in_sequence_order_and_the_outputs_follow_their_rows() -> None:
    filled = fill([7, 8, 9], [10, 20, 30], [0, 2, 5], [0, 1, 2], {1: 4, 3: 0, 4: 12})
    assert filled.seq_ids == [0, 1, 2, 3, 4, 5]
    assert filled.tokens == [7, 7, 8, 7, 7, 9]  # a pad repeats the call's first token
    assert filled.positions == [10, 4, 20, 0, 12, 30]
    assert filled.rows == [0, 2, 5] and filled.outputs == [0, 2, 5]
    assert filled.pads == [(1, 4), (3, 0), (4, 12)]


def test_outputs_may_be_some_rows_only() -> None:
    filled = fill([7, 8], [1, 1], [1, 3], [1], {0: 5, 2: 6})
    assert filled.seq_ids == [0, 1, 2, 3] and filled.rows == [3] and filled.outputs == [3]


@pytest.mark.model
def test_streams_beside_an_idle_cached_slot_answer_as_cold_and_the_slot_comes_back_intact(
    gguf_path: Any, cold: Any
) -> None:
    # Three greedy requests in slots 0, 1 and 2; the middle one ends first, so the other two decode
    # with its slot idle between them and a throw-away row in it at every step. Then its next turn
    # takes its own cached KV back: a row left behind would break its positions (llama.cpp refuses
    # the batch) or its answer.
    runner = make_runner(gguf_path, n_slots=3, gap_fill=1)
    middle: list[int] = []  # the positions of sequence 1's rows, call by call
    batch, real_fill = runner.batch, runner.batch.fill

    def recording(tokens: Sequence[int], positions: Sequence[int], seq_ids: Sequence[int], outputs: Any) -> None:
        middle.extend(pos for pos, seq in zip(positions, seq_ids, strict=True) if seq == 1)
        real_fill(tokens, positions, seq_ids, outputs)

    batch.fill = recording  # type: ignore[method-assign,assignment]
    try:
        prompts = shared_prompts(runner.model)[:3]
        lengths = (2 * N, 2, 2 * N)  # the middle one ends first
        sinks = [submit_to(runner, Request(p, GREEDY, num_predict=n)) for p, n in zip(prompts, lengths, strict=True)]
        answers = [tokens_of(drain(sink)) for sink in sinks]
        for prompt, answer in zip(prompts, answers, strict=True):
            assert answer == cold_tokens(cold, prompt, len(answer))
        # Each position of a sequence is decoded once, but a pad goes in again at the next step.
        pad = len(prompts[1]) + 1
        assert middle.count(pad) >= 2 and all(middle.count(pos) == 1 for pos in middle if pos != pad)
        again = next_turn(runner.model, prompts[1], answers[1])
        events = drain(submit_to(runner, Request(again, GREEDY, num_predict=N)))
        assert events[-1].stats is not None and events[-1].stats.prompt_cached > len(prompts[1])
        assert tokens_of(events) == cold_tokens(cold, again)
    finally:
        close(runner)
