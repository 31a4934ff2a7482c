"""What agents' long prompts need, on a live server over the tiny qwen3: a stream that answers with
its headers at admission and keeps the client company until its first token, in every dialect,
parsed by the official clients; and Claude Code's per-request billing header not standing in the
way of prefix reuse.

The slow prefill is made, not waited for: a ~1,500-token prompt decoded 8 tokens per step
(``num_batch=8``, ~190 llama.cpp decodes) takes far longer than the 5 ms keep-alive interval, and
each test checks that premise against the engine's own prefill time, which bounds the time from
admission to the first token from below (``assert_slow_prefill``). A keep-alive is due whenever
that time exceeds the interval, however busy the machine: no test here waits on a clock.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import anthropic
import httpx
import ollama
import openai
import pytest
from serving import serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings

pytestmark = pytest.mark.model
MODEL = "tiny"  # installed by conftest.settings
INTERVAL_S = 0.005
# The tiny vocabulary spends a token on a word or two: some 1,500 tokens of prompt.
LONG = " ".join(["The quick brown fox jumps over the lazy dog, and the server answers many people at once."] * 80)
GREEDY = {"temperature": 0}
N = 4
BILLING = "x-anthropic-billing-header: cc_version=2.1.331.{}; cc_entrypoint=cli; cch={};"


@pytest.fixture
def url(settings: Settings) -> Iterator[str]:
    slow = replace(settings, context_length=4096, num_parallel=2, num_batch=8, stream_keepalive=INTERVAL_S)
    with serve_in_thread(create_app(slow)) as base:
        yield base


def assert_slow_prefill(prompt_eval_ns: int) -> None:
    """The premise of a keep-alive test: the prefill alone outlasted the interval."""
    assert prompt_eval_ns > INTERVAL_S * 1e9 * 2, f"prefill of {prompt_eval_ns} ns too fast to test keep-alives"


def fresh(tag: str) -> str:
    """LONG, with nothing in common with an earlier prompt after the template's first tokens."""
    return f"{tag}: {LONG}"


def raw_stream(base: str, path: str, body: dict[str, Any]) -> tuple[float, float, list[bytes]]:
    """Seconds to the headers and to the first byte of output, and the stream's lines."""
    t0 = time.perf_counter()
    with httpx.Client(timeout=120) as client, client.stream("POST", base + path, json=body) as r:
        headers_s = time.perf_counter() - t0
        assert r.status_code == 200
        lines = []
        for line in r.iter_lines():
            lines.append(line.encode())
        return headers_s, time.perf_counter() - t0, lines


def test_ollama_chat_sends_empty_chunks_until_its_first_token(url: str) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": LONG}], "options": GREEDY | {"num_predict": N}}
    _, _, lines = raw_stream(url, "/api/chat", body)
    chunks = [json.loads(line) for line in lines]
    final = chunks[-1]
    assert final["done"] is True
    assert_slow_prefill(final["prompt_eval_duration"])
    first_token = next(i for i, c in enumerate(chunks) if c["message"]["content"] or c["done"])
    assert first_token >= 1, "no keep-alive before the first token"
    for keepalive in chunks[:first_token]:
        assert keepalive["model"] == MODEL and keepalive["done"] is False
        assert keepalive["message"] == {"role": "assistant", "content": ""}
    # The official client reads such a stream (a new prompt: nothing to reuse): keep-alives are empty chunks to it.
    messages = [{"role": "user", "content": fresh("ollama")}]
    parts = list(ollama.Client(host=url).chat(MODEL, messages=messages, options=body["options"], stream=True))
    assert parts[-1].done and parts[-1].eval_count == N
    assert parts[0].message.content == "" and not parts[0].done


def test_openai_chat_completions_sends_comments_until_its_first_token(url: str) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": LONG}], "max_tokens": N, "stream": True}
    body |= GREEDY | {"stream_options": {"include_usage": True}}
    _, _, lines = raw_stream(url, "/v1/chat/completions", body)
    events = [line for line in lines if line]
    first_data = next(i for i, e in enumerate(events) if e.startswith(b"data: {"))
    assert first_data >= 1 and set(events[:first_data]) == {b": keep-alive"}
    data = [json.loads(e.removeprefix(b"data: ")) for e in events if e.startswith(b"data: {")]
    client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
    messages = [{"role": "user", "content": fresh("openai")}]
    stream = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=N, stream=True, temperature=0)
    chunks = [c for c in stream if c.choices]
    assert chunks[-1].choices[0].finish_reason == "length" and data[-1]["choices"] == []  # the usage chunk


def test_openai_responses_sends_comments_until_its_first_event(url: str) -> None:
    body = {"model": MODEL, "input": LONG, "max_output_tokens": N, "stream": True} | GREEDY
    _, _, lines = raw_stream(url, "/v1/responses", body)
    events = [line for line in lines if line]
    first_event = next(i for i, e in enumerate(events) if e.startswith(b"event: "))
    assert first_event >= 1 and set(events[:first_event]) == {b": keep-alive"}
    done = json.loads(events[-1].removeprefix(b"data: "))
    assert done["type"] in ("response.completed", "response.incomplete")
    # Sequence numbers count events only, from 0, keep-alives or not.
    numbers = [json.loads(e.removeprefix(b"data: "))["sequence_number"] for e in events if e.startswith(b"data: ")]
    assert numbers == list(range(len(numbers)))
    client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
    with client.responses.stream(model=MODEL, input=fresh("responses"), max_output_tokens=N, temperature=0) as stream:
        final = stream.get_final_response()
    assert final.status == done["response"]["status"] and final.output_text


def test_anthropic_messages_sends_pings_until_its_first_event(url: str) -> None:
    body = {"model": MODEL, "max_tokens": N, "messages": [{"role": "user", "content": LONG}], "stream": True}
    _, _, lines = raw_stream(url, "/v1/messages", body | GREEDY | {"thinking": {"type": "disabled"}})
    events = [line for line in lines if line.startswith(b"event: ")]
    first_event = events.index(b"event: message_start")
    assert first_event >= 1 and set(events[:first_event]) == {b"event: ping"}
    client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0, timeout=120)
    messages = [{"role": "user", "content": fresh("anthropic")}]
    with client.messages.stream(
        model=MODEL, max_tokens=N, messages=messages, thinking={"type": "disabled"}, extra_body=GREEDY
    ) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == N


def test_billing_header_hash_does_not_defeat_prefix_reuse(url: str) -> None:
    """Two Claude Code requests whose system prompts differ only in the header's hashes: the
    second reuses all of the long rest of its prompt."""

    def ask(version_hash: str, cch: str) -> None:
        system = [{"type": "text", "text": BILLING.format(version_hash, cch)}, {"type": "text", "text": LONG}]
        body = {"model": MODEL, "max_tokens": 1, "system": system, "messages": [{"role": "user", "content": "Hi"}]}
        r = httpx.post(url + "/v1/messages", json=body | GREEDY, timeout=120)
        assert r.status_code == 200, r.text

    def cached() -> float:
        text = httpx.get(url + "/metrics", timeout=30).text
        line = next(x for x in text.splitlines() if x.startswith("cllm_prompt_tokens_total") and 'source="cached"' in x)
        return float(line.rsplit(" ", 1)[1])

    ask("e51", "a5145")
    before = cached()
    ask("7b4", "eb6c6")
    assert cached() - before > 1000  # the whole system prompt, not the 3 tokens before the header
