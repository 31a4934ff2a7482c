"""The model pool with a fake loader and a fake clock: reloads, keep_alive and LRU eviction,
with no llama.cpp and no real waiting."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fakeengine import FakeEngine

from cllm_ollama.engine import pool as pool_module
from cllm_ollama.engine.loaded import LoadSpec
from cllm_ollama.engine.pool import LoadRequest, ModelPool


@dataclass
class FakeModel(FakeEngine):
    spec: LoadSpec
    n_ctx_train: int = 4096
    closed: bool = field(default=False)
    dead: str | None = None
    closes: int = 0

    def close(self) -> None:
        self.closes += 1  # a model closed twice frees its weights twice
        super().close()


@dataclass
class FakeTimer:
    due: float
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """Time stands still until ``advance`` moves it; then the timers that came due fire."""

    def __init__(self) -> None:
        self.now = 1_000_000.0
        self.timers: list[FakeTimer] = []

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(self.now + delay, callback)
        self.timers.append(timer)
        return timer

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = [t for t in self.timers if t.due <= self.now and not t.cancelled]
        self.timers = [t for t in self.timers if t not in due and not t.cancelled]
        for timer in due:
            timer.callback()


def fake_pool(
    loader: Callable[[LoadSpec, int], FakeModel], clock: FakeClock | None, max_loaded: int, **more: Any
) -> ModelPool:
    """The pool the fake-loader tests run (here and in test_memory_settings.py): num_parallel 4,
    context 512, a queue of 8, keep_alive 300 s; the system clock unless ``clock`` is given;
    ``more``: further ``ModelPool`` arguments."""
    return ModelPool(
        defaults=LoadSpec(Path(), n_slots=4, n_ctx_slot=512, n_batch=512, n_threads=2),
        max_loaded=max_loaded,
        max_queue=8,
        default_keep_alive=300,
        loader=loader,
        clock=clock,
        **more,
    )


def make_pool(loads: list[LoadSpec], clock: FakeClock | None = None, max_loaded: int = 2) -> ModelPool:
    def loader(spec: LoadSpec, max_queue: int) -> FakeModel:
        loads.append(spec)
        return FakeModel(spec)

    return fake_pool(loader, clock, max_loaded)


def request(path: str = "/m.gguf", **options: int) -> LoadRequest:
    return LoadRequest(path=Path(path), name=Path(path).stem, digest="d", **options)  # type: ignore[arg-type]


async def settle(pool: ModelPool) -> None:
    """Wait for the work the pool started (expiry, notifications) to end."""
    while pool._tasks:
        await asyncio.gather(*pool._tasks)


def loaded(pool: ModelPool) -> list[str]:
    return sorted(e.name for e in pool.running())


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


def test_another_main_gpu_or_memory_map_reloads_an_idle_model() -> None:
    """Ollama's needsReload compares ``main_gpu`` and ``use_mmap`` too; a busy model is served as loaded."""
    loads: list[LoadSpec] = []

    async def run() -> None:
        pool = make_pool(loads)
        first = await pool.acquire(request(use_mmap=False), None)
        assert not loads[0].use_mmap and loads[0].main_gpu == -1
        busy = await pool.acquire(request(main_gpu=1), None)
        assert busy is first and len(loads) == 1
        pool.release(busy)
        pool.release(first)
        same = await pool.acquire(request(use_mmap=False), None)  # as loaded: kept
        assert same is first and len(loads) == 1
        pool.release(same)
        moved = await pool.acquire(request(main_gpu=1), None)
        assert len(loads) == 2 and loads[1].main_gpu == 1 and not loads[1].use_mmap
        pool.release(moved)
        await pool.close()

    asyncio.run(run())


def test_a_model_whose_engine_died_is_loaded_again_by_the_next_request() -> None:
    loads: list[LoadSpec] = []

    async def run() -> None:
        pool = make_pool(loads)
        entry = await pool.acquire(request(), None)
        pool.release(entry)
        entry.model.dead = "RuntimeError: boom"  # type: ignore[misc]
        again = await pool.acquire(request(), None)
        assert len(loads) == 2 and again is not entry and entry.model.closed  # type: ignore[attr-defined]
        pool.release(again)
        await pool.close()

    asyncio.run(run())


def test_a_dead_model_still_held_is_freed_only_when_its_last_request_lets_go() -> None:
    """A request may still be tokenizing with a model whose engine died: the next request gets a
    fresh load at once, and the dead one's memory goes with the last request holding it."""
    loads: list[LoadSpec] = []

    async def run() -> None:
        pool = make_pool(loads)
        held = await pool.acquire(request(), None)
        held.model.dead = "RuntimeError: boom"  # type: ignore[misc]
        fresh = await pool.acquire(request(), None)
        assert len(loads) == 2 and fresh is not held
        assert not held.model.closed  # type: ignore[attr-defined]
        pool.release(held)
        await settle(pool)
        assert held.model.closed and not fresh.model.closed  # type: ignore[attr-defined]
        pool.release(fresh)
        await pool.close()
        assert fresh.model.closed  # type: ignore[attr-defined]
        assert held.model.closes == fresh.model.closes == 1  # type: ignore[attr-defined]

    asyncio.run(run())


def test_a_dead_model_still_held_frees_its_engine_before_the_replacement_loads() -> None:
    """Its KV cache (on a GPU: gigabytes) would otherwise push the replacement's layers onto the
    CPU, or refuse it, for as long as a request holds the dead one."""
    freed_at_load: list[bool] = []

    async def run() -> None:
        models: list[FakeModel] = []

        def loader(spec: LoadSpec, max_queue: int) -> FakeModel:
            freed_at_load.append(all(m.engine_freed for m in models))
            models.append(FakeModel(spec))
            return models[-1]

        pool = fake_pool(loader, None, 2)
        held = await pool.acquire(request(), None)
        held.model.dead = "RuntimeError: boom"  # type: ignore[misc]
        fresh = await pool.acquire(request(), None)
        assert freed_at_load == [True, True] and not held.model.closed  # type: ignore[attr-defined]
        assert not fresh.model.engine_freed  # type: ignore[attr-defined]
        pool.release(held)
        pool.release(fresh)
        await pool.close()

    asyncio.run(run())


def test_a_dead_engine_that_fails_to_free_still_gives_way_to_its_replacement() -> None:
    """The failure is logged, not raised at the request that found the model dead."""

    class Unfreeable(FakeModel):
        def free_engine(self) -> None:
            raise RuntimeError("the context would not close")

    async def run() -> None:
        models: list[FakeModel] = []

        def loader(spec: LoadSpec, max_queue: int) -> FakeModel:
            models.append((Unfreeable if not models else FakeModel)(spec))
            return models[-1]

        pool = fake_pool(loader, None, 2)
        held = await pool.acquire(request(), None)
        held.model.dead = "RuntimeError: boom"  # type: ignore[misc]
        fresh = await pool.acquire(request(), None)
        assert fresh.model is models[1] and len(models) == 2
        pool.release(held)
        pool.release(fresh)
        await pool.close()
        assert held.model.closed  # type: ignore[attr-defined]

    asyncio.run(run())


def test_a_dead_model_whose_request_ends_during_shutdown_is_closed_once() -> None:
    async def run() -> None:
        pool = make_pool([])
        held = await pool.acquire(request(), None)
        held.model.dead = "RuntimeError: boom"  # type: ignore[misc]
        fresh = await pool.acquire(request(), None)
        pool.release(fresh)
        loop = asyncio.get_running_loop()
        closing = held.model.close

        def close_as_its_request_ends() -> None:
            # Its request ends while shutdown closes it (this runs in the closing thread: the
            # release is queued before shutdown resumes).
            loop.call_soon_threadsafe(pool.release, held)
            closing()

        held.model.close = close_as_its_request_ends  # type: ignore[method-assign]
        await pool.close()
        await settle(pool)
        assert held.model.closes == 1  # type: ignore[attr-defined]

    asyncio.run(run())


def test_keep_alive_expiry_unloads_when_the_time_is_up_and_a_new_request_stops_the_timer() -> None:
    clock = FakeClock()

    async def run() -> None:
        pool = make_pool([], clock)
        entry = await pool.acquire(request(), 60)
        assert entry.expires_at == clock.now + 60
        clock.advance(3600)  # in use: no timer runs while a request holds it
        await settle(pool)
        assert loaded(pool) == ["m"]
        pool.release(entry)
        assert entry.expires_at == clock.now + 60
        clock.advance(59)
        await settle(pool)
        assert loaded(pool) == ["m"]
        again = await pool.acquire(request(), 60)  # used again before expiry: the timer is cancelled
        assert again is entry and not any(not t.cancelled for t in clock.timers)
        pool.release(again)
        clock.advance(59)
        await settle(pool)
        assert loaded(pool) == ["m"]
        clock.advance(1)
        await settle(pool)
        assert loaded(pool) == [] and entry.model.closed  # type: ignore[attr-defined]
        await pool.close()

    asyncio.run(run())


def test_a_request_without_keep_alive_keeps_what_the_model_was_given() -> None:
    """As Ollama's scheduler: a keep_alive is the loaded model's until a request gives another (the
    default only at a load), so `"keep_alive": -1` once pins a model that later chats leave be."""
    clock = FakeClock()

    async def run() -> None:
        pool = make_pool([], clock)
        assert (await pool.acquire(request(), None)).keep_alive == 300  # loaded: the default
        pinned = await pool.acquire(request(), math.inf)
        plain = await pool.acquire(request(), None)
        assert plain is pinned and plain.keep_alive == math.inf
        for entry in (plain, pinned, pinned):
            pool.release(entry)
        clock.advance(10**6)
        await settle(pool)
        assert loaded(pool) == ["m"]
        pool.release(await pool.acquire(request(), 60))  # another given: that one from now on
        clock.advance(60)
        await settle(pool)
        assert loaded(pool) == []
        await pool.close()

    asyncio.run(run())


def test_keep_alive_zero_unloads_at_release_and_negative_never_expires() -> None:
    clock = FakeClock()

    async def run() -> None:
        pool = make_pool([], clock)
        pool.release(await pool.acquire(request("/a.gguf"), 0))
        await settle(pool)
        assert loaded(pool) == []
        forever = await pool.acquire(request("/b.gguf"), math.inf)
        pool.release(forever)
        assert forever.expires_at == math.inf and forever.timer is None
        clock.advance(10**9)
        await settle(pool)
        assert loaded(pool) == ["b"]
        await pool.close()

    asyncio.run(run())


def test_the_least_recently_used_idle_model_is_evicted_beyond_max_loaded() -> None:
    clock = FakeClock()
    loads: list[LoadSpec] = []

    async def run() -> None:
        pool = make_pool(loads, clock, max_loaded=2)
        a = await pool.acquire(request("/a.gguf"), None)
        b = await pool.acquire(request("/b.gguf"), None)
        pool.release(b)
        clock.advance(1)
        pool.release(a)  # a was used last
        await pool.acquire(request("/c.gguf"), None)
        assert loaded(pool) == ["a", "c"] and b.model.closed  # type: ignore[attr-defined]
        # Every loaded model busy: a new one waits for one to be released, then takes its place.
        a2 = await pool.acquire(request("/a.gguf"), None)
        waiting = asyncio.ensure_future(pool.acquire(request("/d.gguf"), None))
        await asyncio.sleep(0.01)
        assert not waiting.done() and loaded(pool) == ["a", "c"]
        pool.release(a2)
        d = await asyncio.wait_for(waiting, 5)
        assert loaded(pool) == ["c", "d"] and d.refs == 1 and len(loads) == 4
        await pool.close()

    asyncio.run(run())


@pytest.mark.parametrize(("gpus", "most"), [(0, 3), (1, 3), (2, 6)])
def test_unset_max_loaded_is_three_models_per_gpu_found(monkeypatch: pytest.MonkeyPatch, gpus: int, most: int) -> None:
    """OLLAMA_MAX_LOADED_MODELS unset (0): Ollama's 3 per GPU, a CPU counting as one."""
    monkeypatch.setattr(pool_module, "gpu_devices", lambda: [(f"CUDA{i}", 2**34, 2**35) for i in range(gpus)])
    loads: list[LoadSpec] = []

    async def run() -> None:
        pool = make_pool(loads, max_loaded=0)
        for i in range(most + 1):
            pool.release(await pool.acquire(request(f"/{i}.gguf"), None))
        assert len(loaded(pool)) == most and len(loads) == most + 1
        await pool.close()

    asyncio.run(run())


def test_models_over_one_text_file_with_other_projectors_are_entries_of_their_own() -> None:
    """Keyed by projector too: Ollama-layout vision models map to text files byte-identical to
    llama.cpp's, so a text-only model and a model that sees (or two with different projectors) can
    share one text blob; each must run with its own projector, never another model's runner."""
    loads: list[LoadSpec] = []

    async def run() -> None:
        pool = make_pool(loads, max_loaded=3)
        text = await pool.acquire(LoadRequest(Path("/m.gguf"), "text", "d"), None)
        sees = await pool.acquire(LoadRequest(Path("/m.gguf"), "sees", "d", projector=Path("/a.gguf")), None)
        other = await pool.acquire(LoadRequest(Path("/m.gguf"), "other", "d", projector=Path("/b.gguf")), None)
        assert len({id(text), id(sees), id(other)}) == 3
        assert [spec.projector for spec in loads] == [None, Path("/a.gguf"), Path("/b.gguf")]
        for entry in (text, sees, other):
            pool.release(entry)
        await pool.unload(Path("/m.gguf"), (Path("/m.gguf"), Path("/a.gguf"), ()))
        await settle(pool)
        assert loaded(pool) == ["other", "text"]
        await pool.close()

    asyncio.run(run())


def test_a_model_with_adapters_is_its_own_entry_beside_its_base_and_unloads_on_its_own() -> None:
    """Keyed by (weights, adapters): the base and each adapted model load once each and serve at
    the same time; keep_alive 0 for one leaves the other; a deleted file unloads both."""
    loads: list[LoadSpec] = []
    adapter = (Path("/lora.gguf"),)

    async def run() -> None:
        pool = make_pool(loads, max_loaded=3)
        base = await pool.acquire(request(), None)
        tuned = await pool.acquire(LoadRequest(Path("/m.gguf"), "tuned", "d", adapters=adapter), None)
        assert tuned is not base and [spec.adapters for spec in loads] == [(), adapter]
        again = await pool.acquire(LoadRequest(Path("/m.gguf"), "tuned", "d", adapters=adapter), None)
        assert again is tuned and len(loads) == 2
        for entry in (base, tuned, again):
            pool.release(entry)
        await pool.unload(Path("/m.gguf"), (Path("/m.gguf"), None, ()))
        await settle(pool)
        assert loaded(pool) == ["tuned"]
        pool.release(await pool.acquire(request(), None))
        assert loaded(pool) == ["m", "tuned"]
        await pool.unload(Path("/m.gguf"))
        await settle(pool)
        assert loaded(pool) == []
        await pool.close()

    asyncio.run(run())
