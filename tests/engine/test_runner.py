"""The engine thread on a real (tiny, generated) GGUF: batched output must equal single-sequence output."""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Iterator
from pathlib import Path

import gguf
import llama_cpp
import pytest

from cllm_ollama.engine.binding import Model
from cllm_ollama.engine.client import LoadedModel, LoadSpec
from cllm_ollama.engine.request import Event, FinishReason, Request, SamplingParams
from cllm_ollama.engine.runner import Runner, RunnerConfig, Sink
from cllm_ollama.testing.ggufs import write_qwen3

pytestmark = pytest.mark.model

PROMPTS = [
    "Hello, how are you?",
    "The quick brown fox",
    "Write a short poem about the sea.",
    "def add(a, b):",
    "Paris is the capital",
    "Once upon a time",
]
GREEDY = SamplingParams(temperature=0)


@pytest.fixture(scope="module")
def oracle_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Q8_0 with weights of scale 0.5: peaked logits, so batched and single-sequence kernels agree.
    return write_qwen3(tmp_path_factory.mktemp("m") / "oracle.gguf", qtype=gguf.GGMLQuantizationType.Q8_0)


@pytest.fixture(scope="module")
def runner(oracle_gguf: Path) -> Iterator[Runner]:
    r = Runner(Model(oracle_gguf), RunnerConfig(n_slots=4, n_ctx_slot=256, n_batch=32, n_threads=2))
    yield r
    r.close()
    r.model.close()


def run(runner: Runner, requests: list[Request]) -> list[list[Event]]:
    queues = []
    for request in requests:
        q: queue.SimpleQueue[Event] = queue.SimpleQueue()
        runner.submit(request, None, Sink(q))
        queues.append(q)
    results = []
    for q in queues:
        events = [q.get(timeout=30)]
        while events[-1].finish is None:
            events.append(q.get(timeout=30))
        results.append(events)
    return results


def tokens_of(events: list[Event]) -> list[int]:
    return [t for e in events for t in e.tokens]


def test_batched_greedy_equals_one_at_a_time_and_plain_llama_cpp(runner: Runner, oracle_gguf: Path) -> None:
    model = runner.model
    requests = [Request(tuple(model.tokenize(p)), GREEDY, num_predict=24) for p in PROMPTS]
    together = [tokens_of(ev) for ev in run(runner, requests)]
    alone = [tokens_of(run(runner, [Request(r.prompt, GREEDY, num_predict=24)])[0]) for r in requests]
    assert together == alone
    # More prompts than slots: every one finished with its full length.
    assert all(len(t) == 24 for t in together)
    # Not degenerate: the oracle only means something if the outputs differ.
    assert len({tuple(t) for t in together}) == len(PROMPTS)
    # And the same as llama-cpp-python's own single-sequence generator, with the same
    # attention kernel (flash attention, which llama.cpp's "auto" picks on CPU; the other
    # kernel rounds differently and flips a near-tie at the 7th token of the first prompt).
    llm = llama_cpp.Llama(str(oracle_gguf), n_ctx=256, n_threads=2, verbose=False, flash_attn=True)
    for request, ours in zip(requests, together, strict=True):
        theirs = []
        for token in llm.generate(list(request.prompt), temp=0.0, top_k=1, reset=True):
            theirs.append(token)
            if len(theirs) == 24:
                break
        assert ours == theirs


def test_seeded_sampling_is_reproducible_whatever_else_is_in_the_batch(runner: Runner) -> None:
    model = runner.model
    seeded = SamplingParams(temperature=0.9, top_k=50, top_p=0.95, seed=1234)
    prompt = tuple(model.tokenize("Tell me a story"))

    def seeded_request() -> tuple[Request, object]:
        return Request(prompt, seeded, num_predict=16), LoadedModel.sampler_for(_Holder(model), seeded)

    alone_req, alone_sampler = seeded_request()
    q: queue.SimpleQueue[Event] = queue.SimpleQueue()
    runner.submit(alone_req, alone_sampler, Sink(q))  # type: ignore[arg-type]
    alone = _drain(q)
    busy = [Request(tuple(model.tokenize(p)), GREEDY, num_predict=20) for p in PROMPTS[:3]]
    mixed_req, mixed_sampler = seeded_request()
    queues = []
    for r in busy:
        bq: queue.SimpleQueue[Event] = queue.SimpleQueue()
        runner.submit(r, None, Sink(bq))
        queues.append(bq)
    q2: queue.SimpleQueue[Event] = queue.SimpleQueue()
    runner.submit(mixed_req, mixed_sampler, Sink(q2))  # type: ignore[arg-type]
    mixed = _drain(q2)
    for bq in queues:
        _drain(bq)
    assert tokens_of(alone) == tokens_of(mixed)
    assert len(set(tokens_of(alone))) > 1


def test_abort_frees_the_slot_within_a_step(runner: Runner) -> None:
    model = runner.model
    long = [Request(tuple(model.tokenize(p)), GREEDY, num_predict=200) for p in PROMPTS[:4]]
    queues = []
    for r in long:
        q: queue.SimpleQueue[Event] = queue.SimpleQueue()
        runner.submit(r, None, Sink(q))
        queues.append(q)
    queues[0].get(timeout=30)  # the first request is generating
    runner.abort(long[0].id)
    events = _drain(queues[0])
    assert events[-1].finish is FinishReason.CANCELED
    # A new request gets the freed slot while the other three still run.
    fresh = Request(tuple(model.tokenize("Hello")), GREEDY, num_predict=2)
    (result,) = run(runner, [fresh])
    assert result[-1].finish is FinishReason.LENGTH
    for r in long[1:]:
        runner.abort(r.id)
    for q in queues[1:]:
        assert _drain(q)[-1].finish in (FinishReason.CANCELED, FinishReason.LENGTH)


def test_async_generate_and_queue_limit(oracle_gguf: Path) -> None:
    from cllm_ollama.errors import QueueFull

    loaded = LoadedModel(LoadSpec(oracle_gguf, n_slots=1, n_ctx_slot=128, n_batch=32, n_threads=2), max_queue=1)

    async def main() -> None:
        prompt = tuple(loaded.tokenize("Hello"))
        first = loaded.generate(Request(prompt, GREEDY, num_predict=50))
        second = loaded.generate(Request(prompt, GREEDY, num_predict=50))
        third = loaded.generate(Request(prompt, GREEDY, num_predict=50))
        await first.__anext__()
        task = asyncio.ensure_future(second.__anext__())
        await asyncio.sleep(0)
        with pytest.raises(QueueFull):
            await third.__anext__()
        await first.aclose()  # leaving early aborts and frees the slot for the queued one
        event = await task
        assert event.request_id
        await second.aclose()

    try:
        asyncio.run(main())
    finally:
        loaded.close()


class _Holder:
    """Just enough of LoadedModel for sampler_for()."""

    def __init__(self, model: Model) -> None:
        self.model = model


def _drain(q: queue.SimpleQueue[Event]) -> list[Event]:
    events = [q.get(timeout=30)]
    while events[-1].finish is None:
        events.append(q.get(timeout=30))
    return events
