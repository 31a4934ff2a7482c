"""Saved prompt states of more tokens than a slot's context (saved before a reload with a smaller
context): llama.cpp refuses to restore them (``state_read_meta``: not enough cells), so neither
tier offers them nor counts them as holding the shorter prefixes this load can save and use. A
state llama.cpp refuses anyway is dropped from both tiers, not read and refused at every request
that shares it."""

from __future__ import annotations

import queue
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fake_binding import FakeContext, FakeModel
from test_scheduler import make, req, run_to_end

from cllm_ollama.engine.disk_cache import Read
from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.kv_store import KvStore
from cllm_ollama.engine.prefix import KvOp, Load, Restore
from cllm_ollama.engine.scheduler import Scheduler, StepPlan

SYSTEM = [(7 * i) % 23 + 1 for i in range(200)]  # a system prompt every request shares
AGENT = (*SYSTEM, *[5] * 100)  # an agent's context, saved while slots held 512 cells
_HEAD = struct.Struct("<IiI")  # magic, sequence id, stream count (``state_streams``)
_U32 = struct.Struct("<I")


def state(n_cells: int, n_streams: int = 1) -> bytearray:
    """A sequence's state in llama.cpp's layout: its cells in the first stream (a byte each
    here), the others empty."""
    return bytearray(_HEAD.pack(0x67676E73, 0, n_streams) + _U32.pack(n_cells) + bytes(n_cells + 4 * (n_streams - 1)))


def cells(payload: Any) -> int:
    """How many cells a ``state`` holds."""
    view = memoryview(payload).cast("B")
    (n_streams,) = _U32.unpack_from(view, 8)
    counts = (_U32.unpack_from(view, 12 + 4 * k)[0] for k in range(n_streams))
    return next((n for n in counts if n), 0)


class SizedContext(FakeContext):
    """As llama.cpp's: ``state_set`` refuses a state of more cells than a sequence's stream holds,
    one under a queued copy, and any while ``refuse`` (a layout this context does not read)."""

    def __init__(self, model: FakeModel, **kw: Any) -> None:
        super().__init__(model, **kw)
        self.refuse = False
        self.held: dict[int, int] = {}  # each sequence's cells

    def state_get(self, seq_id: int, alloc: Any = None) -> bytearray:  # type: ignore[override]
        return state(self.held.get(seq_id, 0), self.n_seq_max)

    def state_set(self, seq_id: int, data: Any) -> bool:
        if self.copy_queued(seq_id) or self.refuse or cells(data) > self.n_ctx_seq:
            return False
        self.held[seq_id] = cells(data)
        return True


@contextmanager
def loaded(tmp_path: Path, n_ctx: int) -> Iterator[tuple[KvStore, SizedContext, queue.Queue[tuple[int, Any]]]]:
    """A load of one slot of ``n_ctx`` cells with both tiers (the disk one in ``tmp_path``, shared by
    every load of these weights); its disk reads, as they are done."""
    weights = tmp_path / "m.gguf"
    if not weights.exists():  # touched again, its modification time would make it other weights
        weights.touch()
    model = FakeModel()
    model.path = weights
    spec = LoadSpec(
        weights,
        n_slots=1,
        n_ctx_slot=n_ctx,
        n_batch=64,
        n_threads=1,
        cache_bytes=1 << 20,
        cache_min_tokens=32,
        cache_dir=tmp_path / "cache",
        cache_disk_bytes=1 << 24,
    )
    ctx = SizedContext(model, n_seq_max=1, n_ctx_seq=n_ctx, n_batch=64, n_threads=1)
    reads: queue.Queue[tuple[int, Any]] = queue.Queue()
    kv = KvStore(model, spec, ctx, lambda request_id: lambda read: reads.put((request_id, read)))  # type: ignore[arg-type]
    try:
        yield kv, ctx, reads
    finally:
        kv.close()


def scheduler(kv: KvStore, n_ctx: int) -> Scheduler:
    return make(n_slots=1, n_ctx=n_ctx, n_batch=64, cache=kv.cache, disk=kv.disk)


def saved_under_a_larger_context(tmp_path: Path) -> None:
    """The agent's state, on disk from a load whose slots held 512 cells."""
    with loaded(tmp_path, 512) as (kv, _, _):
        assert kv.disk is not None
        kv.disk.save(AGENT, state(len(AGENT)))


def restores(ops: list[KvOp]) -> list[KvOp]:
    return [op for op in ops if isinstance(op, Load | Restore)]


def test_a_state_longer_than_a_slot_is_neither_loaded_from_disk_nor_kept_in_ram(tmp_path: Path) -> None:
    saved_under_a_larger_context(tmp_path)
    with loaded(tmp_path, 256) as (kv, _, _):
        assert kv.disk is not None and kv.cache is not None
        s = scheduler(kv, 256)
        s.add(req([*SYSTEM, 9, 9], num_predict=1))
        assert restores(s.admit().ops) == []  # the prompt is computed: no read of a state refused
        assert kv.cache.add(AGENT, state(len(AGENT)), len(AGENT)) is None  # nor can RAM hold it
        assert len(list(kv.disk.dir.glob("*.kv"))) == 1  # still on disk, for a load that fits it


def test_a_state_longer_than_a_slot_does_not_stand_in_for_the_prefix_it_holds(tmp_path: Path) -> None:
    """The system prompt's own state is saved (it would not be while the agent's "held" it), and
    restored from then on."""
    saved_under_a_larger_context(tmp_path)
    with loaded(tmp_path, 256) as (kv, ctx, _):
        assert kv.disk is not None and kv.cache is not None
        assert not kv.disk.covers(SYSTEM) and not kv.cache.covers(SYSTEM)
        ctx.held[0] = len(SYSTEM)
        kv.keep(0, tuple(SYSTEM), host=False, disk=True)
        entry, n = kv.disk.lookup([*SYSTEM, 9])
        assert entry is not None and entry.tokens == tuple(SYSTEM) and n == len(SYSTEM)


def apply(kv: KvStore, s: Scheduler, ops: list[KvOp]) -> None:
    kv.apply(StepPlan(ops=ops), s)


def test_a_refused_state_from_ram_goes_but_not_one_only_a_queued_copy_kept_out(tmp_path: Path) -> None:
    with loaded(tmp_path, 256) as (kv, ctx, _):
        assert kv.cache is not None
        entry = kv.cache.add(SYSTEM, state(len(SYSTEM)), len(SYSTEM))
        assert entry is not None
        s = scheduler(kv, 256)
        ctx.queued = {0}  # a copy lands on the sequence at the next decode: not the state's fault
        apply(kv, s, [Restore(0, entry)])
        assert kv.cache.lookup(SYSTEM) == (entry, len(SYSTEM))
        ctx.queued.clear()
        ctx.refuse = True
        apply(kv, s, [Restore(0, entry)])
        assert kv.cache.lookup(SYSTEM) == (None, 0)


def test_a_refused_state_from_disk_is_read_once(tmp_path: Path) -> None:
    """Refused once, the state goes from RAM (where the read put it) and from disk (its file too):
    the next request sharing its prefix computes it without reading it again."""
    with loaded(tmp_path, 256) as (kv, ctx, reads):
        assert kv.disk is not None and kv.cache is not None
        kv.disk.save(SYSTEM, state(len(SYSTEM)))
        ctx.refuse = True
        s = scheduler(kv, 256)
        s.add(req([*SYSTEM, 9, 9], num_predict=1))
        plan = s.admit()
        assert [type(op) for op in restores(plan.ops)] == [Load]
        apply(kv, s, plan.ops)  # the read starts
        request_id, read = reads.get(timeout=10)
        assert isinstance(read, Read)
        s.loaded(request_id, read)
        plan = s.admit()
        assert [type(op) for op in restores(plan.ops)] == [Restore]
        apply(kv, s, plan.ops)  # refused: the slot computes its prompt
        assert kv.cache.lookup(SYSTEM) == (None, 0) and kv.disk.lookup(SYSTEM) == (None, 0)
        s.plan()
        run_to_end(s)
        s.add(req([*SYSTEM, 8, 8], num_predict=1))
        assert restores(s.admit().ops) == []
        disk_dir = kv.disk.dir
    assert list(disk_dir.glob("*.kv")) == []  # the file went with it
