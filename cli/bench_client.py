"""The load generator behind ``cllm bench``: streaming requests to Ollama or OpenAI-style endpoints.

Each level runs a closed loop: ``concurrency`` workers take request numbers from one bounded
list until it is empty, so a level always ends by itself.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import httpx

from .bench_stats import LevelStats, RequestTiming, make_prompt, summarize
from .bench_workloads import Session, Workload, build_waves, groups, history, unload_before, wave_in_flight


class BenchError(Exception):
    """The target cannot be measured (its warm-up request failed)."""


class Api(StrEnum):
    GENERATE = "generate"
    CHAT = "chat"
    OPENAI_COMPLETIONS = "openai-completions"
    OPENAI_CHAT = "openai-chat"
    ANTHROPIC = "anthropic-messages"
    EMBED = "embed"
    OPENAI_EMBEDDINGS = "openai-embeddings"


# Embedding APIs: one answer per request, no stream; a level's "tokens" are the inputs embedded.
EMBEDDING_APIS = (Api.EMBED, Api.OPENAI_EMBEDDINGS)
CHAT_APIS = (Api.CHAT, Api.OPENAI_CHAT, Api.ANTHROPIC)  # the APIs that take conversations


PATHS = {
    Api.GENERATE: "/api/generate",
    Api.CHAT: "/api/chat",
    Api.OPENAI_COMPLETIONS: "/v1/completions",
    Api.OPENAI_CHAT: "/v1/chat/completions",
    Api.ANTHROPIC: "/v1/messages",
    Api.EMBED: "/api/embed",
    Api.OPENAI_EMBEDDINGS: "/v1/embeddings",
}


@dataclass(frozen=True)
class Target:
    """Where and how to send, and what every request asks for."""

    url: str
    api: Api
    model: str
    prompt_tokens: int = 64
    max_tokens: int = 64
    seed: int = 0
    raw: bool = True  # /api/generate: no chat template, so the prompt is what llama-server sees
    ignore_eos: bool = True  # OpenAI APIs: llama-server honours it, others ignore the field
    timeout_s: float = 600.0
    inputs: int = 1  # embedding APIs: texts per request
    # Sent as a Bearer token (CLLM_API_KEY, llama-server's --api-key); out of repr so it is never printed.
    api_key: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Chunk:
    """What one streamed message carries."""

    text: str = ""  # everything the user sees arrive, thinking included: what TTFT and ITL time
    tokens: int | None = None
    prompt_tokens: int | None = None
    error: str | None = None
    done: bool = False  # Ollama's last object; OpenAI streams end with ``data: [DONE]`` instead
    answer: str = ""  # the answer alone (no thinking): what a chat client puts in its history
    cached_tokens: int | None = None


Messages = Sequence[Mapping[str, Any]]


def request_body(target: Target, prompt: str | Messages) -> dict[str, Any]:
    """Greedy, fixed-length, streamed: the settings that make runs comparable.

    ``prompt`` is a text, or a whole conversation for the chat APIs (a text becomes one user message).
    """
    if not isinstance(prompt, str) and target.api not in CHAT_APIS:
        raise ValueError(f"a conversation needs a chat API, not {target.api.value}")
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
    if target.api is Api.ANTHROPIC:
        return anthropic_body(target, messages)
    wire = dialect_messages(target.api, messages)
    if target.api in (Api.GENERATE, Api.CHAT):
        body: dict[str, Any] = {
            "model": target.model,
            "stream": True,
            # An empty stop list overrides stop sequences the model's own parameters set.
            "options": {"num_predict": target.max_tokens, "temperature": 0, "seed": target.seed, "stop": []},
        }
        if target.api is Api.GENERATE:
            body |= {"prompt": prompt, "raw": target.raw}
        else:
            body["messages"] = wire
        return body
    body = {
        "model": target.model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": target.max_tokens,
        "temperature": 0,
        "seed": target.seed,
    }
    if target.ignore_eos:
        body["ignore_eos"] = True
    if target.api is Api.OPENAI_COMPLETIONS:
        body["prompt"] = prompt
    else:
        body["messages"] = [_openai_message(m) for m in wire]
    return body


def _openai_message(message: dict[str, Any]) -> dict[str, Any]:
    """Ollama's ``images`` on a message as OpenAI's content parts (data URLs), as a client sends them."""
    images = message.pop("images", None)
    if not images:
        return message
    parts: list[dict[str, Any]] = [{"type": "text", "text": message["content"]}]
    parts += [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}} for data in images]
    return {**message, "content": parts}


_BREAKPOINT = {"type": "ephemeral"}


def _tool_input(call_id: str) -> dict[str, str]:
    return {"path": f"src/{call_id.removeprefix('call_')}.py"}


def dialect_messages(api: Api, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``history``'s messages as ``api`` takes them: an assistant message's tool call (``tool_call_id``,
    ``tool_name``) and a tool result (role ``tool``) in Ollama's, OpenAI's or Anthropic's shape
    (Anthropic: a ``tool_use`` block after the answer's text, a user message of one ``tool_result``)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        call_id = m.get("tool_call_id")
        if call_id is None:
            out.append(dict(m))
        elif m["role"] == "tool" and api is Api.ANTHROPIC:
            result = {"type": "tool_result", "tool_use_id": call_id, "content": m["content"]}
            out.append({"role": "user", "content": [result]})
        elif m["role"] == "tool":
            out.append(
                {"role": "tool", "content": m["content"]} | ({} if api is Api.CHAT else {"tool_call_id": call_id})
            )
        elif api is Api.ANTHROPIC:
            text = [{"type": "text", "text": m["content"]}] if m["content"] else []
            use = {"type": "tool_use", "id": call_id, "name": m["tool_name"], "input": _tool_input(call_id)}
            out.append({"role": "assistant", "content": [*text, use]})
        else:
            args: Any = _tool_input(call_id)
            function = {"name": m["tool_name"], "arguments": args if api is Api.CHAT else json.dumps(args)}
            call = {"function": function} | ({} if api is Api.CHAT else {"id": call_id, "type": "function"})
            out.append({"role": "assistant", "content": m["content"], "tool_calls": [call]})
    return out


def anthropic_body(target: Target, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A Messages API request as coding agents send one: the system prompt a top-level list of
    text blocks, ``cache_control`` breakpoints on it and on the last message (Claude Code marks
    both), greedy and streamed."""
    system = [m["content"] for m in messages if m["role"] == "system"]
    turns = dialect_messages(Api.ANTHROPIC, [m for m in messages if m["role"] != "system"])
    if turns:
        last = turns[-1]
        if isinstance(last["content"], str):
            last["content"] = [{"type": "text", "text": last["content"]}]
        last["content"][-1]["cache_control"] = _BREAKPOINT
    body: dict[str, Any] = {
        "model": target.model,
        "max_tokens": target.max_tokens,
        "stream": True,
        "temperature": 0,
        "messages": turns,
    }
    if system:
        body["system"] = [{"type": "text", "text": "\n\n".join(system), "cache_control": _BREAKPOINT}]
    return body


def _error_text(error: object) -> str:
    if isinstance(error, dict):
        return str(error.get("message", error))
    return str(error)


def parse_chunk(api: Api, obj: dict[str, Any]) -> Chunk:
    """Text, counts and errors out of one NDJSON object or SSE ``data:`` payload."""
    if "error" in obj:
        return Chunk(error=_error_text(obj["error"]))
    if api in (Api.GENERATE, Api.CHAT):
        source = obj if api is Api.GENERATE else obj.get("message") or {}
        key = "response" if api is Api.GENERATE else "content"
        answer = source.get(key) or ""
        text = (source.get("thinking") or "") + answer
        if obj.get("done"):
            return Chunk(text, obj.get("eval_count"), obj.get("prompt_eval_count"), done=True, answer=answer)
        return Chunk(text, answer=answer)
    if api is Api.ANTHROPIC:
        return _anthropic_chunk(obj)
    text = answer = ""
    for choice in obj.get("choices") or []:
        if api is Api.OPENAI_COMPLETIONS:
            piece = choice.get("text") or ""
            answer, text = answer + piece, text + piece
        else:
            delta = choice.get("delta") or {}
            answer += delta.get("content") or ""
            text += (delta.get("reasoning_content") or "") + (delta.get("content") or "")
    usage = obj.get("usage") or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if cached is None:
        cached = (obj.get("timings") or {}).get("cache_n")  # llama-server's own field
    return Chunk(text, usage.get("completion_tokens"), usage.get("prompt_tokens"), answer=answer, cached_tokens=cached)


def _anthropic_chunk(obj: dict[str, Any]) -> Chunk:
    """One Messages API event: text deltas, the prompt at ``message_start``, the counts at
    ``message_delta`` (the prompt is the uncached input plus the cache reads and writes)."""
    kind = obj.get("type")
    if kind == "content_block_delta":
        delta = obj.get("delta") or {}
        answer = delta.get("text") or ""
        return Chunk((delta.get("thinking") or "") + answer, answer=answer)
    if kind == "message_start":
        usage = (obj.get("message") or {}).get("usage") or {}
        return Chunk(prompt_tokens=usage.get("input_tokens"))
    if kind == "message_delta":
        usage = obj.get("usage") or {}
        read = usage.get("cache_read_input_tokens") or 0
        prompt = (usage.get("input_tokens") or 0) + (usage.get("cache_creation_input_tokens") or 0) + read
        return Chunk(tokens=usage.get("output_tokens"), prompt_tokens=prompt or None, cached_tokens=read)
    return Chunk(done=kind == "message_stop")


def _payload(api: Api, line: str) -> str | None:
    """The data of a stream line (JSON, or SSE's ``[DONE]``); None for blank lines and other SSE fields."""
    line = line.strip()
    if api in (Api.GENERATE, Api.CHAT):
        return line or None
    return line[5:].strip() if line.startswith("data:") else None


async def send(client: httpx.AsyncClient, target: Target, prompt: str | Messages, phase: str = "") -> RequestTiming:
    """One streamed request, timed; failures end up in ``error``, never raised."""
    timing = RequestTiming(start=time.perf_counter(), phase=phase)
    try:
        async with asyncio.timeout(target.timeout_s):
            if target.api in EMBEDDING_APIS:
                await _embed(client, target, prompt, timing)
            else:
                await _stream(client, target, prompt, timing)
    except (httpx.HTTPError, TimeoutError, ValueError) as exc:
        timing.error = f"{type(exc).__name__}: {exc}"
    timing.end = time.perf_counter()
    if timing.error is None and not timing.chunk_times:
        timing.error = "no text generated"
    return timing


def _headers(target: Target) -> dict[str, str] | None:
    return {"Authorization": f"Bearer {target.api_key}"} if target.api_key else None


async def _embed(client: httpx.AsyncClient, target: Target, prompt: str | Messages, timing: RequestTiming) -> None:
    """One embedding request of ``target.inputs`` distinct texts: its answer is its one "chunk",
    and the inputs embedded are its "tokens" (the report's rate is then inputs/s)."""
    if not isinstance(prompt, str):
        raise ValueError("embedding APIs take texts, not conversations")
    texts = [f"{i} {prompt}" for i in range(target.inputs)]
    url = target.url.rstrip("/") + PATHS[target.api]
    response = await client.post(url, json={"model": target.model, "input": texts}, headers=_headers(target))
    if response.status_code != 200:
        timing.error = f"HTTP {response.status_code}: {response.text[:200]}"
        return
    obj = response.json()
    vectors = obj.get("embeddings") if target.api is Api.EMBED else obj.get("data")
    if not isinstance(vectors, list) or len(vectors) != len(texts):
        timing.error = f"expected {len(texts)} embeddings: {response.text[:200]}"
        return
    timing.chunk_times.append(time.perf_counter())
    timing.tokens = len(vectors)
    usage = obj.get("usage") or {}
    prompt_tokens = obj.get("prompt_eval_count") or usage.get("prompt_tokens")
    if isinstance(prompt_tokens, int):
        timing.prompt_tokens = prompt_tokens


async def _stream(client: httpx.AsyncClient, target: Target, prompt: str | Messages, timing: RequestTiming) -> None:
    url = target.url.rstrip("/") + PATHS[target.api]
    async with client.stream("POST", url, json=request_body(target, prompt), headers=_headers(target)) as response:
        if response.status_code != 200:
            body = (await response.aread()).decode(errors="replace")
            timing.error = f"HTTP {response.status_code}: {body[:200]}"
            return
        async for line in response.aiter_lines():
            data = _payload(target.api, line)
            if data is None:
                continue
            if data == "[DONE]":
                return
            obj = json.loads(data)
            if not isinstance(obj, dict):
                raise ValueError(f"not a JSON object: {data[:80]}")
            chunk = parse_chunk(target.api, obj)
            if chunk.text:
                timing.chunk_times.append(time.perf_counter())
            if chunk.answer:
                timing.answer_parts.append(chunk.answer)
            if chunk.cached_tokens is not None:
                timing.cached_tokens = chunk.cached_tokens
            if chunk.tokens is not None:
                timing.tokens = chunk.tokens
            if chunk.prompt_tokens is not None:
                timing.prompt_tokens = chunk.prompt_tokens
            if chunk.error is not None:
                timing.error = chunk.error
                return
            if chunk.done:
                return
    # A stream cut short (server crash, proxy) must not pass for a short answer.
    timing.error = "stream ended before its end marker"


async def run_level(client: httpx.AsyncClient, target: Target, concurrency: int, indices: range) -> list[RequestTiming]:
    """Send one request per index, ``concurrency`` at a time, and wait for all of them."""
    pending = iter(indices)
    timings: list[RequestTiming] = []

    async def worker() -> None:
        for index in pending:
            prompt = make_prompt(target.prompt_tokens, index, target.seed)
            timings.append(await send(client, target, prompt))

    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(worker())
    return timings


def new_client(max_concurrency: int, timeout_s: float) -> httpx.AsyncClient:
    """A pool wide enough that no request queues in the client; proxies are never used."""
    limits = httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency)
    return httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(timeout_s, connect=30.0), trust_env=False)


async def run_bench(
    target: Target,
    levels: list[tuple[int, int]],
    warmup: int = 1,
    on_level: Callable[[LevelStats], None] = lambda stats: None,
    warmup_tokens: int | None = None,
) -> list[LevelStats]:
    """Warm up (loads the model, not counted; prompts of ``warmup_tokens``, default the measured
    size), then run each (concurrency, requests) level in turn.

    Request numbers never repeat across levels, so no prompt is ever sent twice.
    """
    results: list[LevelStats] = []
    async with new_client(max(c for c, _ in levels), target.timeout_s) as client:
        for index in range(warmup):
            size = warmup_tokens or target.prompt_tokens
            timing = await send(client, target, make_prompt(size, -1 - index, target.seed))
            if timing.error is not None:
                raise BenchError(f"warm-up request failed: {timing.error}")
        first = 0
        for concurrency, n_requests in levels:
            timings = await run_level(client, target, concurrency, range(first, first + n_requests))
            first += n_requests
            stats = summarize(concurrency, timings)
            on_level(stats)
            results.append(stats)
    return results


async def run_session(client: httpx.AsyncClient, target: Target, session: Session, t0: float) -> list[RequestTiming]:
    """One user: wait for its start, then its turns in order, each re-sending the whole history.

    The history holds the answers the server actually gave. A failed turn ends the session: its
    remaining turns are recorded as failed too (a chat client would have nothing to send).
    """
    await asyncio.sleep(max(0.0, t0 + session.start_s - time.perf_counter()))
    timings: list[RequestTiming] = []
    users: list[str] = []
    answers: list[str] = []
    for phase, message in session.turns:
        if timings and timings[-1].error is not None:
            now = time.perf_counter()
            timings.append(RequestTiming(start=now, end=now, phase=phase, error="not sent: an earlier turn failed"))
            continue
        users.append(message)
        messages = history(session.system, users, answers, session.image, session.tools)
        timing = await send(client, target, messages, phase)
        answers.append(timing.answer)
        timings.append(timing)
    return timings


async def run_sessions(
    client: httpx.AsyncClient, target: Target, sessions: Sequence[Session], in_flight: int = 0
) -> list[RequestTiming]:
    """Every session of a wave, each from its start offset, at most ``in_flight`` at once (0: no limit)."""
    gate = asyncio.Semaphore(in_flight or max(len(sessions), 1))
    timings: list[RequestTiming] = []
    t0 = time.perf_counter()

    async def one(session: Session) -> None:
        async with gate:
            # A session held back by the gate starts when it gets in, not at its planned offset.
            timings.extend(await run_session(client, target, session, t0 if not in_flight else time.perf_counter()))

    async with asyncio.TaskGroup() as group:
        for session in sessions:
            group.create_task(one(session))
    return timings


async def unload(client: httpx.AsyncClient, target: Target) -> bool:
    """Ask an Ollama-compatible server to unload the model now (``keep_alive: 0``); False where
    the server cannot (llama-server has no unload: ``evict`` stands in for it)."""
    headers = {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}
    body = {"model": target.model, "keep_alive": 0}
    try:
        response = await client.post(f"{target.url}/api/generate", json=body, headers=headers)
    except httpx.HTTPError:
        return False
    return response.status_code == 200


async def evict(client: httpx.AsyncClient, target: Target, prompts: int) -> None:
    """Push a session out of a server's slots with ``prompts`` distinct short prompts at once
    (its slot count): what a server that cannot unload does when other work comes, after which
    its next turn measures what the server kept elsewhere (llama-server: its host-RAM cache)."""
    async with asyncio.TaskGroup() as group:
        for index in range(prompts):
            group.create_task(send(client, target, make_prompt(32, -1000 - index, target.seed)))


async def run_workload(
    target: Target,
    workload: Workload,
    levels: list[int],
    warmup: int = 1,
    on_level: Callable[[LevelStats], None] = lambda stats: None,
) -> list[LevelStats]:
    """A prefix workload at each level (number of users, chats or requests), one after another.

    The warm-up requests share no prefix with the workload; each level's texts carry its own key,
    so no level finds another's prompts in a cache.
    """
    results: list[LevelStats] = []
    async with new_client(max(*levels, workload.evict), target.timeout_s) as client:
        for index in range(warmup):
            timing = await send(client, target, make_prompt(16, -1 - index, target.seed))
            if timing.error is not None:
                raise BenchError(f"warm-up request failed: {timing.error}")
        for number, users in enumerate(levels):
            timings: list[RequestTiming] = []
            for wave, sessions in enumerate(build_waves(workload, users, f"L{number}", target.seed)):
                if unload_before(workload, wave) and not await unload(client, target):
                    await evict(client, target, workload.evict)
                timings += await run_sessions(client, target, sessions, wave_in_flight(workload, wave))
            stats = summarize(users, timings, groups(workload))
            on_level(stats)
            results.append(stats)
    return results
