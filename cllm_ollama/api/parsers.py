"""Streaming split of generated text into Ollama's ``thinking``, ``content`` and ``tool_calls``.

Only a possible partial tag at the end of the text seen so far is held back; everything else is
emitted as soon as it arrives.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field
from typing import Any

TOOL_OPEN = "<tool_call>"
TOOL_CLOSE = "</tool_call>"


@dataclass
class Delta:
    """What one ``feed``/``finish`` produced; tool calls as ``{"function": {"name", "arguments"}}``."""

    content: str = ""
    thinking: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.content or self.thinking or self.tool_calls)


class _State(enum.Enum):
    EMPTY_BLOCK = enum.auto()  # thinking off: a leading empty think block may still come
    LOOK_OPEN = enum.auto()  # thinking on: the opening tag may still come
    REOPEN = enum.auto()  # started inside thinking: swallow a redundant opening tag
    THINK_WS = enum.auto()  # just opened: drop whitespace before the thinking text
    THINK = enum.auto()
    AFTER_THINK_WS = enum.auto()  # just closed: drop whitespace before the content
    CONTENT = enum.auto()
    TOOL = enum.auto()  # inside <tool_call>, waiting for the closing tag


def prompt_opens_thinking(prompt: str, think_open: str = "<think>") -> bool:
    """Whether a rendered prompt ends inside a think block, so the output starts mid-thought.

    True for templates that emit the opening tag themselves (Qwen3-*-Thinking-2507, DeepSeek-R1);
    pass it as ``OutputParser(start_in_thinking=...)``.
    """
    return prompt.rstrip().endswith(think_open)


def _held(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that could still grow into ``tag``."""
    for n in range(min(len(text), len(tag) - 1), 0, -1):
        if tag.startswith(text[-n:]):
            return n
    return 0


def _parse_tool_call(body: str) -> dict[str, Any] | None:
    """Hermes/Qwen ``{"name": ..., "arguments": {...}}``; None when it is not a call."""
    try:
        call = json.loads(body)
    except ValueError:
        return None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return None
    arguments = call.get("arguments", call.get("parameters", {}))
    if isinstance(arguments, str):
        # Some models double-encode the arguments as a JSON string.
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return {"function": {"name": call["name"], "arguments": arguments}}


class OutputParser:
    """Splits one request's output stream; feed it text in any chunking, then call ``finish``.

    ``thinking``: route ``<think>…</think>`` to ``thinking`` (off: tags stay in the content, but a
    leading empty block, what Qwen3 emits when told not to think, is dropped). ``tools``: turn
    ``<tool_call>`` blocks into tool calls. ``start_in_thinking``: the prompt already opened the
    think block (see ``prompt_opens_thinking``).
    """

    def __init__(
        self,
        *,
        thinking: bool,
        tools: bool,
        think_open: str = "<think>",
        think_close: str = "</think>",
        start_in_thinking: bool = False,
    ) -> None:
        self._tools = tools
        self._open = think_open
        self._close = think_close
        self._empty_block = re.compile(rf"\s*{re.escape(think_open)}\s*{re.escape(think_close)}\s*")
        if not thinking:
            self._state = _State.EMPTY_BLOCK
        elif start_in_thinking:
            self._state = _State.REOPEN
        else:
            self._state = _State.LOOK_OPEN
        self._buf = ""
        # After a tool call, whitespace is held: dropped if another call or the end follows.
        self._after_tool = False

    def feed(self, text: str) -> Delta:
        self._buf += text
        return self._drain(final=False)

    def finish(self) -> Delta:
        """Flush what was held back: a partial tag that never completed is plain text after all."""
        return self._drain(final=True)

    def _drain(self, *, final: bool) -> Delta:
        out = Delta()
        while self._step(out, final):
            pass
        return out

    def _step(self, out: Delta, final: bool) -> bool:
        """Consume what the current state can decide; True when the state changed and the loop goes on."""
        buf = self._buf
        state = self._state
        if state is _State.EMPTY_BLOCK:
            m = self._empty_block.match(buf)
            if m and (m.end() < len(buf) or final):
                self._buf = buf[m.end() :]
            elif not final and self._could_be_empty_block(buf):
                return False
            self._state = _State.CONTENT
            return True
        if state is _State.LOOK_OPEN:
            stripped = buf.lstrip()
            if stripped.startswith(self._open):
                self._buf = stripped[len(self._open) :]
                self._state = _State.THINK_WS
            elif self._open.startswith(stripped) and not final:
                return False
            else:
                # No think block: the output is all content, its leading whitespace included.
                self._state = _State.CONTENT
            return True
        if state in (_State.THINK_WS, _State.AFTER_THINK_WS, _State.REOPEN):
            self._buf = buf.lstrip()
            if not self._buf:
                return False
            if state is _State.REOPEN:
                if self._buf.startswith(self._open):
                    self._buf = self._buf[len(self._open) :]
                    self._state = _State.THINK_WS
                    return True
                if self._open.startswith(self._buf) and not final:
                    return False
            self._state = _State.CONTENT if state is _State.AFTER_THINK_WS else _State.THINK
            return True
        if state is _State.THINK:
            end = buf.find(self._close)
            if end >= 0:
                out.thinking += buf[:end]
                self._buf = buf[end + len(self._close) :]
                self._state = _State.AFTER_THINK_WS
                return True
            keep = 0 if final else _held(buf, self._close)
            out.thinking += buf[: len(buf) - keep]
            self._buf = buf[len(buf) - keep :]
            return False
        if state is _State.TOOL:
            end = buf.find(TOOL_CLOSE)
            if end < 0:
                if final:
                    out.content += TOOL_OPEN + buf
                    self._buf = ""
                return False
            call = _parse_tool_call(buf[:end])
            if call is None:
                out.content += TOOL_OPEN + buf[: end + len(TOOL_CLOSE)]
            else:
                out.tool_calls.append(call)
                self._after_tool = True
            self._buf = buf[end + len(TOOL_CLOSE) :]
            self._state = _State.CONTENT
            return True
        return self._content(out, final)

    def _content(self, out: Delta, final: bool) -> bool:
        buf = self._buf
        if not self._tools:
            out.content += buf
            self._buf = ""
            return False
        if self._after_tool:
            stripped = buf.lstrip()
            if stripped.startswith(TOOL_OPEN) or (final and not stripped):
                buf = stripped
            elif TOOL_OPEN.startswith(stripped) and not final:
                return False
            self._after_tool = False
        start = buf.find(TOOL_OPEN)
        if start >= 0:
            out.content += buf[:start]
            self._buf = buf[start + len(TOOL_OPEN) :]
            self._state = _State.TOOL
            return True
        keep = 0 if final else _held(buf, TOOL_OPEN)
        out.content += buf[: len(buf) - keep]
        self._buf = buf[len(buf) - keep :]
        return False

    def _could_be_empty_block(self, buf: str) -> bool:
        """Whether ``buf`` is a prefix of whitespace, open tag, whitespace, close tag, whitespace."""
        rest = buf.lstrip()
        if len(rest) <= len(self._open):
            return self._open.startswith(rest)
        if not rest.startswith(self._open):
            return False
        rest = rest[len(self._open) :].lstrip()
        return self._close.startswith(rest[: len(self._close)]) and (
            len(rest) <= len(self._close) or not rest[len(self._close) :].strip()
        )
