"""The error boundary: every exception becomes a status and a message the same way, and each
dialect writes them in its own shape, before the first byte (a JSON error response) and after
it (its stream's last words, see ``encoders.Framing``).

``CllmError`` keeps its status and message; anything else is a 500 ``internal error: ...``.
Ollama is the app's default dialect (Starlette's exception handlers); ``/v1`` handlers are
wrapped in ``OPENAI.boundary``, ``/v1/messages`` in ``ANTHROPIC.boundary``.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
import zstandard
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response

from ..errors import CllmError, InvalidRequest, RequestCanceled
from .anthropic.errors import anthropic_error
from .encoders import JSONResponse
from .go_json import GoSyntaxError, first_value
from .ollama.errors import ollama_error
from .openai.errors import openai_error
from .schemas.go import GoStruct, go_field_names, go_type, go_value_type
from .services import services

log = logging.getLogger("cllm.api")

Handler = Callable[[Request], Awaitable[Response]]
# Ollama's native handlers' words for a request without a body.
MISSING_BODY = "missing request body"


async def read_body(request: Request, empty: str = MISSING_BODY) -> bytes:
    """The request's body, decompressed where it says zstd; none at all (or only blanks) is a 400
    in ``empty``'s words (the dialect's ``empty_body``)."""
    try:
        body = await request.body()
    except ClientDisconnect:
        # Gone before its body arrived: nobody to answer, nothing that went wrong here.
        raise RequestCanceled() from None
    if request.headers.get("content-encoding", "").strip().lower() == "zstd":
        body = _unzstd(body)
    if not body.strip():
        raise InvalidRequest(empty)
    return body


async def read_json(request: Request, into: type[GoStruct], empty: str = MISSING_BODY) -> dict[str, Any]:
    """Decode a JSON object body with Ollama's error strings for the failure cases: ``into`` is the
    struct Go decodes it into, named where the body is no object; ``empty`` is the words for no
    body at all (the dialect's ``empty_body``)."""
    body = await read_body(request, empty)
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = _first_value(body)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidRequest(f"json: cannot unmarshal {go_type(data)} into Go value of type {go_value_type(into)}")
    try:
        return go_field_names(data, into)
    except RecursionError:  # nested past Python's stack: as sent (the decode says what it makes of it)
        return data


# Ollama's cap on a decompressed body (maxDecompressedBodySize): a small zstd frame cannot unfold
# into gigabytes here.
MAX_DECOMPRESSED_BODY = 20 << 20


def _unzstd(body: bytes) -> bytes:
    """A zstd-compressed body (Codex compresses its /v1/responses requests, and Ollama reads them),
    at most ``MAX_DECOMPRESSED_BODY`` bytes of it, refused in Ollama's words."""
    out = bytearray()
    try:
        with zstandard.ZstdDecompressor().stream_reader(body, read_across_frames=True) as reader:
            while piece := reader.read(1 << 20):
                out += piece
                if len(out) > MAX_DECOMPRESSED_BODY:
                    raise InvalidRequest("http: request body too large")
    except zstandard.ZstdError:
        raise InvalidRequest("failed to decompress zstd body") from None
    return bytes(out)


def _first_value(body: bytes) -> Any:
    """A body orjson refused, read as Go's decoder reads it: its first value (what follows is not
    read), Go's words where that is malformed; bytes that are not UTF-8 inside it replaced, as Go does."""
    try:
        value = first_value(body)
    except GoSyntaxError as exc:
        raise InvalidRequest(str(exc)) from None
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(value.decode("utf-8", "replace"), parse_float=_go_number, parse_int=_go_number)
    except (ValueError, RecursionError) as exc:  # nesting deeper than Python reads, within Go's 10000
        raise InvalidRequest(f"invalid request body: {exc}") from None


def _go_number(text: str) -> float | int:
    """A JSON number as Go's decoder reads one into an ``any`` (options, arguments, schemas): a
    float64, so one past its range (1e400, a 400-digit integer) refuses the request, not a later
    step (orjson refuses such a number, and Python's json would read it as inf or an exact int)."""
    if math.isinf(float(text)):
        raise InvalidRequest(f"json: cannot unmarshal number {text} into Go value of type float64")
    return int(text) if text.lstrip("-").isdigit() else float(text)


def public_message(request: Request, message: str) -> str:
    """``message`` without the model store's location on this server (logged in full instead)."""
    try:
        root = str(services(request).settings.models_dir)
    except LookupError:  # an app of the tests' own, without cllm's services: nothing to hide
        root = ""
    if not root or root not in message:
        return message
    log.warning("%s %s: %s", request.method, request.url.path, message)
    return message.replace(root + os.sep, "").replace(root, "")


def describe(request: Request, exc: Exception) -> tuple[int, str]:
    """The status and message a client gets for ``exc``, in every dialect, before or after the first byte."""
    if isinstance(exc, CllmError):
        return exc.status_code, public_message(request, exc.message)
    return 500, public_message(request, f"internal error: {exc}")


@dataclass(frozen=True)
class Dialect:
    """How one API family writes an error: ``body(status, message)``. ``empty_body``: its words for
    a request without a body (Ollama's native handlers check for it; its /v1 middlewares pass on
    gin's bind error, Go's ``EOF``)."""

    name: str
    body: Callable[[int, str], dict[str, Any]]
    empty_body: str = MISSING_BODY

    def response(self, status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse(self.body(status, message), status_code=status, headers=headers)

    def boundary(self, handler: Handler) -> Handler:
        """``handler`` with every exception it raises answered in this dialect."""

        @functools.wraps(handler)
        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:
                if not isinstance(exc, CllmError):
                    log.exception("unhandled error on %s", request.url.path)
                return self.response(*describe(request, exc))

        return guarded


OLLAMA = Dialect("ollama", ollama_error)
OPENAI = Dialect("openai", openai_error, "EOF")
ANTHROPIC = Dialect("anthropic", anthropic_error, "EOF")


def dialect_for(path: str) -> Dialect:
    """The dialect of a path, for answers made outside any handler (middleware)."""
    if path == "/v1/messages" or path.startswith("/v1/messages/"):
        return ANTHROPIC
    return OPENAI if path.startswith("/v1/") else OLLAMA


async def cllm_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, CllmError)
    return OLLAMA.response(*describe(request, exc))


async def http_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    # gin's plain-text defaults for unknown paths and wrong methods.
    if exc.status_code == 404:
        return PlainTextResponse("404 page not found", status_code=404)
    if exc.status_code == 405:
        return PlainTextResponse("405 method not allowed", status_code=405)
    return OLLAMA.response(exc.status_code, str(exc.detail))


async def unexpected_error_handler(request: Request, exc: Exception) -> Response:
    # Starlette re-raises after this response and uvicorn logs the traceback: no log here.
    return OLLAMA.response(*describe(request, exc))


EXCEPTION_HANDLERS = {
    CllmError: cllm_error_handler,
    HTTPException: http_error_handler,
    Exception: unexpected_error_handler,
}
