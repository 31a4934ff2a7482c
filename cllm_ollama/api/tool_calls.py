"""Tool calls as the dialects write them: the ids Ollama gives each call, and its native call shape."""

from __future__ import annotations

import secrets
import string
from typing import Any

_ID_ALPHABET = string.ascii_lowercase + string.digits


def random_id() -> str:
    """8 random lowercase letters and digits, the random part of Ollama's call ids."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(8))


def tool_call_id() -> str:
    """A call's id as Ollama's ``toolCallId`` makes one: ``call_`` and 8 random letters and digits."""
    return f"call_{random_id()}"


def tool_calls_json(calls: list[dict[str, Any]], start_index: int = 0) -> list[dict[str, Any]]:
    """Ollama's shape: a fresh id for each call (ChatHandler's ``toolCallId``, never the model's
    own) and the call's index inside ``function``."""
    return [
        {"id": tool_call_id(), "function": {"index": start_index + i, **call["function"]}}
        for i, call in enumerate(calls)
    ]


def name_tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` (Ollama's shape), each tool result that has a call id but no ``tool_name``
    named for the function whose call had that id, the last such call winning (Ollama's
    ``nameFromToolCallID``). OpenAI's, Anthropic's and Codex's clients pair a result with its call
    by id alone, and templates write the name (gpt-oss's ``functions.NAME to=assistant``)."""
    calls = [call for message in messages for call in message.get("tool_calls") or ()]
    names = {call["id"]: call["function"]["name"] for call in calls if call.get("id")}
    for message in messages:
        name = names.get(message.get("tool_call_id") or "")
        if message["role"] == "tool" and name and not message.get("tool_name"):
            message["tool_name"] = name
    return messages
