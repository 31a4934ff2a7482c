"""The lifecycle's hold on a model: a lease cancelled during a load gives the model back when it is ready."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from fakeengine import FakeEngine

from cllm_ollama.api.lifecycle import lease
from cllm_ollama.api.options import resolve_options
from cllm_ollama.engine.loaded import LoadSpec
from cllm_ollama.engine.pool import ModelPool


class SlowModel(FakeEngine):
    n_ctx_train = 256

    def __init__(self, spec: LoadSpec) -> None:
        time.sleep(0.2)  # reading weights: a thread nobody can interrupt
        self.spec = spec


def test_a_lease_cancelled_during_the_load_gives_the_model_back_once_loaded() -> None:
    record = SimpleNamespace(
        model_path=Path("/m.gguf"), short_name="m:latest", digest="d", adapter_paths=(), projector_paths=()
    )
    model: Any = SimpleNamespace(record=record, info=SimpleNamespace(is_embedding=False), full_name="m")

    async def run() -> None:
        pool = ModelPool(
            defaults=LoadSpec(Path(), n_slots=1, n_ctx_slot=256, n_batch=64, n_threads=1),
            max_loaded=1,
            max_queue=1,
            default_keep_alive=300,
            loader=lambda spec, _: SlowModel(spec),
        )

        async def hold() -> None:
            async with lease(pool, model, resolve_options(None, None), None):
                raise AssertionError("cancelled before the model was held")

        task = asyncio.ensure_future(hold())
        await asyncio.sleep(0.05)
        task.cancel()  # the client left while its model loads
        await asyncio.gather(task, return_exceptions=True)
        assert task.cancelled()
        deadline = time.monotonic() + 5
        while not pool.running():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.01)
        (entry,) = pool.running()
        # Loaded, registered and given back.
        assert entry.refs == 0 and isinstance(entry.model, SlowModel) and not entry.model.closed
        await pool.close()

    asyncio.run(run())
