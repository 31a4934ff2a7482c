"""The prefix-reuse component through the scheduler: typed KV operations in the order the runner
performs them, and waiting for another slot's prefix as a named slot state."""

from __future__ import annotations

from test_scheduler import SHARED, make, req, run_to_end, step

from cllm_ollama.engine.prefix import Copy, Save, Trim
from cllm_ollama.engine.prompt_cache import PromptCache
from cllm_ollama.engine.slot import SlotState, Tier


def test_a_slot_waiting_for_another_slots_prefix_is_in_a_state_of_its_own_then_copies_it() -> None:
    s = make(n_slots=2, n_ctx=256, n_batch=128)
    s.add(req([*SHARED, 7], num_predict=50))
    s.add(req([*SHARED, 7, 8], num_predict=50))
    plan = s.admit()
    # Slot 0 computes SHARED; slot 1 waits for it and takes no part in the batch.
    assert s.slots[1].state is SlotState.WAITING and s.slots[1].wait is not None
    assert s.slots[1].wait.source is s.slots[0] and plan.ops == [Trim(0, 0), Trim(1, 0)]
    plan = s.plan()
    assert set(plan.seq_ids) == {0}
    s.update(plan, [1])
    plan, _ = step(s)
    assert plan.ops == [Copy(0, 1), Trim(1, 41)] and s.slots[1].wait is None
    assert s.slots[1].prefix_source is Tier.SLOT and plan.tokens[-1] == 8
    run_to_end(s)
    assert s.stats.copied == 41


def test_operations_come_in_the_order_they_must_run() -> None:
    cache = PromptCache(limit_bytes=10**6, min_tokens=32)
    s = make(n_slots=2, n_ctx=256, n_batch=128, cache=cache)
    s.add(req([*SHARED, 5], num_predict=200))
    step(s)  # slot 0 generates after SHARED
    conversation = [60 + i % 7 for i in range(70)]
    s.add(req(conversation, num_predict=1))
    step(s)  # slot 1 computes a conversation and finishes: it holds it, and nothing else does
    assert s.slots[1].state is SlotState.IDLE and s.slots[1].cached == conversation
    s.add(req([*SHARED, 9, 9], num_predict=1))
    plan = s.admit()
    # Slot 1's conversation is kept first, then slot 0's prefix is copied over it and cut.
    assert plan.ops == [Save(1, tuple(conversation)), Copy(0, 1), Trim(1, 40)]
    assert s.slots[1].prefix_source is Tier.SLOT and s.stats.copied == 40
