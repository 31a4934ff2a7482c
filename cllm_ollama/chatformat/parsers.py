"""Streaming split of generated text into Ollama's ``thinking``, ``content`` and ``tool_calls``.

Only what may still turn out to be a tag or a tool call is held back; everything else is emitted
as soon as it arrives.
"""

from __future__ import annotations

import enum
import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..model_families import DEFAULT_TOOL_SYNTAX, taught_tool_syntax
from .call_syntaxes import call
from .gotemplate import TemplateError, parse
from .gotemplate.parser import Action, Branch, Field, Pipe, Text


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


@dataclass(frozen=True)
class TemplateTag:
    """Calls written as JSON after the tag a model's Go template writes before its calls
    (``template_tool_tag``), as Ollama's generic ``tools.Parser`` reads them: the tag opens calls
    anywhere in the content, a call object or a list of them after it. Its fields are
    ``ToolFormat``'s; ``written`` is the tag as the template writes it."""

    written: str
    tag: str
    bare: str = ""
    end_tag: str = ""
    separator: str = ""

    @property
    def anywhere(self) -> bool:
        return bool(self.tag)

    @classmethod
    def of(cls, written: str) -> TemplateTag:
        """``[``, the template's calls as a bare list, opens calls only where the content starts
        (``tools.Parser.Add``); the ``[`` that ends a tag (``[TOOL_CALL] [``) is the list's, left to the JSON."""
        if written == "[":
            return cls(written, "", bare="[")
        return cls(written, written[:-1].rstrip() if written.endswith("[") else written)


# How a model's calls are written: a family's syntax, or the tag its Go template teaches.
CallFormat = ToolFormat | TemplateTag


def _names_tool_calls(pipe: Pipe) -> bool:
    return any(isinstance(arg, Field) and "ToolCalls" in arg.idents for cmd in pipe.cmds for arg in cmd.args)


def _tool_calls_branch(nodes: list[Any]) -> Branch | None:
    """The first ``if`` on ``.ToolCalls``, searched depth first (Ollama's ``findToolCallNode``)."""
    for node in nodes:
        if not isinstance(node, Branch):
            continue
        if node.kind == "if" and _names_tool_calls(node.pipe):
            return node
        for body in (node.body, node.orelse or []):
            if (found := _tool_calls_branch(body)) is not None:
                return found
    return None


def _first_text(nodes: list[Any]) -> str | None:
    """The first text that is not all whitespace, stopping at the first action or past the first
    block (Ollama's ``findTextNode``: text after them follows the calls)."""
    for node in nodes:
        if isinstance(node, Text) and node.text.strip():
            return node.text
        if isinstance(node, Branch):
            return _first_text(node.body) or _first_text(node.orelse or [])
        if isinstance(node, Action):
            return None
    return None


@functools.lru_cache(maxsize=64)
def template_tool_tag(template: str | None) -> str | None:
    """The tag a Go template writes before its calls, as Ollama's ``parseTag`` reads it: the first
    text in its ``if .ToolCalls`` block, cut at its first ``{`` and trimmed; ``{`` where there is
    none (the calls are bare JSON). None where ``template`` is no Go template (a Jinja one)."""
    try:
        nodes = parse(template).nodes if template else []
    except TemplateError:
        return None
    branch = _tool_calls_branch(nodes)
    text = _first_text(branch.body) if branch is not None else None
    # str.strip is Go's TrimSpace but for U+001C-U+001F, which no tag holds.
    tag = (text or "").replace("\r\n", "\n").partition("{")[0].strip()
    return tag or "{"


def tool_format_for_template(template: str | None) -> CallFormat:
    """The tool-call syntax a chat template teaches its model: the family's whose marks it holds
    (``model_families.taught_tool_syntax``), else the tag its Go template writes before its calls
    (``template_tool_tag``), else Hermes (``model_families.tool_syntax`` says why). A Go template
    with no tag (its calls are bare JSON, Ollama's ``{`` tag) gets Hermes too: it reads the calls
    that open the content untagged as Ollama does."""
    taught = taught_tool_syntax(template)
    if taught is not None:
        return ToolFormat[taught]
    tag = template_tool_tag(template)
    if tag is None or tag == "{":
        return ToolFormat[DEFAULT_TOOL_SYNTAX]
    return TemplateTag.of(tag)


@dataclass
class Delta:
    """What one ``feed``/``finish`` produced; tool calls as ``{"function": {"name", "arguments"}}``."""

    content: str = ""
    thinking: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.content or self.thinking or self.tool_calls)

    def add(self, other: Delta) -> Delta:
        """Append ``other`` to this one (text joined, calls gathered); returns self."""
        self.content += other.content
        self.thinking += other.thinking
        self.tool_calls += other.tool_calls
        return self


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
# Where a JSON value may start: past JSON's whitespace.
_JSON_START = re.compile(r"[^ \t\n\r]")
# Outside JSON strings: what opens a string or counts as a bracket.
_JSON_MARK = re.compile(r'["\[\]{}]')
# Inside a JSON string: the rest of it up to its closing quote, escapes skipped whole (a final lone backslash stays).
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
# How a call object, or a list of them, can begin, written without whitespace; \Z lets a start that is still too
# short through.
_CALLS_HEAD = re.compile(r'\[?\{(?:"|\Z)|\[\Z')
# An untagged call's first key, complete, and its ``name`` value, whole or still open.
_FIRST_KEY = re.compile(r'\s*\[?\s*\{\s*"((?:[^"\\]|\\.)*)"', re.DOTALL)
_OPEN_KEY = re.compile(r'\s*\[?\s*\{\s*"((?:[^"\\]|\\.)*)\Z', re.DOTALL)
_NAME_VALUE = re.compile(r'\s*:\s*"((?:[^"\\]|\\.)*)("?)', re.DOTALL)
# The keys a call object may open with (``_tool_call`` reads name, arguments, parameters).
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "type", "id"})
# Past this many characters an untagged call's start is no longer looked at: it was decided by then.
_VERDICT_SPAN = 256


def bare_call_verdict(prefix: str, names: frozenset[str]) -> bool | None:
    """Whether untagged JSON that starts with ``prefix`` may still be a call: False as soon as it
    cannot (its first key is none of a call's, or its ``name`` is, or begins, no requested tool's),
    True once it may (it is then held until its JSON closes), None while its start is too short to say."""
    key = _FIRST_KEY.match(prefix)
    if key is None:
        partial = _OPEN_KEY.match(prefix)
        if partial is not None and not any(k.startswith(partial.group(1)) for k in _CALL_KEYS):
            return False
        return None if len(prefix) < _VERDICT_SPAN else True
    if key.group(1) not in _CALL_KEYS:
        return False
    if key.group(1) != "name" or not names:
        return True
    value = _NAME_VALUE.match(prefix, key.end())
    if value is None:
        return None if len(prefix) - key.end() < _VERDICT_SPAN else True
    try:
        name = json.loads(f'"{value.group(1)}"') if value.group(2) else value.group(1)
    except ValueError:
        return False
    if value.group(2):
        return name in names
    if len(prefix) >= _VERDICT_SPAN or "\\" in name:
        return True
    return None if any(n.startswith(name) for n in names) else False


def prompt_opens_thinking(prompt: str, think_open: str = "<think>", channel: str = "") -> bool:
    """Whether a rendered prompt ends inside a think block, so the output starts mid-thought.

    True for templates that emit the opening tag themselves (Qwen3-*-Thinking-2507, DeepSeek-R1),
    or the tag and the thinking's ``channel`` name: Gemma 4's after a tool result, where Ollama's
    ``Gemma4Parser.Init`` starts in thinking. Pass it as ``OutputParser(start_in_thinking=...)``.
    """
    return prompt.rstrip().endswith((think_open, (think_open + channel).rstrip()))


def _held(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that could still grow into ``tag``."""
    for n in range(min(len(text), len(tag) - 1), 0, -1):
        if tag.startswith(text[-n:]):
            return n
    return 0


def hold_back(text: str, *marks: str, final: bool) -> tuple[str, str]:
    """``text`` split into what can be emitted now and its longest end that could still grow into
    one of ``marks`` (a tag, a call's opening), which waits for more text; at the end (``final``)
    nothing waits. Every streaming parser holds back this way, and only this much."""
    if final:
        return text, ""
    keep = max((_held(text, mark) for mark in marks), default=0)
    return text[: len(text) - keep], text[len(text) - keep :]


@dataclass
class _JsonScan:
    """Where a call's JSON stands after the text so far, so that each feed scans only its own text.

    ``head``: the first (up to three) characters of the JSON that are not whitespace, all ``_CALLS_HEAD`` needs.
    ``depth``: open brackets outside strings. ``in_string``, ``escape``: inside a string, just past a backslash.
    """

    head: str = ""
    depth: int = 0
    in_string: bool = False
    escape: bool = False

    def end(self, text: str) -> int | None:
        """Index in ``text`` just past the bracket that closes the JSON's first one; None while it is open."""
        i = 0
        while i < len(text):
            if self.escape:
                self.escape = False
                i += 1
            elif self.in_string:
                m = _STRING_REST.match(text, i)
                assert m is not None  # the pattern matches the empty string
                i = m.end()
                if i == len(text):
                    return None
                if text[i] == '"':
                    self.in_string = False
                else:
                    self.escape = True  # a backslash that ends the text escapes the next text's first character
                i += 1
            else:
                m = _JSON_MARK.search(text, i)
                if m is None:
                    return None
                i = m.end()
                mark = m.group()
                if mark == '"':
                    self.in_string = True
                elif mark in "[{":
                    self.depth += 1
                else:
                    self.depth -= 1
                    if self.depth == 0:
                        return i
        return None


def _tool_call(item: Any) -> dict[str, Any] | None:
    """``{"name": ..., "arguments"|"parameters": {...}}`` as Ollama's call; None when it is not one."""
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        return None
    arguments = item.get("arguments", item.get("parameters", {}))
    if isinstance(arguments, str):
        # Some models double-encode the arguments as a JSON string.
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return call(item["name"], arguments)


def _parse_calls(body: str) -> list[dict[str, Any]] | None:
    """Call objects, or lists of them, one after another (Ollama's ``tools.Parser.Add`` reads every
    call that follows the tag); None when any of it is not a call."""
    decoder = json.JSONDecoder()
    calls = []
    pos = 0
    while (start := _JSON_START.search(body, pos)) is not None:
        try:
            value, pos = decoder.raw_decode(body, start.start())
        except ValueError:
            return None
        for item in value if isinstance(value, list) else [value]:
            parsed = _tool_call(item)
            if parsed is None:
                return None
            calls.append(parsed)
    return calls or None


class BufferedParser:
    """A stream parser that gathers fed text in ``_buf`` and drains what it can decide; at the
    end (``finish``) it decides the rest."""

    _buf: str = ""

    def feed(self, text: str) -> Delta:
        self._buf += text
        return self._drain(final=False)

    def finish(self) -> Delta:
        """Flush what was held back: a partial tag or call that never completed is plain text after all."""
        return self._drain(final=True)

    def _drain(self, *, final: bool) -> Delta:
        raise NotImplementedError


class OutputParser(BufferedParser):
    """Splits one request's output stream; feed it text in any chunking, then call ``finish``.

    ``thinking``: route ``<think>…</think>`` to ``thinking`` (off: tags stay in the content, but a
    leading empty block, what Qwen3 emits when told not to think, is dropped). ``tools``: turn calls
    written in ``tool_format`` into tool calls; one that does not parse stays content.
    ``start_in_thinking``: the prompt already opened the think block (see ``prompt_opens_thinking``).
    ``reasoning=False``: only the tool calls, for text the reasoning splitter (an instance with
    ``tools=False``) let through as content; ``families.parser_for`` composes the two.
    ``call_ends_thinking``: a call's opening tag that also ends the thinking, left in the content.

    ``feed`` runs once per token on the event loop, so its work is linear in the new text: what a state
    holds back and has already examined (a call's text, a run of whitespace) waits in ``_seen`` and is
    not looked at again; ``_buf`` keeps only the new text and a few characters that may begin a tag.
    """

    def __init__(
        self,
        *,
        thinking: bool,
        tools: bool,
        think_open: str = "<think>",
        think_close: str = "</think>",
        start_in_thinking: bool = False,
        tool_format: CallFormat = ToolFormat.HERMES,
        tool_names: frozenset[str] = frozenset(),
        reasoning: bool = True,
        call_ends_thinking: str = "",
    ) -> None:
        self._tools = tools
        self._open = think_open
        self._close = think_close
        self._call_ends = call_ends_thinking
        self._think_ends = tuple(tag for tag in (think_close, call_ends_thinking) if tag)
        self._format = tool_format
        self._names = tool_names
        # Calls written with no tag: the format's own bare opening, else (given the requested
        # tools' names) a bare JSON object, which small models write without the template's tags,
        # as Ollama's parser falls back to.
        self._bare = tool_format.bare or ("{" if tool_names else "")
        sep = re.escape(tool_format.separator)
        self._between = re.compile(rf"(?:\s|{sep})*") if sep else _SPACE
        # Formats whose calls may open the content untagged look there before anything is emitted.
        self._content_start = _State.LOOK_CALL if tools and self._bare else _State.CONTENT
        if not reasoning:  # a tool parser after the reasoning splitter: it sees only content
            self._state = self._content_start
        elif not thinking:
            self._state = _State.EMPTY_BLOCK
        elif start_in_thinking:
            self._state = _State.REOPEN
        else:
            self._state = _State.LOOK_OPEN
        self._buf = ""
        # Held back and already examined, in the order it came: it goes before ``_buf``.
        self._seen: list[str] = []
        # In EMPTY_BLOCK: how many of the block's two tags ``_seen`` holds.
        self._block_tags = 0
        # In LOOK_CALL: whether a call came just before (else it is the content's start).
        self._after_tool = False
        # What opened the current call (separators, tag): content again if the call does not parse.
        self._lead = ""
        self._tagged = True
        self._json = _JsonScan()
        # An untagged call's verdict (``bare_call_verdict``): None while its start is undecided.
        self._verdict: bool | None = True

    def _drain(self, *, final: bool) -> Delta:
        out = Delta()
        while self._step(out, final):
            pass
        return out

    def _take_seen(self) -> str:
        """What ``_seen`` held, joined once when its state is decided."""
        seen = "".join(self._seen)
        self._seen.clear()
        return seen

    def _step(self, out: Delta, final: bool) -> bool:
        """Consume what the current state can decide; True when the state changed and the loop goes on."""
        buf = self._buf
        state = self._state
        if state is _State.EMPTY_BLOCK:
            return self._empty_block(final)
        if state is _State.LOOK_OPEN:
            stripped = buf.lstrip()
            if stripped.startswith(self._open):
                self._seen.clear()
                self._buf = stripped[len(self._open) :]
                self._state = _State.THINK_WS
            elif self._open.startswith(stripped) and not final:
                if not stripped:
                    self._seen.append(buf)
                    self._buf = ""
                return False
            else:
                # No think block: the output is all content, its leading whitespace included.
                self._buf = self._take_seen() + buf
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
            return self._think(out, final)
        if state is _State.LOOK_CALL:
            return self._look_call(final)
        if state is _State.TAGGED:
            return self._tagged_call(out, final)
        if state is _State.JSON:
            return self._json_call(out, final)
        return self._content(out, final)

    def _think(self, out: Delta, final: bool) -> bool:
        """Thinking up to its closing tag, or up to a call's opening tag where one ends it (left in
        the text: the tool parser reads the call)."""
        buf = self._buf
        ends = [(at, tag) for tag in self._think_ends if (at := buf.find(tag)) >= 0]
        if ends:
            end, tag = min(ends)
            out.thinking += buf[:end]
            self._buf = buf[end:] if tag == self._call_ends else buf[end + len(tag) :]
            self._state = _State.AFTER_THINK_WS
            return True
        ready, self._buf = hold_back(buf, *self._think_ends, final=final)
        out.thinking += ready
        return False

    def _empty_block(self, final: bool) -> bool:
        """Thinking off: drop a leading empty think block with the whitespace around it, once it is complete.

        Tag by tag, so that what has matched waits in ``_seen`` and only the new text is examined again.
        """
        while True:
            buf = self._buf
            stripped = buf.lstrip()
            if self._block_tags == 2:
                if not stripped and not final:
                    self._seen.append(buf)
                    self._buf = ""
                    return False
                self._seen.clear()
                self._buf = stripped
                break
            tag = self._close if self._block_tags else self._open
            if stripped.startswith(tag):
                self._seen.append(buf[: len(buf) - len(stripped) + len(tag)])
                self._buf = stripped[len(tag) :]
                self._block_tags += 1
            elif tag.startswith(stripped) and not final:
                if not stripped:
                    self._seen.append(buf)
                    self._buf = ""
                return False
            else:
                self._buf = self._take_seen() + buf
                break
        self._state = self._content_start
        return True

    def _look_call(self, final: bool) -> bool:
        """Where a run of calls may begin or go on: is a call next, or content?"""
        buf = self._buf
        fmt = self._format
        bare = self._bare
        # The separators set aside in ``_seen`` matched whole, so matching goes on where they stop.
        skip = (self._between if self._after_tool else _SPACE).match(buf)
        assert skip is not None  # the patterns match the empty string
        rest = buf[skip.end() :]
        if fmt.tag and rest.startswith(fmt.tag):
            self._open_call(self._take_seen() + buf[: skip.end() + len(fmt.tag)], rest[len(fmt.tag) :])
        elif not final and (fmt.tag.startswith(rest) or bare.startswith(rest)):
            if not rest:
                self._seen.append(buf)
                self._buf = ""
            return False
        elif bare and rest.startswith(bare):
            self._open_call(self._take_seen() + buf[: skip.end()], rest, tagged=False)
        else:
            seen = self._take_seen()
            # What trails the last call goes; otherwise all of it is content.
            self._buf = "" if final and not rest and self._after_tool else seen + buf
            self._state = _State.CONTENT
        self._after_tool = False
        return True

    def _open_call(self, lead: str, rest: str, *, tagged: bool = True) -> None:
        self._lead = lead
        self._buf = rest
        self._json = _JsonScan()
        self._tagged = tagged
        self._verdict = None if not tagged else True
        self._state = _State.TAGGED if self._format.end_tag and tagged else _State.JSON

    def _tagged_call(self, out: Delta, final: bool) -> bool:
        """A call inside tags: wait for the closing one, keeping back only an end that may begin it.

        At the end none is needed (Ollama's ``tools.Parser`` reads a call once its JSON is whole):
        the call is read without it, a closing tag cut short dropped with it."""
        buf = self._buf
        end_tag = self._format.end_tag
        end = buf.find(end_tag)
        if end >= 0:
            self._seen.append(buf[:end])
            self._end_call(out, end_tag, buf[end + len(end_tag) :])
            return True
        if final:
            cut = len(buf) - _held(buf, end_tag)
            self._seen.append(buf[:cut])
            self._end_call(out, buf[cut:], "")
            return True
        ready, self._buf = hold_back(buf, end_tag, final=False)
        self._seen.append(ready)
        return False

    def _json_call(self, out: Delta, final: bool) -> bool:
        """A call that ends with its JSON: release the text as soon as it cannot be one."""
        text = self._buf
        self._buf = ""
        scan = self._json
        if not scan.head:
            stripped = text.lstrip()
            if not stripped and not final:
                self._seen.append(text)
                return False
            # The whitespace before the JSON goes with what opened the call: JSON allows no Unicode spaces.
            self._lead += self._take_seen() + text[: len(text) - len(stripped)]
            text = stripped
        if len(scan.head) < 3:
            scan.head = (scan.head + "".join(text.split()))[:3]
            if not _CALLS_HEAD.match(scan.head):
                out.content += self._lead
                self._buf = self._take_seen() + text
                self._state = _State.CONTENT
                return True
        if self._verdict is None:
            self._verdict = bare_call_verdict("".join(self._seen) + text, self._names)
            if self._verdict is False:  # it cannot be a call: what was held goes out at once
                out.content += self._lead
                self._buf = self._take_seen() + text
                self._state = _State.CONTENT
                return True
        end = scan.end(text)
        if end is None:
            self._seen.append(text)
            if final:
                out.content += self._lead + self._take_seen()
            return False
        self._seen.append(text[:end])
        self._end_call(out, "", text[end:])
        return True

    def _end_call(self, out: Delta, end_tag: str, rest: str) -> None:
        """Emit the call whose JSON ``_seen`` holds (content if it is none) and go on with ``rest``."""
        body = self._take_seen()
        calls = _parse_calls(body)
        # Untagged JSON is a call only when it names a requested tool.
        if calls and not self._tagged and self._names and any(c["function"]["name"] not in self._names for c in calls):
            calls = None
        if calls is None:
            out.content += self._lead + body + end_tag
            self._state = _State.CONTENT
        else:
            out.tool_calls += calls
            self._after_tool = True
            self._state = _State.LOOK_CALL
        self._buf = rest

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
        ready, self._buf = hold_back(buf, tag, final=final)
        out.content += ready
        return False
