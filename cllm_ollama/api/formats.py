"""Ollama's ``format`` (``"json"`` or a JSON Schema): what it may be, and Ollama's messages when it is not.

The grammar itself is the engine's (``engine/grammar.py``): this layer never touches llama.cpp.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ..engine.grammar import JSON_GRAMMAR, json_schema_grammar
from ..errors import CllmError, InvalidRequest
from ..gostrconv import go_quote

# Largest count a schema may ask for (maxLength, maxItems, ...): the converter spells a bound of
# N as N nested groups; llama.cpp refuses more than ~2000 of them and its recursive parser
# overflows its stack on ~15000 (a crash).
MAX_SCHEMA_COUNT = 1000
_COUNT_KEYS = (
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minContains",
    "maxContains",
)
MAX_SCHEMA_DEPTH = 64


def check_schema_bounds(schema: object, depth: int = 0) -> None:
    """Refuse repetition counts and nesting beyond what a grammar can safely spell out."""
    if depth > MAX_SCHEMA_DEPTH:
        raise InvalidRequest(f"invalid JSON schema in format: nested deeper than {MAX_SCHEMA_DEPTH} levels")
    if isinstance(schema, dict):
        for key in _COUNT_KEYS:
            value = schema.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and value > MAX_SCHEMA_COUNT:
                raise InvalidRequest(
                    f"invalid JSON schema in format: {key} {value} is more than the supported {MAX_SCHEMA_COUNT}"
                )
        children: Iterable[object] = schema.values()
    elif isinstance(schema, list):
        children = schema
    else:
        return
    for child in children:
        check_schema_bounds(child, depth + 1)


def grammar_for_format(fmt: object) -> str | None:
    """GBNF for a request's decoded ``format`` value; None when output is unconstrained.

    Can take a while for a big schema: call it off the event loop.
    """
    if fmt is None or fmt == "":
        return None
    if fmt == "json":
        return JSON_GRAMMAR
    raw = json.dumps(fmt, ensure_ascii=False, separators=(",", ":"))
    if not isinstance(fmt, dict):
        # Ollama quotes the raw JSON it was sent, so a string arrives with its quotes escaped.
        message = f'invalid format: {go_quote(raw)}; expected "json" or a valid JSON Schema object'
        raise CllmError(message, 500)
    check_schema_bounds(fmt)
    return json_schema_grammar(raw)
