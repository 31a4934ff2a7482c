"""Bytes on the wire: JSON with the escapes line-splitting clients need, NDJSON and error bodies."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import orjson
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from ..errors import CllmError

log = logging.getLogger("cllm.api")

# httpx's iter_lines() splits on str.splitlines() boundaries, which include these; orjson
# leaves them raw, so a token containing one would cut a streamed JSON object in two.
_LINE_BREAKS = {0x2028: "\\u2028", 0x2029: "\\u2029", 0x85: "\\u0085"}
_ESCAPABLE = b"\xe2\x80\xa8", b"\xe2\x80\xa9", b"\xc2\x85"


def dumps(obj: Any) -> bytes:
    """orjson, plus escapes for U+2028, U+2029 and U+0085."""
    data = orjson.dumps(obj)
    if any(seq in data for seq in _ESCAPABLE):
        data = data.decode().translate(_LINE_BREAKS).encode()
    return data


class JSONResponse(Response):
    media_type = "application/json; charset=utf-8"

    def render(self, content: Any) -> bytes:
        return dumps(content)


def error_response(status_code: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status_code)


async def ndjson_lines(objects: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    """One JSON object per line; an error after the first line becomes a final error line."""
    try:
        async for obj in objects:
            yield dumps(obj) + b"\n"
    except CllmError as exc:
        yield dumps({"error": exc.message}) + b"\n"
    except Exception as exc:
        log.exception("stream failed")
        yield dumps({"error": f"internal error: {exc}"}) + b"\n"


class NDJSONResponse(StreamingResponse):
    """A stream that always closes its source, so abandoned generations free their slot now.

    Starlette cancels the sending task when the client leaves; a generator suspended at a
    ``yield`` at that moment would only be finalized by the garbage collector.
    """

    def __init__(self, objects: AsyncGenerator[dict[str, Any], None], status_code: int = 200) -> None:
        self._objects = objects
        super().__init__(ndjson_lines(objects), status_code=status_code, media_type="application/x-ndjson")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._objects.aclose()
