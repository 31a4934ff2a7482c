"""The model pool's reload policy, with a fake loader (no llama.cpp)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from cllm_ollama.engine.client import LoadSpec
from cllm_ollama.engine.pool import LoadRequest, ModelPool


@dataclass
class FakeModel:
    spec: LoadSpec
    n_ctx_train: int = 4096
    closed: bool = field(default=False)
    dead: str | None = None

    @property
    def n_ctx_slot(self) -> int:
        return self.spec.n_ctx_slot

    def close(self) -> None:
        self.closed = True


def make_pool(loads: list[LoadSpec]) -> ModelPool:
    def loader(spec: LoadSpec, max_queue: int) -> FakeModel:
        loads.append(spec)
        return FakeModel(spec)

    return ModelPool(
        num_parallel=4,
        context_length=512,
        num_batch=512,
        num_thread=2,
        max_loaded=2,
        max_queue=8,
        default_keep_alive=300,
        loader=loader,  # type: ignore[arg-type]
    )


def request(**options: int) -> LoadRequest:
    return LoadRequest(path=Path("/m.gguf"), name="m", digest="d", **options)  # type: ignore[arg-type]


def test_a_clients_batch_or_thread_setting_never_reloads_or_shrinks_the_batch() -> None:
    loads: list[LoadSpec] = []

    async def run() -> None:
        pool = make_pool(loads)
        first = await pool.acquire(request(num_batch=8, num_thread=1), None)
        assert loads[0].n_batch == 512  # floored at the server's batch
        held = await pool.acquire(request(num_batch=2048, num_thread=7), None)
        assert held is first and len(loads) == 1
        pool.release(held)
        pool.release(first)
        # Even idle, another batch or thread count does not reload.
        again = await pool.acquire(request(num_batch=64), None)
        assert again is first and len(loads) == 1
        pool.release(again)
        await pool.close()

    asyncio.run(run())


def test_gpu_placement_reloads_only_an_idle_model_and_context_growth_always() -> None:
    loads: list[LoadSpec] = []

    async def run() -> None:
        pool = make_pool(loads)
        busy = await pool.acquire(request(), None)
        same = await pool.acquire(request(num_gpu=3), None)  # busy: served as loaded
        assert same is busy and len(loads) == 1
        pool.release(same)
        pool.release(busy)
        moved = await pool.acquire(request(num_gpu=3), None)  # idle: reloaded
        assert len(loads) == 2 and loads[1].n_gpu_layers == 3 and busy.model.closed  # type: ignore[attr-defined]
        pool.release(moved)
        bigger = await pool.acquire(request(num_ctx=1024), None)
        assert len(loads) == 3 and bigger.model.n_ctx_slot == 1024
        pool.release(bigger)
        await pool.close()

    asyncio.run(run())


def test_a_model_whose_engine_died_is_loaded_again_by_the_next_request() -> None:
    loads: list[LoadSpec] = []

    async def run() -> None:
        pool = make_pool(loads)
        entry = await pool.acquire(request(), None)
        pool.release(entry)
        entry.model.dead = "RuntimeError: boom"  # type: ignore[attr-defined]
        again = await pool.acquire(request(), None)
        assert len(loads) == 2 and again is not entry and entry.model.closed  # type: ignore[attr-defined]
        pool.release(again)
        await pool.close()

    asyncio.run(run())
