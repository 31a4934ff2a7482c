"""GBNF text: what the grammars built in the API (call grammars) and in the binding (a lazy
grammar's rule) share; imports nothing of cllm's, so the binding may use it without a cycle."""

from __future__ import annotations

import json


def literal(text: str) -> str:
    """A GBNF string literal (JSON's escapes are GBNF's: quotes, backslashes, control characters)."""
    return json.dumps(text, ensure_ascii=False)
