"""The loaded model over the fake binding: who owns a request's sampler when its caller goes."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_binding import FakeBatch, FakeContext, FakeModel

from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.loaded import LoadedModel
from cllm_ollama.engine.request import Event, FinishReason, Request, SamplingParams
from cllm_ollama.engine.runner import Runner
from cllm_ollama.errors import InvalidRequest

# A grammar makes the client build the sampler in a worker thread (the chain parses it).
CONSTRAINED = SamplingParams(temperature=0, grammar='root ::= "a"')


class SlowChain:
    """Stands in for a native sampler chain: builds slowly, samples greedily, counts closes."""

    def __init__(self) -> None:
        self.closed = False

    def prime(self, tokens: Any) -> None:
        pass

    def sample(self, ctx: FakeContext, row: int) -> int:
        return int(ctx.logits(len(ctx._last))[row].argmax())

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def loaded() -> Iterator[tuple[LoadedModel, list[SlowChain]]]:
    runner = Runner(
        FakeModel(),  # type: ignore[arg-type]
        LoadSpec(Path("fake.gguf"), n_slots=2, n_ctx_slot=4096, n_batch=16, n_threads=1),
        context=FakeContext,  # type: ignore[arg-type]
        batch=FakeBatch,  # type: ignore[arg-type]
    )
    model = object.__new__(LoadedModel)  # no weights: only what generate() uses
    model.runner, model.model, model.max_queue, model.in_flight = runner, FakeModel(), 8, 0
    model.spec = type("Spec", (), {"n_slots": 2})()  # type: ignore[assignment]
    chains: list[SlowChain] = []

    def build(params: SamplingParams) -> SlowChain:
        time.sleep(0.2)
        chains.append(SlowChain())
        return chains[-1]

    model._sampler_for = build  # type: ignore[method-assign,assignment]
    yield model, chains
    runner.close()


def test_a_request_is_run_with_the_sampler_the_engine_built(loaded: tuple[LoadedModel, list[SlowChain]]) -> None:
    model, chains = loaded

    async def run() -> list[Event]:
        return [e async for e in model.generate(Request((3,), CONSTRAINED, num_predict=3))]

    events = asyncio.run(run())
    assert events[-1].finish is FinishReason.LENGTH and [t for e in events for t in e.tokens] == [4, 5, 6]
    assert len(chains) == 1 and chains[0].closed  # freed by the engine when the request ended


def test_a_caller_cancelled_while_its_sampler_is_built_leaves_nothing_behind(
    loaded: tuple[LoadedModel, list[SlowChain]],
) -> None:
    """The task does not wait for the thread building the chain: whichever ends second cleans up."""
    model, chains = loaded
    runner = model.runner
    assert runner is not None

    async def run() -> None:
        async def consume() -> None:
            async for _ in model.generate(Request((3,), CONSTRAINED, num_predict=10**6)):
                pass

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0.05)
        task.cancel()  # while the chain is being built
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0.4)  # the thread has finished by now

    asyncio.run(run())
    assert len(chains) == 1 and chains[0].closed  # closed by its builder: never submitted
    assert model.in_flight == 0 and not runner.scheduler.running_ids() and not runner.scheduler.waiting
    assert model.occupancy().waiting == 0  # its reservation is gone with it


@pytest.mark.parametrize("sampling", [CONSTRAINED, SamplingParams(dry_multiplier=0.8)], ids=["grammar", "dry"])
def test_a_request_whose_sampler_is_being_built_counts_as_queued(
    loaded: tuple[LoadedModel, list[SlowChain]], sampling: SamplingParams
) -> None:
    """A grammar's chain, or DRY's (which reads the whole vocabulary per breaker), is built off the
    event loop: meanwhile the loop runs, and the request counts as queued."""
    model, chains = loaded
    building, release = threading.Event(), threading.Event()

    def build(params: SamplingParams) -> SlowChain:
        building.set()
        release.wait(10)
        chains.append(SlowChain())
        return chains[-1]

    model._sampler_for = build  # type: ignore[method-assign,assignment]

    async def run() -> None:
        async def consume() -> None:
            async for _ in model.generate(Request((3,), sampling, num_predict=3)):
                pass

        task = asyncio.ensure_future(consume())
        assert await asyncio.to_thread(building.wait, 10)
        assert not chains  # the loop runs while the chain is still being built
        now = model.occupancy()
        assert (now.running, now.waiting) == (0, 1)  # not yet in the runner, but queued
        release.set()
        await task

    asyncio.run(run())
    now = model.occupancy()
    assert (now.running, now.waiting) == (0, 0)


def test_a_sampler_that_cannot_be_built_leaves_no_reservation(loaded: tuple[LoadedModel, list[SlowChain]]) -> None:
    model, _ = loaded

    def build(params: SamplingParams) -> SlowChain:
        raise InvalidRequest("bad grammar")

    model._sampler_for = build  # type: ignore[method-assign,assignment]

    async def run() -> None:
        with pytest.raises(InvalidRequest):
            async for _ in model.generate(Request((3,), CONSTRAINED, num_predict=3)):
                pass

    asyncio.run(run())
    assert model.occupancy().waiting == 0
