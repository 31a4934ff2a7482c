"""Ollama's error seam: its error body, and its requests decoded with Go's error strings."""

from __future__ import annotations

from typing import Any

from ...errors import InvalidRequest
from ..request_fields import parse_keep_alive_field
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
