"""Go's ``strconv.Quote`` (what ``%q`` prints for a string), written once for both users: the API,
whose error strings clients compare byte for byte with Ollama's, and the Go templates' ``printf``.

It sits at the package's top, beside ``errors``, so that both layers import it without importing
each other (``tests/test_layers.py``).
"""

from __future__ import annotations

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def go_quote(text: str) -> str:
    """``text`` as Go's ``strconv.Quote`` writes it: printable runes kept, quote, backslash and
    ``\\a\\b\\f\\n\\r\\t\\v`` escaped, other runes as ``\\xNN`` (ASCII), ``\\uNNNN`` or ``\\UNNNNNNNN``.

    Go's ``unicode.IsPrint`` (letters, marks, numbers, punctuation, symbols, the ASCII space) is
    Python's ``str.isprintable``. A lone surrogate, which Go's strings cannot hold (its JSON decoder
    reads one as U+FFFD), is written as U+FFFD.
    """
    out = ['"']
    for ch in text:
        code = ord(ch)
        if 0xD800 <= code <= 0xDFFF:
            ch, code = "\ufffd", 0xFFFD
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


# What Go's strconv.ParseBool takes as true and as false (anything else is its error).
PARSE_BOOL_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
PARSE_BOOL_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
