"""The stream parser of the families whose thinking and calls stand between their own marks
(``model_families``' "marked" ones: Gemma 4, FunctionGemma, Ministral 3, LFM2, Command, OLMo 3).

One parser reads both, as Ollama's per-family parsers do: text outside the marks streams at once
(only an end that may begin a mark waits, with the whitespace before it, which a mark trims), a
call is emitted as soon as its block closes, and a block that does not parse stays content.
"""

from __future__ import annotations

import enum

from ..model_families import Family
from .call_syntaxes import BlockParser, Tools
from .parsers import BufferedParser, Delta, hold_back


class _In(enum.Enum):
    CONTENT = enum.auto()
    THINK = enum.auto()
    CALL = enum.auto()
    AFTER_CALL = enum.auto()


class _JsonEnd:
    """Where the JSON value that opens at ``start`` (``{`` or ``[``) closes, each character
    scanned once however the text arrives: each call goes on where the last one stopped."""

    def __init__(self) -> None:
        self.pos = -1  # the next index to scan; -1 before the first call
        self.depth, self.in_string, self.escape = 0, False, False

    def end(self, text: str, start: int) -> int | None:
        """Index just past the value's closing bracket; None while it is open."""
        if self.pos < 0:
            self.pos = start
        for i in range(self.pos, len(text)):
            c = text[i]
            if self.in_string:
                if self.escape:
                    self.escape = False
                elif c == "\\":
                    self.escape = True
                elif c == '"':
                    self.in_string = False
            elif c == '"':
                self.in_string = True
            elif c in "[{":
                self.depth += 1
            elif c in "]}":
                self.depth -= 1
                if self.depth == 0:
                    return i + 1
        self.pos = len(text)
        return None


def _trailing_space(text: str) -> int:
    return len(text) - len(text.rstrip())


class Marked(BufferedParser):
    """One request's output in a marked family's format; ``thinking`` off drops the thinking (as
    Gemma 4's parser does), ``start_in_thinking``: the prompt opened the thinking block, ``tools``
    None: calls stay content (none was requested)."""

    def __init__(
        self, family: Family, parse: BlockParser, tools: Tools | None, *, thinking: bool, start_in_thinking: bool
    ) -> None:
        self._family, self._parse, self._tools, self._thinking = family, parse, tools, thinking
        self._open, self._close = family.tool_block
        self._think_open, self._think_close = family.think_tags
        self._buf = ""
        self._state = _In.THINK if start_in_thinking else _In.CONTENT
        self._prefix = family.think_prefix if start_in_thinking else ""  # still to strip from the thinking
        self._trim = start_in_thinking  # drop the whitespace that opens the next text (after a mark)
        # A call's block, which only grows until it ends, is searched once: how far the closing mark
        # was looked for, and where its JSON arguments stand.
        self._searched = 0
        self._json = _JsonEnd()
        marks = [m for m in (self._open, self._think_open) if m]
        self._content_marks = tuple(marks) + family.dropped_marks

    def _drain(self, *, final: bool) -> Delta:
        out = Delta()
        step = {
            _In.CONTENT: self._content,
            _In.THINK: self._think,
            _In.CALL: self._call,
            _In.AFTER_CALL: self._after_call,
        }
        while self._buf and step[self._state](out, final):
            pass
        return out

    def _trimmed(self) -> bool:
        """Drop leading whitespace while ``_trim``; False while nothing else has come yet."""
        if self._trim:
            self._buf = self._buf.lstrip()
            if not self._buf:
                return False
            self._trim = False
        return True

    def _release(self, text: str, marks: tuple[str, ...], final: bool) -> str:
        """What of ``text`` goes out now: an end that may begin a mark waits in ``_buf``, with the
        whitespace before it (a mark trims it)."""
        ready, held = hold_back(text, *marks, final=final)
        if not final:
            cut = len(ready) - _trailing_space(ready)
            ready, held = ready[:cut], ready[cut:] + held
        self._buf = held
        return ready

    def _content(self, out: Delta, final: bool) -> bool:
        if not self._trimmed():
            return False
        buf = self._buf
        found = [(i, m) for m in self._content_marks if (i := buf.find(m)) >= 0]
        if not found:
            out.content += self._release(buf, self._content_marks, final)
            return False
        start, mark = min(found)
        before, self._buf = buf[:start], buf[start + len(mark) :]
        if mark in self._family.dropped_marks:
            out.content += before
            return True
        out.content += before.rstrip()
        if mark == self._think_open:
            self._state, self._prefix, self._trim = _In.THINK, self._family.think_prefix, True
        elif self._tools is None:  # no tools requested: the block is text
            out.content += mark
        else:
            self._state, self._searched, self._json = _In.CALL, 0, _JsonEnd()
        return True

    def _think(self, out: Delta, final: bool) -> bool:
        if self._prefix:
            if self._buf.startswith(self._prefix):
                self._buf = self._buf[len(self._prefix) :]
            elif self._prefix.startswith(self._buf) and not final:
                return False
            self._prefix = ""
        if not self._trimmed():
            return False
        buf = self._buf
        end = buf.find(self._think_close)
        if end < 0:
            text = self._release(buf, (self._think_close,), final)
        else:
            text, self._buf = buf[:end].rstrip(), buf[end + len(self._think_close) :]
            self._state, self._trim = _In.CONTENT, True
        if self._thinking:
            out.thinking += text
        return end >= 0

    def _block_end(self, buf: str) -> tuple[int, int] | None:
        """Where the call's block ends and where the text after it starts; None while it is open."""
        if self._close:
            end = buf.find(self._close, max(0, self._searched - len(self._close) + 1))
            self._searched = len(buf)
            return None if end < 0 else (end, end + len(self._close))
        args = buf.find("[ARGS]")  # no closing mark: the block ends with its JSON arguments
        head = buf.lstrip()
        if head[:1] in ("[", "{"):  # the older Mistral format: a JSON list of calls
            closed = self._json.end(buf, len(buf) - len(head))
            return None if closed is None else (closed, closed)
        if args < 0 or "\n" in buf[:args]:  # a name runs to ``[ARGS]`` on one line; else no call
            line = buf.find("\n")
            return None if line < 0 else (line, line)
        start = len(buf) - len(buf[args + 6 :].lstrip())
        if start == len(buf):
            return None
        if buf[start] not in "{[":
            return start, start  # no JSON: the block ends here (and does not parse)
        closed = self._json.end(buf, start)
        return None if closed is None else (closed, closed)

    def _call(self, out: Delta, final: bool) -> bool:
        buf = self._buf
        ends = self._block_end(buf)
        if ends is None and not final:
            return False
        block, rest = (buf, "") if ends is None else (buf[: ends[0]], buf[ends[1] :])
        calls = self._parse(block, self._tools or {})
        if calls is None:
            out.content += self._open + block + ("" if ends is None else buf[ends[0] : ends[1]])
            self._state = _In.CONTENT
        else:
            out.tool_calls += calls
            self._state, self._trim = _In.AFTER_CALL, True
        self._buf = rest
        return True

    def _after_call(self, out: Delta, final: bool) -> bool:
        """Right after a call: the family's stray closing marks are dropped, whatever else is content."""
        if not self._trimmed():
            return False
        noise = self._family.after_call_noise
        for mark in noise:
            if self._buf.startswith(mark):
                self._buf, self._trim = self._buf[len(mark) :], True
                return True
        if not final and any(m.startswith(self._buf) for m in noise):
            return False
        self._state = _In.CONTENT
        return True
