"""Grammars for constrained output: the JSON grammar, JSON Schemas turned into GBNF, and a
check that runs where a crash cannot take the server down.

llama.cpp parses GBNF by recursive descent: a grammar nested deep enough overflows the C
stack and the process dies with SIGSEGV (a JSON schema's ``maxLength: 20000`` becomes 20000
nested groups). Two guards keep that from ever reaching the server's own llama.cpp:

- a bound on nesting, checked here in linear time, refuses what is certainly too deep;
- every grammar not seen before is parsed first by llama.cpp in a child process. If the
  child dies, the grammar is refused and the child replaced; only grammars that a child
  parsed reach the engine. Results are cached, so a client sending the same schema on
  every request pays for the child once.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import multiprocessing
import re
import threading
from collections import OrderedDict
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from ..errors import InvalidRequest

log = logging.getLogger("cllm.engine")

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


# Nested groups llama.cpp's parser takes safely: it overflowed an 8 MiB stack between 10,000
# and 20,000 levels on x86-64; threads and other platforms may have less.
MAX_NESTING = 5000
_CACHE_SIZE = 256


class GrammarRejected(InvalidRequest):
    """A grammar llama.cpp cannot (or must not be asked to) parse."""


def nesting_depth(grammar: str) -> int:
    """Deepest ``(`` group nesting in GBNF text, skipping string literals, char classes and comments."""
    depth = deepest = 0
    i, n = 0, len(grammar)
    while i < n:
        c = grammar[i]
        if c == '"' or c == "[":
            close = '"' if c == '"' else "]"
            i += 1
            while i < n and grammar[i] != close:
                i += 2 if grammar[i] == "\\" else 1
        elif c == "#":
            while i < n and grammar[i] != "\n":
                i += 1
        elif c == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif c == ")":
            depth -= 1
        i += 1
    return deepest


def _parses(grammar: str) -> bool:
    """Runs in the child: whether llama.cpp parses ``grammar`` (a crash here kills only the child)."""
    from .binding import grammar_parses

    return grammar_parses(grammar)


class GrammarChecker:
    """Parses grammars in a child process, one at a time, remembering the verdicts."""

    def __init__(self, max_nesting: int = MAX_NESTING) -> None:
        self.max_nesting = max_nesting
        self._verdicts: OrderedDict[str, bool] = OrderedDict()
        self._executor: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    async def check(self, grammar: str, what: str = "format") -> None:
        """Raise ``GrammarRejected`` unless llama.cpp can parse ``grammar`` without harm; ``what``
        names where it came from in the refusal (``format``, or ``grammar`` as sent)."""
        if nesting_depth(grammar) > self.max_nesting:
            raise GrammarRejected(
                f"{what} is too deeply nested for the grammar engine (more than {self.max_nesting} levels)"
            )
        verdict = self._verdicts.get(grammar)
        if verdict is None:
            verdict = await asyncio.get_running_loop().run_in_executor(None, self._check_in_child, grammar)
            self._verdicts[grammar] = verdict
            while len(self._verdicts) > _CACHE_SIZE:
                self._verdicts.popitem(last=False)
        else:
            self._verdicts.move_to_end(grammar)
        if not verdict:
            if what == "grammar":
                raise GrammarRejected("invalid grammar: llama.cpp could not parse it")
            raise GrammarRejected(f"{what} could not be turned into a grammar: llama.cpp refused it")

    def _check_in_child(self, grammar: str) -> bool:
        with self._lock:
            if self._executor is None:
                # spawn, not fork: the server has threads (and llama.cpp state) a fork would copy.
                self._executor = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
            try:
                return self._executor.submit(_parses, grammar).result()
            except BrokenProcessPool:
                log.warning("the grammar check process died on a grammar of %d bytes; refused", len(grammar))
                self._executor.shutdown(wait=False)
                self._executor = None
                return False

    def close(self) -> None:
        with self._lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True, cancel_futures=True)
                self._executor = None


@functools.lru_cache(maxsize=64)
def json_schema_grammar(schema_json: str) -> str:
    """GBNF for a JSON Schema (given as JSON text), by llama-cpp-python's pure-Python converter.

    Can take a while for a big schema: call it off the event loop. Cached, as clients tend to
    send the same schema on every request.
    """
    # Imported here: the llama_cpp package loads the compiled library on import.
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        return strict_strings(json_schema_to_gbnf(schema_json))
    except (AssertionError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise InvalidRequest(f"invalid JSON schema in format: {exc}") from exc


@functools.lru_cache(maxsize=64)
def grammar_with_schemas(root: str, schemas: tuple[tuple[str, str], ...]) -> str:
    """GBNF whose ``root`` rule is ``root``, which names a rule per JSON Schema in ``schemas``
    (pairs of a rule name, lowercase letters, digits and dashes, and the schema as JSON text):
    the text a tool call wraps its arguments in is the caller's, the arguments' rules the converter's.

    Can take a while for big schemas: call it off the event loop. Cached, as ``json_schema_grammar``.
    """
    from llama_cpp.llama_grammar import SchemaConverter

    converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    renamed = root
    try:
        for name, schema_json in schemas:
            schema = converter.resolve_refs(json.loads(schema_json), "stdin")
            key = converter.visit(schema, name)
            if key != name:  # the converter renames a rule that clashes with one of its own
                renamed = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", key, renamed)
    except (AssertionError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise InvalidRequest(f"invalid JSON schema in tool parameters: {exc}") from exc
    return strict_strings(f"root ::= {renamed}\n{converter.format_grammar()}")


# A character of a JSON string as JSON has it (llama.cpp's converter today): the converter
# llama-cpp-python carries lets raw control characters and ``\/`` in, and a raw tab or line break
# makes JSON that every parser (a family's, Ollama's, a client's ``json.loads``) refuses, a
# Python-style call a string with a ``\/`` that is not the one written.
_JSON_CHAR = re.compile(r"^char ::= .*$", re.MULTILINE)
_STRICT_CHAR = r'char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4})'


def strict_strings(grammar: str) -> str:
    """``grammar`` with the converter's JSON string character replaced by JSON's own."""
    return _JSON_CHAR.sub(lambda _: _STRICT_CHAR, grammar)
