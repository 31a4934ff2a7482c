"""Small pieces of Ollama's wire format shared by the handlers: Go's decode error, timestamps,
tool calls, media."""

from __future__ import annotations

import secrets
import string
from datetime import UTC, datetime
from typing import Any

from ..errors import InvalidRequest
from .media import Base64Error, Media, decode_media

_GO_TYPES = {bool: "bool", int: "number", float: "number", str: "string", list: "array", dict: "object"}
_GO_INTS = ("int", "int32", "int64")


_ID_ALPHABET = string.ascii_lowercase + string.digits


def go_type(value: object) -> str:
    """How Go's JSON decoder names a value's type in its errors ("string", "number", "array"...)."""
    return _GO_TYPES.get(type(value), "value")


def created_at() -> str:
    """RFC 3339 with fractional seconds in UTC, as Go's time.Time marshals."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def decode_error(value: object, field: str, target: str) -> InvalidRequest:
    """Go's JSON decode error for ``value`` in the struct field ``field`` of Go type ``target``.

    ``field`` is what Go prints: the innermost struct, then the path from the request's root
    (``ChatRequest.messages.content``). A number an integer field cannot hold is quoted, as Go does.
    """
    got = go_type(value)
    if got == "number" and target in _GO_INTS:
        got = f"number {value}"
    return InvalidRequest(f"json: cannot unmarshal {got} into Go struct field {field} of type {target}")


def tool_call_id() -> str:
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(8))


def tool_calls_json(calls: list[dict[str, Any]], start_index: int = 0) -> list[dict[str, Any]]:
    """Ollama's shape: an 8-character id and the call's index inside ``function``."""
    return [
        {"id": tool_call_id(), "function": {"index": start_index + i, **call["function"]}}
        for i, call in enumerate(calls)
    ]


def decoded_media(items: list[str] | None) -> list[Media]:
    """``images`` (Go's []api.ImageData: images and audio, strings already) decoded, [] when absent.

    Go decodes the base64 while it decodes the JSON: bad base64 is its error, as it words it.
    """
    try:
        return [decode_media(item) for item in items or ()]
    except Base64Error as exc:
        raise InvalidRequest(str(exc)) from exc
