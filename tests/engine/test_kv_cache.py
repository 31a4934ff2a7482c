"""Quantized KV caches on real llama.cpp contexts: their size per token as llama.cpp stores it,
how close greedy decoding stays to f16, the fallbacks that keep llama.cpp from refusing a
context, and a load whose memory is short (an injected probe) running with fewer slots.

Quantized K and V are not bit-identical to f16, so greedy text is not either: a near-tie flips
and the continuations part. What is compared is the next-token choice with the f16 sequence fed
to every cache type (teacher forcing), so one flip does not count as all the tokens after it.
Measured on this tiny model (head size 32, F32 weights of scale 0.5, 4 prompts x 64 tokens):
q8_0 agrees with f16 on 94-100% of positions (mean KL 0.001 nats), q4_0 on 69-81% (KL 0.05-0.2).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from unittest.mock import patch

import llama_cpp
import numpy as np
import pytest
from oracle import drain, submit, tokens_of

from cllm_ollama.engine.binding import Batch, CacheTypeRefused, Context, Model, gpu_free_memory
from cllm_ollama.engine.kv_types import KV_VALUE_BYTES
from cllm_ollama.engine.loaded import LoadedModel, LoadSpec, host_fixed_bytes, resolved_spec
from cllm_ollama.engine.pool import LoadRequest, ModelPool
from cllm_ollama.engine.request import Request
from cllm_ollama.engine.runner import Runner
from cllm_ollama.errors import InsufficientMemory
from cllm_ollama.testing.ggufs import Shape, write_qwen3

pytestmark = pytest.mark.model

PROMPTS = [
    "Hello there, how are you?",
    "The quick brown fox jumps over the lazy dog " * 3,
    "def f(x): return x*2\n" * 4,
    "One two three four five six",
]
N = 64
# Least share of positions whose greedy token equals f16's (measured minimum less a margin).
AGREEMENT = {"q8_0": 0.9, "q4_0": 0.6}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Model]:
    # Head size 32: a quantized cache needs heads in whole 32-value blocks (TINY's are 16).
    path = write_qwen3(tmp_path_factory.mktemp("kv") / "tiny32.gguf", shape=Shape(head_dim=32))
    m = Model(path)
    yield m
    m.close()


@pytest.fixture(scope="module")
def small_heads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_qwen3(tmp_path_factory.mktemp("kv") / "tiny16.gguf")


def context(model: Model, cache_type: str, flash_attn: bool | None = None) -> Context:
    return Context(
        model, n_seq_max=1, n_ctx_seq=256, n_batch=256, n_threads=2, cache_type=cache_type, flash_attn=flash_attn
    )


def forced(model: Model, cache_type: str, prompt: list[int], follow: list[int] | None) -> tuple[list[int], np.ndarray]:
    """Greedy tokens (or ``follow``'s, fed in turn) and the logits row before each."""
    ctx, batch = context(model, cache_type), Batch(256)
    assert ctx.cache_type == cache_type
    batch.fill(prompt, range(len(prompt)), [0] * len(prompt), [len(prompt) - 1])
    ctx.decode(batch)
    rows, tokens = [], []
    for i in range(N):
        rows.append(ctx.logits(1)[0].copy())
        token = int(np.argmax(rows[-1])) if follow is None else follow[i]
        tokens.append(token)
        batch.fill([token], [len(prompt) + i], [0], [0])
        ctx.decode(batch)
    ctx.close()
    return tokens, np.array(rows)


@pytest.mark.parametrize("cache_type", ["f16", "q8_0", "q4_0"])
def test_kv_bytes_per_token_is_what_llama_cpp_stores(model: Model, cache_type: str) -> None:
    """A sequence's saved state grows by the K and V rows of each token (plus its cell's
    position, sequence count and sequence id, 12 bytes: llama-kv-cache.cpp state_write_meta),
    so the estimate the memory check uses is llama.cpp's."""
    ctx, batch = context(model, cache_type), Batch(256)
    sizes = []
    for n in (32, 96):
        ctx.clear()
        batch.fill(list(range(1, n + 1)), range(n), [0] * n, [n - 1])
        ctx.decode(batch)
        sizes.append(len(ctx.state_get(0)))
    ctx.close()
    per_token = (sizes[1] - sizes[0]) / 64
    assert per_token == model.kv_bytes_per_token(cache_type) + 12
    # 2 layers x 2 KV heads x (32 + 32) values: 512 bytes in f16, 272 in q8_0, 144 in q4_0.
    assert model.kv_bytes_per_token(cache_type) == int(2 * 2 * 64 * KV_VALUE_BYTES[cache_type])


@pytest.mark.parametrize("cache_type", ["q8_0", "q4_0"])
def test_greedy_decoding_with_a_quantized_cache_stays_close_to_f16(model: Model, cache_type: str) -> None:
    agreements = []
    for text in PROMPTS:
        prompt = model.tokenize(text)
        reference, base = forced(model, "f16", prompt, None)
        _, rows = forced(model, cache_type, prompt, reference)
        agreements.append(float(np.mean(rows.argmax(1) == base.argmax(1))))
    print(cache_type, "agreement with f16 per prompt:", agreements, file=sys.stderr)
    assert min(agreements) >= AGREEMENT[cache_type]


def test_the_runner_decodes_with_the_cache_type_it_is_given(model: Model) -> None:
    runner = Runner(
        model, LoadSpec(model.path, n_slots=2, n_ctx_slot=256, n_batch=64, n_threads=2, kv_cache_type="q8_0")
    )
    try:
        assert runner.ctx.cache_type == "q8_0"
        sinks = [submit(runner, Request(prompt=tuple(model.tokenize(t)), num_predict=16)) for t in PROMPTS[:2]]
        assert all(len(tokens_of(drain(s))) > 0 for s in sinks)
    finally:
        runner.close()


def test_a_context_llama_cpp_refuses_quantized_says_so(small_heads: Path) -> None:
    """Head size 16 is no whole q8_0 block: llama.cpp returns no context (it does not abort);
    the binding says so, and the caller decides whether an f16 cache fits instead."""
    m = Model(small_heads)
    try:
        for flash_attn in (True, False):  # off: a quantized V cache needs flash attention anyway
            with pytest.raises(CacheTypeRefused, match="refused a q8_0 KV cache"):
                context(m, "q8_0", flash_attn=flash_attn)
        ctx = context(m, "f16", flash_attn=False)
        assert ctx.cache_type == "f16"
        ctx.close()
    finally:
        m.close()


def test_a_refused_quantized_cache_falls_back_to_f16_only_if_that_fits(small_heads: Path) -> None:
    """The fallback is 2-4x larger: it is checked against memory again before it is made."""
    spec = LoadSpec(path=small_heads, n_slots=2, n_ctx_slot=64, kv_cache_type="q8_0")
    with patch("cllm_ollama.engine.loaded.resolve_kv_cache_type", return_value="q8_0"):  # past the known check
        loaded = LoadedModel(spec, 4)
        try:
            assert loaded.kv_cache_type == "f16" and loaded.runner is not None
        finally:
            loaded.close()
        probe = Model(small_heads)
        q8, f16 = probe.kv_bytes_per_token("q8_0"), probe.kv_bytes_per_token("f16")
        weights = fixed_bytes(spec, probe)
        probe.close()
        # Room for the weights and a q8_0 cache, not for an f16 one.
        room = weights + 2 * 64 * (q8 + f16) // 2
        with pytest.raises(InsufficientMemory):
            LoadedModel(spec, 4, host_memory=lambda: room)


def test_a_loaded_model_reports_the_cache_type_it_got(small_heads: Path, model: Model) -> None:
    loaded = LoadedModel(LoadSpec(path=small_heads, n_slots=1, n_ctx_slot=64, kv_cache_type="q4_0"), 4)
    try:
        assert loaded.kv_cache_type == "f16"  # head size 16: the known fallback, before llama.cpp
    finally:
        loaded.close()
    loaded = LoadedModel(LoadSpec(path=model.path, n_slots=1, n_ctx_slot=64, kv_cache_type="q4_0"), 4)
    try:
        assert loaded.kv_cache_type == "q4_0"
    finally:
        loaded.close()


def fixed_bytes(spec: LoadSpec, model: Model) -> int:
    """What the load of ``spec`` adds in host RAM besides its KV cache (weights, compute buffers)."""
    return host_fixed_bytes(resolved_spec(spec, model), model, offloaded=False)


def test_a_load_short_of_memory_says_how_many_slots_fit(model: Model) -> None:
    kv_slot = model.kv_bytes_per_token("q8_0") * 256
    spec = LoadSpec(path=model.path, n_slots=8, n_ctx_slot=256, kv_cache_type="q8_0")
    # Room for the weights, the compute buffers and three slots' q8_0 cache: of 8 asked, halving gives 2.
    memory = fixed_bytes(spec, model) + 3 * kv_slot
    with pytest.raises(
        InsufficientMemory, match=r"model requires more system memory \(.* GiB\) than is available"
    ) as e:
        LoadedModel(spec, 4, host_memory=lambda: memory)
    assert e.value.fits == 2
    with pytest.raises(InsufficientMemory) as e:
        LoadedModel(spec, 4, host_memory=lambda: fixed_bytes(spec, model) + kv_slot - 1)
    assert e.value.fits is None


def test_the_pool_loads_a_model_short_of_memory_with_the_slots_that_fit(model: Model) -> None:
    spec = LoadSpec(path=model.path, n_slots=8, n_ctx_slot=256, n_batch=64, n_threads=2)
    memory = fixed_bytes(spec, model) + 3 * model.kv_bytes_per_token("f16") * 256

    async def main() -> None:
        pool = ModelPool(
            defaults=LoadSpec(Path(), n_slots=8, n_ctx_slot=256, n_batch=64, n_threads=2),
            max_loaded=2,
            max_queue=4,
            default_keep_alive=300,
            loader=partial(LoadedModel, host_memory=lambda: memory),
        )
        try:
            async with pool.use(LoadRequest(path=model.path, name="tiny32", digest="d"), None) as entry:
                assert entry.slots_asked == 8
                assert entry.model.n_slots == 2
                assert entry.model.runner is not None and entry.model.runner.ctx.n_seq_max == 2
        finally:
            await pool.close()

    asyncio.run(main())


def test_prompt_reuse_with_a_quantized_cache_gives_a_cold_computations_tokens(model: Model) -> None:
    """Copying a slot's KV, and saving and restoring it, move q8_0 blocks as they are: a request
    served from a reused prefix decodes the tokens a fresh context computes for it."""
    system = "You are a careful assistant. Answer briefly and precisely, and say when you do not know. " * 2
    questions = ("What is a slot?", "Why batch?", "What is a KV cache?")
    prompts = [tuple(model.tokenize(system + q)) for q in questions]
    other = tuple(model.tokenize("An unrelated conversation, long enough to be saved. " * 4))

    def run(n_slots: int, cache_mib: int, batch: list[tuple[int, ...]]) -> tuple[list[list[int]], Runner]:
        config = LoadSpec(
            model.path,
            n_slots=n_slots,
            n_ctx_slot=256,
            n_batch=64,
            n_threads=2,
            cache_bytes=cache_mib << 20,
            cache_min_tokens=32,
            kv_cache_type="q8_0",
        )
        runner = Runner(model, config)
        try:
            # One after another: each later request finds the shared start somewhere.
            return [tokens_of(drain(submit(runner, Request(prompt=p, num_predict=16)))) for p in batch], runner
        finally:
            runner.close()

    cold = [run(1, 0, [p])[0][0] for p in prompts]
    out, runner = run(2, 0, [prompts[0], other, prompts[1], prompts[2]])
    assert [out[0], *out[2:]] == cold and runner.scheduler.stats.copied + runner.scheduler.stats.own > 0
    out, runner = run(1, 64, [prompts[0], other, prompts[1], other, prompts[2]])
    assert [out[0], out[2], out[4]] == cold and runner.scheduler.stats.restored > 0


def test_gpu_memory_is_read_from_llama_cpps_devices() -> None:
    free = gpu_free_memory()
    if llama_cpp.llama_supports_gpu_offload():
        assert free is not None and free > 0
    else:
        assert free is None  # a CPU build: the KV cache is in host RAM
