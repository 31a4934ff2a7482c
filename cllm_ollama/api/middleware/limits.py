"""A bound on request bodies: 413 past ``max_body_size`` bytes, except blob uploads (model weights).

Checked from Content-Length before anything is read, and by counting while the body streams in
(chunked requests); the handler never sees more than the limit.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...errors import CllmError
from ..errors import dialect_for


class BodyTooLarge(CllmError):
    status_code = 413


def _exempt(scope: Scope) -> bool:
    # POST /api/blobs/:digest streams gigabytes of weights to disk, never into memory.
    return scope["method"] == "POST" and scope["path"].startswith("/api/blobs/")


class BodyLimit:
    """ASGI middleware: refuse bodies over ``max_size`` bytes (no limit when ``max_size`` <= 0)."""

    def __init__(self, app: ASGIApp, max_size: int) -> None:
        self.app = app
        self.max_size = max_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.max_size <= 0 or _exempt(scope):
            await self.app(scope, receive, send)
            return
        length = Headers(scope=scope).get("content-length", "")
        if length.isdigit() and int(length) > self.max_size:
            await self._refuse(scope, receive, send)
            return

        received = 0
        exceeded = started = False

        async def counting_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_size:
                    exceeded = True
                    raise BodyTooLarge(self._message())
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if exceeded and not started:
                return  # the handler's own error answer: ours goes out instead
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except BodyTooLarge:
            if started:
                raise
        if exceeded and not started:
            await self._refuse(scope, receive, send)

    def _message(self) -> str:
        return f"request body too large: the limit is {self.max_size} bytes (CLLM_MAX_BODY_SIZE)"

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The rest of the body is never read, so the connection cannot be reused.
        refusal = dialect_for(scope["path"]).response(413, self._message(), headers={"Connection": "close"})
        await refusal(scope, receive, send)
