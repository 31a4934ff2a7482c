"""Where a request body's first JSON value ends, or the error Go's ``encoding/json`` gives for it.

Ollama reads bodies with gin's ``ShouldBindJSON``: a ``json.Decoder`` that decodes the first value
and ignores whatever follows it, answering malformed input with its scanner's words (``invalid
character 'x' looking for beginning of value``, ``unexpected EOF``), which clients and the
reference compare byte for byte. This is that scanner (Go's ``encoding/json/scanner.go``), state
for state, over bytes: orjson then decodes the value it delimits.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from ..gostrconv import go_quote

_SPACE = b" \t\r\n"
_DIGITS = b"0123456789"
_HEX = b"0123456789abcdefABCDEF"
_ESCAPES = b'bfnrt\\/"'
MAX_DEPTH = 10000  # Go's maxNestingDepth

# What a parse-stack entry is waiting for.
_OBJECT_KEY, _OBJECT_VALUE, _ARRAY_VALUE = range(3)


class GoSyntaxError(ValueError):
    """Go's error for the body, as its decoder words it."""


def _char(c: int) -> str:
    """Go's ``quoteChar``: the byte as a rune in single quotes."""
    if c == ord("'"):
        return "'\\''"
    if c == ord('"'):
        return "'\"'"
    return "'" + go_quote(chr(c))[1:-1] + "'"


class _Scanner:
    """Go's scanner: ``step(c)`` for each byte; ``done`` once the first value is whole."""

    def __init__(self) -> None:
        self.stack: list[int] = []
        self.step: Callable[[int], None] = self._begin_value
        self.done = False
        self.closed = False  # the value ended with the byte that closed it (a bracket at the top)

    def _fail(self, c: int, context: str) -> None:
        raise GoSyntaxError(f"invalid character {_char(c)} {context}")

    def _push(self, c: int, kind: int) -> None:
        self.stack.append(kind)
        if len(self.stack) > MAX_DEPTH:
            self._fail(c, "exceeded max depth")

    def _pop(self) -> None:
        self.stack.pop()
        if not self.stack:
            self.done = self.closed = True
        else:
            self.step = self._end_value

    def _begin_value_or_empty(self, c: int) -> None:
        if c in _SPACE:
            return
        if c == ord("]"):
            self._end_value(c)
            return
        self._begin_value(c)

    def _begin_value(self, c: int) -> None:
        if c in _SPACE:
            return
        match chr(c):
            case "{":
                self._push(c, _OBJECT_KEY)
                self.step = self._begin_string_or_empty
            case "[":
                self._push(c, _ARRAY_VALUE)
                self.step = self._begin_value_or_empty
            case '"':
                self.step = self._in_string
            case "-":
                self.step = self._neg
            case "0":
                self.step = self._zero
            case "t":
                self.step = self._literal(b"rue", "true")
            case "f":
                self.step = self._literal(b"alse", "false")
            case "n":
                self.step = self._literal(b"ull", "null")
            case _ if c in b"123456789":
                self.step = self._one
            case _:
                self._fail(c, "looking for beginning of value")

    def _begin_string_or_empty(self, c: int) -> None:
        if c in _SPACE:
            return
        if c == ord("}"):
            self.stack[-1] = _OBJECT_VALUE
            self._end_value(c)
            return
        self._begin_string(c)

    def _begin_string(self, c: int) -> None:
        if c in _SPACE:
            return
        if c != ord('"'):
            self._fail(c, "looking for beginning of object key string")
        self.step = self._in_string

    def _end_value(self, c: int) -> None:
        if not self.stack:
            self.done = True
            return
        if c in _SPACE:
            self.step = self._end_value
            return
        kind = self.stack[-1]
        if kind == _OBJECT_KEY:
            if c != ord(":"):
                self._fail(c, "after object key")
            self.stack[-1] = _OBJECT_VALUE
            self.step = self._begin_value
        elif kind == _OBJECT_VALUE:
            if c == ord(","):
                self.stack[-1] = _OBJECT_KEY
                self.step = self._begin_string
            elif c == ord("}"):
                self._pop()
            else:
                self._fail(c, "after object key:value pair")
        elif c == ord(","):
            self.step = self._begin_value
        elif c == ord("]"):
            self._pop()
        else:
            self._fail(c, "after array element")

    def _in_string(self, c: int) -> None:
        if c == ord('"'):
            self.step = self._end_value
        elif c == ord("\\"):
            self.step = self._in_escape
        elif c < 0x20:
            self._fail(c, "in string literal")

    def _in_escape(self, c: int) -> None:
        if c in _ESCAPES:
            self.step = self._in_string
        elif c == ord("u"):
            self.step = self._hex(4)
        else:
            self._fail(c, "in string escape code")

    def _hex(self, left: int) -> Callable[[int], None]:
        def step(c: int) -> None:
            if c not in _HEX:
                self._fail(c, "in \\u hexadecimal character escape")
            self.step = self._hex(left - 1) if left > 1 else self._in_string

        return step

    def _neg(self, c: int) -> None:
        if c == ord("0"):
            self.step = self._zero
        elif c in b"123456789":
            self.step = self._one
        else:
            self._fail(c, "in numeric literal")

    def _one(self, c: int) -> None:
        if c in _DIGITS:
            return
        self._zero(c)

    def _zero(self, c: int) -> None:
        if c == ord("."):
            self.step = self._digit("after decimal point in numeric literal", self._fraction)
        elif c in b"eE":
            self.step = self._exp
        else:
            self._end_value(c)

    def _fraction(self, c: int) -> None:
        if c in _DIGITS:
            return
        if c in b"eE":
            self.step = self._exp
        else:
            self._end_value(c)

    def _exp(self, c: int) -> None:
        exponent = self._digit("in exponent of numeric literal", self._exp_digits)
        if c in b"+-":
            self.step = exponent
        else:
            exponent(c)

    def _exp_digits(self, c: int) -> None:
        if c not in _DIGITS:
            self._end_value(c)

    def _digit(self, context: str, then: Callable[[int], None]) -> Callable[[int], None]:
        """A step that takes one digit, then goes on with ``then``."""

        def step(c: int) -> None:
            if c not in _DIGITS:
                self._fail(c, context)
            self.step = then

        return step

    def _literal(self, rest: bytes, word: str) -> Callable[[int], None]:
        def step(c: int) -> None:
            if c != rest[0]:
                self._fail(c, f"in literal {word} (expecting {_char(rest[0])})")
            self.step = self._literal(rest[1:], word) if len(rest) > 1 else self._end_value

        return step


def first_value(body: bytes) -> bytes:
    """The bytes of ``body``'s first JSON value (what follows it Go's decoder never reads); raises
    ``GoSyntaxError`` with Go's words where it is malformed or cut short (``unexpected EOF``).
    ``body`` holds more than white space."""
    scanner = _Scanner()
    for i, c in enumerate(body):
        scanner.step(c)
        if scanner.done:
            # An object or array ends with its closing bracket; anything else at the top (a number,
            # a string, a literal) with the byte after it, which is not the value's.
            return body[: i + 1] if scanner.closed else body[:i]
    # At the end Go asks whether a space would end the value (a number at the top); anything cut
    # short is "unexpected EOF", whatever the space did.
    with contextlib.suppress(GoSyntaxError):
        scanner.step(ord(" "))
    if scanner.done:
        return body
    raise GoSyntaxError("unexpected EOF")
