"""Oracle tests: a prompt whose start was copied from another slot, restored from the host cache
or computed once for several requests gives exactly the greedy tokens of a cold computation."""

from __future__ import annotations

from pathlib import Path

import llama_cpp
import oracle
import pytest
from oracle import (
    GREEDY,
    OTHER,
    SYSTEM,
    N,
    answer_then_other,
    close,
    cold_tokens,
    drain,
    make_runner,
    next_turn,
    shared_prompts,
    submit,
    tokens_of,
)

from cllm_ollama.engine import prefix
from cllm_ollama.engine.request import Request

pytestmark = pytest.mark.model
gguf_path, cold = oracle.gguf_path, oracle.cold  # the oracle model and its cold reference (fixtures)


@pytest.mark.parametrize("factor", [0, 10**6], ids=["state-copy", "stream-copy"])
def test_a_prefix_copied_from_a_generating_slot_gives_the_cold_tokens(
    gguf_path: Path, cold: llama_cpp.Llama, factor: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ways of copying a prefix: the whole KV stream, or the source's serialised state."""
    monkeypatch.setattr(prefix, "STATE_COPY_FACTOR", factor)
    runner = make_runner(gguf_path, n_slots=2)
    try:
        first, second = shared_prompts(runner.model)[:2]
        running = submit(runner, Request(first, GREEDY, num_predict=60))
        running.queue.get(timeout=60)  # type: ignore[attr-defined]  # generating now
        running.consumed += 1
        events = drain(submit(runner, Request(second, GREEDY, num_predict=N)))
        drain(running)
        assert tokens_of(events) == cold_tokens(cold, second)
        stats = events[-1].stats
        assert stats is not None and stats.prompt_cached >= 32
        assert runner.scheduler.stats.copied == stats.prompt_cached
    finally:
        close(runner)


def test_requests_arriving_together_compute_their_shared_start_once(gguf_path: Path, cold: llama_cpp.Llama) -> None:
    runner = make_runner(gguf_path, n_slots=4)
    try:
        all_prompts = shared_prompts(runner.model)
        sinks = [submit(runner, Request(p, GREEDY, num_predict=N)) for p in all_prompts]
        results = [drain(s) for s in sinks]
        for prompt, events in zip(all_prompts, results, strict=True):
            assert tokens_of(events) == cold_tokens(cold, prompt)
        # Three of the four took the shared start from the first instead of computing it.
        shared = len(runner.model.tokenize(SYSTEM + "\nQ:")) - 1
        assert runner.scheduler.stats.copied >= 3 * (shared - 8)
        assert len({tuple(tokens_of(r)) for r in results}) == len(all_prompts)  # not degenerate
    finally:
        close(runner)


def test_a_conversation_restored_from_the_host_cache_gives_the_cold_tokens(
    gguf_path: Path, cold: llama_cpp.Llama
) -> None:
    runner = make_runner(gguf_path, n_slots=1)
    try:
        model = runner.model
        first = shared_prompts(model)[0]
        answer = answer_then_other(runner, first)  # the other takes the only slot: saves the first
        assert runner.kv.cache is not None and len(runner.kv.cache) == 1
        follow_up = next_turn(model, first, answer)
        events = drain(submit(runner, Request(follow_up, GREEDY, num_predict=N)))
        assert tokens_of(events) == cold_tokens(cold, follow_up)
        assert runner.scheduler.stats.restored >= len(first)
        # The entry stays after a restore: the other conversation can come back too.
        drain(submit(runner, Request((*model.tokenize(OTHER), 11), GREEDY, num_predict=4)))
        assert len(runner.kv.cache) == 2
    finally:
        close(runner)
