"""A generating stream moved into a gap between the batch's sequences (``engine/compaction.py``):
which move closes a gap, how the scheduler plans it, and, on a real llama.cpp context, that the
moved stream answers as cold, its old sequence stays a cached prefix, and what the gap held comes
back from the host cache."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from fake_binding import fake_runner
from oracle import GREEDY, N, close, cold, cold_tokens, drain, gguf_path, make_runner, next_turn, shared_prompts
from oracle import submit as submit_to
from test_kv_ops import CellContext, apply
from test_scheduler import SHARED, make, req, step

from cllm_ollama.engine.binding import Batch, Context, Model
from cllm_ollama.engine.blocks import TokenChain
from cllm_ollama.engine.compaction import MIN_TOKENS_LEFT, closing_move, runs, worth_moving
from cllm_ollama.engine.prefix import Move, Save
from cllm_ollama.engine.prompt_cache import PromptCache
from cllm_ollama.engine.request import Request
from cllm_ollama.engine.slot import SlotState
from cllm_ollama.errors import EngineError
from cllm_ollama.testing.ggufs import write_qwen3

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
    assert closing_move({0, 2, 4}, [0, 2, 4], [3, 1], depth(10)) == (0, 3)  # [2, 3, 4]
    assert closing_move({0, 2, 4}, [0, 2, 4], [1, 3], depth(10)) == (4, 1)  # [0, 1, 2]


def test_another_stream_is_tried_where_the_farthest_one_joins_nothing() -> None:
    # Moving 3 (or 2) into 1 leaves two runs; moving 0 there leaves one.
    assert closing_move({0, 2, 3, 4}, [0, 2, 3], [1], depth(10)) == (0, 1)


def test_a_row_counts_the_cell_its_token_takes_in_its_span() -> None:
    # 255 and 256 cells: one span of 256 as they stand, but the step's token makes the second 257.
    cells = {0: 255, 2: 256}
    assert closing_move({0, 2}, [0, 2], [1], lambda s: cells[s]) == (2, 1)
    assert closing_move({0, 2}, [0, 2], [1], lambda s: cells[s] + 1) is None


def test_a_longer_copy_asks_for_more_tokens_left() -> None:
    assert worth_moving(MIN_TOKENS_LEFT, 512) and not worth_moving(MIN_TOKENS_LEFT - 1, 512)
    assert not worth_moving(MIN_TOKENS_LEFT, 32768) and worth_moving(8 * MIN_TOKENS_LEFT, 32768)


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
    asked: list[tuple[int, bool]] = []  # (tokens left, whether slot 2 was to move), step by step
    while s.slots[2].busy:
        ops = s.admit().ops  # the moves are not made: nothing performs them here
        left = MIN_TOKENS_LEFT + 3 - s.slots[2].n_generated
        asked.append((left, any(isinstance(op, Move) and op.src == 2 for op in ops)))
        if left < MIN_TOKENS_LEFT:  # then slot 0, with more to go, moves up beside it instead
            assert ops == [Move(0, 1)]
        plan = s.plan()
        s.update(plan, [1] * len(plan.outputs))
    assert asked and all(move == (left >= MIN_TOKENS_LEFT) for left, move in asked)
    assert any(move for _, move in asked) and not all(move for _, move in asked)


def test_a_paused_stream_neither_moves_nor_counts_as_a_row() -> None:
    paused: set[int] = set()
    s = make(n_slots=4, n_ctx=128, n_batch=64, compact=True, paused=paused.__contains__)
    for tail, n in ((7, 30), (8, 1), (9, 30), (10, 30)):
        s.add(req([*SHARED, tail], num_predict=n))
    step(s)
    while s.slots[1].busy:
        step(s)
    assert [slot.busy for slot in s.slots] == [True, False, True, True]
    # Slot 0's reader is behind: this step's rows are 2 and 3 alone, one run.
    paused.add(s.slots[0].request.id)  # type: ignore[union-attr]
    assert not s.admit().ops
    s.plan()
    paused.clear()
    assert s.admit().ops == [Move(3, 1)]


def test_a_move_hands_the_stream_over_once_its_kv_is_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = fake_runner(CellContext, n_slots=3)
    try:
        ctx: CellContext = runner.ctx  # type: ignore[assignment]
        ctx.seqs[2] = list(range(45))
        moved: list[tuple[int, int]] = []
        monkeypatch.setattr(runner.scheduler, "moved", lambda src, dst: moved.append((src, dst)))
        assert not apply(runner, [Move(2, 1)], monkeypatch)
        assert moved == [(2, 1)] and ctx.seqs[1] == list(range(45))
    finally:
        runner.close()


def test_a_move_whose_copy_fails_leaves_the_stream_where_it_is(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    runner = fake_runner(CellContext, n_slots=3)
    try:
        ctx: CellContext = runner.ctx  # type: ignore[assignment]
        ctx.seqs[1], ctx.seqs[2] = [0, 1, 2], list(range(45))
        runner.scheduler.slots[1].chain = TokenChain([5, 6, 7])
        ctx.refuse = {1}  # a short source is copied by its state: llama.cpp refuses it
        moved: list[tuple[int, int]] = []
        monkeypatch.setattr(runner.scheduler, "moved", lambda src, dst: moved.append((src, dst)))
        assert not apply(runner, [Move(2, 1)], monkeypatch)  # no request loses its prefix
        assert not moved and ctx.seqs[1] == [] and runner.scheduler.slots[1].cached == []
        assert "could not be copied" in caplog.text
    finally:
        runner.close()


@pytest.mark.model
def test_a_reset_does_the_copies_still_queued_before_anything_new_lands(tmp_path: Any) -> None:
    # A whole-stream copy waits for the next decode; a step that failed clears the cache, and a
    # state restored into the copy's destination then would be overwritten by that decode.
    model = Model(write_qwen3(tmp_path / "m.gguf"))
    prompt = [(7 * i) % 200 + 3 for i in range(24)]
    head = len(prompt) - 1

    def with_head(ctx: Context) -> None:
        batch = Batch(32)
        batch.fill(prompt[:-1], list(range(head)), [0] * head, [])
        ctx.decode(batch)

    def next_logits(ctx: Context, seq: int) -> np.ndarray:
        batch = Batch(1)
        batch.fill([prompt[-1]], [head], [seq], [0])
        ctx.decode(batch)
        return np.array(ctx.logits(1)[0])

    def restored(reset: bool) -> np.ndarray | None:
        """Sequence 1's next logits after a restore; None where the binding refused it (a queued
        copy into 1 would land on it at the next decode)."""
        ctx = Context(model, n_seq_max=2, n_ctx_seq=64, n_batch=32, n_threads=2)
        try:
            with_head(ctx)
            state = bytes(ctx.state_get(0))
            ctx.seq_copy(0, 1)  # queued until the next decode
            assert ctx.copy_queued(0) and ctx.copy_queued(1)
            with pytest.raises(EngineError):
                ctx.state_get(1)  # its bytes are not there yet
            if reset:
                ctx.reset()
            else:
                ctx.clear()
            if not ctx.state_set(1, bytearray(state)):
                return None
            return next_logits(ctx, 1)
        finally:
            ctx.close()

    try:
        ctx = Context(model, n_seq_max=2, n_ctx_seq=64, n_batch=32, n_threads=2)
        try:
            with_head(ctx)
            cold = next_logits(ctx, 0)
        finally:
            ctx.close()
        assert np.array_equal(restored(reset=True), cold)  # type: ignore[arg-type]
        assert restored(reset=False) is None  # refused: what the reset prevents
    finally:
        model.close()


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
        assert steps and steps.count(2) <= 1 and runner.scheduler.moves == 1
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
