"""What the engine's oracle tests share: a cold reference, a runner over a real GGUF, and reading
a request's events as a reader that keeps up does."""

from __future__ import annotations

import queue
from pathlib import Path

import llama_cpp

from cllm_ollama.engine.binding import Model
from cllm_ollama.engine.request import Event, Request
from cllm_ollama.engine.runner import Runner, RunnerConfig, Sink

N = 16


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


def make_runner(path: Path, n_slots: int, cache_mib: int = 64, n_ctx: int = 256) -> Runner:
    # Short test prompts: save states from 32 tokens on (the default waits for 256).
    config = RunnerConfig(
        n_slots=n_slots, n_ctx_slot=n_ctx, n_batch=64, n_threads=2, cache_bytes=cache_mib << 20, cache_min_tokens=32
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
