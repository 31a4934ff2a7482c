"""Ollama's error seam: its error body, and its requests decoded with Go's error strings."""

from __future__ import annotations

from typing import Any

from ...errors import InvalidRequest
from ..options import options_object
from ..request_fields import parse_keep_alive_field, parse_think
from ..schemas import go
from ..schemas.go import T


def ollama_error(status: int, message: str) -> dict[str, Any]:
    """Ollama's error body: ``{"error": msg}`` whatever the status."""
    return {"error": message}


def decode(body: dict[str, Any], cls: type[T]) -> T:
    """``body`` as ``cls``, or the error Go's decoder gives: a ``keep_alive`` Go cannot parse
    (its own decoder, which stops the decode) before the first field of a wrong type."""
    try:
        return go.decode(body, cls)
    except InvalidRequest:
        if "keep_alive" in cls.__struct_fields__:
            parse_keep_alive_field(body.get("keep_alive"))
        raise


def decode_bound(body: dict[str, Any], cls: type[T]) -> T:
    """``body`` as Ollama's handlers bind it, before any model is looked up: ``keep_alive`` and
    ``think`` decode themselves in Go (api.Duration, api.ThinkValue), so the first bad one in the
    body stops the decode, whatever else is wrong; then the first field of a wrong type; then
    ``options`` (a map in Go) must be an object."""
    fields = cls.__struct_fields__
    for key, value in body.items():
        if key == "keep_alive" and key in fields:
            parse_keep_alive_field(value)
        elif key == "think" and key in fields:
            parse_think(value)
    req = decode(body, cls)
    if "options" in fields:
        options_object(getattr(req, "options", None), cls.go_name or cls.__name__)
    return req
