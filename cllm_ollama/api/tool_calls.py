"""Tool calls as the dialects write them: the ids Ollama gives each call, and its native call shape."""

from __future__ import annotations

import secrets
import string
from typing import Any

_ID_ALPHABET = string.ascii_lowercase + string.digits


def tool_call_id() -> str:
    """A call's id as Ollama makes one: 8 random lowercase letters and digits."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(8))


def tool_calls_json(calls: list[dict[str, Any]], start_index: int = 0) -> list[dict[str, Any]]:
    """Ollama's shape: an 8-character id and the call's index inside ``function``."""
    return [
        {"id": tool_call_id(), "function": {"index": start_index + i, **call["function"]}}
        for i, call in enumerate(calls)
    ]
