"""Prefixes a request asks to keep (``Request.keep``, Anthropic's ``cache_control``): a prefill
chunk ends at each, and the engine saves the state there to the host cache and to disk; over the
real runner (its engine thread, scheduler and KV operations) on the fake binding."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_binding import FakeBatch, FakeContext, FakeModel, drain

from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.request import Event, Request, SamplingParams
from cllm_ollama.engine.runner import Runner, Sink
from cllm_ollama.engine.scheduler import Scheduler

GREEDY = SamplingParams(temperature=0)
PROMPT = tuple(1 + i % 48 for i in range(200))
HINT = 120


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Runner]:
    spec = LoadSpec(
        Path("fake.gguf"),
        n_slots=2,
        n_ctx_slot=4096,
        n_batch=64,
        n_threads=1,
        cache_bytes=1 << 20,
        cache_min_tokens=32,
        cache_dir=tmp_path / "cache",
        cache_disk_bytes=1 << 20,
    )
    model = FakeModel()
    model.path = tmp_path / "fake.gguf"  # the disk cache's identity reads the weights file
    model.path.write_bytes(b"weights")
    r = Runner(model, spec, context=FakeContext, batch=FakeBatch)  # type: ignore[arg-type]
    yield r
    r.close()


def run(runner: Runner, request: Request) -> list[Event]:
    sink = Sink(queue.SimpleQueue())
    runner.submit(request, None, sink)
    return drain(runner, sink)


def saved(runner: Runner) -> tuple[set[int], set[int]]:
    """The lengths of the prompt states in the host cache and on disk."""
    assert runner.kv.cache is not None and runner.kv.disk is not None
    host = {len(e.tokens) for e in runner.kv.cache._entries.values()}
    disk = {len(e.tokens) for e in runner.kv.disk.index._entries.values()}
    return host, disk


def prefill_ends(runner: Runner) -> list[int]:
    """The last prompt position each batch decoded for sequence 0 (the first slot)."""
    ctx: FakeContext = runner.ctx  # type: ignore[assignment]
    return [max(pos for _, pos, seq in rows if seq == 0) for rows in ctx.batches if any(s == 0 for *_, s in rows)]


def test_a_prefill_chunk_ends_at_a_length_to_keep() -> None:
    s = Scheduler(1, 512, 64, lambda t: b"x", lambda t: False)
    s.add(Request(PROMPT, GREEDY, num_predict=1, keep=(40, HINT)))
    sizes = []
    while (plan := s.schedule()).prefills:
        sizes.append(plan.prefills[0][1])
        s.update(plan, [7] * len(plan.outputs))
    assert sizes == [40, 64, HINT - 40 - 64, 64, 200 - HINT - 64]


def test_a_hinted_request_saves_its_state_at_the_hint(runner: Runner) -> None:
    run(runner, Request(PROMPT, GREEDY, num_predict=3, keep=(HINT,)))
    assert HINT - 1 in prefill_ends(runner)  # a chunk ended there: the KV held exactly the hint
    host, disk = saved(runner)
    assert host == {HINT} and disk == {HINT}
    assert runner.kv.cache.lookup(PROMPT[:HINT])[1] == HINT  # type: ignore[union-attr]


def test_without_a_hint_a_short_prompt_is_not_saved(runner: Runner) -> None:
    run(runner, Request(PROMPT, GREEDY, num_predict=3))
    assert HINT - 1 not in prefill_ends(runner)
    assert saved(runner) == (set(), set())


def test_a_hint_at_the_prompts_end_saves_the_whole_prompt_to_disk(runner: Runner) -> None:
    """The slot holds it (and saves it to RAM when reused): only the disk gets a copy now."""
    run(runner, Request(PROMPT, GREEDY, num_predict=3, keep=(len(PROMPT),)))
    assert saved(runner) == (set(), {len(PROMPT)})
