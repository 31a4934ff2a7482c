"""The text of one tool-call block, as each 2026 family writes it, parsed into Ollama's calls.

Each parser takes what stands between the family's call marks (``model_families``) and the
requested tools by name, and returns the calls, or None when the text is not a call (it then
stays content). They follow Ollama's parsers (``model/parsers/*.go`` in ollama/ollama): Gemma 4's
and FunctionGemma's keyed arguments, Ministral's ``NAME[ARGS]{json}``, the Python-style calls of
LFM2 and OLMo 3, and Command's JSON actions.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable
from typing import Any

Call = dict[str, Any]
Tools = dict[str, dict[str, Any]]
# Parses the text between a family's opening and closing marks into calls; None when it is not one.
BlockParser = Callable[[str, Tools], list[Call] | None]


def call(name: str, arguments: dict[str, Any]) -> Call:
    """One call in the parsers' shape, without an id: Ollama's ``ChatHandler`` gives every parsed call
    its own (``toolCallId``), the model's own (Command's ``tool_call_id``) dropped, so that ids never
    repeat across turns."""
    return {"function": {"name": name, "arguments": go_numbers(arguments)}}


# The integers JSON encoders here write (orjson: 64 bits, signed or not).
_INT_RANGE = range(-(1 << 63), 1 << 64)


def go_numbers(value: Any) -> Any:
    """``value`` with each integer past 64 bits as the float64 Go reads it into (inf past its
    range), at any depth: a model may write one in its call's arguments, which orjson refuses to
    encode (a 500 in every dialect), where Ollama's calls hold float64s."""
    if isinstance(value, dict):
        return {key: go_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [go_numbers(item) for item in value]
    if isinstance(value, int) and not isinstance(value, bool) and value not in _INT_RANGE:
        try:
            return float(value)
        except OverflowError:
            return -math.inf if value < 0 else math.inf
    return value


def schema_types(schema: Any) -> list[str]:
    """A parameter's declared types as Ollama gathers them to type its value (``parseToolCall`` in
    qwen3coder.go): every ``anyOf`` option's, in order, else its own ``type``."""
    if not isinstance(schema, dict):
        return []
    options = schema.get("anyOf")
    if isinstance(options, list) and options:
        return [kind for option in options for kind in _property_type(option)]
    return _property_type(schema)


def _property_type(schema: Any) -> list[str]:
    """``type`` as Go's ``api.PropertyType`` reads it: a string or a list of them, a null as ""."""
    if not isinstance(schema, dict) or "type" not in schema:
        return []
    kinds = schema["type"]
    return [kind if isinstance(kind, str) else "" for kind in (kinds if isinstance(kinds, list) else [kinds])]


# Go's strconv syntax: ParseInt's base 10, and ParseFloat's decimal and hexadecimal literals (the
# latter need their ``p`` exponent) with an underscore only between digits, and its special values.
_GO_DIGITS = r"[0-9]+(?:_[0-9]+)*"
_GO_HEX_DIGITS = r"[0-9a-fA-F]+(?:_[0-9a-fA-F]+)*"
_GO_INT = re.compile(r"[+-]?[0-9]+")
_GO_DECIMAL = re.compile(rf"[+-]?(?:{_GO_DIGITS}(?:\.(?:{_GO_DIGITS})?)?|\.{_GO_DIGITS})(?:[eE][+-]?{_GO_DIGITS})?")
_GO_HEX = re.compile(
    rf"[+-]?0[xX](?:_?{_GO_HEX_DIGITS}(?:\.(?:{_GO_HEX_DIGITS})?)?|\.{_GO_HEX_DIGITS})[pP][+-]?{_GO_DIGITS}"
)
_GO_SPECIAL = re.compile(r"[+-]?(?:inf|infinity)|nan", re.IGNORECASE)
_INT64 = range(-(1 << 63), 1 << 63)


def _go_int(raw: str) -> int | None:
    """``strconv.ParseInt(raw, 10, 64)``; None where it fails (a syntax error, or a value out of range)."""
    digits = raw.lstrip("+-").lstrip("0")  # read apart from leading zeros: Python caps a number's digits
    if not _GO_INT.fullmatch(raw) or len(digits) > 19:
        return None
    value = int(digits or "0") * (-1 if raw.startswith("-") else 1)
    return value if value in _INT64 else None


def _go_float(raw: str) -> float | None:
    """``strconv.ParseFloat(raw, 64)``; None where it fails (a syntax error, or a value out of range)."""
    if _GO_SPECIAL.fullmatch(raw):
        return float(raw)
    try:
        if _GO_DECIMAL.fullmatch(raw):
            number = float(raw.replace("_", ""))
            return None if math.isinf(number) else number
        if _GO_HEX.fullmatch(raw):
            return float.fromhex(raw.replace("_", ""))
    except OverflowError:
        pass
    return None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # Go's encoding/json reads no NaN or Infinity


def typed_tool_value(raw: str, kinds: list[str]) -> Any:
    """A parameter's text typed as Ollama's ``parseTypedToolValue`` types it: "null" (any case) is
    null whatever the type; no type is text; else boolean, integer, number, array, object, in that
    order, each that does not parse trying the next, or where it is the only type the text (false
    for a boolean). A whole number is an integer; one past int64, which Go converts as its platform
    does, stays a float."""
    if raw.lower() == "null":
        return None
    if not kinds:
        return raw
    only = len(kinds) == 1
    if "boolean" in kinds:
        if raw.lower() in ("true", "false"):
            return raw.lower() == "true"
        if only:
            return False
    if "integer" in kinds:
        integer = _go_int(raw)
        if integer is not None:
            return integer
        if only:
            return raw
    if "number" in kinds:
        number = _go_float(raw)
        if number is not None and math.isfinite(number):  # NaN and ±Inf are no JSON: Ollama's reply fails
            return int(number) if number.is_integer() and int(number) in _INT64 else number
        if only:
            return raw
    for kind, shape in (("array", list), ("object", dict)):
        if kind in kinds:
            try:
                decoded = json.loads(raw, parse_constant=_no_constant)
            except ValueError:
                pass
            else:
                if decoded is None or isinstance(decoded, shape):  # Go reads a null into a nil slice or map
                    return decoded
            if only:
                return raw
    return raw


class _Keyed:
    """Gemma's argument syntax: ``{key:value,...}`` with bare keys, strings between ``quote``
    marks (``<|"|>``, ``<escape>``) or JSON quotes, bare words as numbers, booleans or text."""

    def __init__(self, text: str, quote: str) -> None:
        self.text, self.quote, self.i = text, quote, 0

    def _space(self) -> None:
        while self.i < len(self.text) and self.text[self.i].isspace():
            self.i += 1

    def value(self, stops: str) -> Any:
        self._space()
        text = self.text
        if text.startswith(self.quote, self.i):
            end = text.find(self.quote, self.i + len(self.quote))
            if end < 0:
                raise ValueError("unclosed string")
            found = text[self.i + len(self.quote) : end]
            self.i = end + len(self.quote)
            return found
        if text.startswith('"', self.i):
            decoded, self.i = json.JSONDecoder().raw_decode(text, self.i)
            return decoded
        if text.startswith("{", self.i):
            return self.mapping()
        if text.startswith("[", self.i):
            return self.sequence()
        start = self.i
        while self.i < len(text) and text[self.i] not in stops:
            self.i += 1
        return _bare(text[start : self.i].strip())

    def _expect(self, mark: str) -> None:
        self._space()
        if not self.text.startswith(mark, self.i):
            raise ValueError(f"expected {mark!r}")
        self.i += len(mark)

    def _key(self) -> str:
        self._space()
        if self.text.startswith(self.quote, self.i) or self.text.startswith('"', self.i):
            return str(self.value(":"))
        end = self.text.find(":", self.i)
        if end < 0:
            raise ValueError("a key without a value")
        key = self.text[self.i : end].strip()
        self.i = end
        return key

    def mapping(self) -> dict[str, Any]:
        self._expect("{")
        out: dict[str, Any] = {}
        self._space()
        while not self.text.startswith("}", self.i):
            key = self._key()
            self._expect(":")
            out[key] = self.value(",}")
            self._space()
            if self.text.startswith(",", self.i):
                self.i += 1
                self._space()
            elif not self.text.startswith("}", self.i):
                raise ValueError("expected ',' or '}'")
        self.i += 1
        return out

    def sequence(self) -> list[Any]:
        self._expect("[")
        out: list[Any] = []
        self._space()
        while not self.text.startswith("]", self.i):
            out.append(self.value(",]"))
            self._space()
            if self.text.startswith(",", self.i):
                self.i += 1
                self._space()
            elif not self.text.startswith("]", self.i):
                raise ValueError("expected ',' or ']'")
        self.i += 1
        return out


def _bare(word: str) -> Any:
    """A bare word as JSON reads it (a number, true, false, null), else the text itself."""
    if word in ("true", "false", "null") or re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", word):
        return json.loads(word)
    return word


def _keyed_call(block: str, quote: str) -> list[Call] | None:
    """``call:NAME{key:value,...}``, Gemma 4's and FunctionGemma's call; a call cut short (its last
    string or its closing brace missing, as a stop can leave it) is repaired as Ollama repairs it."""
    match = re.match(r"\s*call:([^{]+)\{", block)
    if match is None:
        return None
    for text in _repairs(block.rstrip(), quote):
        reader = _Keyed(text, quote)
        reader.i = match.end() - 1
        try:
            arguments = reader.mapping()
        except ValueError:
            continue
        if not text[reader.i :].strip():
            return [call(match.group(1).strip(), arguments)]
    return None


def _repairs(block: str, quote: str) -> list[str]:
    """The block, then it with its unclosed string closed (before a final brace), then with the
    closing brace added."""
    closed = block
    if block.count(quote) % 2:
        cut = len(block) - 1 if block.endswith("}") else len(block)
        closed = block[:cut] + quote + block[cut:]
    return list(dict.fromkeys([block, closed, closed + "}"]))


def parse_gemma4(block: str, tools: Tools) -> list[Call] | None:
    """Gemma 4: ``call:NAME{key:<|"|>text<|"|>,n:5}``."""
    return _keyed_call(block, '<|"|>')


def parse_functiongemma(block: str, tools: Tools) -> list[Call] | None:
    """FunctionGemma: ``call:NAME{key:<escape>text<escape>,n:5}``."""
    return _keyed_call(block, "<escape>")


def _json_calls(block: str) -> list[Call] | None:
    """The older Mistral calls: ``[{"name": ..., "arguments": {...}}, ...]``."""
    try:
        decoded = json.loads(block)
    except ValueError:
        return None
    calls = []
    for item in decoded if isinstance(decoded, list) else [decoded]:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return None
        arguments = item.get("arguments", {})
        if not isinstance(arguments, dict):
            return None
        calls.append(call(item["name"], arguments))
    return calls or None


def parse_ministral(block: str, tools: Tools) -> list[Call] | None:
    """Ministral 3 / Devstral: ``NAME[ARGS]{json}`` (the opening ``[TOOL_CALLS]`` already read),
    or the older Mistral list of JSON calls."""
    name, sep, arguments = block.partition("[ARGS]")
    name = name.strip()
    if not sep:
        return _json_calls(block)
    if not name or "\n" in name:
        return None
    try:
        decoded = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return None
    return [call(name, decoded)] if isinstance(decoded, dict) else None


_PY_NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


def _literal(node: ast.expr) -> Any:
    """A Python (or JSON) literal's value; ValueError for anything else (names, calls, operators)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in _PY_NAMES:
        return _PY_NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):  # a ``**spread``
            raise ValueError("not a literal")
        return {str(_literal(k)): _literal(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None}
    raise ValueError("not a literal")


def _python_calls(text: str) -> list[Call] | None:
    """``f(a=1)``, ``[f(a=1), g(b="x")]``: keyword arguments only, their values literals."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None
    nodes = tree.elts if isinstance(tree, (ast.List, ast.Tuple)) else [tree]
    calls = []
    for node in nodes:
        if not isinstance(node, ast.Call) or node.args or not isinstance(node.func, (ast.Name, ast.Attribute)):
            return None
        try:
            arguments = {k.arg: _literal(k.value) for k in node.keywords if k.arg is not None}
        except ValueError:
            return None
        if len(arguments) != len(node.keywords):
            return None
        calls.append(call(ast.unparse(node.func), arguments))
    return calls or None


def parse_lfm2(block: str, tools: Tools) -> list[Call] | None:
    """LFM2: ``[get_weather(city="Paris"), ...]`` (Python's syntax)."""
    return _python_calls(block)


def parse_olmo3(block: str, tools: Tools) -> list[Call] | None:
    """OLMo 3: one Python-style call a line."""
    calls: list[Call] = []
    for line in block.strip().splitlines():
        if line.strip():
            found = _python_calls(line)
            if found is None:
                return None
            calls += found
    return calls or None


def _cohere_action(item: Any) -> Call | None:
    if not isinstance(item, dict) or not isinstance(item.get("tool_name"), str):
        return None
    parameters = item.get("parameters") or {}
    if not isinstance(parameters, dict):
        return None
    return call(item["tool_name"], parameters)


def parse_cohere(block: str, tools: Tools) -> list[Call] | None:
    """Command R7B / A: a JSON list of ``{"tool_call_id", "tool_name", "parameters"}``; the
    model's own call id (its turn's "0", "1", ...) is dropped, as Ollama's ``ChatHandler`` replaces it."""
    try:
        decoded = json.loads(block)
    except ValueError:
        return None
    items = decoded if isinstance(decoded, list) else [decoded]
    calls = [_cohere_action(item) for item in items]
    return [c for c in calls if c is not None] if calls and None not in calls else None


# The block parser of each "marked" family (``model_families``).
MARKED_PARSERS: dict[str, BlockParser] = {
    "gemma4": parse_gemma4,
    "functiongemma": parse_functiongemma,
    "ministral": parse_ministral,
    "lfm2": parse_lfm2,
    "cohere": parse_cohere,
    "olmo3": parse_olmo3,
}
