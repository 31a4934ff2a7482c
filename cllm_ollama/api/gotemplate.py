"""The part of Go's text/template that Ollama prompt templates use, for the request ``template`` field.

Supported: text with ``{{ }}`` actions and ``{{-``/``-}}`` trimming, comments, fields (``.System``,
``$.Messages``, ``.Role``), variables from ``range``, string/number literals, the functions
``and or not eq ne len json``, and ``if``/``else if``/``else``/``range``/``with``/``end``.
Anything else is a template error (500, as Ollama answers a template it cannot parse).

A template comes from the request, so what it may cost is bounded: nesting is limited at parse
time (a deeper template would exhaust Python's stack), and execution stops past the render
budget's deadline or output size (nested ranges multiply: three over 300 messages are 27 million
iterations).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import CllmError
from .render_budget import PromptTooLong, RenderBudget

_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.S)
# Blocks (if/range/with) and parentheses a template may nest; Ollama's own nest a few levels.
MAX_DEPTH = 100
_CHECK_EVERY = 1024  # steps between looks at the clock
_TOKEN = re.compile(r'\s*(?:(\()|(\))|("(?:[^"\\]|\\.)*")|(`[^`]*`)|(-?\d+(?:\.\d+)?)|([$.\w][\w.$]*)|(:=|,))')


class TemplateError(CllmError):
    def __init__(self, message: str) -> None:
        super().__init__(f"template: {message}", 500)


@dataclass
class _Node:
    kind: str  # text | expr | if | range | with
    text: str = ""
    expr: list[Any] = field(default_factory=list)
    body: list[_Node] = field(default_factory=list)
    orelse: list[_Node] = field(default_factory=list)
    names: tuple[str, ...] = ()  # range variables
    chained: bool = False  # an {{else if}}: closed by its owner's {{end}}


def _tokens(src: str) -> list[Any]:
    out: list[Any] = []
    pos = 0
    depth = 0
    src = src.strip()
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if m is None or m.end() == pos:
            raise TemplateError(f"unexpected {src[pos:]!r} in action")
        pos = m.end()
        lpar, rpar, dq, bq, num, word, punct = m.groups()
        if lpar or rpar or punct:
            depth += 1 if lpar else -1 if rpar else 0
            if depth > MAX_DEPTH:
                raise TemplateError("max expression depth exceeded")
            out.append(("op", lpar or rpar or punct))
        elif dq is not None:
            out.append(("lit", json.loads(dq)))
        elif bq is not None:
            out.append(("lit", bq[1:-1]))
        elif num is not None:
            out.append(("lit", float(num) if "." in num else int(num)))
        else:
            out.append(("word", word))
    return out


def _parse(src: str) -> list[_Node]:
    pieces: list[tuple[str, str]] = []
    pos = 0
    for m in _ACTION.finditer(src):
        text = src[pos : m.start()]
        if m.group(1):
            text = text.rstrip()
        pieces.append(("text", text))
        pieces.append(("action", m.group(2)))
        pos = m.end()
        if m.group(3):
            while pos < len(src) and src[pos].isspace():
                pos += 1
    pieces.append(("text", src[pos:]))

    root: list[_Node] = []
    stack: list[tuple[_Node | None, list[_Node]]] = [(None, root)]
    for kind, text in pieces:
        target = stack[-1][1]
        if kind == "text":
            if text:
                target.append(_Node("text", text=text))
            continue
        action = text.strip()
        if action.startswith("/*"):
            continue
        head, _, rest = action.partition(" ")
        if head in ("if", "with"):
            node = _Node(head, expr=_tokens(rest))
            target.append(node)
            stack.append((node, node.body))
        elif head == "range":
            toks = _tokens(rest)
            names: tuple[str, ...] = ()
            if ("op", ":=") in toks:
                split = toks.index(("op", ":="))
                names = tuple(t[1] for t in toks[:split] if t[0] == "word")
                toks = toks[split + 1 :]
            node = _Node("range", expr=toks, names=names)
            target.append(node)
            stack.append((node, node.body))
        elif head == "else":
            owner = stack[-1][0]
            if owner is None:
                raise TemplateError("unexpected {{else}}")
            stack.pop()
            if rest.startswith("if "):
                nested = _Node("if", expr=_tokens(rest[3:]), chained=True)
                owner.orelse.append(nested)
                stack.append((owner, owner.orelse))
                stack.append((nested, nested.body))
            else:
                stack.append((owner, owner.orelse))
        elif head == "end":
            if len(stack) == 1:
                raise TemplateError("unexpected {{end}}")
            node, _ = stack.pop()
            while node is not None and node.chained:
                node, _ = stack.pop()
        else:
            target.append(_Node("expr", expr=_tokens(action)))
        if len(stack) - 1 > MAX_DEPTH:  # the root is no block
            raise TemplateError(f"blocks nested deeper than {MAX_DEPTH}")
    if len(stack) != 1:
        raise TemplateError("unexpected EOF: missing {{end}}")
    return root


def _truthy(value: Any) -> bool:
    return bool(value)


_FUNCS = {
    "and": lambda *a: next((x for x in a if not _truthy(x)), a[-1] if a else None),
    "or": lambda *a: next((x for x in a if _truthy(x)), a[-1] if a else None),
    "not": lambda x: not _truthy(x),
    "eq": lambda a, *b: any(a == x for x in b),
    "ne": lambda a, b: a != b,
    "len": lambda x: len(x),
    "json": lambda x: json.dumps(x, separators=(",", ":")),
}


class _Scope:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.vars: list[dict[str, Any]] = [{"$": root}]

    def lookup(self, word: str, dot: Any) -> Any:
        if word == ".":
            return dot
        if word.startswith("$"):
            name, _, path = word.partition(".")
            for frame in reversed(self.vars):
                if name in frame:
                    return _field(frame[name], path)
            raise TemplateError(f"undefined variable {name!r}")
        if word.startswith("."):
            return _field(dot, word[1:])
        raise TemplateError(f"function {word!r} not defined")


def _field(value: Any, path: str) -> Any:
    for name in filter(None, path.split(".")):
        value = value.get(name) if isinstance(value, dict) else None
    return value


def _eval(tokens: list[Any], scope: _Scope, dot: Any) -> Any:
    def operand(i: int) -> tuple[Any, int]:
        kind, value = tokens[i]
        if kind == "lit":
            return value, i + 1
        if kind == "op" and value == "(":
            depth, j = 1, i + 1
            while depth:
                if j >= len(tokens):
                    raise TemplateError("unclosed (")
                depth += {("op", "("): 1, ("op", ")"): -1}.get(tokens[j], 0)
                j += 1
            return _eval(tokens[i + 1 : j - 1], scope, dot), j
        if kind == "word" and value in _FUNCS:
            return _FUNCS[value], i + 1
        return scope.lookup(value, dot), i + 1

    if not tokens:
        raise TemplateError("empty action")
    values = []
    i = 0
    while i < len(tokens):
        value, i = operand(i)
        values.append(value)
    head, *args = values
    if callable(head):
        try:
            return head(*args)
        except TypeError as exc:
            raise TemplateError(str(exc)) from exc
    if args:
        raise TemplateError("can't give argument to non-function")
    return head


class _Output:
    """The text rendered so far, and the budget it is rendered under."""

    def __init__(self, budget: RenderBudget) -> None:
        self.budget = budget
        self.pieces: list[str] = []
        self.size = 0
        self.steps = 0

    def step(self) -> None:
        self.steps += 1
        if self.steps % _CHECK_EVERY == 0:
            self.budget.check()

    def write(self, text: str) -> None:
        self.size += len(text)
        if self.size > self.budget.max_chars:
            raise PromptTooLong(self.budget.max_chars)
        self.pieces.append(text)


def _go_text(value: Any) -> str:
    """A value as Go's %v prints it (for the scalars a template can hold)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    return str(value)


def _range_items(node: _Node, value: Any) -> tuple[bool, Iterable[tuple[Any, Any]]]:
    """Whether there is anything to walk, and the (index, element) pairs in the order Go's range
    walks them; Go refuses strings, bools and floats."""
    if value is None:
        return False, ()
    if isinstance(value, list | tuple):
        return bool(value), enumerate(value)
    if isinstance(value, dict):
        return bool(value), [(key, value[key]) for key in sorted(value)]
    if isinstance(value, int) and not isinstance(value, bool):
        # Since Go 1.22, range over an int counts from 0, into one variable only.
        if len(node.names) > 1:
            raise TemplateError(f"can't use {value} to iterate over more than one variable")
        return value > 0, zip(range(value), range(value), strict=True)
    raise TemplateError(f"range can't iterate over {_go_text(value)}")


def _render(nodes: list[_Node], scope: _Scope, dot: Any, out: _Output) -> None:
    for node in nodes:
        out.step()
        if node.kind == "text":
            out.write(node.text)
        elif node.kind == "expr":
            value = _eval(node.expr, scope, dot)
            if isinstance(value, bool):
                out.write("true" if value else "false")
            else:
                out.write("" if value is None else str(value))
        elif node.kind in ("if", "with"):
            value = _eval(node.expr, scope, dot)
            if _truthy(value):
                _render(node.body, scope, value if node.kind == "with" else dot, out)
            else:
                _render(node.orelse, scope, dot, out)
        elif node.kind == "range":
            any_items, items = _range_items(node, _eval(node.expr, scope, dot))
            if not any_items:
                _render(node.orelse, scope, dot, out)
            for index, item in items:
                out.step()
                frame = dict(zip(node.names, (index, item) if len(node.names) == 2 else (item,), strict=False))
                scope.vars.append(frame)
                _render(node.body, scope, item, out)
                scope.vars.pop()


def render_go_template(template: str, data: dict[str, Any], budget: RenderBudget | None = None) -> str:
    """Render ``template`` with ``data`` (keys as Go field names: System, Prompt, Messages...).

    Past the ``budget``'s deadline or output size, rendering stops with an error.
    """
    nodes = _parse(template)
    out = _Output(budget or RenderBudget())
    _render(nodes, _Scope(data), data, out)
    return "".join(out.pieces)
