"""The prefix-reuse component through the scheduler: typed KV operations in the order the runner
performs them, and waiting for another slot's prefix as a named slot state."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_scheduler import SHARED, make, req, run_to_end, step

from cllm_ollama.engine import prefix
from cllm_ollama.engine.blocks import block_keys
from cllm_ollama.engine.disk_cache import DiskCache
from cllm_ollama.engine.prefix import Checkpoint, Copy, KvOp, Restore, Save, Trim, room_to_grow
from cllm_ollama.engine.prompt_cache import PromptCache
from cllm_ollama.engine.scheduler import Scheduler
from cllm_ollama.engine.slot import Slot, SlotState, Tier


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


class SimulatedKv:
    """Each sequence's KV as the list of tokens it holds: the KV operations and the decode
    applied to it exactly as llama.cpp applies them to cells."""

    def __init__(self, n_slots: int, cache: PromptCache) -> None:
        self.seqs: list[list[int]] = [[] for _ in range(n_slots)]
        self.cache = cache

    def apply(self, ops: list[KvOp]) -> None:
        for op in ops:
            match op:
                case Save(seq_id, tokens):
                    assert self.seqs[seq_id][: len(tokens)] == list(tokens)  # it holds what is saved
                    self.cache.add(tokens, list(self.seqs[seq_id]), 1)
                case Copy(src, dst):
                    self.seqs[dst] = list(self.seqs[src])
                case Restore(seq_id, entry):
                    self.seqs[seq_id] = list(entry.payload)
                case Trim(seq_id, pos):
                    del self.seqs[seq_id][pos:]

    def decode(self, tokens: list[int], positions: list[int], seq_ids: list[int]) -> None:
        for token, pos, seq in zip(tokens, positions, seq_ids, strict=True):
            assert pos == len(self.seqs[seq]), "a row must extend its sequence's KV exactly"
            self.seqs[seq].append(token)


@pytest.mark.parametrize("seed", range(12))
def test_random_traffic_keeps_every_slots_kv_what_the_scheduler_believes(seed: int) -> None:
    """Conversations that share system prompts and come back, over few slots and a small host
    cache: whatever was kept, copied, restored or waited for, each sequence's KV is exactly the
    tokens its slot counts on, and every prompt token is decoded at the position it belongs."""
    rng = random.Random(seed)
    cache = PromptCache(limit_bytes=6, min_tokens=32)
    s = make(n_slots=3, n_ctx=512, n_batch=64, cache=cache)
    kv = SimulatedKv(3, cache)
    systems = [[rng.randrange(1, 27) for _ in range(rng.choice((20, 40, 70)))] for _ in range(2)]
    history: list[list[int]] = []
    for _ in range(150):
        if rng.random() < 0.3 and len(s.waiting) < 6:
            if history and rng.random() < 0.5:
                prompt = [*rng.choice(history), *(rng.randrange(1, 27) for _ in range(rng.randrange(1, 40)))]
            else:
                prompt = [*rng.choice(systems), *(rng.randrange(1, 27) for _ in range(rng.randrange(1, 30)))]
            history.append(prompt)
            s.add(req(prompt, num_predict=rng.randrange(1, 12)))
        if rng.random() < 0.05 and s.running_ids():
            s.abort([rng.choice(s.running_ids())])
        plan = s.admit()
        kv.apply(plan.ops)
        if rng.random() < 0.05 and plan.ops:  # an operation fails: its slot recomputes its prompt
            lost = plan.ops[-1].seq_id if not isinstance(plan.ops[-1], Copy) else plan.ops[-1].dst
            kv.seqs[lost].clear()
            s.lost_prefix(lost)
        plan = s.plan()
        for slot in s.slots:
            assert kv.seqs[slot.seq_id][: len(slot.cached)] == slot.cached
            assert slot.chain.keys == block_keys(slot.cached)  # the index agrees with the tokens
            if slot.state in (SlotState.PREFILL, SlotState.GENERATING):
                assert kv.seqs[slot.seq_id] == slot.cached and len(slot.cached) == slot.n_past
            if slot.state is SlotState.PREFILL and slot.request is not None:
                assert slot.cached == list(slot.request.prompt[: slot.n_past])
        kv.decode(plan.tokens, plan.positions, plan.seq_ids)
        s.update(plan, [rng.choice((0, *range(1, 27))) for _ in plan.outputs])
    assert s.stats.cached > 0  # the traffic did reuse prefixes


def test_a_slot_expects_its_next_save_so_that_its_buffer_can_be_made_ready_before() -> None:
    cache = PromptCache(limit_bytes=1 << 20, min_tokens=32)
    s = make(n_slots=1, n_ctx=256, n_batch=16, cache=cache)
    slot = s.slots[0]
    s.add(req([*SHARED, 5], num_predict=1, keep=(32,)))
    step(s)
    assert slot.n_past == 16 and s.prefix.next_save(slot) == 32  # the length its request asks to keep
    run_to_end(s)
    assert slot.request is None and s.prefix.next_save(slot) == 41  # idle: saved once reused
    cache.add(slot.chain.tokens, "state", 10)
    assert s.prefix.next_save(slot) == 0  # held by the cache already: nothing to save
    s.add(req([*SHARED, 6, 7], num_predict=5))
    step(s)
    assert slot.request is not None and s.prefix.next_save(slot) == 0  # no hint, no disk: no save ahead


def after_step(s: Scheduler, slot: Slot) -> Checkpoint | None:
    """What ``KvStore.checkpoint`` asks of the prefix component after a step for ``slot``."""
    checkpoint = s.prefix.to_checkpoint(slot)
    if checkpoint is not None and checkpoint.later:
        s.prefix.defer(slot)
    if checkpoint is not None and checkpoint.disk:
        s.prefix.saved(slot)
    return checkpoint


def test_a_waiting_checkpoints_buffer_is_made_again_only_at_doublings() -> None:
    sizes = {0: 0, 1: 1, 2: 2, 3: 4, 41: 64, 64: 64, 65: 128, 100: 128, 1500: 2048, 3000: 4096, 5000: 4096}
    assert {n: room_to_grow(n, 4096) for n in sizes} == sizes
    assert all(n <= room_to_grow(n, 1 << 20) < 2 * n for n in range(1, 5000))  # within the slack


def test_a_long_prompt_expects_its_checkpoint_to_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prefix, "CHECKPOINT_TOKENS", 32)
    disk = DiskCache(tmp_path, bytes(32), 1 << 20, 32)
    try:
        s = make(n_slots=1, n_ctx=256, n_batch=16, disk=disk)
        s.add(req([*SHARED, 5], num_predict=3))
        step(s)
        assert s.prefix.next_save(s.slots[0]) == 41  # the whole prompt, once computed
        while s.slots[0].state is SlotState.PREFILL:
            step(s)
        # Alone, it is saved at once (to disk only: the slot holds it).
        assert after_step(s, s.slots[0]) == ((*SHARED, 5), False, True, False)
    finally:
        disk.close()


@contextmanager
def deferred_beside_a_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: int, prompts: tuple[list[int], ...] = ([*SHARED, 5],)
) -> Iterator[Scheduler]:
    """Slot 0 streams; slots 1, 2, ... have just computed ``prompts``, long ones (``answer`` tokens
    to come each), whose checkpoints wait."""
    monkeypatch.setattr(prefix, "CHECKPOINT_TOKENS", 32)
    disk = DiskCache(tmp_path, bytes(32), 1 << 20, 32)
    try:
        s = make(n_slots=1 + len(prompts), n_ctx=256, n_batch=64 * len(prompts), disk=disk)
        s.add(req([90, 91, 92], num_predict=50))
        step(s)
        for prompt in prompts:
            s.add(req(prompt, num_predict=answer))
        step(s)  # slots 1, ... compute their prompts and sample their first tokens
        for slot, prompt in zip(s.slots[1:], prompts, strict=True):
            assert slot.state is SlotState.GENERATING
            assert after_step(s, slot) == (tuple(prompt), False, False, True)
        yield s
    finally:
        disk.close()


def test_a_long_prompts_checkpoint_waits_while_another_slot_streams(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Copying the state holds the engine thread (tens of ms on a GPU, several decode steps): it
    waits until no slot is busy, and is then taken with the answer the slot holds by then."""
    with deferred_beside_a_stream(tmp_path, monkeypatch, answer=3) as s:
        # Its buffer is made ready for what the slot will hold: 41 tokens now, up to 64 answered.
        assert s.prefix.next_save(s.slots[1]) == 64
        step(s)
        assert list(s.prefix.take_deferred()) == []  # slot 0 still streams
        run_to_end(s)
        assert s.prefix.next_save(s.slots[1]) == 64  # the same buffer, idle: not made again
        # Prompt and answer (its last token never decoded): 41 + 2.
        assert list(s.prefix.take_deferred()) == [(1, (*SHARED, 5, 1, 1))]
        assert list(s.prefix.take_deferred()) == []  # taken once


def test_waiting_checkpoints_stop_for_a_request_that_came(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each copy holds the engine thread: once a request has come, it would wait for the rest,
    which wait on for the next moment no slot is busy (or their slot's reuse)."""
    other = [70 + i % 9 for i in range(40)]
    # Both wait beside slot 0's stream.
    with deferred_beside_a_stream(tmp_path, monkeypatch, answer=2, prompts=([*SHARED, 5], other)) as s:
        run_to_end(s)
        came = iter([True, False])  # quiet before the first copy, not before the second
        assert list(s.prefix.take_deferred(lambda: next(came))) == [(1, (*SHARED, 5, 1))]
        assert list(s.prefix.take_deferred()) == [(2, (*other, 1))]


def agent_beside_a_stream(s: Scheduler) -> Slot:
    """Slot 0 streams; slot 1 takes an agent's prompt with a breakpoint inside it (after 32
    tokens, as after its tools) and one at its end, and computes up to the first."""
    s.add(req([90, 91, 92], num_predict=50))
    step(s)
    s.add(req([*SHARED, 5, 6], num_predict=3, keep=(32, 42)))
    step(s)  # the prompt is cut at its first breakpoint
    return s.slots[1]


def test_an_agents_breakpoints_wait_while_another_slot_streams(tmp_path: Path) -> None:
    """Both of a coding agent's breakpoints wait, inside its prompt (its tools) and at its end
    (its last message): the state taken once no slot is busy gives back both lengths, and the
    slot holds them meanwhile (for RAM, it is saved when reused)."""
    cache = PromptCache(limit_bytes=1 << 20, min_tokens=32)
    disk = DiskCache(tmp_path, bytes(32), 1 << 20, 32)
    try:
        s = make(n_slots=2, n_ctx=256, n_batch=64, cache=cache, disk=disk)
        agent = agent_beside_a_stream(s)
        assert after_step(s, agent) == (tuple(SHARED[:32]), False, False, True)
        assert s.prefix.next_save(agent) == 64  # its buffer is made ready for its whole prompt
        step(s)
        assert agent.state is SlotState.GENERATING
        assert after_step(s, agent) == ((*SHARED, 5, 6), False, False, True)
        assert s.prefix.next_save(agent) == 64  # and its answer: not made again
        run_to_end(s)
        assert list(s.prefix.take_deferred()) == [(1, (*SHARED, 5, 6, 1, 1))]
    finally:
        disk.close()


def test_a_waiting_breakpoint_is_covered_by_its_prompts_save_once_the_others_ended(tmp_path: Path) -> None:
    """The stream beside it ends before the agent's prompt does: its end is saved at once, which
    holds the breakpoint too, and no second copy of the whole state follows."""
    cache = PromptCache(limit_bytes=1 << 20, min_tokens=32)
    disk = DiskCache(tmp_path, bytes(32), 1 << 20, 32)
    try:
        s = make(n_slots=2, n_ctx=256, n_batch=64, cache=cache, disk=disk)
        s.add(req([90, 91, 92], num_predict=3))
        step(s)
        s.add(req([*SHARED, 5, 6], num_predict=3, keep=(32, 42)))
        step(s)  # the stream's second token; the agent's prompt up to its first breakpoint
        agent = s.slots[1]
        assert after_step(s, agent) == (tuple(SHARED[:32]), False, False, True)
        step(s)  # the stream's last token; the rest of the agent's prompt
        assert s.slots[0].request is None and agent.state is SlotState.GENERATING
        assert after_step(s, agent) == ((*SHARED, 5, 6), False, True, False)  # alone now: at once
        run_to_end(s)
        assert list(s.prefix.take_deferred()) == []
    finally:
        disk.close()


@pytest.mark.parametrize("windowed", [False, True])
def test_a_breakpoint_inside_a_prompt_is_saved_at_once_alone_or_for_a_sliding_window(
    tmp_path: Path, windowed: bool
) -> None:
    """Alone, nothing waits for the copy; a sliding-window model's state past the breakpoint no
    longer holds the window there, so it is saved when the slot reaches it, to RAM too."""
    cache = PromptCache(limit_bytes=1 << 20, min_tokens=32)
    disk = DiskCache(tmp_path, bytes(32), 1 << 20, 32)
    try:
        s = make(n_slots=2, n_ctx=256, n_batch=64, cache=cache, disk=disk, windowed=windowed)
        if windowed:
            agent = agent_beside_a_stream(s)
        else:
            s.add(req([*SHARED, 5, 6], num_predict=3, keep=(32, 42)))
            step(s)
            agent = s.slots[0]
        assert after_step(s, agent) == (tuple(SHARED[:32]), True, True, False)
        # Then the whole prompt: saved at once alone, waiting beside the stream.
        assert s.prefix.next_save(agent) == (0 if windowed else 42)
        step(s)
        assert after_step(s, agent) == ((*SHARED, 5, 6), False, not windowed, windowed)
    finally:
        disk.close()


def test_a_slot_reused_while_its_checkpoint_waits_is_saved_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a host cache too: the reuse would cut the cells the checkpoint waited for."""
    with deferred_beside_a_stream(tmp_path, monkeypatch, answer=2) as s:
        step(s)
        assert s.slots[1].state is SlotState.IDLE
        s.add(req([70 + i % 5 for i in range(20)], num_predict=2))
        plan = s.admit()
        assert plan.ops[0] == Save(1, (*SHARED, 5, 1))
        run_to_end(s)
        assert list(s.prefix.take_deferred()) == []  # saved once, at the reuse


def test_a_checkpoint_waits_no_longer_once_its_cells_are_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed step clears the KV cache; the slot's later request is not saved in its name."""
    with deferred_beside_a_stream(tmp_path, monkeypatch, answer=2) as s:
        s.fail_all("compute error")
        s.add(req([80, 81], num_predict=1))
        s.add(req([*SHARED, 6, 7], num_predict=1))  # into slot 1, not checkpointed (not asked here)
        run_to_end(s)
        assert s.slots[1].cached == [*SHARED, 6, 7] and list(s.prefix.take_deferred()) == []
