"""The deterministic mode on the real model, through the real ``cllm serve`` (CLLM_DETERMINISTIC=1
is read when the process starts, before llama.cpp computes anything): a request's tokens and
logprobs are bitwise the same cold, re-sent (prefix from the slot), inside a burst of other
prompts, and from another slot. And, by default, a re-sent request answers as it did cold."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import real_model
from harness.child_server import cllm_serve

MODEL = "coder"
PROMPTS = [
    "Write a Python function that reverses a string.",
    "What is a closure in JavaScript?",
    "Explain recursion to a child.",
    "Name three sorting algorithms and their complexity.",
    "How do I read a file line by line in Go?",
    "What does the SQL keyword JOIN do?",
]
OTHERS = ["Write a haiku about the sea.", "List the planets of the solar system."]
OPTIONS = {"temperature": 0, "num_predict": 24, "seed": 1}


@pytest.fixture(scope="module")
def deterministic_url(real_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("deterministic")
    real_model.install(root / "models", real_gguf, MODEL)
    settings = {
        "OLLAMA_NUM_PARALLEL": "4",
        "OLLAMA_CONTEXT_LENGTH": "2048",
        "CLLM_NUM_THREAD": "2",
        "CLLM_DETERMINISTIC": "1",
    }
    with cllm_serve(root / "models", settings, root / "serve.log") as (_, url):
        yield url


async def _ask(client: httpx.AsyncClient, url: str, prompt: str, **options: Any) -> list[tuple[str, float]]:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": prompt}],
        "stream": False,
        "logprobs": True,
        "options": {**OPTIONS, **options},
    }
    reply = (await client.post(url + "/api/chat", json=body, timeout=300)).json()
    return [(t["token"], t["logprob"]) for t in reply["logprobs"]]


def test_tokens_and_logprobs_are_the_same_cold_re_sent_and_in_a_burst(deterministic_url: str) -> None:
    async def run() -> tuple[list[Any], list[Any], list[Any]]:
        async with httpx.AsyncClient() as client:
            cold = [await _ask(client, deterministic_url, p) for p in PROMPTS]
            again = [await _ask(client, deterministic_url, p) for p in PROMPTS]
            burst = await asyncio.gather(*(_ask(client, deterministic_url, p) for p in [*PROMPTS, *OTHERS]))
        return cold, again, list(burst[: len(PROMPTS)])

    cold, again, burst = asyncio.run(run())
    assert all(cold) and sum(len(answer) for answer in cold) > 3 * OPTIONS["num_predict"]
    assert again == cold
    assert burst == cold


def test_a_re_sent_request_answers_as_it_did_cold_by_default(real_url: str) -> None:
    # The default mode (the session's in-process server): the prompt's last token is decoded
    # alone both times, so the logprobs are bitwise the same, alone on the server.
    async def run() -> tuple[Any, Any]:
        async with httpx.AsyncClient() as client:
            prompt = "Describe a binary search tree in two sentences."
            return await _ask(client, real_url, prompt), await _ask(client, real_url, prompt)

    cold, again = asyncio.run(run())
    assert again == cold
