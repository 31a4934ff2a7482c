"""A generating stream moved into a gap between the batch's sequences (``engine/compaction.py``):
which move closes a gap, how the scheduler plans it, and, on a real llama.cpp context, that the
moved stream answers as cold, its old sequence stays a cached prefix, and what the gap held comes
back from the host cache."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

import pytest
from oracle import GREEDY, N, close, cold, cold_tokens, drain, gguf_path, make_runner, next_turn, shared_prompts
from oracle import submit as submit_to
from test_scheduler import SHARED, make, req, step

from cllm_ollama.engine.compaction import MIN_TOKENS_LEFT, closing_move, runs
from cllm_ollama.engine.prefix import Move, Save
from cllm_ollama.engine.prompt_cache import PromptCache
from cllm_ollama.engine.request import Request
from cllm_ollama.engine.slot import SlotState

__all__ = ["cold", "gguf_path"]  # fixtures


def test_runs_are_the_consecutive_ids_in_order() -> None:
    assert runs([4, 0, 2, 1, 6, 7]) == [[0, 1, 2], [4], [6, 7]]
    assert runs([]) == [] and runs([3]) == [[3]]


def depth(n: int) -> Any:
    return lambda seq_id: n


@pytest.mark.parametrize(
    ("rows", "movable", "idle", "expected"),
    [
        ({0, 2}, [0, 2], [1, 3], (2, 1)),  # the last stream into the gap below it
        ({0, 2, 4, 6}, [0, 2, 4, 6], [1, 3, 5, 7], (6, 1)),  # one a step: the first gap first
        ({3, 5}, [3, 5], [0, 1, 2, 4, 6], (5, 4)),  # a slot outside the rows closes nothing
        ({0, 1, 3}, [0], [2], (0, 2)),  # 1 and 3 prefill: the first stream goes up into the gap
        ({0, 2}, [0, 2], [3, 4], None),  # no idle slot between the rows
        ({0, 1, 2}, [0, 1, 2], [3], None),  # one run already
        ({0, 2}, [], [1], None),  # nothing may move (nearly done, behind, or read by a copy)
        ({0, 2, 3}, [0], [1], (0, 1)),  # [1, 2, 3]: one run
    ],
)
def test_the_move_that_closes_a_gap(
    rows: set[int], movable: list[int], idle: list[int], expected: tuple[int, int] | None
) -> None:
    assert closing_move(rows, movable, idle, depth(100)) == expected


def test_a_move_that_would_make_a_row_read_more_cells_is_not_made() -> None:
    # Sequence 0 holds 100 cells (a span of 256), sequence 2 holds 600 (768): joined, 0's row
    # would attend over 768 cells.
    cells = {0: 100, 2: 600}
    assert closing_move({0, 2}, [0, 2], [1], cells.__getitem__) is None
    cells = {0: 600, 2: 700}  # one span of 768
    assert closing_move({0, 2}, [0, 2], [1], cells.__getitem__) == (2, 1)


def test_the_idle_slots_are_tried_in_the_order_given() -> None:
    # The scheduler gives an empty slot first (nothing to save before it is overwritten): either
    # gap here joins two runs.
    assert closing_move({0, 2, 4}, [0, 2, 4], [3, 1], depth(10)) == (4, 3)
    assert closing_move({0, 2, 4}, [0, 2, 4], [1, 3], depth(10)) == (4, 1)


def test_the_scheduler_moves_a_stream_into_the_gap_its_neighbour_left_and_saves_what_the_gap_held() -> None:
    cache = PromptCache(limit_bytes=10_000, min_tokens=32)
    s = make(n_slots=3, n_ctx=128, n_batch=64, cache=cache, compact=True)
    # Three conversations in slots 0, 1, 2; the middle one ends first.
    for tail, n in ((7, 30), (8, 1), (9, 30)):
        s.add(req([*SHARED, tail], num_predict=n))
    step(s)  # slot 0 computes the shared start; 1 and 2 wait for it, then copy it
    while s.slots[1].busy:
        step(s)
    assert [slot.state for slot in s.slots] == [SlotState.GENERATING, SlotState.IDLE, SlotState.GENERATING]
    middle = tuple(s.slots[1].cached)
    moved = s.slots[2].request
    plan = s.admit()
    # Slot 1's conversation exists nowhere else: saved before the move overwrites it.
    assert plan.ops == [Save(1, middle), Move(2, 1)]
    s.moved(2, 1)  # what the runner does once the KV is copied
    assert s.slots[1].request is moved and s.slots[1].state is SlotState.GENERATING
    assert s.slots[2].state is SlotState.IDLE and s.slots[2].cached == s.slots[1].cached
    plan = s.plan()
    assert plan.seq_ids == [0, 1] and plan.positions[1] == len(s.slots[1].cached)
    s.update(plan, [1, 1])
    assert not s.admit().ops  # no gap: nothing moves again


def test_a_stream_nearly_done_stays_where_it_is() -> None:
    s = make(n_slots=3, n_ctx=128, n_batch=64, compact=True)
    for tail, n in ((7, 30), (8, 1), (9, MIN_TOKENS_LEFT + 3)):
        s.add(req([*SHARED, tail], num_predict=n))
    step(s)  # slot 0 computes the shared start; 1 and 2 wait for it, then copy it
    while s.slots[1].busy:
        step(s)
    asked: list[tuple[int, bool]] = []  # (tokens left, whether a move was planned), step by step
    while s.slots[2].busy:
        ops = s.admit().ops  # the moves are not made: nothing performs them here
        left = MIN_TOKENS_LEFT + 3 - s.slots[2].n_generated
        asked.append((left, ops == [Move(2, 1)]))
        plan = s.plan()
        s.update(plan, [1] * len(plan.outputs))
    assert asked and all(move == (left >= MIN_TOKENS_LEFT) for left, move in asked)
    assert any(move for _, move in asked) and not all(move for _, move in asked)


STEP_RUNS = re.compile(r"step: .*sequences in (\d+) runs")


@pytest.mark.model
def test_a_moved_stream_answers_as_cold_and_both_conversations_come_back(
    gguf_path: Any, cold: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Three greedy requests in slots 0, 1 and 2; the middle one ends first, so slot 2's stream
    # moves into slot 1 (its KV copied there) and the two decode in one run. Every answer must be
    # the cold one; the middle conversation's next turn comes back from the host cache (the move
    # overwrote its slot), and the moved one's from the slot it finished in.
    runner = make_runner(gguf_path, n_slots=3)
    rows: list[tuple[int, int]] = []  # (sequence, position) of every row, call by call
    batch, real_fill = runner.batch, runner.batch.fill

    def recording(tokens: Sequence[int], positions: Sequence[int], seq_ids: Sequence[int], outputs: Any) -> None:
        rows.extend(zip(seq_ids, positions, strict=True))
        real_fill(tokens, positions, seq_ids, outputs)

    batch.fill = recording  # type: ignore[method-assign,assignment]
    caplog.set_level(logging.DEBUG, logger="cllm.engine")
    try:
        prompts = shared_prompts(runner.model)[:3]
        # The middle answer is long enough that its conversation is worth restoring (``MIN_SHARE``
        # past what the other slots share with it), and ends first.
        lengths = (2 * N, N // 2, 2 * N)
        sinks = [submit_to(runner, Request(p, GREEDY, num_predict=n)) for p, n in zip(prompts, lengths, strict=True)]
        answers = [[t for e in drain(sink) for t in e.tokens] for sink in sinks]
        for prompt, answer in zip(prompts, answers, strict=True):
            assert answer == cold_tokens(cold, prompt, len(answer))
        # The third stream's rows went on in sequence 1, from the position after its last in 2 to
        # the one before its last token; the middle request's rows there were all before those.
        third = [pos for seq, pos in rows if seq == 2]
        after = [pos for seq, pos in rows if seq == 1 and pos > max(third)]
        assert after == list(range(max(third) + 1, len(prompts[2]) + len(answers[2]) - 1))
        # So the two streams never decoded in two runs (at most the step in which the middle ended).
        steps = [int(m.group(1)) for r in caplog.records if (m := STEP_RUNS.search(r.getMessage()))]
        assert steps and steps.count(2) <= 1
        again = next_turn(runner.model, prompts[1], answers[1])
        events = drain(submit_to(runner, Request(again, GREEDY, num_predict=N)))
        assert events[-1].stats is not None and events[-1].stats.prompt_cached >= len(prompts[1]) + N // 2 - 1
        assert [t for e in events for t in e.tokens] == cold_tokens(cold, again)
        again = next_turn(runner.model, prompts[2], answers[2])
        events = drain(submit_to(runner, Request(again, GREEDY, num_predict=N)))
        # Sequence 1 holds the answer but its last token (never decoded).
        assert events[-1].stats is not None and events[-1].stats.prompt_cached >= len(prompts[2]) + len(answers[2]) - 1
        assert [t for e in events for t in e.tokens] == cold_tokens(cold, again)
    finally:
        close(runner)
