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

A small grammar can also be slow: llama.cpp builds a parse stack per path through its
alternatives (``rK ::= rK+1 "a" | rK+1 "b"`` 16 deep: 2**16 stacks, 11 s to parse, and as
long again for every token it constrains). A parse that takes more than ``SLOW_PARSE_S`` is
refused as too complex, and one still running at ``CHECK_TIMEOUT_S`` is killed with its child,
so that no later check waits behind it. Real grammars (JSON schemas') parse in milliseconds.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import multiprocessing
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from ..errors import InvalidRequest

if TYPE_CHECKING:
    from llama_cpp.llama_grammar import SchemaConverter

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


# A grammar llama.cpp takes longer than this to parse is refused as too complex: it would cost
# about as much again on every token it constrains, on the engine thread.
SLOW_PARSE_S = 1.0
# A check still running after this is killed with its child (the grammar refused).
CHECK_TIMEOUT_S = 10.0
# The child's start: a fresh interpreter that loads llama.cpp (seconds on a busy machine).
START_TIMEOUT_S = 120.0


def _serve(conn: Connection) -> None:
    """The child: answers each grammar sent with whether llama.cpp parses it, and how long that took
    (a crash here kills only the child)."""
    from .binding import grammar_parses

    grammar_parses('root ::= "a"')  # llama.cpp's start (backends, devices) is not the first check's parse
    conn.send("ready")
    while True:
        try:
            grammar = conn.recv()
        except EOFError:
            return
        start = time.perf_counter()
        parsed = grammar_parses(grammar)
        conn.send((parsed, time.perf_counter() - start))


class _Child:
    """One checking process and the pipe to it; ``kill`` is its only way out."""

    def __init__(self) -> None:
        # spawn, not fork: the server has threads (and llama.cpp state) a fork would copy.
        ctx = multiprocessing.get_context("spawn")
        self.conn, theirs = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(theirs,), daemon=True, name="cllm-grammar-check")
        self.process.start()
        theirs.close()
        if self._answer(START_TIMEOUT_S) != "ready":
            self.kill()
            raise RuntimeError("the grammar check process did not start")

    def _answer(self, timeout: float) -> object:
        """What the child says within ``timeout`` seconds: "timeout" when nothing, "died" when it is gone."""
        try:
            return self.conn.recv() if self.conn.poll(timeout) else "timeout"
        except (EOFError, OSError):
            return "died"

    def parse(self, grammar: str, timeout: float) -> tuple[bool, float] | str:
        """llama.cpp's verdict and parse time, or why there is none ("died", "timeout")."""
        try:
            self.conn.send(grammar)
        except OSError:
            return "died"
        answer = self._answer(timeout)
        return answer if isinstance(answer, tuple | str) else "died"

    def kill(self) -> None:
        self.process.kill()
        self.process.join()
        self.conn.close()


class GrammarChecker:
    """Parses grammars in a child process, one at a time, remembering the verdicts."""

    def __init__(
        self, max_nesting: int = MAX_NESTING, slow_parse_s: float = SLOW_PARSE_S, timeout_s: float = CHECK_TIMEOUT_S
    ) -> None:
        self.max_nesting = max_nesting
        self.slow_parse_s = slow_parse_s
        self.timeout_s = timeout_s
        self._verdicts: OrderedDict[str, str] = OrderedDict()  # grammar -> why refused ("": parsed)
        self._child: _Child | None = None
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        """Whether a checking process runs (none is started for what the nesting bound refuses)."""
        return self._child is not None

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
        if verdict == "slow":
            raise GrammarRejected(f"{what} is too complex for the grammar engine (too many alternatives to track)")
        if verdict:
            if what == "grammar":
                raise GrammarRejected("invalid grammar: llama.cpp could not parse it")
            raise GrammarRejected(f"{what} could not be turned into a grammar: llama.cpp refused it")

    def _check_in_child(self, grammar: str) -> str:
        """Why llama.cpp's parse refuses ``grammar``: "" (it parsed, in time), "refused" (it did not,
        or the child died of it) or "slow"."""
        with self._lock:
            if self._child is None:
                self._child = _Child()
            answer = self._child.parse(grammar, self.timeout_s)
            if isinstance(answer, str):  # died (of the grammar) or still parsing: a new child next time
                log.warning("the grammar check process %s on a grammar of %d bytes; refused", answer, len(grammar))
                self._child.kill()
                self._child = None
                return "slow" if answer == "timeout" else "refused"
            parsed, seconds = answer
            if parsed and seconds > self.slow_parse_s:
                return "slow"
            return "" if parsed else "refused"

    def close(self) -> None:
        with self._lock:
            if self._child is not None:
                self._child.kill()
                self._child = None


# The converter's errors for a schema it cannot convert.
_SCHEMA_ERRORS = (AssertionError, ValueError, KeyError, TypeError, AttributeError, RecursionError)
# The most of the converter's reason a 400 quotes: some of its reasons hold the whole (sub)schema.
_MAX_REASON = 200
# Where ``hoist_refs`` points every local ``$ref``.
_DEFS = "#/$defs/"
_NOT_RULE_CHARS = re.compile(r"[^A-Za-z0-9-]+")


def _invalid_schema(what: str, exc: BaseException) -> InvalidRequest:
    """The 400 for a schema that cannot be converted: its reason, cut short."""
    reason = str(exc)
    if len(reason) > _MAX_REASON:
        reason = reason[:_MAX_REASON] + "..."
    return InvalidRequest(f"invalid JSON schema in {what}: {reason}")


@dataclass(frozen=True)
class HoistedSchema:
    """A JSON Schema whose local ``$ref``s all point to ``#/$defs/NAME``, and the schemas so named:
    it keeps its meaning wherever it is embedded, in a schema that carries ``defs`` at its root."""

    schema: dict[str, Any]
    defs: dict[str, Any]

    def deref(self, schema: dict[str, Any]) -> dict[str, Any]:
        """The definition ``schema`` refers to (through refs to refs), or ``schema`` when it is no
        ref: what a root or a parameter is, to be read here (its properties, its type)."""
        seen: set[str] = set()
        while isinstance(ref := schema.get("$ref"), str) and ref.startswith(_DEFS) and ref not in seen:
            seen.add(ref)
            target = self.defs.get(ref.removeprefix(_DEFS))
            if not isinstance(target, dict):
                break
            schema = target
        return schema

    def rooted(self, schema: dict[str, Any]) -> dict[str, Any]:
        """``schema`` (this one, or part of it, or one that embeds it) with the definitions at its root."""
        return {**schema, "$defs": self.defs} if self.defs else schema


def _pointer_parts(pointer: str) -> list[str]:
    """The keys of a JSON pointer (``/a/b``), escaped as in a ``$ref`` (URI, then pointer escapes)."""
    return [unquote(part).replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:]]


def _pointed(root: object, pointer: str) -> object:
    """What a JSON pointer picks out of ``root``."""
    node = root
    for part in _pointer_parts(pointer):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isascii() and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise ValueError(f"$ref {json.dumps('#' + pointer, ensure_ascii=False)} points to nothing")
    return node


def hoist_refs(schema: dict[str, Any], prefix: str, what: str) -> HoistedSchema:
    """``schema`` with each local ``$ref`` (a JSON pointer into it: ``#/$defs/X``, ``#/definitions/X``,
    ``#/properties/a``, ``#``) rewritten to ``#/$defs/NAME``, NAME ``{prefix}{n}-{X}`` a GBNF rule name.

    The converter resolves a ref against the root of the schema it converts, so a tool's schema
    embedded in a call's, or one of its parameters alone, loses its definitions; and it names a
    definition's rule by the ref's last part, so two alike (two tools' ``Addr``, a property of that
    name) share one rule. ``prefix`` is one no rule of the converter's begins with, and unique per
    schema among those converted together. Other refs are left as they are, for the converter.
    Raises ``InvalidRequest`` (``what`` says where the schema came from) for a ref to nothing.
    """
    names: dict[str, str] = {}  # JSON pointer -> its definition's name
    pending: list[str] = []

    def rewrite(node: object) -> object:
        if isinstance(node, list):
            return [rewrite(item) for item in node]
        if not isinstance(node, dict):
            return node
        out = {key: rewrite(value) for key, value in node.items()}
        ref = node.get("$ref")
        if isinstance(ref, str) and (ref == "#" or ref.startswith("#/")):
            pointer = ref[1:]
            if pointer not in names:
                last = (_pointer_parts(pointer) or ["root"])[-1]
                names[pointer] = f"{prefix}{len(names)}-{_NOT_RULE_CHARS.sub('-', last)}"
                pending.append(pointer)
            out["$ref"] = _DEFS + names[pointer]
        return out

    try:
        # The definitions are reached through the refs: the ones none points to are dropped.
        body = rewrite({key: value for key, value in schema.items() if key not in ("$defs", "definitions")})
        # Each definition once, as it is first pointed to; rewriting one may append more (iterated too).
        defs = {names[pointer]: rewrite(_pointed(schema, pointer)) for pointer in pending}
    except (ValueError, RecursionError) as exc:
        raise _invalid_schema(what, exc) from exc
    assert isinstance(body, dict)
    return HoistedSchema(body, defs)


def _visit(converter: SchemaConverter, schema: dict[str, Any], defs: dict[str, Any], name: str) -> str:
    """Adds the rules of ``schema``, whose local refs point into ``defs`` (``hoist_refs``), as rule
    ``name``, and returns the name it got. The refs are resolved in a document holding ``defs``
    beside the schema: the converter does not look past a ref, so a root that is one (a recursive
    Pydantic model's) would leave the refs inside its definitions unresolved."""
    converter.resolve_refs({"$defs": defs, "schema": schema}, "stdin")
    return converter.visit(schema, name)


def _converter() -> SchemaConverter:
    # Imported here: the llama_cpp package loads the compiled library on import.
    from llama_cpp.llama_grammar import SchemaConverter

    return SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)


@functools.lru_cache(maxsize=64)
def json_schema_grammar(schema_json: str) -> str:
    """GBNF for a JSON Schema (given as JSON text), by llama-cpp-python's pure-Python converter.

    Can take a while for a big schema: call it off the event loop. Cached, as clients tend to
    send the same schema on every request.
    """
    converter = _converter()
    try:
        schema = json.loads(schema_json)
        if not isinstance(schema, dict):
            raise TypeError("a schema is an object")
        hoisted = hoist_refs(schema, "def", "format")
        _visit(converter, hoisted.schema, hoisted.defs, "")
    except _SCHEMA_ERRORS as exc:
        raise _invalid_schema("format", exc) from exc
    return strict_strings(converter.format_grammar())


@functools.lru_cache(maxsize=64)
def grammar_with_schemas(root: str, schemas: tuple[tuple[str, str], ...]) -> str:
    """GBNF whose ``root`` rule is ``root``, which names a rule per JSON Schema in ``schemas``
    (pairs of a rule name, lowercase letters, digits and dashes, and the schema as JSON text):
    the text a tool call wraps its arguments in is the caller's, the arguments' rules the converter's.
    A schema's local refs point into its root ``$defs``, their names apart from the other schemas'
    unless the definitions are the same (``HoistedSchema.rooted``).

    Can take a while for big schemas: call it off the event loop. Cached, as ``json_schema_grammar``.
    """
    converter = _converter()
    renamed = root
    try:
        for name, schema_json in schemas:
            schema = json.loads(schema_json)
            key = _visit(converter, schema, schema.pop("$defs", {}), name)
            if key != name:  # the converter renames a rule that clashes with one of its own
                renamed = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", key, renamed)
    except _SCHEMA_ERRORS as exc:
        raise _invalid_schema("tool parameters", exc) from exc
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
