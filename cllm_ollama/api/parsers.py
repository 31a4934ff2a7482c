"""Streaming split of generated text into Ollama's ``thinking``, ``content`` and ``tool_calls``.

Only what may still turn out to be a tag or a tool call is held back; everything else is emitted
as soon as it arrives.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field
from typing import Any


class ToolFormat(enum.Enum):
    """How a model family writes tool calls; ``tool_format_for_template`` picks one.

    ``tag`` opens a call: anywhere in the content when ``anywhere``, else only where a run of calls
    may begin (the content's start, right after a call). ``end_tag`` closes it; without one the call
    ends with its JSON. ``bare``: where a run may begin, a call may also be this bracket with no tag
    (Llama's bare JSON; Mistral's when the tokenizer drops the control-token tag). ``separator``:
    what may stand between calls besides whitespace. The JSON is a call object or a list of them.
    """

    HERMES = ("<tool_call>", "</tool_call>", True, "", "")
    LLAMA = ("<|python_tag|>", "", False, "{", ";")
    MISTRAL = ("[TOOL_CALLS]", "", True, "[", "")

    def __init__(self, tag: str, end_tag: str, anywhere: bool, bare: str, separator: str) -> None:
        self.tag = tag
        self.end_tag = end_tag
        self.anywhere = anywhere
        self.bare = bare
        self.separator = separator


# Llama 3.1-3.3's templates: the ipython environment line, the tag, the instruction for bare JSON.
_LLAMA_MARKS = ("<|python_tag|>", "Environment: ipython", '"parameters": dictionary')


def tool_format_for_template(template: str | None) -> ToolFormat:
    """The tool-call syntax a chat template (GGUF ``tokenizer.chat_template``) teaches its model.

    Hermes first: Hermes templates for Llama models also carry Llama's marks. A bare ``"parameters"``
    is no mark: templates of other syntaxes (Cohere, GigaChat) write tool schemas with it. Templates
    that name no syntax (SmolLM2, ChatML) get Hermes, the most common one for models tuned on their own.
    """
    if not template or "<tool_call>" in template:
        return ToolFormat.HERMES
    if "[TOOL_CALLS]" in template:
        return ToolFormat.MISTRAL
    if any(mark in template for mark in _LLAMA_MARKS):
        return ToolFormat.LLAMA
    return ToolFormat.HERMES


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
    LOOK_CALL = enum.auto()  # a run of calls may begin or go on here: hold separators until known
    TAGGED = enum.auto()  # inside a call's tags, waiting for the closing one
    JSON = enum.auto()  # inside a call that ends with its JSON


_SPACE = re.compile(r"\s*")
# A JSON string (or the open rest of one) or a bracket: strings are skipped whole, so brackets in them do not count.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)
# How a call object, or a list of them, can begin; \Z lets a start that is still too short through.
_CALLS_HEAD = re.compile(r'(?:\[\s*)?\{\s*(?:"|\Z)|\[\s*\Z')


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


def _json_end(text: str) -> int | None:
    """Index just past the bracket closing the one ``text`` starts with; None while it is open."""
    depth = 0
    for m in _JSON_TOKEN.finditer(text):
        token = m.group()
        if token in ("{", "["):
            depth += 1
        elif token in ("}", "]"):
            depth -= 1
            if depth == 0:
                return m.end()
    return None


def _tool_call(call: Any) -> dict[str, Any] | None:
    """``{"name": ..., "arguments"|"parameters": {...}}`` as Ollama's call; None when it is not one."""
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


def _parse_calls(body: str) -> list[dict[str, Any]] | None:
    """One call object or a non-empty list of them; None when any of it is not a call."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    calls = []
    for item in value if isinstance(value, list) else [value]:
        call = _tool_call(item)
        if call is None:
            return None
        calls.append(call)
    return calls or None


class OutputParser:
    """Splits one request's output stream; feed it text in any chunking, then call ``finish``.

    ``thinking``: route ``<think>…</think>`` to ``thinking`` (off: tags stay in the content, but a
    leading empty block, what Qwen3 emits when told not to think, is dropped). ``tools``: turn calls
    written in ``tool_format`` into tool calls; one that does not parse stays content.
    ``start_in_thinking``: the prompt already opened the think block (see ``prompt_opens_thinking``).
    """

    def __init__(
        self,
        *,
        thinking: bool,
        tools: bool,
        think_open: str = "<think>",
        think_close: str = "</think>",
        start_in_thinking: bool = False,
        tool_format: ToolFormat = ToolFormat.HERMES,
    ) -> None:
        self._tools = tools
        self._open = think_open
        self._close = think_close
        self._empty_block = re.compile(rf"\s*{re.escape(think_open)}\s*{re.escape(think_close)}\s*")
        self._format = tool_format
        sep = re.escape(tool_format.separator)
        self._between = re.compile(rf"(?:\s|{sep})*") if sep else _SPACE
        # Formats whose calls may open the content untagged look there before anything is emitted.
        self._content_start = _State.LOOK_CALL if tools and tool_format.bare else _State.CONTENT
        if not thinking:
            self._state = _State.EMPTY_BLOCK
        elif start_in_thinking:
            self._state = _State.REOPEN
        else:
            self._state = _State.LOOK_OPEN
        self._buf = ""
        # In LOOK_CALL: whether a call came just before (else it is the content's start).
        self._after_tool = False
        # What opened the current call (separators, tag): content again if the call does not parse.
        self._lead = ""

    def feed(self, text: str) -> Delta:
        self._buf += text
        return self._drain(final=False)

    def finish(self) -> Delta:
        """Flush what was held back: a partial tag or call that never completed is plain text after all."""
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
            self._state = self._content_start
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
                self._state = self._content_start
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
            self._state = self._content_start if state is _State.AFTER_THINK_WS else _State.THINK
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
        if state is _State.LOOK_CALL:
            return self._look_call(final)
        if state is _State.TAGGED:
            end_tag = self._format.end_tag
            end = buf.find(end_tag)
            if end < 0:
                if final:
                    out.content += self._lead + buf
                    self._buf = ""
                return False
            self._end_call(out, buf[:end], end + len(end_tag))
            return True
        if state is _State.JSON:
            return self._json_call(out, final)
        return self._content(out, final)

    def _look_call(self, final: bool) -> bool:
        """Where a run of calls may begin or go on: is a call next, or content?"""
        buf = self._buf
        fmt = self._format
        skip = (self._between if self._after_tool else _SPACE).match(buf)
        assert skip is not None  # the patterns match the empty string
        rest = buf[skip.end() :]
        if fmt.tag and rest.startswith(fmt.tag):
            self._open_call(buf[: skip.end() + len(fmt.tag)], rest[len(fmt.tag) :])
        elif not final and (fmt.tag.startswith(rest) or fmt.bare.startswith(rest)):
            return False
        elif fmt.bare and rest.startswith(fmt.bare):
            self._open_call(buf[: skip.end()], rest)
        else:
            if final and not rest and self._after_tool:
                self._buf = ""  # what trails the last call
            self._state = _State.CONTENT
        self._after_tool = False
        return True

    def _open_call(self, lead: str, rest: str) -> None:
        self._lead = lead
        self._buf = rest
        self._state = _State.TAGGED if self._format.end_tag else _State.JSON

    def _json_call(self, out: Delta, final: bool) -> bool:
        """A call that ends with its JSON: release the text as soon as it cannot be one."""
        buf = self._buf
        body = buf.lstrip()
        if not _CALLS_HEAD.match(body):
            if body or final:
                out.content += self._lead
                self._state = _State.CONTENT
                return True
            return False
        end = _json_end(body)
        if end is None:
            if final:
                out.content += self._lead + buf
                self._buf = ""
            return False
        self._end_call(out, body[:end], len(buf) - len(body) + end)
        return True

    def _end_call(self, out: Delta, body: str, consumed: int) -> None:
        """Emit the call whose JSON is ``body`` (content if it is none) and move past its text."""
        calls = _parse_calls(body)
        if calls is None:
            out.content += self._lead + self._buf[:consumed]
            self._state = _State.CONTENT
        else:
            out.tool_calls += calls
            self._after_tool = True
            self._state = _State.LOOK_CALL
        self._buf = self._buf[consumed:]

    def _content(self, out: Delta, final: bool) -> bool:
        buf = self._buf
        tag = self._format.tag
        if not (self._tools and self._format.anywhere):
            out.content += buf
            self._buf = ""
            return False
        start = buf.find(tag)
        if start >= 0:
            out.content += buf[:start]
            self._open_call(tag, buf[start + len(tag) :])
            return True
        keep = 0 if final else _held(buf, tag)
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
