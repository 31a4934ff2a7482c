"""The lexer (Go's ``text/template/parse/lex.go``): a template's text and the items of its actions."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .values import TemplateError

# Blocks (if/range/with) and parentheses a template may nest; Ollama's own nest a few levels.
MAX_DEPTH = 100
_SPACE = " \t\r\n"
_KEYWORDS = {"if", "else", "end", "range", "with", "define", "template", "block", "break", "continue"}


@dataclass(frozen=True)
class Item:
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


def lex(src: str) -> list[Item]:
    """Go's lexer: text, and for each action its tokens between ``left`` and ``right`` items."""
    return _Lexer(src).run()


def _token(kind: str, text: str, line: int) -> Item:
    """The item of one action token (not a space or a parenthesis: ``_Lexer._action``)."""
    if kind == "string":
        return Item("string", _unquote(text), line)
    if kind == "raw":
        return Item("string", text[1:-1], line)
    if kind == "char":
        value = _unquote('"' + text[1:-1].replace('"', '\\"') + '"')
        if len(value) != 1:
            raise TemplateError(f":{line}: malformed character constant: {text}")
        return Item("number", ord(value), line)
    if kind == "number":
        return Item("number", _number(text), line)
    if kind == "field":
        return Item("field", text[1:], line)
    if kind == "var":
        return Item("var", text, line)
    if kind == "dot":
        return Item("dot", None, line)
    if kind == "declare":
        return Item(":=", None, line)
    if kind == "ident":
        if text in ("true", "false"):
            return Item("bool", text == "true", line)
        if text == "nil":
            return Item("nil", None, line)
        return Item("keyword" if text in _KEYWORDS else "ident", text, line)
    return Item(text, None, line)


class _Lexer:
    """One pass over a template's source: ``run`` gives its items."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.pos = 0
        self.line = 1
        self.items: list[Item] = []

    def run(self) -> list[Item]:
        src = self.src
        while True:
            start = src.find("{{", self.pos)
            if start < 0:
                if self.pos < len(src):
                    self.items.append(Item("text", src[self.pos :], self.line))
                break
            trim_left = src.startswith("{{-", start) and start + 3 < len(src) and src[start + 3] in _SPACE
            text = src[self.pos : start]
            if trim_left:
                text = text.rstrip(_SPACE)
            if text:
                self.items.append(Item("text", text, self.line))
            self.line += src.count("\n", self.pos, start)
            self.pos = start + (4 if trim_left else 2)
            if src.startswith("/*", self.pos):
                self._comment()
            else:
                self._action()
        self.items.append(Item("eof", None, self.line))
        return self.items

    def _skip_space(self) -> None:
        src = self.src
        while self.pos < len(src) and src[self.pos] in _SPACE:
            self.line += src[self.pos] == "\n"
            self.pos += 1

    def _comment(self) -> None:
        """A comment fills the whole action: {{/* ... */}}, optionally with trim markers."""
        src, pos, line = self.src, self.pos, self.line
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
        self.line += src.count("\n", pos, after)
        self.pos = after
        if trim_right:
            self._skip_space()

    def _action(self) -> None:
        """The tokens of one action, between its ``left`` and ``right`` items."""
        src, items = self.src, self.items
        items.append(Item("left", None, self.line))
        depth = 0
        while True:
            pos = self.pos
            if pos >= len(src):
                raise TemplateError(f":{self.line}: unclosed action")
            if src[pos] in _SPACE and src.startswith("-}}", pos + 1):
                self.line += src[pos] == "\n"
                self.pos += 4
                self._skip_space()
                break
            if src.startswith("}}", pos):
                self.pos += 2
                break
            m = _ACTION_TOKEN.match(src, pos)
            if m is None:
                raise TemplateError(f":{self.line}: unexpected {src[pos]!r} in command")
            kind, text = m.lastgroup, m.group()
            assert kind is not None
            if kind == "space":
                items.append(Item("space", None, self.line))
                if src.startswith("-}}", m.end()) and len(text) > 1:  # leave " -}}" whole for the check above
                    text = text[:-1]
                    self.line += text.count("\n")
                    self.pos += len(text)
                    continue
            elif text in ("(", ")") and kind not in ("string", "raw", "char"):
                depth += 1 if text == "(" else -1
                if depth > MAX_DEPTH:
                    raise TemplateError("max expression depth exceeded")
                items.append(Item(text, None, self.line))
            else:
                items.append(_token(kind, text, self.line))
            self.line += text.count("\n")
            self.pos = m.end()
        items.append(Item("right", None, self.line))
