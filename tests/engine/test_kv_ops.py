"""The runner's KV operations (``KvStore.apply``) over a fake context whose sequences hold
cells: an operation that cannot be done costs its own request a recomputed prompt, and so does
every later copy that reads what it left, never a sequence that holds other than it is said to."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_binding import FakeContext, FakeModel, fake_runner
from test_scheduler import SHARED, make, req, step

from cllm_ollama.engine.prefix import Copy, Trim
from cllm_ollama.engine.runner import Runner
from cllm_ollama.engine.scheduler import StepPlan
from cllm_ollama.engine.slot import SlotState
from cllm_ollama.errors import EngineError


class CellContext(FakeContext):
    """Each sequence's cells as a list of positions; ``refuse`` makes ``state_set`` fail for a
    sequence as llama.cpp's does (the sequence is left empty), ``unreadable`` ``state_get``. As
    llama.cpp's, a ``seq_copy`` moves the bytes at the next decode: till then ``state_get`` of its
    destination reads what it held before (``stale``)."""

    def __init__(self, model: FakeModel, **kw: Any) -> None:
        super().__init__(model, **kw)
        self.seqs: list[list[int]] = [[] for _ in range(self.n_seq_max)]
        self.refuse: set[int] = set()
        self.unreadable: set[int] = set()
        self.stale: dict[int, list[int]] = {}

    def decode(self, batch: Any) -> None:
        self.stale.clear()
        super().decode(batch)

    def seq_rm(self, seq_id: int, p0: int, p1: int = -1) -> bool:
        assert p1 == -1
        del self.seqs[seq_id][p0:]
        return True

    def seq_clear(self, seq_id: int) -> None:
        self.seqs[seq_id].clear()

    def seq_copy(self, src: int, dst: int) -> None:
        super().seq_copy(src, dst)
        self.stale.setdefault(dst, list(self.seqs[dst]))
        self.seqs[dst] = list(self.seqs[src])

    def state_get(self, seq_id: int, alloc: Any = None) -> tuple[int, ...]:  # type: ignore[override]
        if seq_id in self.unreadable:
            raise EngineError(f"could not save the state of sequence {seq_id}")
        return tuple(self.stale.get(seq_id, self.seqs[seq_id]))

    def state_set(self, seq_id: int, data: tuple[int, ...]) -> bool:  # type: ignore[override]
        if seq_id in self.refuse:
            self.seqs[seq_id] = []
            return False
        self.seqs[seq_id] = list(data)
        return True


@pytest.fixture
def runner() -> Iterator[Runner]:
    r = fake_runner(CellContext, n_slots=3)
    yield r
    r.close()


def apply(runner: Runner, ops: list[Any], monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """Perform ``ops`` as the engine thread does (it is idle); the sequences reported lost."""
    lost: set[int] = set()
    monkeypatch.setattr(runner.scheduler, "lost_prefix", lost.add)
    runner.kv.apply(StepPlan(ops=ops), runner.scheduler)
    return lost


# What admission plans when a slot that waited for another's prefix copies it, and a request
# admitted in the same step copies that prefix from the waiter (the test below shows it does).
CHAIN = [Copy(1, 0), Trim(0, 41), Copy(0, 2), Trim(2, 40)]


def test_admission_can_copy_from_a_slot_that_copies_in_the_same_step() -> None:
    s = make(n_slots=3, n_ctx=256, n_batch=4)
    s.add(req([50], num_predict=1))  # slot 0, done at once
    s.add(req([*SHARED, 7], num_predict=50))  # slot 1 computes SHARED, 3 tokens a step
    step(s)
    s.add(req([*SHARED, 7, 8], num_predict=50))  # slot 0 waits for slot 1's
    step(s)
    assert s.slots[0].state is SlotState.WAITING
    while s.slots[1].state is not SlotState.GENERATING:
        step(s)
    s.add(req([*SHARED, 9], num_predict=5))
    assert s.admit().ops == CHAIN


def test_a_copy_from_a_sequence_whose_copy_failed_is_lost_too(runner: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx: CellContext = runner.ctx  # type: ignore[assignment]
    ctx.seqs[1] = list(range(45))
    ctx.refuse = {0}
    lost = apply(runner, CHAIN, monkeypatch)
    assert 0 in lost
    # Sequence 2 copied what sequence 0 held after its failure (nothing): it must be recomputed.
    assert 2 in lost or ctx.seqs[2] == list(range(40))


def test_a_copy_from_a_sequence_whose_own_copy_is_queued_is_queued_behind_it(
    runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chain above with the waiter's copy a whole stream (its source is long): its bytes land
    at the next decode, so the newcomer's copy from the waiter must be queued behind it, not read
    from the waiter's stale bytes now (wrong answers, then cached and saved to disk)."""
    ctx: CellContext = runner.ctx  # type: ignore[assignment]
    ctx.seqs[0] = [7, 7]  # an earlier conversation
    ctx.seqs[1] = list(range(ctx.n_ctx_seq // 2))  # long: copied as its whole stream
    runner.scheduler.slots[1].chain.extend(ctx.seqs[1])
    assert apply(runner, CHAIN, monkeypatch) == set()
    assert ctx.seqs[0] == list(range(41)) and ctx.seqs[2] == list(range(40))
    assert ctx.copy_queued(2)


def test_an_unreadable_copy_source_costs_only_the_copy(runner: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx: CellContext = runner.ctx  # type: ignore[assignment]
    ctx.seqs[1] = list(range(45))
    ctx.unreadable = {1}
    # A state copy (a short source) that cannot be read loses its destination's prefix; it does
    # not fail the step, which would end every running request with an error.
    assert apply(runner, [Copy(1, 0), Trim(0, 41)], monkeypatch) == {0}
    assert ctx.seqs[0] == []
