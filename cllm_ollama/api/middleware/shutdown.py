"""Stopping the server: requests in flight get a short grace period, then end with an error.

On SIGTERM uvicorn stops accepting connections, then waits for every open one to finish, so a
long generation kept the process alive for as long as it ran (48.8 s measured). ``Drain``
(``drain.py``) is told when shutdown starts; from then ``DrainMiddleware`` answers new requests
503, and when the grace period is over it cancels each request still running (which aborts its
engine request, as a client that leaves does) and ends its response itself: a final
``{"error"}`` line on NDJSON, an error event on SSE, or a 503 if nothing was sent yet.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..encoders import NDJSON, SSE, AnthropicSSE, SSEEvents
from ..errors import dialect_for
from .drain import Drain

SHUTTING_DOWN = "server shutting down"
# How long a cancelled request may take to unwind (abort its engine request) before its
# response is ended anyway: a worker thread it waits on cannot be interrupted.
UNWIND_S = 1.0


class _Exchange:
    """One request's ``send``, watched: what went out, and a way to end it in the right format."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False
        self.ended = False
        self.content_type = ""

    async def send(self, message: Message) -> None:
        if self.ended:
            return  # output of a request that was already ended for it
        if message["type"] == "http.response.start":
            self.started = True
            headers = dict(message.get("headers", []))
            self.content_type = headers.get(b"content-type", b"").decode("latin-1")
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.ended = True
        await self._send(message)

    async def end(self, scope: Scope, receive: Receive) -> None:
        if self.ended:
            return
        self.ended = True
        path = scope.get("path", "")
        if not self.started:
            await dialect_for(path).response(503, SHUTTING_DOWN)(scope, receive, self._send)
            return
        await self._send({"type": "http.response.body", "body": self._last_words(path), "more_body": False})

    def _last_words(self, path: str) -> bytes:
        if self.content_type.startswith("application/x-ndjson"):
            framing: NDJSON | SSE | SSEEvents | AnthropicSSE = NDJSON()
        elif not self.content_type.startswith("text/event-stream"):
            return b""
        elif path == "/v1/responses":
            framing = SSEEvents(sequence=None)  # its events so far were numbered by the response
        elif path == "/v1/messages":
            framing = AnthropicSSE()
        else:
            framing = SSE()
        return framing.error(503, SHUTTING_DOWN) + framing.end()


class DrainMiddleware:
    """Runs each HTTP request until it finishes or ``drain``'s grace period is over."""

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange = _Exchange(send)
        if self.drain.stopping:
            await exchange.end(scope, receive)
            return
        request = asyncio.ensure_future(self.app(scope, receive, exchange.send))
        try:
            await asyncio.wait({request, self.drain.expired()}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            request.cancel()
            raise
        if request.done():
            request.result()  # its error, if any, goes on to Starlette's and uvicorn's handlers
            return
        request.cancel()
        await asyncio.wait({request}, timeout=UNWIND_S)
        # A request still unwinding (blocked on a thread) is left to finish on its own: its
        # late output is dropped, and its error, if any, is retrieved here rather than logged.
        request.add_done_callback(lambda task: task.cancelled() or task.exception())
        await exchange.end(scope, receive)
