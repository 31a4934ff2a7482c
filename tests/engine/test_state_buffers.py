"""State buffers (issue 18): a save copies into pages made ready off the engine thread, and a
dropped state is freed off it, never while something can still read it."""

from __future__ import annotations

import queue
import random
import threading
from pathlib import Path
from typing import Any

import pytest
from fake_binding import FakeBatch, FakeContext, FakeModel
from polling import until

from cllm_ollama.engine.binding import state_buffers
from cllm_ollama.engine.binding.state_buffers import StateBuffers
from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.request import Request, SamplingParams
from cllm_ollama.engine.runner import Runner, Sink

MIB = 1 << 20


@pytest.fixture
def buffers() -> Any:
    b = StateBuffers(1 << 30)
    yield b
    b.close()


def test_a_buffer_is_exactly_the_size_asked_writable_and_zeroed(buffers: StateBuffers) -> None:
    buf = buffers.take(None, 10_000)
    assert len(buf) == 10_000 and bytes(buf) == bytes(10_000)
    memoryview(buf).cast("B")[:3] = b"abc"
    assert bytes(buf[:3]) == b"abc"
    assert buffers.stats.fresh == 1 and buffers.stats.hits == 0


def test_a_prepared_buffer_serves_its_keys_save(buffers: StateBuffers) -> None:
    buffers.prepare(3, 2 * MIB)
    until(lambda: buffers.ready(3))
    buf = buffers.take(3, 2 * MIB - 100)  # the estimate is an upper bound: a little is left over
    assert len(buf) == 2 * MIB - 100 and buffers.stats.hits == 1 and not buffers.ready(3)
    other = buffers.take(3, 100)  # taken already: fresh memory
    assert buffers.stats.fresh == 1 and len(other) == 100


def test_a_prepared_buffer_far_from_the_size_is_not_used(buffers: StateBuffers) -> None:
    buffers.prepare(1, 8 * MIB)
    buffers.prepare(2, MIB)
    until(lambda: buffers.ready(1) and buffers.ready(2))
    small = buffers.take(1, MIB)  # 8x smaller: the prepared buffer would waste most of its pages
    large = buffers.take(2, 2 * MIB)  # larger than prepared: it cannot hold it
    assert buffers.stats.hits == 0 and buffers.stats.fresh == 2
    assert not buffers.ready(1) and not buffers.ready(2)
    until(lambda: buffers.stats.freed >= 2)  # both prepared buffers went back
    assert len(small) == MIB and len(large) == 2 * MIB


def test_a_new_expectation_replaces_the_old_and_prepared_memory_is_bounded() -> None:
    buffers = StateBuffers(3 * MIB)
    try:
        buffers.prepare(0, MIB)
        buffers.prepare(0, 2 * MIB)  # the slot now expects a larger save
        until(lambda: buffers.ready(0))
        assert buffers.held_bytes == 2 * MIB  # the first expectation is gone
        buffers.prepare(1, 2 * MIB)  # 4 MiB in all: past the limit, skipped
        assert buffers.held_bytes == 2 * MIB
        assert len(buffers.take(0, 2 * MIB)) == 2 * MIB and buffers.stats.hits == 1
    finally:
        buffers.close()


def test_a_save_nobody_expected_finds_a_spare_of_the_last_saves_size(buffers: StateBuffers) -> None:
    """Under load a slot is reused as soon as it is free: no time to expect its save."""
    first = buffers.take(0, 3 * MIB)
    assert buffers.stats.fresh == 1
    until(lambda: buffers.ready(state_buffers.SPARE))
    second = buffers.take(1, 3 * MIB - 4096)
    assert buffers.stats.hits == 1 and len(first) == 3 * MIB and len(second) == 3 * MIB - 4096
    assert buffers.take(None, 4096) is not None and buffers.stats.fresh == 2  # reads and copies: fresh


def test_a_dropped_buffer_is_freed_by_the_worker_not_the_thread_that_dropped_it(
    buffers: StateBuffers, monkeypatch: pytest.MonkeyPatch
) -> None:
    freed_on: queue.SimpleQueue[str] = queue.SimpleQueue()
    real = StateBuffers._free

    def watched(mm: Any) -> None:
        freed_on.put(threading.current_thread().name)
        real(mm)

    monkeypatch.setattr(StateBuffers, "_free", staticmethod(watched))
    buf = buffers.take(None, 4 * MIB)
    memoryview(buf).cast("B")[:] = b"x" * (4 * MIB)  # its pages are in
    del buf
    buffers.flush()
    assert freed_on.get_nowait() == "cllm-state-buffers" and freed_on.empty()
    assert buffers.stats.freed == 1


def test_a_view_keeps_the_buffer_and_its_bytes() -> None:
    buffers = StateBuffers(1 << 30)
    buf = buffers.take(None, 3 * state_buffers.SLICE)
    view = memoryview(buf).cast("B")
    view[-5:] = b"still"
    del buf
    buffers.close()  # the worker has done all it was asked
    assert buffers.stats.freed == 0 and bytes(view[-5:]) == b"still"


class AllocContext(FakeContext):
    """Saves a state as the binding does: into the buffer ``alloc`` gives for its size."""

    def state_get(self, seq_id: int, alloc: Any = None) -> Any:
        buf = alloc(64 << 10)
        memoryview(buf).cast("B")[:4] = seq_id.to_bytes(4, "little")
        return buf


def test_a_slot_reused_for_another_conversation_saves_into_the_buffer_made_ready_for_it() -> None:
    """The engine expects an idle slot's save (it is saved once the slot is reused) and has its
    buffer made ready: the save on reuse then only copies."""
    spec = LoadSpec(
        Path("fake.gguf"),
        n_slots=1,
        n_ctx_slot=4096,
        n_batch=64,
        n_threads=1,
        cache_bytes=64 * MIB,
        cache_min_tokens=64,
    )
    runner = Runner(FakeModel(), spec, context=AllocContext, batch=FakeBatch)  # type: ignore[arg-type]
    buffers = runner.kv.buffers
    assert buffers is not None
    rng = random.Random(0)
    try:
        for prompt in ([rng.randrange(1, 40) for _ in range(200)], [rng.randrange(1, 40) for _ in range(200)]):
            sink = Sink(queue.SimpleQueue())
            runner.submit(Request(tuple(prompt), SamplingParams(temperature=0), num_predict=2), None, sink)
            while (event := sink.queue.get(timeout=10)).finish is None:  # type: ignore[attr-defined]
                pass
            until(lambda: buffers.ready(0))  # the idle slot's save is expected, its buffer ready
        assert buffers.stats.hits == 1  # the second request's admission saved the first's state into it
        assert runner.kv.cache is not None and len(runner.kv.cache) == 1
        assert event.finish is not None
    finally:
        runner.close()
