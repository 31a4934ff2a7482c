"""Memory and parallelism settings without llama.cpp: the KV cache type and flash attention from
the environment, the pure memory fit, a model's own slot count, and the pool's answer to a load
that does not fit (evict idle models, then fewer slots, then refuse) with a fake loader and clock."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_pool import FakeClock, FakeModel, fake_pool

from cllm_ollama.api.options import MAX_PARALLEL, resolve_options
from cllm_ollama.config import Settings
from cllm_ollama.engine.loaded import LoadSpec, check_load_memory, resolve_kv_cache_type
from cllm_ollama.engine.memory import check_memory_fit, fit_slots
from cllm_ollama.engine.offload import CacheShape
from cllm_ollama.engine.pool import LoadRequest, ModelPool
from cllm_ollama.errors import CllmError, InsufficientMemory
from cllm_ollama.store.modelfile import parse_parameter

GIB = 2**30


# --- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "f16"),
        ({"OLLAMA_KV_CACHE_TYPE": "q8_0"}, "q8_0"),
        ({"OLLAMA_KV_CACHE_TYPE": "Q4_0"}, "q4_0"),  # Ollama lowercases it
        ({"OLLAMA_KV_CACHE_TYPE": " f16 "}, "f16"),
        ({"OLLAMA_KV_CACHE_TYPE": "q4_0", "CLLM_KV_CACHE_TYPE": "q8_0"}, "q8_0"),
    ],
)
def test_kv_cache_type_from_env(env: dict[str, str], expected: str) -> None:
    assert Settings.from_env(env).kv_cache_type == expected


@pytest.mark.parametrize("value", ["q5_1", "f32", "bf16", "int8", "q8"])
def test_an_unsupported_kv_cache_type_is_warned_about_and_f16_used(
    value: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="cllm.config"):
        assert Settings.from_env({"OLLAMA_KV_CACHE_TYPE": value}).kv_cache_type == "f16"
    assert "unsupported OLLAMA_KV_CACHE_TYPE" in caplog.text and value in caplog.text


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), ("1", True), ("true", True), ("0", False), ("false", False), ("F", False), ("yes", True)],
)
def test_flash_attention_from_env(value: str | None, expected: bool | None) -> None:
    # Unset: llama.cpp's "auto". A value Go's ParseBool rejects ("yes") reads as true, as in Ollama.
    env = {} if value is None else {"OLLAMA_FLASH_ATTENTION": value}
    assert Settings.from_env(env).flash_attention is expected


# --- which cache type a model gets -----------------------------------------------------------


def test_f16_is_always_kept() -> None:
    assert resolve_kv_cache_type("f16", False, (16, 16)) == "f16"


@pytest.mark.parametrize("flash", [True, None])
def test_a_quantized_cache_is_kept_with_flash_attention_on_or_auto(flash: bool | None) -> None:
    assert resolve_kv_cache_type("q8_0", flash, (64, 64)) == "q8_0"
    assert resolve_kv_cache_type("q4_0", flash, (128, 128)) == "q4_0"


def test_a_quantized_cache_without_flash_attention_falls_back_to_f16(caplog: pytest.LogCaptureFixture) -> None:
    # llama.cpp refuses a quantized V cache with flash attention off; Ollama drops to f16 there.
    with caplog.at_level(logging.WARNING, logger="cllm.engine"):
        assert resolve_kv_cache_type("q8_0", False, (64, 64)) == "f16"
    assert "flash attention" in caplog.text


def test_a_head_size_the_block_does_not_divide_falls_back_to_f16(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="cllm.engine"):
        assert resolve_kv_cache_type("q4_0", True, (16, 16)) == "f16"
        assert resolve_kv_cache_type("q8_0", None, (64, 48)) == "f16"
    assert "multiples of 32" in caplog.text


# --- the pure fit ----------------------------------------------------------------------------


def test_fit_slots_keeps_every_slot_that_fits() -> None:
    assert fit_slots(1024, 4096, 8, GIB, 2 * GIB) == 8  # 8 x 4096 x 1 KiB = 32 MiB beside 1 GiB
    assert fit_slots(1024, 4096, 8, 0, None) == 8  # memory unknown: no refusal


def test_fit_slots_halves_down_to_what_fits() -> None:
    per_slot = 1024 * 4096  # 4 MiB
    assert fit_slots(1024, 4096, 8, 0, 4 * per_slot) == 4
    assert fit_slots(1024, 4096, 8, 0, 4 * per_slot - 1) == 2
    assert fit_slots(1024, 4096, 6, 0, 2 * per_slot) == 1  # 6 -> 3 -> 1: halving, not the exact best
    assert fit_slots(1024, 4096, 8, 10 * per_slot, 11 * per_slot) == 1


def test_fit_slots_is_none_when_one_slot_does_not_fit() -> None:
    assert fit_slots(1024, 4096, 8, GIB, GIB) is None
    assert fit_slots(1024, 4096, 1, 0, 1024 * 4096 - 1) is None


def test_a_smaller_cache_type_fits_more_slots() -> None:
    # Qwen2.5-Coder-0.5B: 24 layers x 2 KV heads x (64 + 64) values per token.
    values = 24 * 2 * 128
    f16, q8, q4 = values * 2, values * 34 // 32, values * 18 // 32
    budget = GIB
    assert [fit_slots(b, 4096, 64, 0, budget) for b in (f16, q8, q4)] == [16, 32, 64]
    assert (budget // (f16 * 4096), budget // (q8 * 4096), budget // (q4 * 4096)) == (21, 40, 75)


MIB = 2**20


def test_cpu_only_the_weights_and_the_whole_cache_are_in_host_ram() -> None:
    fit = {"kv_bytes_per_token": 1024, "n_ctx_slot": 1024, "n_slots": 8, "host_weights": 100 * MIB}
    check_memory_fit(**fit, host_free=108 * MIB)  # 8 x 1 MiB beside 100 MiB
    check_memory_fit(**fit, host_free=None)  # unknown: no refusal
    with pytest.raises(InsufficientMemory) as e:
        check_memory_fit(**fit, host_free=105 * MIB)
    assert e.value.fits == 4
    assert e.value.message == "model requires more system memory (0.1 GiB) than is available (0.1 GiB)"


def test_offloaded_layers_keep_their_cache_in_gpu_memory() -> None:
    # All layers offloaded: the cache is checked against the GPU, host RAM only holds the rest.
    fit = {"kv_bytes_per_token": 1024, "n_ctx_slot": 1024, "n_slots": 8, "host_weights": 0, "gpu_share": 1.0}
    check_memory_fit(**fit, host_free=1 * MIB, gpu_free=8 * MIB)
    with pytest.raises(InsufficientMemory, match=r"model requires more GPU memory \(") as e:
        check_memory_fit(**fit, host_free=10 * GIB, gpu_free=3 * MIB)
    assert e.value.fits == 2
    # Half the layers: half the cache on each side; the tighter side decides.
    half = fit | {"gpu_share": 0.5, "host_weights": 50 * MIB}
    check_memory_fit(**half, host_free=54 * MIB, gpu_free=4 * MIB)
    with pytest.raises(InsufficientMemory, match="system memory") as e:
        check_memory_fit(**half, host_free=52 * MIB, gpu_free=4 * MIB)
    assert e.value.fits == 4
    with pytest.raises(InsufficientMemory) as e:
        check_memory_fit(**half, host_free=54 * MIB, gpu_free=0)
    assert e.value.fits is None


def test_an_offloaded_models_compute_buffers_are_checked_against_the_gpu() -> None:
    """Without flash attention the scores of 32k of context are ~1 GiB of the graph's buffer: on
    the GPU of a model wholly offloaded, where host RAM holds only the logits' output buffer."""
    qwen = SimpleNamespace(n_gpu_layers=25, n_layer=24, size_bytes=500 * MIB, n_head=14, n_vocab=151936, n_embd=896)
    model: Any = qwen
    spec = LoadSpec(Path("/qwen.gguf"), n_slots=4, n_ctx_slot=32768, flash_attention=False)
    cache = CacheShape(kv_values=24 * 2 * 128)
    kv = cache.kv_bytes_per_token() * 32768 * 4  # 1.5 GiB, all of it on the GPU

    def check(host: int, gpu: int) -> None:
        check_load_memory(spec, model, lambda: host, lambda: gpu, cache)

    check(host=64 * MIB, gpu=kv + 1200 * MIB)  # the host holds no ~1 GiB graph of the GPU's
    with pytest.raises(InsufficientMemory, match="more GPU memory"):
        check(host=64 * GIB, gpu=kv + 512 * MIB)
    on_cpu: Any = SimpleNamespace(**{**vars(qwen), "n_gpu_layers": 0})
    with pytest.raises(InsufficientMemory, match="more system memory"):  # on the CPU it is the host's
        check_load_memory(spec, on_cpu, lambda: kv + 1200 * MIB, lambda: 0, cache)


# --- a model's own slot count ----------------------------------------------------------------


def test_num_parallel_is_a_modelfile_integer_parameter() -> None:
    assert parse_parameter("num_parallel", "2") == 2


def test_num_parallel_comes_from_the_model_not_the_request() -> None:
    assert resolve_options(None, {"num_parallel": 2}).num_parallel == 2
    assert resolve_options({"num_parallel": 6}, {"num_parallel": 2}).num_parallel == 2
    assert resolve_options({"num_parallel": 6}, None).num_parallel is None  # ignored, as Ollama does
    assert resolve_options(None, {"num_parallel": 0}).num_parallel is None  # the server's
    assert resolve_options(None, {"num_parallel": 10_000}).num_parallel == MAX_PARALLEL
    assert resolve_options(None, {"num_parallel": 3.0}).num_parallel == 3


def test_a_num_parallel_of_the_wrong_type_is_reported() -> None:
    with pytest.raises(CllmError, match='option "num_parallel" must be of type integer'):
        resolve_options(None, {"num_parallel": "two"})


# --- the pool: evict, then fewer slots, then refuse ----------------------------------------------


class Memory:
    """A machine with ``total`` bytes: each loaded model takes ``per_slot`` bytes per slot."""

    def __init__(self, total: int, per_slot: int = 1) -> None:
        self.total, self.per_slot = total, per_slot
        self.loaded: list[FakeModel] = []
        self.attempts: list[LoadSpec] = []

    def used(self) -> int:
        return sum(m.spec.n_slots * self.per_slot for m in self.loaded if not m.closed)

    def loader(self, spec: LoadSpec, max_queue: int) -> FakeModel:
        self.attempts.append(spec)
        free = self.total - self.used()
        fits = fit_slots(self.per_slot, 1, spec.n_slots, 0, free)
        if fits != spec.n_slots:
            raise InsufficientMemory(
                f"model requires more system memory ({spec.n_slots} GiB) than is available ({free} GiB)", fits
            )
        model = FakeModel(spec)
        self.loaded.append(model)
        return model


def make_pool(memory: Memory, max_loaded: int = 3, clock: FakeClock | None = None) -> ModelPool:
    return fake_pool(memory.loader, clock or FakeClock(), max_loaded)


def req(name: str, num_parallel: int | None = None) -> LoadRequest:
    return LoadRequest(path=Path(f"/m/{name}.gguf"), name=name, digest=name, num_parallel=num_parallel)


def test_a_load_that_does_not_fit_unloads_idle_models_first_least_recent_first() -> None:
    async def main() -> None:
        memory = Memory(total=10)
        clock = FakeClock()
        pool = make_pool(memory, clock=clock)
        for name in ("a", "b"):  # 4 + 4 of 10
            pool.release(await pool.acquire(req(name), None))
            clock.advance(1)
        entry = await pool.acquire(req("c"), None)
        # "a" (least recently used) went; "b" stays; "c" got all its slots.
        assert sorted(e.name for e in pool.running()) == ["b", "c"]
        assert entry.model.spec.n_slots == 4 and entry.slots_asked == 4
        assert [s.n_slots for s in memory.attempts[2:]] == [4, 4]

    asyncio.run(main())


def test_when_no_model_is_idle_the_load_gets_fewer_slots(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        memory = Memory(total=7)
        pool = make_pool(memory)
        busy = await pool.acquire(req("a"), None)  # 4 of 7, in use: never unloaded for another
        with caplog.at_level(logging.WARNING, logger="cllm.engine"):
            entry = await pool.acquire(req("b", num_parallel=8), None)
        assert [s.n_slots for s in memory.attempts[1:]] == [8, 2]
        assert entry.model.spec.n_slots == 2 and entry.slots_asked == 8
        assert "loading it with 2" in caplog.text
        assert {e.name for e in pool.running()} == {"a", "b"} and busy.refs == 1
        # The same model asked again (same num_parallel) is served as loaded: no reload loop.
        again = await pool.acquire(req("b", num_parallel=8), None)
        assert again is entry and len(memory.attempts) == 3

    asyncio.run(main())


def test_a_load_that_never_fits_is_refused_with_ollamas_text() -> None:
    async def main() -> None:
        memory = Memory(total=3)
        pool = make_pool(memory)
        busy = await pool.acquire(req("a", num_parallel=3), None)
        with pytest.raises(InsufficientMemory, match=r"model requires more system memory \(.*\) than is available"):
            await pool.acquire(req("b"), None)
        assert [e.name for e in pool.running()] == ["a"] and busy.refs == 1

    asyncio.run(main())


def test_a_models_own_num_parallel_reloads_it_only_when_idle() -> None:
    async def main() -> None:
        memory = Memory(total=100)
        pool = make_pool(memory)
        entry = await pool.acquire(req("a"), None)
        assert entry.model.spec.n_slots == 4  # the server's OLLAMA_NUM_PARALLEL
        # Another model made from the same GGUF with num_parallel 2, while "a" is busy: served as is.
        same = await pool.acquire(req("a", num_parallel=2), None)
        assert same is entry
        pool.release(entry)
        pool.release(same)
        reloaded = await pool.acquire(req("a", num_parallel=2), None)
        assert reloaded is not entry and reloaded.model.spec.n_slots == 2
        # A request that does not say (no Modelfile num_parallel) takes what is loaded.
        assert await pool.acquire(req("a"), None) is reloaded

    asyncio.run(main())
