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
    items: list[Item] = []
    pos = 0
    line = 1
    while True:
        start = src.find("{{", pos)
        if start < 0:
            if pos < len(src):
                items.append(Item("text", src[pos:], line))
            break
        trim_left = src.startswith("{{-", start) and start + 3 < len(src) and src[start + 3] in _SPACE
        text = src[pos:start]
        if trim_left:
            text = text.rstrip(_SPACE)
        if text:
            items.append(Item("text", text, line))
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
        items.append(Item("left", None, line))
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
                    items.append(Item("space", None, line))
                    line += text.count("\n")
                    pos += len(text)
                    continue
                items.append(Item("space", None, line))
            elif kind == "string":
                items.append(Item("string", _unquote(text), line))
            elif kind == "raw":
                items.append(Item("string", text[1:-1], line))
            elif kind == "char":
                value = _unquote('"' + text[1:-1].replace('"', '\\"') + '"')
                if len(value) != 1:
                    raise TemplateError(f":{line}: malformed character constant: {text}")
                items.append(Item("number", ord(value), line))
            elif kind == "number":
                items.append(Item("number", _number(text), line))
            elif kind == "field":
                items.append(Item("field", text[1:], line))
            elif kind == "var":
                items.append(Item("var", text, line))
            elif kind == "dot":
                items.append(Item("dot", None, line))
            elif kind == "ident":
                if text in ("true", "false"):
                    items.append(Item("bool", text == "true", line))
                elif text == "nil":
                    items.append(Item("nil", None, line))
                elif text in _KEYWORDS:
                    items.append(Item("keyword", text, line))
                else:
                    items.append(Item("ident", text, line))
            elif kind == "declare":
                items.append(Item(":=", None, line))
            else:
                if text == "(":
                    depth += 1
                    if depth > MAX_DEPTH:
                        raise TemplateError("max expression depth exceeded")
                elif text == ")":
                    depth -= 1
                items.append(Item(text, None, line))
            line += text.count("\n")
            pos = m.end()
        items.append(Item("right", None, line))
    items.append(Item("eof", None, line))
    return items
