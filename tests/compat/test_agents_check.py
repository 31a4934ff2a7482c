"""compat/agents/check.py's own parts: the counters it reads in each dialect's answer, and the
recording proxy it puts in front of a running server (the agents themselves run only by hand)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from harness.codex import Exchange, RequestLog
from serving import serve_in_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat" / "agents"))

import check


def sse(*objects: dict[str, object]) -> bytes:
    return b"".join(f"event: x\ndata: {json.dumps(o)}\n\n".encode() for o in objects)


def exchange(response: bytes) -> Exchange:
    return Exchange("POST", "/v1/x", b"{}", 200, response)


def test_prompt_and_cached_tokens_in_every_dialect() -> None:
    anthropic = sse(
        {"type": "message_start", "message": {"usage": {"input_tokens": 100, "output_tokens": 0}}},
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "hi"}},
        {
            "type": "message_delta",
            "usage": {
                "input_tokens": 5,
                "output_tokens": 3,
                "cache_creation_input_tokens": 15,
                "cache_read_input_tokens": 80,
            },
        },
    )
    assert check.usage(exchange(anthropic)) == (100, 80)  # the three add up to the prompt
    uncached = sse({"type": "message_delta", "usage": {"input_tokens": 7, "output_tokens": 1}})
    assert check.usage(exchange(uncached)) == (7, 0)
    responses = sse(
        {"type": "response.created", "response": {"usage": None}},
        {"type": "response.completed",
         "response": {"usage": {"input_tokens": 90, "input_tokens_details": {"cached_tokens": 64}}}},
    )  # fmt: skip
    assert check.usage(exchange(responses)) == (90, 64)
    chat = sse({"choices": [], "usage": {"prompt_tokens": 12, "prompt_tokens_details": {"cached_tokens": 8}}})
    assert check.usage(exchange(chat)) == (12, 8)
    assert check.usage(exchange(json.dumps({"input_tokens": 33}).encode())) == (33, None)  # count_tokens
    assert check.usage(exchange(b"not json")) == (None, None)


async def _stream(request: Request) -> Response:
    body = await request.json()

    async def parts() -> AsyncIterator[bytes]:
        yield b'event: ping\ndata: {"type": "ping"}\n\n'
        yield sse({"type": "content_block_delta", "delta": {"type": "text_delta", "text": body["say"]}})

    return StreamingResponse(parts(), status_code=201, media_type="text/event-stream")


def test_the_proxy_passes_requests_and_streams_through_and_the_log_times_them() -> None:
    upstream = Starlette(routes=[Route("/v1/messages", _stream, methods=["POST"])])
    log = RequestLog(check.Proxy("http://unused"))
    with serve_in_thread(upstream) as target:
        log.app = check.Proxy(target)
        with serve_in_thread(log) as url:
            response = httpx.post(f"{url}/v1/messages?beta=true", json={"say": "hello"}, trust_env=False)
    assert response.status_code == 201 and b'"text": "hello"' in response.content
    (seen,) = log.exchanges
    assert (seen.path, seen.status, json.loads(seen.body)) == ("/v1/messages", 201, {"say": "hello"})
    assert seen.response == response.content
    row = check.seen(seen)
    # The ping carries no text: the first token is the delta's part, no later than the end.
    assert row.ttft_ms is not None and row.total_ms is not None and 0 <= row.ttft_ms <= row.total_ms
