"""Bytes on the wire: JSON with the escapes line-splitting clients need, and the framings a
stream of objects goes out in (NDJSON, SSE, typed SSE events), each with its dialect's error
body (written in the dialect's folder) and keep-alive.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson
from starlette.responses import Response

from .anthropic.errors import anthropic_error
from .ollama.errors import ollama_error
from .openai.errors import openai_error

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


# An SSE comment line: every SSE parser skips it (the SSE specification; the OpenAI and Anthropic
# SDKs' decoders, Codex's eventsource parser).
SSE_COMMENT = b": keep-alive\n\n"


class Framing(Protocol):
    """How one response's stream of objects becomes bytes: each object, an error, the end."""

    media_type: str

    def frame(self, obj: dict[str, Any]) -> bytes: ...

    def error(self, status: int, message: str) -> bytes:
        """The last words of a stream that failed after its first byte."""
        ...

    def end(self) -> bytes:
        """What closes the stream, after its last object or its error."""
        ...

    def keepalive(self, idle: dict[str, Any] | None) -> bytes:
        """What a stream sends while it has nothing to say (a long prefill), so that clients and
        proxies with read timeouts keep waiting: ``idle`` is the encoder's object for "no output
        yet", for a framing that has no keep-alive of its own (NDJSON)."""
        ...


class NDJSON:
    """Ollama's streams: one JSON object per line; an error is a final ``{"error"}`` line."""

    media_type = "application/x-ndjson"

    def frame(self, obj: dict[str, Any]) -> bytes:
        return dumps(obj) + b"\n"

    def error(self, status: int, message: str) -> bytes:
        return self.frame(ollama_error(status, message))

    def end(self) -> bytes:
        return b""

    def keepalive(self, idle: dict[str, Any] | None) -> bytes:
        # A blank line or an unknown object fails ollama-python (json.loads(""), and pydantic
        # requires ``message``/``response``): an empty chunk of the endpoint's own shape does not.
        assert idle is not None, "NDJSON's keep-alive is the encoder's empty chunk"
        return self.frame(idle)


class SSE:
    """OpenAI's chat and completion streams: ``data:`` events, an error in OpenAI's body, then ``[DONE]``."""

    media_type = "text/event-stream"

    def frame(self, obj: dict[str, Any]) -> bytes:
        return b"data: " + dumps(obj) + b"\n\n"

    def error(self, status: int, message: str) -> bytes:
        return self.frame(openai_error(status, message))

    def end(self) -> bytes:
        return b"data: [DONE]\n\n"

    def keepalive(self, idle: dict[str, Any] | None) -> bytes:
        return SSE_COMMENT


class SSEEvents:
    """The Responses API's stream: typed events (``event:`` + ``data:``) numbered in order.

    ``sequence`` None leaves the numbers out: for last words after events this framing did
    not send (the server's shutdown).
    """

    media_type = "text/event-stream"

    def __init__(self, sequence: int | None = 0) -> None:
        self.sequence = sequence

    def frame(self, obj: dict[str, Any]) -> bytes:
        if self.sequence is not None:
            obj["sequence_number"] = self.sequence
            self.sequence += 1
        return f"event: {obj['type']}\n".encode() + b"data: " + dumps(obj) + b"\n\n"

    def error(self, status: int, message: str) -> bytes:
        event: dict[str, Any] = {"type": "error"}
        if self.sequence is not None:
            event["sequence_number"] = self.sequence
        event |= {"message": message, "code": None, "param": None}
        return b"event: error\ndata: " + dumps(event) + b"\n\n"

    def end(self) -> bytes:
        return b""

    def keepalive(self, idle: dict[str, Any] | None) -> bytes:
        return SSE_COMMENT  # not an event: it takes no sequence number


class AnthropicSSE:
    """Anthropic's Messages stream: ``event: <type>`` + ``data:``; an error is an ``error`` event
    in Anthropic's error shape; nothing after the last event."""

    media_type = "text/event-stream"

    def frame(self, obj: dict[str, Any]) -> bytes:
        return f"event: {obj['type']}\n".encode() + b"data: " + dumps(obj) + b"\n\n"

    def error(self, status: int, message: str) -> bytes:
        return self.frame(anthropic_error(status, message))

    def end(self) -> bytes:
        return b""

    def keepalive(self, idle: dict[str, Any] | None) -> bytes:
        # Anthropic's API sends these; its SDKs (and Claude Code's) skip them wherever they come.
        return self.frame({"type": "ping"})
