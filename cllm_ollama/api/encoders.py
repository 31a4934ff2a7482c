"""Bytes on the wire: JSON with the escapes line-splitting clients need, NDJSON and error bodies."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.responses import Response, StreamingResponse

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
    async for obj in objects:
        yield dumps(obj) + b"\n"


def ndjson_response(objects: AsyncIterator[dict[str, Any]], status_code: int = 200) -> StreamingResponse:
    return StreamingResponse(ndjson_lines(objects), status_code=status_code, media_type="application/x-ndjson")
