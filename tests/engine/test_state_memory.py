"""A saved state's memory on the real binding (issue 18): saved into a prepared buffer, restored
from it, and freed as soon as the last reference goes, by the buffers' worker (a reference cycle
used to leave it to the cyclic garbage collector, on whatever thread ran a collection)."""

from __future__ import annotations

import functools
import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import oracle
import pytest

from cllm_ollama.engine.binding import Batch, Context, Model, StateBuffers

pytestmark = pytest.mark.model
gguf_path = oracle.gguf_path  # the oracle model (a fixture)


@pytest.fixture
def ctx(gguf_path: Path) -> Iterator[Context]:
    model = Model(gguf_path)
    context = Context(model, n_seq_max=2, n_ctx_seq=256, n_batch=64, n_threads=1)
    tokens = model.tokenize(oracle.SYSTEM)[:40]
    batch = Batch(64)
    batch.fill(tokens, range(len(tokens)), [0] * len(tokens), [len(tokens) - 1])
    context.decode(batch)
    yield context
    context.close()
    model.close()


class Bytes(bytearray):
    """A bytearray that can be watched (a weak reference)."""


@pytest.fixture
def no_gc() -> Iterator[None]:
    gc.disable()
    yield
    gc.enable()


def test_a_state_saved_into_a_prepared_buffer_restores_the_same_kv(ctx: Context) -> None:
    buffers = StateBuffers(1 << 30)
    try:
        size = len(ctx.state_get(0))
        buffers.prepare(0, 2 * size)  # an upper bound, as the runner's estimate is
        buffers.flush()
        assert buffers.ready(0)
        state = ctx.state_get(0, functools.partial(buffers.take, 0))
        assert buffers.stats.hits == 1 and len(state) == size
        assert ctx.state_set(1, state)
        batch = Batch(2)  # the same next token on both: the restored sequence answers as the original
        batch.fill([7, 7], [40, 40], [0, 1], [0, 1])
        ctx.decode(batch)
        logits = ctx.logits(2)
        assert np.allclose(logits[0], logits[1], atol=1e-4)
    finally:
        buffers.close()


@pytest.mark.usefixtures("no_gc")
def test_a_dropped_state_is_freed_at_once_not_by_the_garbage_collector(ctx: Context) -> None:
    buffers = StateBuffers(1 << 30)
    try:
        state = ctx.state_get(0, functools.partial(buffers.take, None))
        assert ctx.state_set(1, state)
        del state
        buffers.flush()
        assert buffers.stats.freed == 1  # by the worker, with no collection run
        plain = ctx.state_get(0)  # the default buffer, and a bytearray read back from disk
        read = Bytes(bytes(plain))
        gone = [weakref.finalize(plain, lambda: None), weakref.finalize(read, lambda: None)]
        assert ctx.state_set(1, plain) and ctx.state_set(1, read)
        del plain, read
        assert not any(f.alive for f in gone)
    finally:
        buffers.close()
