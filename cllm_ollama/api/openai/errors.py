"""OpenAI's error seam: its error body, which its clients parse."""

from __future__ import annotations

from typing import Any

# Ollama's OpenAI layer decodes with Go's ``encoding/json`` too: a wrong type is Go's message,
# which the OPENAI boundary writes in OpenAI's body.
from ..schemas.go import decode

__all__ = ["decode", "openai_error"]

# OpenAI's error types by status; every other status is an "api_error".
_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "not_found_error",
    413: "invalid_request_error",
}


def openai_error(status: int, message: str) -> dict[str, Any]:
    """OpenAI's error body, which its clients parse: ``{"error": {"message", "type", ...}}``."""
    kind = _OPENAI_ERROR_TYPES.get(status, "api_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}
