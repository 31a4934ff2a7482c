"""The pool against a loader that places layers as ``LoadedModel`` does: the loaded spec holds the
fitted (or clamped) layer count and split, not what was asked for."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from test_pool import FakeModel, fake_pool, request

from cllm_ollama.engine.loaded import LoadSpec
from cllm_ollama.engine.pool import ModelPool
from cllm_ollama.engine.weights import SharedWeights

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


def test_a_model_that_would_be_split_loads_after_idle_models_leave_the_gpus() -> None:
    """Ollama's requireFull: idle models holding GPU memory go (least recently used first) while
    the new one would be split onto the CPU; a model in use stays, and the new one loads split."""
    loads: list[LoadSpec] = []
    on_gpu: set[str] = set()  # what holds the fake GPU: two models fit on it whole

    def loader(spec: LoadSpec, max_queue: int) -> FakeModel:
        loads.append(spec)
        on_gpu.add(spec.path.stem)
        return FakeModel(spec)

    def split(spec: LoadSpec) -> bool:
        return len(on_gpu) >= 2

    async def run() -> None:
        pool = fake_pool(loader, None, 3, split=split)
        original = pool._unload

        async def unload(entry: Any) -> None:
            on_gpu.discard(entry.name)
            await original(entry)

        pool._unload = unload  # type: ignore[method-assign]
        a = await pool.acquire(request("/a.gguf"), None)
        pool.release(a)
        b = await pool.acquire(request("/b.gguf"), None)  # in use from here on
        c = await pool.acquire(request("/c.gguf"), None)
        assert on_gpu == {"b", "c"}  # idle a went first
        d = await pool.acquire(request("/d.gguf"), None)  # b and c in use: d loads beside them
        assert on_gpu == {"b", "c", "d"} and len(loads) == 4
        for entry in (b, c, d):
            pool.release(entry)
        await pool.close()

    asyncio.run(run())


class HeldWeights(SharedWeights):
    """Weights in memory for ``/a.gguf`` (placed on the GPUs), without loading any."""

    def layout(self, path: Path, batch_invariant: bool = False) -> tuple[int, tuple[float, ...]] | None:
        return (FITTED, ()) if path == Path("/a.gguf") else None


def test_a_model_over_weights_in_memory_unloads_nothing_to_fit() -> None:
    """Its weights stay where they were placed: evicting idle models would not move them."""
    loads: list[LoadSpec] = []
    split_asked: list[str] = []

    def split(spec: LoadSpec) -> bool:
        split_asked.append(spec.path.stem)
        return True

    async def run() -> None:
        pool = fake_pool(lambda spec, _: loads.append(spec) or FakeModel(spec), None, 3, split=split)
        pool.weights = HeldWeights()
        idle = await pool.acquire(request("/b.gguf"), None)
        pool.release(idle)
        variant = await pool.acquire(request("/a.gguf"), None)  # b idle on the "GPU": it stays
        assert [s.path.stem for s in loads] == ["b", "a"] and split_asked == []
        assert len(pool.running()) == 2
        pool.release(variant)
        await pool.close()

    asyncio.run(run())
