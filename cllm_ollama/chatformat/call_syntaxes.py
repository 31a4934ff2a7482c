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


def call(name: str, arguments: dict[str, Any], call_id: str = "") -> Call:
    """One call in the parsers' shape; ``call_id`` where the model wrote its own."""
    made: Call = {"function": {"name": name, "arguments": go_numbers(arguments)}}
    if call_id:
        made["id"] = call_id
    return made


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
    call_id = item.get("tool_call_id")
    return call(item["tool_name"], parameters, str(call_id) if call_id not in (None, "") else "")


def parse_cohere(block: str, tools: Tools) -> list[Call] | None:
    """Command R7B / A: a JSON list of ``{"tool_call_id", "tool_name", "parameters"}``; the
    model's own call id is kept, as Ollama keeps it."""
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
