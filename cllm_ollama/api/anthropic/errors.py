"""Anthropic's error seam: its error body, which its SDK parses."""

from __future__ import annotations

import secrets
from typing import Any

# Ollama's Anthropic layer decodes with Go's ``encoding/json`` too: a wrong type is Go's message,
# which the ANTHROPIC boundary writes in Anthropic's body.
from ..schemas.go import decode

__all__ = ["anthropic_error", "decode"]

# Anthropic's, as Ollama's anthropic.NewError maps them (413 as its API does).
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    """Anthropic's error body, which its SDK parses: ``{"type": "error", "error": {"type", "message"},
    "request_id"}``; the id is a fresh ``req_`` and 24 hex digits, as Ollama's ``anthropic.NewError``
    makes it (Anthropic's own API names its request so for support)."""
    kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": f"req_{secrets.token_hex(12)}"}
