"""Glimmer's output (Ollama's ``glimmer`` parser, ``model/parsers/glimmer.go``): messages, each a
header naming its recipient and a body, ``[<|start|>assistant] to=R<|message|>BODY<|eom|>`` (or
``<|eot|>`` to end the turn). The prompt ends with ``<|start|>assistant``, so the first header
comes without it.

- ``to=self``: thinking; ``to=user`` (or no recipient): content;
- ``to=TOOL``: a call, its body ``<atem:function_calls><atem:invoke name="TOOL"><atem:parameter
  name="K">V</atem:parameter>...</atem:invoke></atem:function_calls>``, each value typed by the
  tool's schema. A tool is named as declared or through its own namespace (``read.read``).
- A content message whose whole body is such a block for a declared tool (a recipient the model
  fumbled) is that call; its body is held while it may be one, everything else streams at once.
- A message ends at its end mark, or where a next assistant header begins without one.

As Ollama, a call's body may hold the marks as text (they end it only after the block closes).
Where Ollama fails the request on a call that does not parse, the body stays content here, as every
cllm parser keeps a call it cannot read.
"""

from __future__ import annotations

import enum
from typing import Any

from .call_syntaxes import Call, Tools, call, schema_types, typed_tool_value
from .parsers import BufferedParser, Delta

START, MESSAGE, END_MESSAGE, END_TURN = "<|start|>", "<|message|>", "<|eom|>", "<|eot|>"
CONTROL_TOKENS = (START, MESSAGE, END_MESSAGE, END_TURN)
_HEADER = START + "assistant"
_CALLS_OPEN, _CALLS_CLOSE = "<atem:function_calls>", "</atem:function_calls>"
_INVOKE_OPEN, _INVOKE_CLOSE = '<atem:invoke name="', "</atem:invoke>"
_PARAM_OPEN, _PARAM_CLOSE = '<atem:parameter name="', "</atem:parameter>"


class _In(enum.Enum):
    HEADER = enum.auto()
    CONTENT = enum.auto()
    THINKING = enum.auto()
    TOOL = enum.auto()


class _Header(enum.Enum):
    INVALID = enum.auto()
    PENDING = enum.auto()
    VALID = enum.auto()


def _overlap(text: str, mark: str) -> int:
    """The longest end of ``text`` that begins ``mark``."""
    for n in range(min(len(text), len(mark) - 1), 0, -1):
        if mark.startswith(text[-n:]):
            return n
    return 0


def resolve_tool(tools: Tools, name: str) -> str | None:
    """The declared tool ``name`` means: itself, or ``NS.FN`` for a declared ``FN`` whose own
    namespace (its first dotted part) is ``NS``, as the template advertises ``NS.*``."""
    if name in tools:
        return name
    ns, dot, fn = name.partition(".")
    if dot and fn in tools and fn.partition(".")[0] == ns:
        return fn
    return None


def _cut_invoke_name(text: str) -> tuple[str, str] | None:
    """The invoke's name and what follows its ``">``; a ``<|message|>`` the model slipped into the
    name (echoing ``to=NAME<|message|>``) is dropped, and one right before the first parameter
    stands for the missing ``">``. None: no end to the name."""
    name, rest = "", text
    while True:
        end, tag = rest.find('">'), rest.find(MESSAGE)
        if tag >= 0 and (end < 0 or tag < end):
            name, rest = name + rest[:tag], rest[tag + len(MESSAGE) :]
            if rest.startswith(_PARAM_OPEN):
                return name, rest
            continue
        if end < 0:
            return None
        return name + rest[:end], rest[end + 2 :]


def parse_atem(body: str, tools: Tools) -> tuple[str, dict[str, Any]]:
    """The invoke's name (as written) and its typed arguments; ValueError where the block is not one."""
    body = body.strip()
    if not (body.startswith(_CALLS_OPEN) and body.endswith(_CALLS_CLOSE)):
        raise ValueError("missing ATEM function_calls wrapper")
    invoke = body[len(_CALLS_OPEN) : len(body) - len(_CALLS_CLOSE)].strip()
    if not (invoke.startswith(_INVOKE_OPEN) and invoke.endswith(_INVOKE_CLOSE)):
        raise ValueError("missing ATEM invoke wrapper")
    cut = _cut_invoke_name(invoke[len(_INVOKE_OPEN) :])
    if cut is None or len(cut[1]) < len(_INVOKE_CLOSE):
        raise ValueError("malformed ATEM invoke name")
    name, rest = cut
    params = rest[: len(rest) - len(_INVOKE_CLOSE)].removeprefix("\n").removesuffix("\n")
    resolved = resolve_tool(tools, name)
    schema = (tools.get(resolved) or {}).get("parameters") if resolved else None
    properties = schema.get("properties") if isinstance(schema, dict) else None
    properties = properties if isinstance(properties, dict) else {}
    arguments: dict[str, Any] = {}
    while params:
        if not params.startswith(_PARAM_OPEN):
            raise ValueError("malformed ATEM parameter")
        params = params[len(_PARAM_OPEN) :]
        key_end = params.find('">')
        if key_end < 0:
            raise ValueError("malformed ATEM parameter name")
        key, params = params[:key_end], params[key_end + 2 :]
        value_end = params.find(_PARAM_CLOSE)
        if value_end < 0:
            raise ValueError(f"unterminated ATEM parameter {key!r}")
        value, params = params[:value_end], params[value_end + len(_PARAM_CLOSE) :].removeprefix("\n")
        arguments[key] = typed_tool_value(value, schema_types(properties.get(key)))
    return name, arguments


class Glimmer(BufferedParser):
    """One request's output in Glimmer's messages; ``thinking`` off drops the ``self`` messages,
    ``tools`` None: no message is a call (none was requested)."""

    def __init__(self, tools: Tools | None, *, thinking: bool) -> None:
        self._tools: Tools = tools or {}
        self._thinking = thinking
        self._buf = ""
        self._state = _In.HEADER
        self._recipient = ""
        self._streamed = False  # some of this content message went out: it is no call

    def _drain(self, *, final: bool) -> Delta:
        out = Delta()
        while True:
            if self._state is _In.HEADER:
                progress, fallback = self._header(final)
                out.content += fallback
                if not progress:
                    return out
                continue
            progress, body, complete = self._body(final)
            self._emit(out, body, complete)
            if complete:
                self._state, self._recipient, self._streamed = _In.HEADER, "", False
            if not progress:
                return out

    def _emit(self, out: Delta, body: str, complete: bool) -> None:
        if self._state is _In.THINKING:
            if self._thinking:
                out.thinking += body
        elif self._state is _In.TOOL:
            if complete:
                made = self._call(body, self._recipient)
                if made is None:
                    out.content += body
                else:
                    out.tool_calls.append(made)
        elif (made := self._fumbled_call(body, complete)) is not None:
            out.tool_calls.append(made)
        elif body:
            out.content += body
            self._streamed = True

    def _header(self, final: bool) -> tuple[bool, str]:
        acc = self._buf
        if acc.startswith(_HEADER):
            acc = self._buf = acc[len(_HEADER) :]
        elif _HEADER.startswith(acc) and acc.startswith("<") and not final:
            return False, ""
        at = acc.find(MESSAGE)
        if at < 0:
            if not final:
                return False, ""
            self._buf = ""
            return acc != "", acc
        self._recipient = acc[:at].strip().removeprefix("to=").strip()
        self._buf = acc[at + len(MESSAGE) :]
        if self._recipient == "self":
            self._state = _In.THINKING
        elif self._tools and resolve_tool(self._tools, self._recipient) is not None:
            self._state = _In.TOOL
        else:
            self._state = _In.CONTENT
        return True, ""

    def _body(self, final: bool) -> tuple[bool, str, bool]:
        """(progress, the body's text that is decided, whether the message ended)."""
        acc = self._buf
        hold = self._state is _In.TOOL or self._may_be_call(acc)
        control = 0
        if hold:  # the marks end a call only after its block closes
            close = acc.find(_CALLS_CLOSE)
            control = close + len(_CALLS_CLOSE) if close >= 0 else len(acc)
        ends = [(i, m) for m in (END_MESSAGE, END_TURN) if (i := acc.find(m, control)) >= 0]
        at, mark = min(ends) if ends else (-1, "")
        implicit, wait = self._next_header(acc, control, final)
        if implicit >= 0 and not wait and (at < 0 or implicit < at):
            self._buf = acc[implicit:]
            return True, acc[:implicit], True
        if at >= 0:
            self._buf = acc[at + len(mark) :]
            return True, acc[:at], True
        if final:
            self._buf = ""
            return acc != "" or self._state is _In.TOOL, acc, True
        if hold:
            return False, "", False
        if wait:
            self._buf = acc[implicit:]
            return implicit > 0, acc[:implicit], False
        keep = max(_overlap(acc, END_MESSAGE), _overlap(acc, END_TURN))
        if keep == len(acc):
            return False, "", False
        self._buf = acc[len(acc) - keep :]
        return True, acc[: len(acc) - keep], False

    def _next_header(self, text: str, search: int, final: bool) -> tuple[int, bool]:
        """Where a next assistant header begins without an end mark before it, and whether that is
        still undecided; -1: none."""
        while (i := text.find(START, search)) >= 0:
            status = self._header_status(text[i:], final)
            if status is not _Header.INVALID:
                return i, status is _Header.PENDING
            search = i + len(START)
        if not final and (keep := _overlap(text[search:], _HEADER)) > 0:
            return len(text) - keep, True
        return -1, False

    def _header_status(self, text: str, final: bool) -> _Header:
        if len(text) < len(_HEADER):
            return _Header.PENDING if not final and _HEADER.startswith(text) else _Header.INVALID
        if not text.startswith(_HEADER):
            return _Header.INVALID
        rest = text[len(_HEADER) :]
        if rest.startswith(MESSAGE):
            return _Header.VALID
        if not final and (rest == "" or MESSAGE.startswith(rest)):
            return _Header.PENDING
        if not rest.startswith(" to="):
            return _Header.PENDING if not final and " to=".startswith(rest) else _Header.INVALID
        recipient = rest[4:]
        at = recipient.find(MESSAGE)
        if at >= 0:
            valid = recipient[:at] in ("self", "user") or recipient[:at] in self._tools
            return _Header.VALID if valid else _Header.INVALID
        if final or any(c in recipient for c in " \t\r\n"):
            return _Header.INVALID
        lt = recipient.find("<")
        return _Header.PENDING if lt < 0 or MESSAGE.startswith(recipient[lt:]) else _Header.INVALID

    def _may_be_call(self, acc: str) -> bool:
        """A content message that opens with the call block may be a call the model addressed
        wrongly: held until it ends (``_fumbled_call``)."""
        if self._state is not _In.CONTENT or self._streamed or not self._tools:
            return False
        head = acc.lstrip(" \t\r\n")
        return _CALLS_OPEN.startswith(head) or head.startswith(_CALLS_OPEN)

    def _fumbled_call(self, body: str, complete: bool) -> Call | None:
        """A whole content message that is only a call block for a declared tool: that call, named
        by its invoke."""
        if not complete or self._streamed or not self._tools:
            return None
        whole = body.strip()
        if not (whole.startswith(_CALLS_OPEN) and whole.endswith(_CALLS_CLOSE)):
            return None
        return self._call(whole, None)

    def _call(self, body: str, recipient: str | None) -> Call | None:
        """The call a block makes, to ``recipient`` (None: whatever tool its invoke names)."""
        try:
            name, arguments = parse_atem(body, self._tools)
        except ValueError:
            return None
        resolved = resolve_tool(self._tools, name)
        wanted = resolved if recipient is None else resolve_tool(self._tools, recipient)
        if resolved is None or resolved != wanted:
            return None
        return call(resolved, arguments)
