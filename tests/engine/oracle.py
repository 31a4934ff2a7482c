"""What the engine's oracle tests share: a cold reference, a runner over a real GGUF, prompts that
start alike, and reading a request's events as a reader that keeps up does."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import llama_cpp
import pytest

from cllm_ollama.engine.binding import Model
from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.request import Event, Request, SamplingParams
from cllm_ollama.engine.runner import Runner, Sink
from cllm_ollama.testing.ggufs import write_qwen3

N = 16
GREEDY = SamplingParams(temperature=0)
SYSTEM = (
    "You are a careful assistant. Answer in short sentences, cite nothing, and say when you do "
    "not know. The user works on a Python web server that speaks Ollama's API and batches "
    "requests over llama.cpp; keep answers about that server precise."
)
QUESTIONS = ["What is a slot?", "Why batch requests?", "How is the KV cache shared?", "What does prefill cost?"]
OTHER = "An unrelated conversation, long enough " * 6


@pytest.fixture(scope="module")
def gguf_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The oracle model (a test module imports this fixture with ``cold``)."""
    # F32 weights of scale 0.5: peaked logits and no quantised activations, so a KV computed in
    # another batch layout gives the same argmax (Q8_0 flipped a near-tie in 1 of 4 prompts, with
    # or without sharing). Endless: no end-of-generation token wins, every request runs N tokens.
    return write_qwen3(tmp_path_factory.mktemp("m") / "oracle.gguf", endless=True)


@pytest.fixture(scope="module")
def cold(gguf_path: Path) -> Iterator[llama_cpp.Llama]:
    """llama-cpp-python's own context over the oracle model: the cold reference."""
    with cold_llm(gguf_path) as llm:
        yield llm


@contextmanager
def cold_llm(path: Path) -> Iterator[llama_cpp.Llama]:
    """llama-cpp-python's own context over ``path`` (the reference ``cold_tokens`` reads), closed on exit."""
    llm = llama_cpp.Llama(str(path), n_ctx=512, n_threads=2, verbose=False, flash_attn=True)
    try:
        yield llm
    finally:
        llm.close()


def cold_tokens(llm: llama_cpp.Llama, prompt: tuple[int, ...], n: int = N) -> list[int]:
    """Greedy tokens computed from nothing by llama-cpp-python's single-sequence generator."""
    # Llama.generate reuses the prefix its last call left in memory even with reset=True;
    # reset() first (which also clears a recurrent state) makes it a computation from nothing.
    llm.reset()
    out: list[int] = []
    for token in llm.generate(list(prompt), temp=0.0, top_k=1, reset=True):
        out.append(token)
        if len(out) == n:
            return out
    return out


def shared_prompts(model: Model) -> list[tuple[int, ...]]:
    """Four prompts that start with the same system prompt (several of gemma3's windows long)."""
    return [tuple(model.tokenize(f"{SYSTEM}\nQ: {q}\nA:")) for q in QUESTIONS]


def next_turn(model: Model, first: tuple[int, ...], answer: list[int]) -> tuple[int, ...]:
    """The conversation ``first`` continued: its answer, then one more question."""
    return first + tuple(answer) + tuple(model.tokenize("\nQ: And then?\nA:", add_special=False))


def make_runner(
    path: Path, n_slots: int, cache_mib: int = 64, n_ctx: int = 256, *, disk: Path | None = None, **spec: object
) -> Runner:
    """A runner over ``path``; with ``disk``, a disk cache there (16 MiB), and ``spec``'s other settings."""
    # Short test prompts: save states from 32 tokens on (the default waits for 256).
    config = LoadSpec(
        path,
        n_slots=n_slots,
        n_ctx_slot=n_ctx,
        n_batch=64,
        n_threads=2,
        cache_bytes=cache_mib << 20,
        cache_min_tokens=32,
        cache_dir=disk,
        cache_disk_bytes=16 << 20 if disk is not None else 0,
        **spec,  # type: ignore[arg-type]
    )
    return Runner(Model(path), config)


def close(runner: Runner) -> None:
    runner.close()
    runner.model.close()


def submit(runner: Runner, request: Request) -> Sink:
    sink = Sink(queue.SimpleQueue())
    runner.submit(request, None, sink)
    return sink


def drain(sink: Sink) -> list[Event]:
    events: list[Event] = []
    while not events or events[-1].finish is None:
        events.append(sink.queue.get(timeout=60))  # type: ignore[attr-defined]
        sink.consumed += 1
    return events


def tokens_of(events: list[Event]) -> list[int]:
    return [t for e in events for t in e.tokens]


def answer_then_other(runner: Runner, first: tuple[int, ...]) -> list[int]:
    """``first``'s greedy answer (N tokens), then a short unrelated request: on a one-slot runner it
    takes the slot, and the first conversation goes to the host cache where the memory allows."""
    answer = tokens_of(drain(submit(runner, Request(first, GREEDY, num_predict=N))))
    drain(submit(runner, Request(tuple(runner.model.tokenize(OTHER)), GREEDY, num_predict=4)))
    return answer
