"""Anthropic error bodies without their fresh ``request_id``, which is checked for its shape."""

from __future__ import annotations

import re
from typing import Any


def without_request_id(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` less its ``request_id``, after checking that it is Ollama's ``req_`` and 24 hex digits."""
    rest = dict(body)
    assert re.fullmatch(r"req_[0-9a-f]{24}", rest.pop("request_id", "")), body
    return rest
