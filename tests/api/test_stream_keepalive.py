"""StreamResponse alone, over fake objects: headers at admission, keep-alives in each framing
until the first object, and an error after them still in the dialect's shape.

The fake generation waits, after its admission, until a keep-alive has been made (``idle`` is
called for each one): the order is forced, not timed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable
from typing import Any

import pytest
from anthropic_ids import without_request_id
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from cllm_ollama.api.encoders import NDJSON, SSE, AnthropicSSE, Framing, SSEEvents
from cllm_ollama.api.services import Services, install
from cllm_ollama.api.streaming import StreamResponse
from cllm_ollama.config import Settings
from cllm_ollama.errors import QueueFull

BUSY = "server busy, please try again.  maximum pending requests exceeded"


def app_for(framing: Callable[[], Framing]) -> Starlette:
    async def handler(request: Request) -> Response:
        admitted, kept_alive = asyncio.Event(), asyncio.Event()

        def idle() -> dict[str, Any]:
            kept_alive.set()
            return {"done": False}

        async def objects() -> AsyncGenerator[dict[str, Any], None]:
            admitted.set()
            await kept_alive.wait()
            if request.query_params.get("fail"):
                raise QueueFull()
            yield {"type": "message_start"}

        return await StreamResponse(framing(), objects(), idle=idle).start(request, admitted)

    app = Starlette(routes=[Route("/", handler, methods=["POST"])])
    install(app, Services(Settings(stream_keepalive=0.001)))
    return app


@pytest.mark.parametrize(
    ("framing", "keepalive", "error"),
    [
        (NDJSON, b'{"done":false}\n', {"error": BUSY}),
        (SSE, b": keep-alive\n\n", {"error": {"message": BUSY, "type": "api_error", "param": None, "code": None}}),
        (
            SSEEvents,
            b": keep-alive\n\n",
            {"type": "error", "sequence_number": 0, "message": BUSY, "code": None, "param": None},
        ),
        (
            AnthropicSSE,
            b'event: ping\ndata: {"type":"ping"}\n\n',
            {"type": "error", "error": {"type": "overloaded_error", "message": BUSY}},
        ),
    ],
)
def test_keepalives_until_the_first_object_then_an_error_in_the_dialects_shape(
    framing: Callable[[], Framing], keepalive: bytes, error: dict[str, Any]
) -> None:
    with TestClient(app_for(framing)) as client:
        ok = client.post("/")
        failed = client.post("/?fail=1")
    assert ok.status_code == 200 and ok.content.startswith(keepalive)
    assert b"message_start" in ok.content.removeprefix(keepalive)
    # Admitted, then refused by the engine: the status is sent, the error is the stream's end.
    assert failed.status_code == 200 and failed.content.startswith(keepalive)
    last = [line for line in failed.content.split(b"\n") if line.startswith((b"{", b"data: {"))][-1]
    sent = json.loads(last.removeprefix(b"data: "))
    assert (without_request_id(sent) if framing is AnthropicSSE else sent) == error
