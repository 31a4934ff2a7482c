"""Ollama's ``format`` (``"json"`` or a JSON Schema) turned into the GBNF grammar the sampler enforces."""

from __future__ import annotations

import functools
import json

from ..errors import CllmError, InvalidRequest
from .wire import go_quote

# llama.cpp's grammars/json.gbnf: an object at the root, and whitespace bounded so a model cannot
# run away in newlines (Ollama's own copy allows unbounded whitespace, a known source of hangs).
JSON_GRAMMAR = r"""
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
"""


def grammar_for_format(fmt: object) -> str | None:
    """GBNF for a request's decoded ``format`` value; None when output is unconstrained."""
    if fmt is None or fmt == "":
        return None
    if fmt == "json":
        return JSON_GRAMMAR
    raw = json.dumps(fmt, ensure_ascii=False, separators=(",", ":"))
    if not isinstance(fmt, dict):
        # Ollama quotes the raw JSON it was sent, so a string arrives with its quotes escaped.
        message = f'invalid format: {go_quote(raw)}; expected "json" or a valid JSON Schema object'
        raise CllmError(message, 500)
    return _schema_grammar(raw)


@functools.lru_cache(maxsize=64)
def _schema_grammar(schema_json: str) -> str:
    # Imported here: the llama_cpp package loads the compiled library on import, and clients tend to
    # send the same schema on every request, hence the cache.
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        return json_schema_to_gbnf(schema_json)
    except (AssertionError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise InvalidRequest(f"invalid JSON schema in format: {exc}") from exc
