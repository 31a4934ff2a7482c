"""The one error boundary: every ``CllmError`` becomes Ollama's ``{"error": msg}`` with its status."""

from __future__ import annotations

import logging
import os
from typing import Any

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from ..errors import CllmError, InvalidRequest
from .encoders import error_response
from .wire import go_type

log = logging.getLogger("cllm.api")


async def read_json(request: Request) -> dict[str, Any]:
    """Decode a JSON object body with Ollama's error strings for the failure cases."""
    body = await request.body()
    if not body.strip():
        raise InvalidRequest("missing request body")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"invalid character in request body: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidRequest(f"json: cannot unmarshal {go_type(data)} into Go value of type object")
    return data


def public_message(request: Request, message: str) -> str:
    """``message`` without the model store's location on this server (logged in full instead)."""
    settings = getattr(request.app.state, "settings", None)
    root = str(settings.models_dir) if settings is not None else ""
    if not root or root not in message:
        return message
    log.warning("%s %s: %s", request.method, request.url.path, message)
    return message.replace(root + os.sep, "").replace(root, "")


async def cllm_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, CllmError)
    return error_response(exc.status_code, public_message(request, exc.message))


async def http_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    # gin's plain-text defaults for unknown paths and wrong methods.
    if exc.status_code == 404:
        return PlainTextResponse("404 page not found", status_code=404)
    if exc.status_code == 405:
        return PlainTextResponse("405 method not allowed", status_code=405)
    return error_response(exc.status_code, str(exc.detail))


async def unexpected_error_handler(request: Request, exc: Exception) -> Response:
    # Starlette re-raises after this response and uvicorn logs the traceback: no log here.
    return error_response(500, public_message(request, f"internal error: {exc}"))


EXCEPTION_HANDLERS = {
    CllmError: cllm_error_handler,
    HTTPException: http_error_handler,
    Exception: unexpected_error_handler,
}
