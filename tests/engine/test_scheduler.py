"""The batching policy with no model: hand-made prompts, hand-picked sampled tokens."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cllm_ollama.engine.prefix import Copy
from cllm_ollama.engine.prompt_cache import PromptCache
from cllm_ollama.engine.request import Event, FinishReason, Request, SamplingParams
from cllm_ollama.engine.scheduler import Occupancy, Scheduler, StepPlan
from cllm_ollama.engine.slot import Slot, SlotState, StopMatcher
from cllm_ollama.engine.step_budget import StepBudget

EOG = 0
# Token t > 0 spells one letter; 900+ are the two halves of "é" (UTF-8 c3 a9).
PIECES = {t: bytes([96 + t]) for t in range(1, 27)} | {900: b"\xc3", 901: b"\xa9"}


def piece(t: int) -> bytes:
    return PIECES.get(t, b"")


def make(n_slots: int = 2, n_ctx: int = 64, n_batch: int = 16, **kw: object) -> Scheduler:
    clock = iter(range(0, 10**9, 1000))
    return Scheduler(n_slots, n_ctx, n_batch, piece, lambda t: t == EOG, clock=lambda: next(clock), **kw)  # type: ignore[arg-type]


def req(prompt: list[int], **kw: object) -> Request:
    return Request(tuple(prompt), SamplingParams(temperature=0), **kw)  # type: ignore[arg-type]


def step(s: Scheduler, choose: Callable[[Slot], int] = lambda slot: 1) -> tuple[StepPlan, list[Event]]:
    plan = s.schedule()
    tokens = [choose(slot) for slot, _ in plan.outputs]
    return plan, s.update(plan, tokens)


def run_to_end(s: Scheduler, choose: Callable[[Slot], int] = lambda slot: 1, limit: int = 200) -> list[Event]:
    events: list[Event] = []
    for _ in range(limit):
        if not s.has_work():
            return events
        events += step(s, choose)[1]
    raise AssertionError("did not finish")


def test_one_token_per_generating_slot_plus_prompt_chunks_of_new_ones() -> None:
    s = make(n_slots=3, n_batch=8)
    s.add(req([1, 2, 3], num_predict=5))
    plan, _ = step(s)
    assert plan.tokens == [1, 2, 3] and plan.positions == [0, 1, 2] and plan.seq_ids == [0, 0, 0]
    s.add(req(list(range(1, 11)), num_predict=5))
    plan, _ = step(s)
    # the generating slot's single token first, then a prompt chunk capped by n_batch
    assert plan.seq_ids == [0] + [1] * 7
    assert plan.positions[0] == 3 and plan.positions[1:] == list(range(7))
    assert [row for _, row in plan.outputs] == [0]  # the unfinished prompt gets no logits yet
    plan, _ = step(s)
    assert plan.seq_ids == [0, 1, 1, 1]
    assert [row for _, row in plan.outputs] == [0, 3]


def test_finished_slot_is_refilled_at_the_next_step_in_arrival_order() -> None:
    s = make(n_slots=2)
    requests = [req([i + 1], num_predict=1 + i) for i in range(5)]
    for r in requests:
        s.add(r)
    finished: list[int] = []
    busy_counts = []
    while s.has_work():
        plan, events = step(s)
        busy_counts.append(len({*plan.seq_ids}))
        finished += [e.request_id for e in events if e.finish]
    assert sorted(finished) == [r.id for r in requests]
    # FIFO admission: each request starts no later than the ones after it
    assert finished[0] == requests[0].id
    # the pool never runs half-empty while requests wait
    assert all(n == 2 for n in busy_counts[:-3])


def test_waiting_request_enters_the_slot_freed_in_the_previous_step() -> None:
    s = make(n_slots=1)
    a, b = req([1, 2], num_predict=2), req([3, 4], num_predict=1)
    s.add(a)
    s.add(b)
    step(s)  # a: prompt, first token
    _, events = step(s)  # a: second token -> finished
    assert events[-1].finish is FinishReason.LENGTH and events[-1].request_id == a.id
    plan, events = step(s)
    assert plan.admitted == [s.slots[0]] and plan.tokens == [3, 4]
    assert events[0].request_id == b.id


def test_longest_cached_prefix_wins_and_only_the_rest_is_evaluated() -> None:
    s = make(n_slots=2)
    s.add(req([1, 2, 3, 4], num_predict=1))
    s.add(req([9, 9], num_predict=1))
    run_to_end(s)
    s.add(req([9, 9, 5, 6], num_predict=1))
    plan, _ = step(s)
    assert plan.seq_ids == [1, 1] and plan.tokens == [5, 6] and plan.positions == [2, 3]
    assert plan.trims == [(1, 2)]


def test_fully_cached_prompt_still_evaluates_its_last_token() -> None:
    s = make(n_slots=1)
    s.add(req([1, 2, 3], num_predict=1))
    run_to_end(s)
    s.add(req([1, 2, 3], num_predict=1))
    plan, _ = step(s)
    assert plan.tokens == [3] and plan.positions == [2] and plan.trims == [(0, 2)]


def test_eog_stops_without_text_and_counts_stats() -> None:
    s = make()
    s.add(req([1, 2]))
    choices = iter([3, 4, EOG])
    events = run_to_end(s, lambda slot: next(choices))
    assert "".join(e.text for e in events) == "cd"
    final = events[-1]
    assert final.finish is FinishReason.STOP
    assert final.stats is not None and final.stats.prompt_tokens == 2 and final.stats.eval_tokens == 3


def test_num_predict_gives_length() -> None:
    s = make()
    s.add(req([1], num_predict=3))
    events = run_to_end(s)
    assert [e.text for e in events] == ["a", "a", "a"] and events[-1].finish is FinishReason.LENGTH


def test_generation_stops_with_length_at_the_end_of_the_context() -> None:
    s = make(n_ctx=8)
    s.add(req([1, 2, 3]))
    events = run_to_end(s)
    assert events[-1].finish is FinishReason.LENGTH
    assert s.slots[0].n_past + 1 == 8


def test_per_request_num_ctx_below_the_slot_context_is_honoured() -> None:
    s = make(n_ctx=64)
    s.add(req([1, 2, 3], num_ctx=6))
    events = run_to_end(s)
    assert events[-1].finish is FinishReason.LENGTH and len(events) == 3


def test_stop_string_split_across_tokens_is_never_emitted() -> None:
    s = make()
    # "xa" + "bc" + "d": stop "abc" spans the first two tokens' text
    PIECES.update({100: b"xa", 101: b"bc", 102: b"d"})
    s.add(req([1], stop=("abc",)))
    choices = iter([100, 101, 102])
    events = run_to_end(s, lambda slot: next(choices))
    assert "".join(e.text for e in events) == "x"
    assert events[-1].finish is FinishReason.STOP


def test_utf8_split_across_tokens_is_emitted_whole() -> None:
    s = make()
    s.add(req([1], num_predict=3))
    choices = iter([900, 901, 1])
    events = run_to_end(s, lambda slot: next(choices))
    assert [e.text for e in events] == ["", "é", "a"]


def test_abort_frees_a_running_slot_and_drops_a_waiting_request() -> None:
    s = make(n_slots=1)
    running, waiting = req([1]), req([2])
    s.add(running)
    s.add(waiting)
    step(s)
    events = s.abort([running.id, waiting.id])
    assert {(e.request_id, e.finish) for e in events} == {
        (running.id, FinishReason.CANCELED),
        (waiting.id, FinishReason.CANCELED),
    }
    assert not s.has_work() and s.slots[0].state is SlotState.IDLE
    # the aborted request's prompt stays cached for reuse
    assert s.slots[0].cached == [1]


def test_a_reader_that_falls_behind_pauses_only_its_own_slot() -> None:
    slow: set[int] = set()
    s = make(n_slots=2, paused=lambda rid: rid in slow)
    a, b = req([1]), req([2])
    s.add(a)
    s.add(b)
    step(s)
    slow.add(a.id)
    plan, _ = step(s)
    assert plan.seq_ids == [1]
    slow.clear()
    plan, _ = step(s)
    assert plan.seq_ids == [0, 1]


@pytest.mark.parametrize(
    ("chunks", "stops", "expected", "hit"),
    [
        (["hel", "lo wor", "ld"], ("lo w",), "hel", True),
        (["a", "b", "c"], ("bd",), "abc", False),
        (["</", "s>"], ("</s>",), "", True),
        (["ab"], (), "ab", False),
        # Among many stops, what begins any one of them is held, wherever it sorts.
        (["x", "yz", "Q"], (*(f"w{i:04d}" for i in range(5000)), "xyzQ!", "zz"), "xyzQ", False),
        (["x", "yz", "Q!"], ("zz", "xyzQ!", "a", "xy"), "", True),
        (["ab", "c"], ("abd", "abce", "b"), "a", True),
    ],
)
def test_stop_matcher(chunks: list[str], stops: tuple[str, ...], expected: str, hit: bool) -> None:
    m = StopMatcher(stops)
    out, stopped = "", False
    for c in chunks:
        text, stopped = m.feed(c)
        out += text
        if stopped:
            break
    if not stopped:
        out += m.flush()
    assert (out, stopped) == (expected, hit)


# -- prefix sharing ---------------------------------------------------------------------

SHARED = list(range(1, 41))  # 40 tokens: more than MIN_SHARE, over a block


def test_a_prefix_held_by_a_generating_slot_is_copied_not_recomputed() -> None:
    s = make(n_slots=2, n_ctx=128, n_batch=64)
    s.add(req([*SHARED, 7], num_predict=50))
    step(s)  # slot 0: whole prompt, first token
    s.add(req([*SHARED, 8, 9], num_predict=1))
    plan, _ = step(s)
    assert plan.copies == [(0, 1)] and (1, 40) in plan.trims
    # Only the new tokens of slot 1 are evaluated, after slot 0's decode row.
    assert plan.seq_ids == [0, 1, 1] and plan.positions[1:] == [40, 41]
    assert s.stats.copied == 40


def test_requests_arriving_together_wait_for_the_first_to_compute_the_shared_start() -> None:
    s = make(n_slots=3, n_ctx=128, n_batch=16)
    for tail in (7, 8, 9):
        s.add(req([*SHARED, tail], num_predict=1))
    plan, _ = step(s)
    # Only slot 0 computes; the others wait for it (no duplicate prefill in the batch).
    assert set(plan.seq_ids) == {0} and [slot.wait is not None for slot in s.slots] == [False, True, True]
    while s.slots[1].wait is not None:
        plan, _ = step(s)
    # The step after the prefix exists: both copy it and evaluate only their last token.
    assert plan.copies == [(0, 1), (0, 2)]
    assert [t for t, sid in zip(plan.tokens, plan.seq_ids, strict=True) if sid in (1, 2)] == [8, 9]
    run_to_end(s)
    assert s.stats.copied == 80 and s.stats.prompt_tokens == 3 * 41


def test_a_slot_reused_for_another_conversation_is_saved_then_restored() -> None:
    cache = PromptCache(limit_bytes=1000, min_tokens=32)
    s = make(n_slots=1, n_ctx=128, n_batch=64, cache=cache)
    first = [*SHARED, 5]
    s.add(req(first, num_predict=1))
    run_to_end(s)
    s.add(req([30, 31, 32], num_predict=1))
    plan, _ = step(s)
    assert plan.saves == [(0, tuple(first))]
    cache.add(plan.saves[0][1], "state", 100)  # what the runner does with the sequence's state
    run_to_end(s)
    s.add(req([*first, 6, 7], num_predict=1))
    plan, _ = step(s)
    assert [(seq, entry.payload) for seq, entry in plan.restores] == [(0, "state")] and (0, 41) in plan.trims
    assert plan.tokens == [6, 7] and s.stats.restored == 41
    assert len(cache) == 1  # kept after the restore


def test_a_failed_kv_operation_costs_only_its_request_a_recomputed_prompt() -> None:
    s = make(n_slots=2, n_ctx=128, n_batch=64)
    s.add(req([*SHARED, 7], num_predict=50))
    step(s)
    s.add(req([*SHARED, 8], num_predict=1))
    plan = s.admit()
    assert plan.copies == [(0, 1)]
    s.lost_prefix(1)
    plan = s.plan()
    assert plan.seq_ids == [0] + [1] * 41 and s.stats.copied == 0


def test_admission_prefers_a_cached_prompt_but_passes_nobody_over_forever() -> None:
    s = make(n_slots=1, n_ctx=128, n_batch=64)
    s.add(req([*SHARED, 5], num_predict=1))
    run_to_end(s)
    cold = req([50, 51, 52], num_predict=1)
    s.add(cold)
    hot = [req([*SHARED, 6 + i], num_predict=1) for i in range(6)]
    for r in hot:
        s.add(r)
    order: list[int] = []
    while s.has_work():
        _plan, events = step(s)
        order += [e.request_id for e in events if e.finish]
    from cllm_ollama.engine.scheduler import MAX_PASSED_OVER

    assert order.index(cold.id) == MAX_PASSED_OVER


def test_prefill_is_capped_while_others_generate_and_rows_follow_sequence_ids() -> None:
    s = make(n_slots=3, n_ctx=256, n_batch=64, budget=StepBudget(cap=8))
    s.add(req([1], num_predict=20))
    s.add(req([2], num_predict=20))
    step(s)
    s.add(req(list(range(1, 30)), num_predict=1))
    plan, _ = step(s)
    assert plan.seq_ids == [0, 1] + [2] * 8
    # With nothing generating, only n_batch caps a prompt.
    s2 = make(n_slots=1, n_ctx=256, n_batch=64, budget=StepBudget(cap=8))
    s2.add(req(list(range(1, 30)), num_predict=1))
    plan, _ = step(s2)
    assert len(plan) == 29


def test_rows_are_ordered_by_sequence_id_when_a_lower_slot_prefills() -> None:
    s = make(n_slots=3, n_ctx=64, n_batch=32)
    for p in ([1], [2], [3]):
        s.add(req(p, num_predict=30))
    step(s)
    s.abort([s.slots[0].request.id])  # type: ignore[union-attr]
    s.add(req([4, 5, 6], num_predict=1))
    plan, _ = step(s)
    assert plan.seq_ids == [0, 0, 0, 1, 2]


def test_a_new_conversation_takes_a_slot_with_nothing_to_save_before_the_lowest_id() -> None:
    cache = PromptCache(limit_bytes=1000, min_tokens=32)
    s = make(n_slots=3, n_ctx=128, n_batch=64, cache=cache)
    s.add(req([*SHARED, 5], num_predict=1))
    run_to_end(s)  # slot 0 holds a long prompt found nowhere else
    s.add(req([60, 61, 62], num_predict=1))
    plan, _ = step(s)
    assert plan.admitted == [s.slots[1]] and plan.saves == []
    assert s.slots[0].cached[:40] == SHARED


def test_beside_a_running_request_a_returning_conversation_takes_the_slot_next_to_it() -> None:
    # llama.cpp decodes each run of consecutive active ids apart (one weight read each): the
    # conversation's own KV, alone in slot 0, is copied next to the running request instead.
    s = make(n_slots=4, n_ctx=128, n_batch=64)
    for first in (1, 100, 200):  # three conversations at once, in slots 0, 1 and 2, and a long answer
        s.add(req([first + i for i in range(40)], num_predict=1))
    s.add(req([300, 301, 302], num_predict=50))
    for _ in range(3):
        step(s)
    assert [s.slots[i].cached[0] for i in range(3)] == [1, 100, 200]
    assert [slot.busy for slot in s.slots] == [False, False, False, True]
    s.add(req([*range(1, 41), 7, 8], num_predict=1))
    plan, _ = step(s)
    assert plan.admitted == [s.slots[2]] and plan.copies == [Copy(src=0, dst=2)]
    assert plan.seq_ids[0] == 2 and len(plan) == 3  # only the rest of its prompt is read


def test_occupancy_counts_slots_queue_and_the_cells_running_requests_hold() -> None:
    s = make(n_slots=2, n_ctx=64)
    assert s.occupancy() == Occupancy(running=0, waiting=0, cells_used=0, cells_total=128)
    for prompt in ([1, 2, 3], [4, 5], [6], [7, 8]):
        s.add(req(prompt, num_predict=3))
    assert s.occupancy() == Occupancy(running=0, waiting=4, cells_used=0, cells_total=128)
    step(s)  # both slots take their prompt and sample a first token
    assert s.occupancy() == Occupancy(running=2, waiting=2, cells_used=3 + 2, cells_total=128)
    step(s)  # each decodes its first token
    assert s.occupancy() == Occupancy(running=2, waiting=2, cells_used=4 + 3, cells_total=128)
    s.abort([s.waiting[0].id])
    assert s.occupancy().waiting == 1
    events = run_to_end(s)
    assert s.occupancy() == Occupancy(running=0, waiting=0, cells_used=0, cells_total=128)
    # The last request waited for a slot; its queue time says how long (the clock ticks 1000 per call).
    queued = [e.stats.queue_ns for e in events if e.finish is not None and e.stats is not None]
    assert queued and queued[-1] > 0
