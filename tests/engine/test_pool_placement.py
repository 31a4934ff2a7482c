"""The pool against a loader that places layers as ``LoadedModel`` does: the loaded spec holds the
fitted (or clamped) layer count and split, not what was asked for."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from test_pool import FakeModel, fake_pool, request

from cllm_ollama.engine.loaded import LoadSpec
from cllm_ollama.engine.pool import ModelPool

N_PARTS = 29  # the model's blocks and its output layer
FITTED = 20  # what memory holds when num_gpu is unset


def placing_pool(loads: list[LoadSpec]) -> ModelPool:
    """A pool whose loads record the spec asked for and place it over two GPUs: num_gpu clamped to
    the model's parts, unset fitted to ``FITTED``."""

    def loader(spec: LoadSpec, max_queue: int) -> FakeModel:
        loads.append(spec)
        layers = min(spec.n_gpu_layers, N_PARTS) if spec.n_gpu_layers >= 0 else FITTED
        return FakeModel(replace(spec, n_gpu_layers=layers, tensor_split=(layers - layers // 2, layers // 2)))

    return fake_pool(loader, None, 2)


def test_num_gpu_above_the_layer_count_does_not_reload_an_idle_model() -> None:
    loads: list[LoadSpec] = []

    async def run() -> None:
        pool = placing_pool(loads)
        first = await pool.acquire(request(num_gpu=999), None)
        assert first.model.spec.n_gpu_layers == N_PARTS
        pool.release(first)
        again = await pool.acquire(request(num_gpu=999), None)
        assert again is first and len(loads) == 1
        pool.release(again)
        other = await pool.acquire(request(num_gpu=5), None)  # another placement still reloads
        assert len(loads) == 2 and loads[1].n_gpu_layers == 5
        pool.release(other)
        await pool.close()

    asyncio.run(run())


def test_a_reload_fits_the_layers_again_unless_they_were_asked_for() -> None:
    loads: list[LoadSpec] = []

    async def run() -> None:
        pool = placing_pool(loads)
        fitted = await pool.acquire(request(), None)
        assert fitted.model.spec.n_gpu_layers == FITTED and fitted.model.spec.tensor_split
        pool.release(fitted)
        grown = await pool.acquire(request(num_ctx=2048), None)  # a larger context: reloaded
        assert len(loads) == 2 and loads[1].n_gpu_layers == -1 and loads[1].tensor_split == ()
        grown.model.dead = "RuntimeError: boom"  # type: ignore[misc]
        pool.release(grown)
        revived = await pool.acquire(request(), None)  # a dead engine: reloaded as asked too
        assert len(loads) == 3 and loads[2].n_gpu_layers == -1 and loads[2].tensor_split == ()
        pool.release(revived)
        pinned = await pool.acquire(request(num_gpu=7), None)
        pool.release(pinned)
        kept = await pool.acquire(request(num_ctx=4096), None)  # an asked count is kept
        assert len(loads) == 5 and loads[4].n_gpu_layers == 7 and loads[4].tensor_split == ()
        pool.release(kept)
        await pool.close()

    asyncio.run(run())
