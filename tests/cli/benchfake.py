"""A fake server for ``cllm bench``'s tests: Ollama and OpenAI streaming endpoints with known output."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import pytest
import uvicorn
from click.testing import CliRunner
from cllm_ollama.cli.bench import bench_command
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

CHUNKS = 5  # text chunks the fake streams per request
EVAL_COUNT = 7  # what it reports as generated tokens (differs on purpose: the report must use it)
PROMPT_EVAL_COUNT = 11
CACHED = 3  # /v1/chat/completions: usage.prompt_tokens_details.cached_tokens; /v1/messages: cache reads


def answer_chunks(body: dict[str, Any]) -> list[str]:
    """What the fake streams: chat answers name the conversation's length and last user message,
    so a test can tell which answer came from which request."""
    messages = body.get("messages")
    if not messages:
        return [f"t{i} " for i in range(CHUNKS)]
    last = str(messages[-1]["content"]).split(":", 1)[0]
    return [f"<{last}/{len(messages)}>" if i == 0 else f"t{i} " for i in range(CHUNKS)]


class FakeServer:
    """Streams CHUNKS chunks per request; model "missing" answers 404, "truncated" stops before
    the final object, "gate-N" holds every response until N requests have been in flight at once
    (bounded), to prove concurrency; "fail-over-N" answers 500 to conversations of more than N
    messages."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.unloads = True  # False: refuses keep_alive 0 as a server without unloads would (404)
        self.in_flight = 0
        self.peak = 0
        self.app = Starlette(
            routes=[
                Route("/api/generate", self.ollama, methods=["POST"]),
                Route("/api/chat", self.ollama, methods=["POST"]),
                Route("/v1/completions", self.openai, methods=["POST"]),
                Route("/v1/chat/completions", self.openai, methods=["POST"]),
                Route("/v1/messages", self.anthropic, methods=["POST"]),
                Route("/api/embed", self.embed, methods=["POST"]),
                Route("/v1/embeddings", self.embed, methods=["POST"]),
            ]
        )

    async def _enter(self, body: dict[str, Any]) -> None:
        self.bodies.append(body)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        model = str(body.get("model", ""))
        if model.startswith("gate-"):
            with anyio.move_on_after(5):
                while self.peak < int(model.removeprefix("gate-")):  # a latch: once reached, open
                    await anyio.sleep(0.001)

    @staticmethod
    def _refusal(body: dict[str, Any]) -> Response | None:
        model = str(body["model"])
        if model == "missing":
            return JSONResponse({"error": f"model '{model}' not found"}, status_code=404)
        if model.startswith("fail-over-") and len(body.get("messages", [])) > int(model.removeprefix("fail-over-")):
            return JSONResponse({"error": "too long"}, status_code=500)
        return None

    async def ollama(self, request: Request) -> Response:
        body = await request.json()
        refusal = self._refusal(body)
        if not self.unloads and body.get("keep_alive") == 0:
            refusal = JSONResponse({"error": "not found"}, status_code=404)
        if refusal is not None:
            self.bodies.append(body)
            return refusal
        key = "response" if request.url.path == "/api/generate" else "message"
        await self._enter(body)

        async def lines() -> AsyncIterator[bytes]:
            try:
                for text in answer_chunks(body):
                    part = text if key == "response" else {"role": "assistant", "content": text}
                    yield json.dumps({"model": body["model"], key: part, "done": False}).encode() + b"\n"
                    await anyio.sleep(0)
                if body["model"] == "truncated":
                    return
                end = {"model": body["model"], key: "" if key == "response" else {"content": ""}}
                end |= {"done": True, "eval_count": EVAL_COUNT, "prompt_eval_count": PROMPT_EVAL_COUNT}
                yield json.dumps(end).encode() + b"\n"
            finally:
                self.in_flight -= 1

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    async def openai(self, request: Request) -> Response:
        body = await request.json()
        chat = request.url.path == "/v1/chat/completions"
        await self._enter(body)

        async def events() -> AsyncIterator[bytes]:
            try:
                for text in answer_chunks(body):
                    choice = {"delta": {"content": text}} if chat else {"text": text}
                    yield f"data: {json.dumps({'choices': [choice | {'index': 0}]})}\n\n".encode()
                    await anyio.sleep(0)
                if chat:  # with usage, as llama-server sends it; /v1/completions without: counted chunks
                    usage = {"completion_tokens": EVAL_COUNT, "prompt_tokens": PROMPT_EVAL_COUNT}
                    usage["prompt_tokens_details"] = {"cached_tokens": CACHED}  # type: ignore[assignment]
                    yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode()
                yield b"data: [DONE]\n\n"
            finally:
                self.in_flight -= 1

        return StreamingResponse(events(), media_type="text/event-stream")

    async def anthropic(self, request: Request) -> Response:
        """Anthropic's event stream: the prompt at message_start, text deltas, then the counters
        (uncached input, cache writes and CACHED reads adding up to PROMPT_EVAL_COUNT)."""
        body = await request.json()
        await self._enter(body)

        def event(obj: dict[str, Any]) -> bytes:
            return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()

        async def events() -> AsyncIterator[bytes]:
            try:
                usage = {"input_tokens": PROMPT_EVAL_COUNT, "output_tokens": 0}
                yield event({"type": "message_start", "message": {"usage": usage}})
                for text in answer_chunks(body | {"messages": _plain(body["messages"])}):
                    yield event(
                        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}
                    )
                    await anyio.sleep(0)
                usage = {"input_tokens": PROMPT_EVAL_COUNT - CACHED - 1, "output_tokens": EVAL_COUNT,
                         "cache_creation_input_tokens": 1, "cache_read_input_tokens": CACHED}  # fmt: skip
                yield event({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage})
                yield event({"type": "message_stop"})
            finally:
                self.in_flight -= 1

        return StreamingResponse(events(), media_type="text/event-stream")

    async def embed(self, request: Request) -> Response:
        """One vector per input; the prompt counted as PROMPT_EVAL_COUNT per input."""
        body = await request.json()
        self.bodies.append(body)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if request.url.path == "/api/embed":
            count = PROMPT_EVAL_COUNT * len(texts)
            return JSONResponse({"embeddings": [[0.5, 0.5]] * len(texts), "prompt_eval_count": count})
        data = [{"object": "embedding", "index": i, "embedding": [0.5, 0.5]} for i in range(len(texts))]
        return JSONResponse({"data": data, "usage": {"prompt_tokens": PROMPT_EVAL_COUNT * len(texts)}})


def _plain(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages API content blocks (text, tool results) as plain text, for ``answer_chunks``."""
    return [
        m | {"content": "".join(b.get("text") or b.get("content") or "" for b in m["content"])}
        if isinstance(m["content"], list)
        else m
        for m in messages
    ]


@contextmanager
def serving(server: FakeServer) -> Iterator[str]:
    """Serve the fake on a free port; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(server.app, lifespan="off", ws="none", log_level="warning")
    runner = uvicorn.Server(config)
    thread = threading.Thread(target=runner.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not runner.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert runner.started
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        runner.should_exit = True
        thread.join(10)
        sock.close()


def invoke_bench(*args: str, code: int = 0) -> Any:
    """``cllm bench`` with ``args``, in process; fails unless it exits with ``code``."""

    result = CliRunner().invoke(bench_command, list(args))
    assert result.exit_code == code, result.output + repr(result.exception)
    return result


@pytest.fixture
def fake() -> Iterator[tuple[FakeServer, str]]:
    """A fake server and its URL (a test module imports this fixture)."""
    server = FakeServer()
    with serving(server) as url:
        yield server, url
