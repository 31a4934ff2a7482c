"""Go's text/template as Ollama's prompt templates use it, and Ollama's way of executing them.

The language (Go's ``text/template``): text and ``{{ }}`` actions with ``{{-``/``-}}`` trimming and
comments; pipelines (``a | b``); fields (``.A.B``), variables (``$``, ``$x``, ``$x.A``) declared with
``:=`` and assigned with ``=``; string (``"..."``, raw), char, number, bool and ``nil`` literals;
parenthesized pipelines and fields of their result; ``if``/``else if``/``else``, ``range`` (one or
two variables, ``else``, ``break``, ``continue``), ``with``/``else with``, ``define``/``template``/
``block``. Functions: Go's builtins (``and or not len index slice eq ne lt le gt ge print printf
println html js urlquery``) and Ollama's (``json currentDate yesterdayDate toTypeScriptType``).

Ollama's execution (``template/template.go``, ``render_ollama``): consecutive messages of one role
are merged; a template that names ``.Messages`` gets ``.System``, ``.Messages``, ``.Tools``,
``.Think``...; an older one is run once per turn with ``.System``, ``.Prompt``, ``.Response``, the
last run cut after ``{{ .Response }}``; one that names neither ``.Messages`` nor ``.Response`` gets
``{{ .Response }}`` appended. Values are Go's: messages and tools are structs with Go field names
(``{{ .Function.Name }}``) that print as Ollama's do (a tool as its JSON), maps range in key order.

A template may come from a request, so what it may cost is bounded: nesting is limited at parse
time, template calls at run time, and execution stops past the render budget's deadline or size.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import functools
import math
import re
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ...errors import CllmError
from ..render_budget import PromptTooLong, RenderBudget

# Blocks (if/range/with) and parentheses a template may nest; Ollama's own nest a few levels.
MAX_DEPTH = 100
MAX_TEMPLATE_CALLS = 100  # nested {{ template }} calls (Go allows 100000: far past Python's stack)
_CHECK_EVERY = 1024  # steps between looks at the clock
_SPACE = " \t\r\n"
_KEYWORDS = {"if", "else", "end", "range", "with", "define", "template", "block", "break", "continue"}


class TemplateError(CllmError):
    def __init__(self, message: str) -> None:
        super().__init__(f"template: {message}", 500)


# -- Go values -----------------------------------------------------------------------------


class _NoValue:
    """What a missing map key gives (Go prints ``<no value>``); false, and null as JSON."""

    _instance: _NoValue | None = None

    def __new__(cls) -> _NoValue:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "<no value>"


NO_VALUE = _NoValue()


class GoStruct:
    """A Go struct: fields by Go name; ``json`` is its JSON form (as its json tags write it), and
    ``string`` its ``String()`` method, which is how it prints."""

    __slots__ = ("fields", "json", "string", "type_name")

    def __init__(
        self,
        type_name: str,
        fields: dict[str, Any],
        json: Callable[[], Any] | None = None,
        string: Callable[[], str] | None = None,
    ) -> None:
        self.type_name = type_name
        self.fields = fields
        self.json = json
        self.string = string

    def __repr__(self) -> str:
        return f"GoStruct({self.type_name}, {self.fields!r})"


class GoMap(dict):  # type: ignore[type-arg]
    """A Go map with a ``String()`` method (Ollama's tool arguments and properties print as JSON)."""

    string: Callable[[], str] | None = None


class GoList(list):  # type: ignore[type-arg]
    """A Go slice with a ``String()`` method (Ollama's tools print as JSON)."""

    string: Callable[[], str] | None = None


def _type_name(value: Any) -> str:
    if isinstance(value, GoStruct):
        return value.type_name
    if value is None or value is NO_VALUE:
        return "<nil>"
    return {bool: "bool", int: "int", float: "float64", str: "string"}.get(type(value)) or (
        "map[string]interface {}" if isinstance(value, dict) else "[]interface {}"
    )


def go_float(value: float, json: bool = False) -> str:
    """A float64 as Go writes it: ``fmt``'s ``%v`` (shortest digits, exponent form from 1e+06 and
    below 1e-04) or, for JSON, encoding/json's (exponent form from 1e+21 and below 1e-06)."""
    if math.isnan(value) or math.isinf(value):
        if json:
            raise TemplateError(f"json: unsupported value: {go_float(value)}")
        return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 and not json else "0"
    sign, digit_tuple, exponent = decimal.Decimal(repr(value)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    exponent = int(exponent) + len(digit_tuple) - len(digits)
    point = len(digits) + exponent  # where the decimal point falls, counted from the first digit
    x = point - 1
    minus = "-" if sign else ""
    low, high = (-6, 21) if json else (-4, 6)
    if x < low or x >= high:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        exp = f"{abs(x):02d}" if not (json and x < 0) else str(abs(x))
        return f"{minus}{mantissa}e{'-' if x < 0 else '+'}{exp}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return minus + digits + "0" * (point - len(digits))
    return f"{minus}{digits[:point]}.{digits[point:]}"


def _json_string(text: str) -> str:
    """A JSON string as Go's encoding/json writes it: HTML characters and U+2028/9 escaped."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif code < 0x20 or ch in "<>&" or code in (0x2028, 0x2029):
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def go_json(value: Any) -> str:
    """``json.Marshal`` as Go writes it: maps in key order, structs in field order, HTML escaped."""
    if isinstance(value, GoStruct):
        if value.json is not None:
            return go_json(value.json())
        return "{" + ",".join(f"{_json_string(k)}:{go_json(v)}" for k, v in value.fields.items()) + "}"
    if value is None or value is NO_VALUE:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value, json=True)
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, _Ordered):
        return "{" + ",".join(f"{_json_string(str(k))}:{go_json(v)}" for k, v in value.items) + "}"
    if isinstance(value, dict):  # a Go map: keys in order
        return "{" + ",".join(f"{_json_string(str(k))}:{go_json(value[k])}" for k in sorted(value)) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    raise TemplateError(f"json: unsupported type: {_type_name(value)}")


@dataclass
class _Ordered:
    """A JSON object whose keys keep their order (a struct's json form)."""

    items: list[tuple[str, Any]]


def _struct_json(*pairs: tuple[str, Any, bool]) -> _Ordered:
    """A struct's JSON: (json name, value, omitempty) in field order."""
    return _Ordered([(k, v) for k, v, omit in pairs if not (omit and _empty(v))])


def _empty(value: Any) -> bool:
    """Go's omitempty: false, 0, nil and empty strings, slices and maps are left out."""
    if value is None or value is NO_VALUE:
        return True
    if isinstance(value, bool | int | float):
        return not value
    if isinstance(value, str | list | tuple | dict):
        return len(value) == 0
    return False


def go_print(value: Any) -> str:
    """A value as Go's ``fmt.Print`` writes it (how ``{{ . }}`` prints)."""
    if isinstance(value, GoStruct):
        if value.string is not None:
            return value.string()
        return "{" + " ".join(go_print(v) for v in value.fields.values()) + "}"
    if isinstance(value, GoMap | GoList) and value.string is not None:
        return value.string()
    if value is NO_VALUE:
        return "<no value>"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str | int):
        return str(value)
    if isinstance(value, dict):
        return "map[" + " ".join(f"{go_print(k)}:{go_print(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list | tuple):
        return "[" + " ".join(go_print(v) for v in value) + "]"
    return str(value)


def _truth(value: Any) -> bool:
    """Go's truth: false, 0, nil and empty strings, slices and maps are false; structs are true."""
    if isinstance(value, GoStruct):
        return True
    return bool(value)


# -- lexing --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Item:
    kind: str  # text field dot var ident keyword string number bool nil pipe ( ) := = , space eof
    value: Any
    line: int


_ACTION_TOKEN = re.compile(
    r"""(?P<space>[ \t\r\n]+)
      | (?P<string>"(?:[^"\\\n]|\\.)*")
      | (?P<raw>`[^`]*`)
      | (?P<char>'(?:[^'\\\n]|\\.[^']*)')
      | (?P<number>[+-]?(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+
                         |(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?)i?)
      | (?P<field>\.[A-Za-z_][A-Za-z0-9_]*)
      | (?P<var>\$[A-Za-z0-9_]*)
      | (?P<dot>\.)
      | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<declare>:=)
      | (?P<op>[|(),=])
    """,
    re.X,
)
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"', "'": "'"}


def _unquote(text: str) -> str:
    """A Go interpreted string literal's value (``strconv.Unquote``)."""
    body = text[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            digits = body[i + 2 : i + 2 + width]
            if len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise TemplateError(f"invalid syntax: {text}")
            out.append(chr(int(digits, 16)))
            i += 2 + width
        elif nxt in "01234567":
            digits = body[i + 1 : i + 4]
            if len(digits) != 3 or not all(c in "01234567" for c in digits):
                raise TemplateError(f"invalid syntax: {text}")
            out.append(chr(int(digits, 8)))
            i += 4
        else:
            raise TemplateError(f"invalid syntax: {text}")
    return "".join(out)


def _number(text: str) -> int | float:
    clean = text.replace("_", "")
    if clean.endswith("i"):
        raise TemplateError(f"complex numbers are not supported: {text}")
    try:
        if re.fullmatch(r"[+-]?0[0-7]+", clean):  # Go's legacy octal
            return int(clean.replace("0", "0o", 1) if clean[0] == "0" else clean[0] + "0o" + clean[2:], 0)
        return int(clean, 0)
    except ValueError:
        try:
            return float(clean)
        except ValueError:
            raise TemplateError(f"illegal number syntax: {text!r}") from None


def _lex(src: str) -> list[_Item]:
    """Go's lexer: text, and for each action its tokens between ``left`` and ``right`` items."""
    items: list[_Item] = []
    pos = 0
    line = 1
    while True:
        start = src.find("{{", pos)
        if start < 0:
            if pos < len(src):
                items.append(_Item("text", src[pos:], line))
            break
        trim_left = src.startswith("{{-", start) and start + 3 < len(src) and src[start + 3] in _SPACE
        text = src[pos:start]
        if trim_left:
            text = text.rstrip(_SPACE)
        if text:
            items.append(_Item("text", text, line))
        line += src.count("\n", pos, start)
        pos = start + (4 if trim_left else 2)
        # A comment fills the whole action: {{/* ... */}}, optionally with trim markers.
        if src.startswith("/*", pos):
            end = src.find("*/", pos + 2)
            if end < 0:
                raise TemplateError(f":{line}: unclosed comment")
            after = end + 2
            trim_right = False
            if after < len(src) and src[after] in _SPACE and src.startswith("-}}", after + 1):
                trim_right, after = True, after + 4
            elif src.startswith("}}", after):
                after += 2
            else:
                raise TemplateError(f":{line}: comment ends before closing delimiter")
            line += src.count("\n", pos, after)
            pos = after
            if trim_right:
                while pos < len(src) and src[pos] in _SPACE:
                    line += src[pos] == "\n"
                    pos += 1
            continue
        items.append(_Item("left", None, line))
        depth = 0
        while True:
            if pos >= len(src):
                raise TemplateError(f":{line}: unclosed action")
            if src[pos] in _SPACE and src.startswith("-}}", pos + 1):
                line += src[pos] == "\n"
                pos += 4
                while pos < len(src) and src[pos] in _SPACE:
                    line += src[pos] == "\n"
                    pos += 1
                break
            if src.startswith("}}", pos):
                pos += 2
                break
            m = _ACTION_TOKEN.match(src, pos)
            if m is None:
                raise TemplateError(f":{line}: unexpected {src[pos]!r} in command")
            kind = m.lastgroup
            text = m.group()
            assert kind is not None
            if kind == "space":
                if src.startswith("-}}", m.end()) and len(text) > 1:  # leave " -}}" whole for the check above
                    text = text[:-1]
                    items.append(_Item("space", None, line))
                    line += text.count("\n")
                    pos += len(text)
                    continue
                items.append(_Item("space", None, line))
            elif kind == "string":
                items.append(_Item("string", _unquote(text), line))
            elif kind == "raw":
                items.append(_Item("string", text[1:-1], line))
            elif kind == "char":
                value = _unquote('"' + text[1:-1].replace('"', '\\"') + '"')
                if len(value) != 1:
                    raise TemplateError(f":{line}: malformed character constant: {text}")
                items.append(_Item("number", ord(value), line))
            elif kind == "number":
                items.append(_Item("number", _number(text), line))
            elif kind == "field":
                items.append(_Item("field", text[1:], line))
            elif kind == "var":
                items.append(_Item("var", text, line))
            elif kind == "dot":
                items.append(_Item("dot", None, line))
            elif kind == "ident":
                if text in ("true", "false"):
                    items.append(_Item("bool", text == "true", line))
                elif text == "nil":
                    items.append(_Item("nil", None, line))
                elif text in _KEYWORDS:
                    items.append(_Item("keyword", text, line))
                else:
                    items.append(_Item("ident", text, line))
            elif kind == "declare":
                items.append(_Item(":=", None, line))
            else:
                if text == "(":
                    depth += 1
                    if depth > MAX_DEPTH:
                        raise TemplateError("max expression depth exceeded")
                elif text == ")":
                    depth -= 1
                items.append(_Item(text, None, line))
            line += text.count("\n")
            pos = m.end()
        items.append(_Item("right", None, line))
    items.append(_Item("eof", None, line))
    return items


# -- the parse tree ------------------------------------------------------------------------


@dataclass
class Text:
    text: str


@dataclass
class Field:
    idents: list[str]


@dataclass
class Variable:
    idents: list[str]  # ["$x", "A", "B"] for $x.A.B


@dataclass
class Dot:
    pass


@dataclass
class Literal:
    value: Any


@dataclass
class Identifier:
    name: str


@dataclass
class Chain:
    node: Any
    fields: list[str]


@dataclass
class Command:
    args: list[Any]


@dataclass
class Pipe:
    decl: list[str] = field(default_factory=list)
    is_assign: bool = False
    cmds: list[Command] = field(default_factory=list)


@dataclass
class Action:
    pipe: Pipe


@dataclass
class Branch:
    kind: str  # if | range | with
    pipe: Pipe
    body: list[Any]
    orelse: list[Any] | None = None


@dataclass
class TemplateCall:
    name: str
    pipe: Pipe | None


@dataclass
class Loop:
    kind: str  # break | continue


_FUNCTION_NAMES = {
    "and",
    "or",
    "not",
    "len",
    "index",
    "slice",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "print",
    "printf",
    "println",
    "html",
    "js",
    "urlquery",
    "call",
    "json",
    "currentDate",
    "yesterdayDate",
    "toTypeScriptType",
}


class _Parser:
    def __init__(self, src: str) -> None:
        self.items = _lex(src)
        self.pos = 0
        self.defines: dict[str, list[Any]] = {}
        self.vars: list[str] = ["$"]
        self.depth = 0
        self.range_depth = 0

    # item access
    def peek(self) -> _Item:
        return self.items[self.pos]

    def next(self) -> _Item:
        item = self.items[self.pos]
        self.pos += 1
        return item

    def peek_non_space(self) -> _Item:
        while self.items[self.pos].kind == "space":
            self.pos += 1
        return self.items[self.pos]

    def next_non_space(self) -> _Item:
        self.peek_non_space()
        return self.next()

    def error(self, item: _Item, message: str) -> TemplateError:
        return TemplateError(f":{item.line}: {message}")

    def expect(self, kind: str, context: str) -> _Item:
        item = self.next_non_space()
        if item.kind != kind:
            raise self.error(item, f"unexpected {self._describe(item)} in {context}")
        return item

    @staticmethod
    def _describe(item: _Item) -> str:
        if item.kind == "right":
            return '"}}"'
        if item.kind == "eof":
            return "EOF"
        if item.kind in ("field", "var", "ident", "keyword"):
            return f"<{'.' if item.kind == 'field' else ''}{item.value}>"
        return repr(item.value) if item.value is not None else repr(item.kind)

    # the tree
    def parse(self) -> list[Any]:
        nodes, end = self.list_until(top=True)
        if end is not None:
            raise self.error(end[1], f"unexpected {{{{{end[0]}}}}}")
        return nodes

    def list_until(self, top: bool = False) -> tuple[list[Any], tuple[str, _Item] | None]:
        """Nodes up to an ``{{end}}``/``{{else ...}}`` (returned with it) or, at the top, EOF."""
        nodes: list[Any] = []
        while True:
            item = self.next()
            if item.kind == "eof":
                if not top:
                    raise self.error(item, "unexpected EOF: missing {{end}}")
                return nodes, None
            if item.kind == "text":
                nodes.append(Text(item.value))
                continue
            assert item.kind == "left"
            head = self.peek_non_space()
            if head.kind == "keyword":
                self.next()
                word = head.value
                if word in ("end", "else"):
                    return nodes, (word, head)
                node = self.control(word, head, top)
                if node is not None:
                    nodes.append(node)
                continue
            nodes.append(Action(self.pipeline("command")))

    def control(self, word: str, item: _Item, top: bool) -> Any:
        if word in ("if", "with", "range"):
            return self.branch(word, item)
        if word in ("break", "continue"):
            if self.range_depth == 0:
                raise self.error(item, f"{{{{{word}}}}} outside {{{{range}}}}")
            self.expect("right", word)
            return Loop(word)
        if word == "template":
            name = self.expect("string", "template clause").value
            pipe = None
            if self.peek_non_space().kind != "right":
                pipe = self.pipeline("template clause")
            else:
                self.next()
            return TemplateCall(name, pipe)
        if word in ("define", "block"):
            if word == "define" and not top:
                raise self.error(item, "unexpected <define> in command")
            name = self.expect("string", f"{word} clause").value
            pipe = None
            if word == "block":
                pipe = self.pipeline("block clause")
            else:
                self.expect("right", "define clause")
            saved_vars, self.vars = self.vars, ["$"]
            body, end = self.list_until()
            self.vars = saved_vars
            if end is None or end[0] != "end":
                raise self.error(item, f"unexpected {{{{else}}}} in {word}")
            self.expect("right", "end")
            self.defines[name] = body
            return TemplateCall(name, pipe) if word == "block" else None
        raise self.error(item, f"unexpected <{word}>")

    def branch(self, kind: str, item: _Item) -> Branch:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TemplateError(f"blocks nested deeper than {MAX_DEPTH}")
        mark = len(self.vars)
        pipe = self.pipeline(kind)
        if kind == "range":
            self.range_depth += 1
        body, end = self.list_until()
        if kind == "range":
            self.range_depth -= 1
        orelse: list[Any] | None = None
        assert end is not None
        if end[0] == "else":
            nxt = self.peek_non_space()
            if kind in ("if", "with") and nxt.kind == "keyword" and nxt.value == kind:
                # {{else if ...}} / {{else with ...}}: a nested branch that shares our {{end}}.
                self.next()
                self.vars = self.vars[:mark]
                orelse = [self.branch(kind, nxt)]
                self.depth -= 1
                return Branch(kind, pipe, body, orelse)
            self.expect("right", "else")
            orelse, end = self.list_until()
            assert end is not None
            if end[0] != "end":
                raise self.error(end[1], "expected end; found {{else}}")
        self.expect("right", "end")
        self.vars = self.vars[:mark]
        self.depth -= 1
        return Branch(kind, pipe, body, orelse)

    def pipeline(self, context: str) -> Pipe:
        pipe = Pipe()
        # A declaration: $x := / $x = / (range only) $i, $e :=
        start = self.pos
        first = self.peek_non_space()
        if first.kind == "var":
            self.next()
            op = self.peek_non_space()
            if op.kind in (":=", "="):
                self.next()
                pipe.decl, pipe.is_assign = [first.value], op.kind == "="
            elif op.kind == "," and context == "range":
                self.next()
                second = self.expect("var", "range")
                op = self.next_non_space()
                if op.kind not in (":=", "="):
                    raise self.error(op, "range can only initialize variables")
                pipe.decl, pipe.is_assign = [first.value, second.value], op.kind == "="
            else:
                self.pos = start
        for name in pipe.decl:
            if pipe.is_assign:
                if name not in self.vars:
                    raise TemplateError(f"undefined variable: {name}")
            else:
                self.vars.append(name)
        paren = context == "parenthesized pipeline"
        while True:
            item = self.peek_non_space()
            if item.kind == "right":
                if paren:
                    raise self.error(item, "unclosed left paren")
                self.next()
                break
            if item.kind == ")":
                if not paren:
                    raise self.error(item, "unexpected right paren")
                break
            if item.kind == "eof":
                raise self.error(item, "unclosed action")
            cmd = self.command()
            pipe.cmds.append(cmd)
            nxt = self.peek_non_space()
            if nxt.kind == "|":
                self.next()
                if self.peek_non_space().kind in ("right", ")"):
                    raise self.error(nxt, "missing command after pipe")
                continue
        if not pipe.cmds:
            raise self.error(self.items[self.pos - 1], f"missing value for {context}")
        return pipe

    def command(self) -> Command:
        args: list[Any] = []
        while True:
            item = self.peek_non_space()
            if item.kind in ("right", "|", ")", "eof"):
                break
            args.append(self.operand())
            nxt = self.peek()
            if nxt.kind not in ("space", "right", "|", ")", "eof"):
                raise self.error(nxt, f"unexpected {self._describe(nxt)} in operand")
        if not args:
            raise self.error(self.peek(), "empty command")
        return Command(args)

    def operand(self) -> Any:
        node = self.term()
        fields: list[str] = []
        while self.peek().kind == "field":
            fields.append(self.next().value)
        if not fields:
            return node
        if isinstance(node, Field):
            return Field(node.idents + fields)
        if isinstance(node, Variable):
            return Variable(node.idents + fields)
        if isinstance(node, Literal | Identifier):
            raise TemplateError(f"unexpected . after term {_node_text(node)}")
        return Chain(node, fields)

    def term(self) -> Any:
        item = self.next_non_space()
        if item.kind == "ident":
            if item.value not in _FUNCTION_NAMES:
                raise self.error(item, f'function "{item.value}" not defined')
            return Identifier(item.value)
        if item.kind == "dot":
            return Dot()
        if item.kind == "field":
            return Field([item.value])
        if item.kind == "var":
            if item.value not in self.vars:
                raise self.error(item, f'undefined variable "{item.value}"')
            return Variable([item.value])
        if item.kind in ("string", "number", "bool"):
            return Literal(item.value)
        if item.kind == "nil":
            return Literal(None)
        if item.kind == "(":
            pipe = self.pipeline("parenthesized pipeline")
            close = self.next_non_space()
            if close.kind != ")":
                raise self.error(close, "unclosed left paren")
            return pipe
        raise self.error(item, f"unexpected {self._describe(item)} in operand")


@dataclass
class Parsed:
    nodes: list[Any]
    defines: dict[str, list[Any]]


@functools.lru_cache(maxsize=64)
def parse(src: str) -> Parsed:
    """Parse ``src`` as Go's text/template does; raises ``TemplateError``."""
    if not isinstance(src, str):
        raise TemplateError("template is not a string")
    parser = _Parser(src)
    nodes = parser.parse()
    return Parsed(nodes, parser.defines)


# -- execution -----------------------------------------------------------------------------


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


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


class _State:
    def __init__(self, parsed: Parsed, out: _Output) -> None:
        self.parsed = parsed
        self.out = out
        self.vars: list[tuple[str, Any]] = []
        self.calls = 0

    # variables
    def push(self, name: str, value: Any) -> None:
        self.vars.append((name, value))

    def set_var(self, name: str, value: Any) -> None:
        for i in range(len(self.vars) - 1, -1, -1):
            if self.vars[i][0] == name:
                self.vars[i] = (name, value)
                return
        raise TemplateError(f"undefined variable: {name}")

    def var(self, name: str) -> Any:
        for key, value in reversed(self.vars):
            if key == name:
                return value
        raise TemplateError(f"undefined variable: {name}")

    # walking
    def walk(self, dot: Any, nodes: list[Any]) -> None:
        for node in nodes:
            self.out.step()
            if isinstance(node, Text):
                self.out.write(node.text)
            elif isinstance(node, Action):
                value = self.pipeline(dot, node.pipe)
                if not node.pipe.decl:
                    self.out.write(go_print(value))
            elif isinstance(node, Branch):
                self.branch(dot, node)
            elif isinstance(node, Loop):
                raise _Break() if node.kind == "break" else _Continue()
            elif isinstance(node, TemplateCall):
                self.call_template(dot, node)

    def branch(self, dot: Any, node: Branch) -> None:
        mark = len(self.vars)
        try:
            if node.kind == "range":
                self.range(dot, node)
                return
            value = self.pipeline(dot, node.pipe)
            if _truth(value):
                self.walk(value if node.kind == "with" else dot, node.body)
            elif node.orelse is not None:
                self.walk(dot, node.orelse)
        finally:
            del self.vars[mark:]

    def range(self, dot: Any, node: Branch) -> None:
        pipe = node.pipe
        value = self.pipeline(dot, Pipe(cmds=pipe.cmds))
        items = self._range_items(value, len(pipe.decl))
        if not items:
            if node.orelse is not None:
                self.walk(dot, node.orelse)
            return
        mark = len(self.vars)
        for key, elem in items:
            self.out.step()
            if len(pipe.decl) == 1:
                self._bind(pipe, 0, elem)
            elif len(pipe.decl) == 2:
                self._bind(pipe, 0, key)
                self._bind(pipe, 1, elem)
            try:
                self.walk(elem, node.body)
            except _Continue:
                pass
            except _Break:
                break
            finally:
                del self.vars[mark:]  # the loop's variables and the body's, fresh each time

    def _bind(self, pipe: Pipe, i: int, value: Any) -> None:
        if pipe.is_assign:
            self.set_var(pipe.decl[i], value)
        else:
            self.push(pipe.decl[i], value)

    @staticmethod
    def _range_items(value: Any, names: int) -> list[tuple[Any, Any]] | range | Iterable[tuple[Any, Any]]:
        if value is None or value is NO_VALUE:
            return []
        if isinstance(value, list | tuple):
            return list(enumerate(value))
        if isinstance(value, dict):
            return [(key, value[key]) for key in sorted(value)]
        if isinstance(value, int) and not isinstance(value, bool):
            # Since Go 1.22, range over an int counts from 0, into one variable only.
            if names > 1:
                raise TemplateError(f"can't use {value} to iterate over more than one variable")
            return _IntRange(value)
        raise TemplateError(f"range can't iterate over {go_print(value)}")

    def call_template(self, dot: Any, node: TemplateCall) -> None:
        body = self.parsed.defines.get(node.name)
        if body is None:
            raise TemplateError(f'no such template "{node.name}"')
        value = self.pipeline(dot, node.pipe) if node.pipe is not None else None
        self.calls += 1
        if self.calls > MAX_TEMPLATE_CALLS:
            raise TemplateError(f"exceeded maximum template depth ({MAX_TEMPLATE_CALLS})")
        saved, self.vars = self.vars, [("$", value)]
        try:
            self.walk(value, body)
        finally:
            self.vars = saved
            self.calls -= 1

    # pipelines
    def pipeline(self, dot: Any, pipe: Pipe) -> Any:
        value: Any = _MISSING
        for cmd in pipe.cmds:
            value = self.command(dot, cmd, value)
        for name in pipe.decl:
            if pipe.is_assign:
                self.set_var(name, value)
            else:
                self.push(name, value)
        return value

    def command(self, dot: Any, cmd: Command, final: Any) -> Any:
        first = cmd.args[0]
        if isinstance(first, Identifier):
            return self.function(dot, first.name, cmd.args[1:], final)
        if len(cmd.args) > 1 or final is not _MISSING:
            raise TemplateError(f"can't give argument to non-function {_node_text(first)}")
        return self.arg(dot, first)

    def arg(self, dot: Any, node: Any) -> Any:
        self.out.step()
        if isinstance(node, Dot):
            return dot
        if isinstance(node, Literal):
            return node.value
        if isinstance(node, Field):
            return self.fields(dot, node.idents, node)
        if isinstance(node, Variable):
            return self.fields(self.var(node.idents[0]), node.idents[1:], node)
        if isinstance(node, Pipe):
            return self.pipeline(dot, node)
        if isinstance(node, Chain):
            return self.fields(self.arg(dot, node.node), node.fields, node)
        if isinstance(node, Identifier):
            return self.function(dot, node.name, [], _MISSING)
        raise TemplateError(f"can't evaluate {node!r}")

    def fields(self, value: Any, names: list[str], node: Any) -> Any:
        for name in names:
            if isinstance(value, GoStruct):
                if name not in value.fields:
                    raise TemplateError(f"can't evaluate field {name} in type {value.type_name}")
                value = value.fields[name]
            elif isinstance(value, dict):
                value = value.get(name, NO_VALUE)
            elif value is None or value is NO_VALUE:
                raise TemplateError(f"nil pointer evaluating {_type_name(value)}.{name}")
            else:
                raise TemplateError(f"can't evaluate field {name} in type {_type_name(value)}")
        return value

    def function(self, dot: Any, name: str, args: list[Any], final: Any) -> Any:
        if name in ("and", "or"):
            nodes = list(args)
            if not nodes and final is _MISSING:
                raise TemplateError(f"wrong number of args for {name}: want at least 1 got 0")
            value: Any = None
            for node in nodes:
                value = self.arg(dot, node)
                if _truth(value) == (name == "or"):
                    return value
            if final is not _MISSING:
                value = final
            return value
        values = [self.arg(dot, node) for node in args]
        if final is not _MISSING:
            values.append(final)
        fn = _FUNCS[name]
        try:
            return fn(*values)
        except TemplateError:
            raise
        except TypeError as exc:
            raise TemplateError(f"error calling {name}: wrong number of args ({len(values)})") from exc


class _IntRange:
    def __init__(self, n: int) -> None:
        self.n = n

    def __bool__(self) -> bool:
        return self.n > 0

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return ((i, i) for i in range(self.n))


_MISSING = object()


def _node_text(node: Any) -> str:
    if isinstance(node, Field):
        return "." + ".".join(node.idents)
    if isinstance(node, Variable):
        return ".".join(node.idents)
    if isinstance(node, Literal):
        return go_print(node.value)
    if isinstance(node, Dot):
        return "."
    return "(...)"


# -- functions -----------------------------------------------------------------------------


def _kind(value: Any) -> str:
    if value is None or value is NO_VALUE:
        return "nil"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "other"


def _eq(a: Any, *others: Any) -> bool:
    if not others:
        raise TemplateError("missing argument for comparison")
    for b in others:
        ka, kb = _kind(a), _kind(b)
        if ka == "other" or kb == "other":
            if isinstance(a, GoStruct) or isinstance(b, GoStruct) or ka == kb:
                raise TemplateError("error calling eq: non-comparable types")
            if "nil" not in (ka, kb):
                raise TemplateError("error calling eq: incompatible types for comparison")
            continue
        if ka != kb:
            if "nil" in (ka, kb):
                continue
            raise TemplateError("error calling eq: incompatible types for comparison")
        if a == b:
            return True
    return False


def _ordered(name: str, a: Any, b: Any) -> tuple[Any, Any]:
    ka, kb = _kind(a), _kind(b)
    if ka not in ("number", "string") or ka != kb:
        raise TemplateError(f"error calling {name}: incompatible types for comparison")
    return a, b


def _len(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, list | tuple | dict):
        return len(value)
    raise TemplateError(f"error calling len: len of type {_type_name(value)}")


def _index(item: Any, *indexes: Any) -> Any:
    for index in indexes:
        if isinstance(item, dict):
            item = item.get(index)
        elif isinstance(item, list | tuple | str):
            seq = item.encode() if isinstance(item, str) else item
            if not isinstance(index, int) or isinstance(index, bool):
                raise TemplateError(f"error calling index: cannot index slice/array with type {_type_name(index)}")
            if not 0 <= index < len(seq):
                raise TemplateError(f"error calling index: index out of range: {index}")
            item = seq[index]
        elif item is None or item is NO_VALUE:
            raise TemplateError("error calling index: index of untyped nil")
        else:
            raise TemplateError(f"error calling index: can't index item of type {_type_name(item)}")
    return item


def _slice(item: Any, *indexes: Any) -> Any:
    if len(indexes) > 3:
        raise TemplateError(f"error calling slice: too many slice indexes: {len(indexes)}")
    if isinstance(item, str):
        if len(indexes) == 3:
            raise TemplateError("error calling slice: cannot 3-index slice a string")
        seq: Any = item.encode()
    elif isinstance(item, list | tuple):
        seq = item
    else:
        raise TemplateError(f"error calling slice: can't slice item of type {_type_name(item)}")
    bounds = [int(i) for i in indexes]
    cap = len(seq)
    low = bounds[0] if bounds else 0
    high = bounds[1] if len(bounds) > 1 else len(seq)
    if not 0 <= low <= high <= cap:
        raise TemplateError(f"error calling slice: index out of range: {high if high > cap else low}")
    out = seq[low:high]
    if isinstance(item, str):
        return out.decode(errors="replace")
    return list(out)


def _sprint(*args: Any) -> str:
    out = []
    for i, arg in enumerate(args):
        if i and not isinstance(arg, str) and not isinstance(args[i - 1], str):
            out.append(" ")
        out.append(go_print(arg))
    return "".join(out)


def _sprintln(*args: Any) -> str:
    return " ".join(go_print(a) for a in args) + "\n"


_VERB = re.compile(r"%([-+# 0]*)(\d+)?(?:\.(\d+))?([a-zA-Z%])")


def _go_quote(text: str) -> str:
    return _json_string(text).replace("\\u003c", "<").replace("\\u003e", ">").replace("\\u0026", "&")


def _sprintf(fmt: str, *args: Any) -> str:
    if not isinstance(fmt, str):
        raise TemplateError("error calling printf: format is not a string")
    values = list(args)
    used = 0

    def verb(m: re.Match[str]) -> str:
        nonlocal used
        flags, width, precision, v = m.groups()
        if v == "%":
            return "%"
        if used >= len(values):
            return f"%!{v}(MISSING)"
        value = values[used]
        used += 1
        if v in "vs":
            text = go_print(value)
        elif v == "q":
            text = _go_quote(value) if isinstance(value, str) else go_print(value)
        elif v == "d" and isinstance(value, int) and not isinstance(value, bool):
            text = str(value)
        elif v in "feEgG" and isinstance(value, int | float) and not isinstance(value, bool):
            text = f"{value:{'.' + precision if precision else ('.6' if v in 'feE' else '')}{v}}"
        elif v == "t" and isinstance(value, bool):
            text = "true" if value else "false"
        elif v in "xX" and isinstance(value, int | str):
            text = value.encode().hex() if isinstance(value, str) else format(value, "x")
            text = text.upper() if v == "X" else text
        elif v == "c" and isinstance(value, int):
            text = chr(value)
        elif v == "T":
            text = _type_name(value)
        else:
            return f"%!{v}({_type_name(value)}={go_print(value)})"
        if width:
            text = text.ljust(int(width)) if "-" in flags else text.rjust(int(width), "0" if "0" in flags else " ")
        return text

    out = _VERB.sub(verb, fmt)
    if used < len(values):
        extra = ", ".join(f"{_type_name(v)}={go_print(v)}" for v in values[used:])
        out += f"%!(EXTRA {extra})"
    return out


def _html(*args: Any) -> str:
    text = _sprint(*args)
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&#34;")
        .replace("'", "&#39;")
        .replace("\0", "\ufffd")
    )


def _js(*args: Any) -> str:
    text = _sprint(*args)
    out = []
    for ch in text:
        if ch in "\\'\"":
            out.append("\\" + ch)
        elif ch in "<>&=" or ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def _urlquery(*args: Any) -> str:
    return urllib.parse.quote_plus(_sprint(*args))


def _not(value: Any) -> bool:
    return not _truth(value)


def _call(*args: Any) -> Any:
    raise TemplateError("error calling call: templates here hold no functions to call")


def _today(offset_days: int) -> str:
    return (datetime.date.today() + datetime.timedelta(days=offset_days)).isoformat()


def _ts_type(json_type: str) -> str:
    return {
        "string": "string",
        "number": "number",
        "integer": "number",
        "boolean": "boolean",
        "array": "any[]",
        "object": "Record<string, any>",
        "null": "null",
    }.get(json_type, "any")


def _to_typescript_type(value: Any = None, *_: Any) -> str:
    """Ollama's ``ToolProperty.ToTypeScriptType``; anything that is not a tool property is ``any``."""
    if not isinstance(value, GoStruct) or value.type_name != "api.ToolProperty":
        return "any"
    any_of = value.fields.get("AnyOf") or []
    if any_of:
        return " | ".join(_to_typescript_type(p) for p in any_of)
    types = value.fields.get("Type") or []
    if not types:
        return "any"
    return " | ".join(_ts_type(t) for t in types)


_FUNCS: dict[str, Callable[..., Any]] = {
    "not": _not,
    "len": _len,
    "index": _index,
    "slice": _slice,
    "eq": _eq,
    "ne": lambda a, b: not _eq(a, b),
    "lt": lambda a, b: (lambda x, y: x < y)(*_ordered("lt", a, b)),
    "le": lambda a, b: (lambda x, y: x <= y)(*_ordered("le", a, b)),
    "gt": lambda a, b: (lambda x, y: x > y)(*_ordered("gt", a, b)),
    "ge": lambda a, b: (lambda x, y: x >= y)(*_ordered("ge", a, b)),
    "print": _sprint,
    "printf": _sprintf,
    "println": _sprintln,
    "html": _html,
    "js": _js,
    "urlquery": _urlquery,
    "call": _call,
    "json": lambda v: go_json(v),
    "currentDate": lambda *fmt: _today(0),
    "yesterdayDate": lambda *fmt: _today(-1),
    "toTypeScriptType": _to_typescript_type,
}


def execute(parsed: Parsed, data: Any, budget: RenderBudget | None = None, nodes: list[Any] | None = None) -> str:
    """Run a parsed template with ``data`` as dot (and ``$``)."""
    out = _Output(budget or RenderBudget())
    state = _State(parsed, out)
    state.push("$", data)
    try:
        state.walk(data, parsed.nodes if nodes is None else nodes)
    except (_Break, _Continue) as exc:  # the parser allows them only inside range
        raise TemplateError("break or continue outside range") from exc
    except RecursionError as exc:
        raise TemplateError("template too deeply nested") from exc
    return "".join(out.pieces)


def render_go_template(template: str, data: dict[str, Any], budget: RenderBudget | None = None) -> str:
    """Render ``template`` with ``data`` (keys as Go field names: System, Prompt, Messages...).

    Past the ``budget``'s deadline or output size, rendering stops with an error.
    """
    return execute(parse(template), data, budget)


# -- Ollama's values and execution (template/template.go) -----------------------------------


def identifiers(parsed: Parsed) -> set[str]:
    """Ollama's ``Template.Vars``: every field and variable name the template uses, lower-cased."""
    names: set[str] = set()

    def pipe(p: Pipe | None) -> None:
        if p is None:
            return
        for cmd in p.cmds:
            for arg in cmd.args:
                if isinstance(arg, Field | Variable):
                    names.update(i.lower() for i in arg.idents)
                elif isinstance(arg, Pipe):
                    pipe(arg)

    def walk(nodes: list[Any]) -> None:
        for node in nodes:
            if isinstance(node, Action):
                pipe(node.pipe)
            elif isinstance(node, Branch):
                pipe(node.pipe)
                walk(node.body)
                walk(node.orelse or [])
            elif isinstance(node, TemplateCall):
                if node.pipe is None:
                    raise TemplateError("undefined template specified")
                pipe(node.pipe)

    walk(parsed.nodes)
    for body in parsed.defines.values():
        walk(body)
    return names


@dataclass
class OllamaTemplate:
    parsed: Parsed
    vars: set[str]
    legacy_last: list[Any]  # the tree cut after {{ .Response }}, for a legacy template's last turn


_RESPONSE_ACTION = Action(Pipe(cmds=[Command([Field(["Response"])])]))


@functools.lru_cache(maxsize=64)
def parse_ollama(src: str) -> OllamaTemplate:
    """Ollama's ``template.Parse``: {{ .Response }} is appended to a template that names neither
    ``.Messages`` nor ``.Response``."""
    parsed = parse(src)
    names = identifiers(parsed)
    if "messages" not in names and "response" not in names:
        parsed = Parsed([*parsed.nodes, _RESPONSE_ACTION], parsed.defines)
    return OllamaTemplate(parsed, names, _cut_after_response(parsed.nodes))


def _cut_after_response(nodes: list[Any]) -> list[Any]:
    """Ollama's ``deleteNode``: everything after the first ``.Response`` field goes."""
    cut = False

    def gone(node: Any) -> bool:
        nonlocal cut
        if isinstance(node, Field) and "Response" in node.idents:
            cut = True
            return False
        return cut

    def walk(node: Any) -> Any:
        if gone(node):
            return None
        if isinstance(node, list):
            return [w for child in node if (w := walk(child)) is not None]
        if isinstance(node, Branch):
            node.body = walk(node.body) or []
            if node.orelse is not None:
                node.orelse = walk(node.orelse)
        elif isinstance(node, Action):
            p = walk(node.pipe)
            if p is None:
                return None
            node.pipe = p
        elif isinstance(node, Pipe):
            cmds = []
            for cmd in node.cmds:
                args = [w for arg in cmd.args if (w := walk(arg)) is not None]
                if not args:
                    return None
                cmd.args = args
                cmds.append(cmd)
            if not cmds:
                return None
            node.cmds = cmds
        return node

    return walk(copy.deepcopy(nodes)) or []


def _json_struct(pairs: Callable[[], _Ordered]) -> Callable[[], str]:
    return lambda: go_json(pairs())


def tool_property(prop: Any) -> GoStruct:
    """An ``api.ToolProperty`` from a JSON schema property."""
    p = prop if isinstance(prop, dict) else {}
    raw_type = p.get("type")
    types = GoList([raw_type] if isinstance(raw_type, str) else [t for t in raw_type or [] if isinstance(t, str)])
    types.string = lambda: types[0] if len(types) == 1 else ("" if not types else "[" + " ".join(types) + "]")
    any_of = [tool_property(x) for x in p.get("anyOf") or []] if isinstance(p.get("anyOf"), list) else []
    properties = p.get("properties")
    props = _properties(properties) if isinstance(properties, dict) else None
    fields = {
        "AnyOf": any_of,
        "Type": types,
        "Items": p.get("items"),
        "Description": p.get("description") or "",
        "Enum": p.get("enum"),
        "Properties": props,
        "Required": p.get("required"),
    }

    def as_json() -> _Ordered:
        typ: Any = types[0] if len(types) == 1 else list(types)
        return _struct_json(
            ("anyOf", any_of, True),
            ("type", typ, True),
            ("items", fields["Items"], True),
            ("description", fields["Description"], True),
            ("enum", fields["Enum"], True),
            ("properties", _Ordered(list(props.items())) if props is not None else None, True),
            ("required", fields["Required"], True),
        )

    return GoStruct("api.ToolProperty", fields, json=as_json)


def _properties(properties: dict[str, Any]) -> GoMap:
    props = GoMap({name: tool_property(value) for name, value in properties.items()})
    props.string = lambda: go_json(props)
    return props


def template_tools(tools: list[dict[str, Any]] | None) -> GoList | None:
    """Ollama's ``convertToolsForTemplate``: tools as structs with Go field names, printed as JSON."""
    if tools is None:
        return None
    out = GoList()
    for tool in tools:
        t = tool if isinstance(tool, dict) else {}
        fn = t.get("function") if isinstance(t.get("function"), dict) else {}
        params = fn.get("parameters") if isinstance(fn.get("parameters"), dict) else {}
        raw_props = params.get("properties")
        props = _properties(raw_props) if isinstance(raw_props, dict) else None
        parameters = GoStruct(
            "template.templateToolFunctionParameters",
            {
                "Type": params.get("type") or "",
                "Defs": params.get("$defs"),
                "Items": params.get("items"),
                "Required": params.get("required"),
                "Properties": props,
            },
        )
        parameters.json = lambda p=parameters: _struct_json(  # type: ignore[misc]
            ("type", p.fields["Type"], False),
            ("$defs", p.fields["Defs"], True),
            ("items", p.fields["Items"], True),
            ("required", p.fields["Required"], True),
            ("properties", p.fields["Properties"], False),
        )
        parameters.string = _json_struct(parameters.json)  # type: ignore[arg-type]
        function = GoStruct(
            "template.templateToolFunction",
            {"Name": fn.get("name") or "", "Description": fn.get("description") or "", "Parameters": parameters},
        )
        function.json = lambda f=function: _struct_json(  # type: ignore[misc]
            ("name", f.fields["Name"], False),
            ("description", f.fields["Description"], False),
            ("parameters", f.fields["Parameters"], False),
        )
        # Ollama's library templates write {{ .Function }} expecting JSON, as api.ToolFunction prints.
        function.string = _json_struct(function.json)  # type: ignore[arg-type]
        go_tool = GoStruct(
            "template.templateTool", {"Type": t.get("type") or "", "Items": t.get("items"), "Function": function}
        )
        go_tool.json = lambda g=go_tool: _struct_json(  # type: ignore[misc]
            ("type", g.fields["Type"], False),
            ("items", g.fields["Items"], True),
            ("function", g.fields["Function"], False),
        )
        go_tool.string = _json_struct(go_tool.json)  # type: ignore[arg-type]
        out.append(go_tool)
    out.string = lambda: go_json(out)
    return out


def _arguments(value: Any) -> GoMap:
    args = GoMap(value if isinstance(value, dict) else {})
    args.string = lambda: go_json(args) if args else "{}"
    return args


def template_message(message: dict[str, Any]) -> GoStruct:
    """Ollama's ``templateMessage``: Role, Content, Thinking, Images, ToolCalls, ToolName, ToolCallID."""
    calls = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) and isinstance(call.get("function"), dict) else {}
        calls.append(
            GoStruct(
                "template.templateToolCall",
                {
                    "ID": call.get("id") or "" if isinstance(call, dict) else "",
                    "Function": GoStruct(
                        "template.templateToolCallFunction",
                        {
                            "Index": fn.get("index") or 0,
                            "Name": fn.get("name") or "",
                            "Arguments": _arguments(fn.get("arguments")),
                        },
                    ),
                },
            )
        )
    return GoStruct(
        "*template.templateMessage",
        {
            "Role": message.get("role") or "",
            "Content": message.get("content") or "",
            "Thinking": message.get("thinking") or "",
            "Images": message.get("images") or None,
            "ToolCalls": calls or None,
            "ToolName": message.get("tool_name") or "",
            "ToolCallID": message.get("tool_call_id") or "",
        },
    )


def collate(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Ollama's ``collate``: the system messages joined, and consecutive messages of one role merged
    (tool results excepted)."""
    system = [m.get("content") or "" for m in messages if m.get("role") == "system"]
    out: list[dict[str, Any]] = []
    for message in messages:
        if out and out[-1].get("role") == message.get("role") and message.get("role") != "tool":
            out[-1] = {**out[-1], "content": (out[-1].get("content") or "") + "\n\n" + (message.get("content") or "")}
        else:
            out.append(dict(message))
    return "\n\n".join(system), out


def render_ollama(
    template: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    think: bool = False,
    think_level: str = "",
    think_set: bool = False,
    prompt: str = "",
    suffix: str = "",
    budget: RenderBudget | None = None,
) -> str:
    """Render a model's (or a request's) Go template as Ollama's ``Template.Execute`` does."""
    t = parse_ollama(template)
    budget = budget or RenderBudget()
    think_values = {"Think": think, "ThinkLevel": think_level, "IsThinkSet": think_set}
    system, collated = collate(messages)
    if prompt and suffix:
        return execute(t.parsed, {"Prompt": prompt, "Suffix": suffix, "Response": "", **think_values}, budget)
    if "messages" in t.vars:
        data = {
            "System": system,
            "Messages": [template_message(m) for m in collated],
            "Tools": template_tools(tools),
            "Response": "",
            **think_values,
        }
        return execute(t.parsed, data, budget)
    # An older template: run once per turn, then once more cut after {{ .Response }}.
    out: list[str] = []
    system = prompt_text = response = ""

    def run() -> None:
        nonlocal system, prompt_text, response
        data = {"System": system, "Prompt": prompt_text, "Response": response, **think_values}
        out.append(execute(t.parsed, data, budget))
        system = prompt_text = response = ""

    for message in collated:
        role, content = message.get("role"), message.get("content") or ""
        if role == "system":
            if prompt_text or response:
                run()
            system = content
        elif role == "user":
            if response:
                run()
            prompt_text = content
        elif role == "assistant":
            response = content
    data = {"System": system, "Prompt": prompt_text, "Response": response, **think_values}
    out.append(execute(t.parsed, data, budget, nodes=t.legacy_last))
    return "".join(out)
