"""Output parsers for the model families whose tool calls are not one JSON object: one parser per
family, chosen from the chat template by ``parser_for`` (the families are ``model_families``'s).

A family parser sees only the content: the reasoning splitter (``OutputParser`` without tools)
runs first and hands it what is not thinking (``Composed``). gpt-oss's harmony format is the
exception: its channels are the reasoning, so its parser splits both at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Protocol

from ..model_families import LEADING_THINK_PARSERS, parser_family, preserve_tool_tag
from .call_syntaxes import MARKED_PARSERS, call, schema_types, typed_tool_value
from .glimmer import Glimmer
from .marked import Marked
from .parsers import (
    BufferedParser,
    Delta,
    OutputParser,
    TemplateTag,
    ToolFormat,
    hold_back,
    prompt_opens_thinking,
    tool_format_for_template,
)


class StreamParser(Protocol):
    def feed(self, text: str) -> Delta: ...

    def finish(self) -> Delta: ...


Call = dict[str, Any]
# Parses the text between a family's opening and closing marks into calls; None when it is not one.
BlockParser = Callable[[str, dict[str, dict[str, Any]]], list[Call] | None]


def _typed(value: str, schema: dict[str, Any] | None) -> Any:
    """A parameter written as text, typed by the tool's schema as Ollama's ``parseValue`` types it
    (Qwen3-Coder's, GLM's, Laguna's): one newline trimmed from each end, then ``typed_tool_value``."""
    return typed_tool_value(value.removeprefix("\n").removesuffix("\n"), schema_types(schema))


def _properties(tools: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    parameters = (tools.get(name) or {}).get("parameters") or {}
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    return properties if isinstance(properties, dict) else {}


_QWEN_FUNCTION = re.compile(r"<function=([^>\n]+)>(.*?)(?:</function>|\Z)", re.DOTALL)
_QWEN_PARAMETER = re.compile(r"<parameter=([^>\n]+)>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.DOTALL)


def parse_qwen3_coder(block: str, tools: dict[str, dict[str, Any]]) -> list[Call] | None:
    """``<function=NAME><parameter=KEY>\\nVALUE\\n</parameter></function>``, one or more."""
    calls = []
    for function in _QWEN_FUNCTION.finditer(block):
        name = function.group(1).strip()
        properties = _properties(tools, name)
        arguments = {
            key.strip(): _typed(value, properties.get(key.strip()))
            for key, value in _QWEN_PARAMETER.findall(function.group(2))
        }
        calls.append(call(name, arguments))
    return calls or None


# GLM's argument tags, in the order a call cycles through them (``repairGLM46XML``'s ``tagCycle``).
_GLM_TAGS = ("<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>")
_GLM_TAG = re.compile("|".join(map(re.escape, _GLM_TAGS)))
_GLM_CLOSE = "</tool_call>"


def _glm_xml(block: str) -> tuple[str, list[str], list[str]] | None:
    """The call's name, keys and values as Go's ``xml.Unmarshal`` reads GLM's block into
    ``GLMToolCallXML`` (``escapeGLM46Content`` leaves only the argument tags as markup): the text
    outside the tags, and each key's and value's own text, in order (an element inside another is
    skipped, as Go skips it); None where the tags do not nest."""
    outside: list[str] = []
    inside: list[str] = []
    fields: dict[str, list[str]] = {"</arg_key>": [], "</arg_value>": []}
    open_tags: list[str] = []
    pos = 0
    for mark in _GLM_TAG.finditer(block):
        text, tag, pos = block[pos : mark.start()], mark.group(), mark.end()
        if not open_tags:
            outside.append(text)
        elif len(open_tags) == 1:
            inside.append(text)
        if tag not in fields:
            if not open_tags:
                inside = []
            open_tags.append(tag)
        elif not open_tags or open_tags.pop() != tag.replace("/", ""):
            return None
        elif not open_tags:
            fields[tag].append("".join(inside))
    if open_tags:
        return None
    return "".join(outside) + block[pos:], fields["</arg_key>"], fields["</arg_value>"]


def _repair_glm(text: str) -> str:
    """Ollama's ``repairGLM46XML``: the block with the argument tags GLM left out put back, following
    their cycle (key open, key close, value open, value close) from the first tag found."""
    first = _GLM_TAG.search(text)
    if first is None:
        return text
    prefix, text = text[: first.start()], text[first.start() :]
    out, phase = [prefix], 0
    # The first tag is not ``<arg_key>``: the text before it may hold the name and the key, split
    # at its first space (a function's name holds none).
    space = next((i for i, c in enumerate(prefix) if c.isspace()), -1)
    if first.group() != _GLM_TAGS[0] and space >= 0:
        out, phase = [prefix[:space], _GLM_TAGS[0], prefix[space:].lstrip()], 1
    while text:
        found = _GLM_TAG.search(text)
        expected = _GLM_TAGS[phase]
        opening = phase % 2 == 0
        if found is None:
            if not opening:  # the text is the open element's: close it
                out += [text, expected]
                phase = (phase + 1) % 4
            break
        at, tag = found.start(), _GLM_TAGS.index(found.group())
        if tag == phase:
            out += [text[:at], expected]
            text = text[at + len(expected) :]
            phase = (phase + 1) % 4
        elif opening and at > 0:  # text where an opening tag belongs: the tag was left out
            out += [expected, text[:at]]
            text = text[at:]
            phase = (phase + 1) % 4
        else:  # another tag: put back those between, the text before it going to the last element
            while phase != tag:
                if phase % 2 and (phase + 1) % 4 == tag and at > 0:
                    out.append(text[:at])
                    text, at = text[at:], 0
                out.append(_GLM_TAGS[phase])
                phase = (phase + 1) % 4
    out += _GLM_TAGS[phase:] if phase else ()  # close the pair left open
    return "".join(out)


def parse_glm(block: str, tools: dict[str, dict[str, Any]]) -> list[Call] | None:
    """GLM-4.5/4.6: ``NAME\\n<arg_key>K</arg_key>\\n<arg_value>V</arg_value>...``, its tags repaired
    where they do not nest (Ollama's ``parseGLM46ToolCall``); or a JSON call object,
    ``{"name": ..., "arguments": {...}}``, which Laguna also writes in the block."""
    if block.lstrip().startswith("{"):
        return _json_call(block)
    read = _glm_xml(block)
    if read is None:
        read = _glm_xml(_repair_glm(block))
    if read is None:
        return None
    name, keys, values = read
    name = name.strip()
    if not name or "\n" in name or len(keys) != len(values):
        return None
    properties = _properties(tools, name)
    return [call(name, {k.strip(): _typed(v, properties.get(k.strip())) for k, v in zip(keys, values, strict=True)})]


def parse_glm_unclosed(block: str, tools: dict[str, dict[str, Any]]) -> list[Call] | None:
    """A GLM call the output ended inside, as Ollama's ``finalizeToolCall`` takes it: only its
    closing tag may be missing (a partial one dropped), never repaired, and only for a declared tool
    given every required argument, so that a call cut short is no call (``validateFinalGLM46ToolCall``)."""
    if block.lstrip().startswith("{"):
        return _json_call(block)
    ready, held = hold_back(block, _GLM_CLOSE, final=False)
    raw = ready.rstrip() if held else block
    read = _glm_xml(raw)
    if read is None:
        return None
    name, keys, _ = read
    spec = tools.get(name.strip())
    parameters = (spec or {}).get("parameters") or {}
    required = parameters.get("required") if isinstance(parameters, dict) else None
    named = {k.strip() for k in keys}
    if spec is None or "" in named or not named.issuperset(required if isinstance(required, list) else []):
        return None
    return parse_glm(raw, tools)


def _json_call(block: str) -> list[Call] | None:
    """One call as a JSON object ``{"name": NAME, "arguments": {...}}`` (no arguments: none)."""
    try:
        decoded = json.loads(block)
    except ValueError:
        return None
    if not isinstance(decoded, dict) or not isinstance(decoded.get("name"), str):
        return None
    arguments = decoded.get("arguments") or {}
    return [call(decoded["name"], arguments)] if isinstance(arguments, dict) else None


_DS_CALL_BEGIN = "<｜tool▁call▁begin｜>"
_DS_CALL_END = "<｜tool▁call▁end｜>"
_DS_SEP = "<｜tool▁sep｜>"
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def parse_deepseek(block: str, tools: dict[str, dict[str, Any]]) -> list[Call] | None:
    """DeepSeek-V3/R1 (``function<sep>NAME\\n```json\\n{...}\\n```) and V3.1 (``NAME<sep>{...}``)."""
    calls = []
    for part in block.split(_DS_CALL_BEGIN)[1:]:
        part = part.split(_DS_CALL_END)[0]
        head, sep, body = part.partition(_DS_SEP)
        if not sep:
            return None
        if head.strip() == "function":  # V3/R1: the name is the body's first line
            name, _, body = body.partition("\n")
        else:
            name = head
        fenced = _FENCE.match(body)
        try:
            arguments = json.loads(fenced.group(1) if fenced else body)
        except ValueError:
            return None
        if not isinstance(arguments, dict):
            return None
        calls.append(call(name.strip(), arguments))
    return calls or None


class BlockTools(BufferedParser):
    """Content in which calls stand between an opening and a closing mark: text outside them
    streams at once (only an end that may begin the opening mark waits), a block is parsed when it
    closes, or at the end (by ``parse_unclosed`` where given), and stays content when it does not parse."""

    def __init__(
        self,
        open_mark: str,
        close_mark: str,
        parse: BlockParser,
        tools: dict[str, dict[str, Any]],
        parse_unclosed: BlockParser | None = None,
    ):
        self._open, self._close, self._parse, self._tools = open_mark, close_mark, parse, tools
        self._parse_unclosed = parse_unclosed or parse
        self._buf = ""
        self._in_block = False
        self._after_call = False
        # Where the open block's search for its closing mark resumes: a feed runs once per token,
        # and a long call's block must not be searched from its start every time.
        self._searched = 0

    def _drain(self, *, final: bool) -> Delta:
        out = Delta()
        while True:
            if self._in_block:
                end = self._buf.find(self._close, self._searched)
                if end < 0 and not final:
                    self._searched = max(0, len(self._buf) - len(self._close) + 1)
                    return out
                self._searched = 0
                block = self._buf if end < 0 else self._buf[:end]
                calls = (self._parse_unclosed if end < 0 else self._parse)(block, self._tools)
                if calls is None:
                    out.content += self._open + block + ("" if end < 0 else self._close)
                else:
                    out.tool_calls += calls
                    self._after_call = True
                self._buf = "" if end < 0 else self._buf[end + len(self._close) :]
                self._in_block = False
                continue
            if self._after_call:  # whitespace between calls, or after the last, is no content
                stripped = self._buf.lstrip()
                if not stripped:
                    if final:
                        self._buf = ""
                    return out
                self._buf, self._after_call = stripped, False
            start = self._buf.find(self._open)
            if start >= 0:
                out.content += self._buf[:start]
                self._buf = self._buf[start + len(self._open) :]
                self._in_block = True
                continue
            ready, self._buf = hold_back(self._buf, self._open, final=final)
            out.content += ready
            return out


# The block parser of each family whose output parser is "blocks" (``model_families``).
_BLOCK_PARSERS: dict[str, BlockParser] = {
    "qwen3-coder": parse_qwen3_coder,
    "glm": parse_glm,
    "deepseek": parse_deepseek,
}
# Those that read a block the output ended inside their own way.
_UNCLOSED_BLOCK_PARSERS: dict[str, BlockParser] = {"glm": parse_glm_unclosed}
# Ollama's parsers that end the thinking where a call opens, for a model that leaves out
# ``</think>`` before it (Qwen35Parser.eat, Qwen3Parser.eat, Qwen3VLParser.eat,
# Nemotron3NanoParser.Add, LagunaParser.consumeThinking): the tag stays for the tool parser.
_CALL_ENDS_THINKING = frozenset(
    {
        "qwen3.5",
        "ornith",
        "nemotron-3-nano",
        "nemotron-3.5-nano",
        "qwen3-thinking",
        "qwen3-vl-thinking",
        "laguna",
        "poolside-v1",
    }
)


class Composed:
    """The reasoning splitter first, then a family's tool parser on the content it lets through."""

    def __init__(self, reasoning: OutputParser, tools: StreamParser):
        self._reasoning, self._tools = reasoning, tools

    def _through(self, delta: Delta, final: bool) -> Delta:
        out = Delta(thinking=delta.thinking)
        if delta.content:
            out.add(self._tools.feed(delta.content))
        if final:
            out.add(self._tools.finish())
        return out

    def feed(self, text: str) -> Delta:
        return self._through(self._reasoning.feed(text), False)

    def finish(self) -> Delta:
        return self._through(self._reasoning.finish(), True)


_HARMONY_MARKS = ("<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|call|>", "<|return|>", "<|constrain|>")
# gpt-oss's built-in tools, which keep their names (``FunctionNameMap.ConvertAndAdd``).
_HARMONY_BUILTINS = frozenset({"browser.open", "browser.search", "browser.find", "python"})


def _harmony_identifier(name: str) -> str:
    """``name`` as a TypeScript identifier (Ollama's ``convertToValidChars``): a space, ``-`` or
    ``.`` as ``_``, anything but a letter, a digit (Go's ``unicode.IsLetter``/``IsDigit``: Python's
    ``isalpha``/``isdecimal``), ``_`` or ``$`` dropped; ``unnamed`` if nothing is left, ``_``
    before a leading digit (Go looks at the first byte: an ASCII one)."""
    kept = "".join("_" if c in " -." else c for c in name if c in " -.$_" or c.isalpha() or c.isdecimal())
    if not kept:
        return "unnamed"
    return "_" + kept if kept[0] in "0123456789" else kept


def harmony_names(names: list[str]) -> list[str]:
    """A request's tool names as gpt-oss is shown them, in order (Ollama's
    ``HarmonyMessageHandler.Init``): each an identifier (``_harmony_identifier``) no earlier one
    took, else numbered on from ``_2`` (``deriveName``); the built-in tools keep theirs, an empty
    name stays empty."""
    taken: set[str] = set()
    shown = []
    for name in names:
        if name and name not in _HARMONY_BUILTINS:
            base = candidate = _harmony_identifier(name)
            count = 2
            while candidate in taken:
                candidate, count = f"{base}_{count}", count + 1
            name = candidate
        taken.add(name)
        shown.append(name)
    return shown


def _tool_name(tool: dict[str, Any]) -> str:
    function = tool.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else ""


def harmony_tools(tools: list[dict[str, Any]], shown: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The request's tools as gpt-oss's prompt shows them, named by ``harmony_names`` (Ollama
    renders the tools its ``HarmonyMessageHandler.Init`` returns; the history's calls keep their names).
    ``shown``: the whole list the prompt shows, where ``tools`` are some of them (a forced choice's):
    each is named as it is there, since names that collide are numbered by their order in it."""
    names = [_tool_name(t) for t in tools]
    if shown is None:
        given = harmony_names(names)
    else:
        among = [_tool_name(t) for t in shown]
        as_shown: dict[str, str] = {}
        for name, shown_as in zip(among, harmony_names(among), strict=True):
            as_shown.setdefault(name, shown_as)
        given = [as_shown.get(name, name) for name in names]
    return [
        tool if shown_as == name else {**tool, "function": {**tool["function"], "name": shown_as}}
        for tool, name, shown_as in zip(tools, names, given, strict=True)
    ]


def harmony_in_use(template: str | None, parser: str | None) -> bool:
    """Whether gpt-oss's harmony parser reads a model's output (as ``parser_for`` picks it): its
    prompt then shows the tools renamed (``harmony_tools``)."""
    family = None if parser == PASSTHROUGH else parser_family(template, parser)
    return family is not None and family.parser == "harmony"


def _recipient_pattern(names: list[str]) -> re.Pattern[str]:
    """A header's ``to=`` and recipient, ``functions.`` left out (Ollama trims it): up to the first
    space or mark, as Ollama's ``parseHeader`` splits the header, but a requested tool's own name
    whole though it holds a space (a forced call's grammar writes it so)."""
    known = "".join(rf"{re.escape(n)}(?=[\s<]|\Z)|" for n in sorted(filter(None, names), key=len, reverse=True))
    return re.compile(rf"to=(?:functions\.)?({known}[^\s<]+)")


class Harmony(BufferedParser):
    """gpt-oss's harmony messages: ``<|channel|>analysis<|message|>…<|end|>`` is thinking,
    ``final`` the content, ``commentary to=functions.NAME … <|message|>{json}<|call|>`` a call.

    Output that starts with no header is content. A header is held until its ``<|message|>``. A
    call's name is the requested tool's own, which the prompt showed renamed (``harmony_tools``;
    Ollama's ``FunctionNameMap.OriginalFromConverted``; a name it did not show stays as written).
    """

    def __init__(self, *, thinking: bool, tools: list[dict[str, Any]] | None):
        names = [_tool_name(t) for t in tools or []]
        self._thinking, self._tools = thinking, bool(tools)
        self._own = dict(zip(harmony_names(names), names, strict=True))
        self._recipient_at = _recipient_pattern(names)
        self._buf = ""
        self._header: str | None = ""  # None: inside a message body
        self._channel = ""
        self._recipient: str | None = None
        self._body = ""  # a call's arguments, gathered
        self._started = False

    def _emit(self, out: Delta, text: str) -> None:
        if self._recipient is not None:
            self._body += text
        elif self._channel == "analysis":
            if self._thinking:
                out.thinking += text
        else:
            out.content += text

    def _end_message(self, out: Delta) -> None:
        if self._recipient is not None:
            name = self._own.get(self._recipient, self._recipient)
            try:
                arguments = json.loads(self._body) if self._body.strip() else {}
            except ValueError:
                arguments = None
            if isinstance(arguments, dict) and self._tools:
                out.tool_calls.append(call(name, arguments))
            else:
                out.content += self._body
        self._header, self._channel, self._recipient, self._body = "", "", None, ""

    def _drain(self, *, final: bool) -> Delta:
        out = Delta()
        while True:
            buf = self._buf
            if self._header is not None:  # reading a header, up to <|message|>
                if not self._started:
                    stripped = buf.lstrip()
                    if stripped and not any(
                        m.startswith(stripped[:11]) or stripped.startswith(m) for m in _HARMONY_MARKS
                    ):
                        # No header at all: plain content.
                        self._header, self._channel = None, "final"
                        continue
                end = buf.find("<|message|>")
                if end < 0:
                    if final:
                        if buf.strip() and not buf.lstrip().startswith("<|"):
                            out.content += buf
                        self._buf = ""
                        return out
                    return out
                self._started = True
                header = buf[:end]
                channel = re.search(r"<\|channel\|>\s*(\w+)", header)
                self._channel = channel.group(1) if channel else "final"
                recipient = self._recipient_at.search(header)
                self._recipient = recipient.group(1) if recipient else None
                self._header = None
                self._buf = buf[end + len("<|message|>") :]
                continue
            cut = min(
                (i for i in (buf.find(m) for m in ("<|end|>", "<|call|>", "<|return|>", "<|start|>")) if i >= 0),
                default=-1,
            )
            if cut >= 0:
                self._emit(out, buf[:cut])
                rest = buf[cut:]
                mark = rest[: rest.index("|>") + 2]
                self._buf = rest if mark == "<|start|>" else rest[len(mark) :]
                self._end_message(out)
                self._started = True
                continue
            ready, self._buf = hold_back(buf, *_HARMONY_MARKS, final=final)
            self._emit(out, ready)
            if final:
                self._end_message(out)
            return out


# Ollama's parser that leaves the output as the model wrote it (``PassthroughParser``).
PASSTHROUGH = "passthrough"


class Passthrough:
    """Everything content, as written: no thinking split off, no calls (a Modelfile's ``PARSER
    passthrough``, which grants neither tools nor thinking)."""

    def feed(self, text: str) -> Delta:
        return Delta(content=text)

    def finish(self) -> Delta:
        return Delta()


def thinking_close(template: str | None, parser: str | None) -> str | None:
    """The tag that ends the thinking in the output of a model whose chat template is ``template``
    (and config's ``parser``), as ``parser_for`` reads it: what a format is held after, so that the
    model thinks first (Ollama's ChatHandler applies a format once the thinking ends). None where
    the end is no one tag (harmony's channels, glimmer's) or the output is not read."""
    if parser == PASSTHROUGH or harmony_in_use(template, parser):
        return None
    family = parser_family(template, parser)
    if family is not None and family.parser == "glimmer":
        return None
    if family is not None and family.parser == "marked":
        return family.think_tags[1] or None
    return "</think>"


def parser_for(
    template: str | None,
    *,
    thinking: bool,
    tools: list[dict[str, Any]] | None,
    prompt: str = "",
    parser: str | None = None,
) -> StreamParser:
    """The output parser for a model whose chat template is ``template`` (and whose config names
    Ollama's ``parser``, which decides where cllm knows it), for one request."""
    specs = {
        f["name"]: f for t in tools or [] if isinstance(f := t.get("function"), dict) and isinstance(f.get("name"), str)
    }
    if parser == PASSTHROUGH:
        return Passthrough()
    if harmony_in_use(template, parser):
        return Harmony(thinking=thinking, tools=tools)
    family = parser_family(template, parser)
    if family is not None and family.parser == "glimmer":
        return Glimmer(specs if tools else None, thinking=thinking)
    if family is not None and family.parser == "marked":
        think_open = family.think_tags[0]
        opened = bool(think_open) and prompt_opens_thinking(prompt, think_open, family.think_prefix)
        parse = MARKED_PARSERS[family.name]
        return Marked(family, parse, specs if tools else None, thinking=thinking, start_in_thinking=opened)
    start_in_thinking = thinking and prompt_opens_thinking(prompt)
    splits = thinking or parser in LEADING_THINK_PARSERS
    # Without tools no call is read: one written in the thinking stays thinking, not raw content.
    call_ends = ToolFormat.HERMES.tag if parser in _CALL_ENDS_THINKING and tools else ""
    reasoning = OutputParser(
        thinking=splits, tools=False, start_in_thinking=start_in_thinking, call_ends_thinking=call_ends
    )
    if not tools:
        return reasoning
    tool_parser: StreamParser
    if family is None:
        tool_format = tool_format_for_template(template)
        if isinstance(tool_format, TemplateTag):
            preserve_tool_tag(tool_format.written)
        tool_parser = OutputParser(
            thinking=False, tools=True, tool_format=tool_format, tool_names=frozenset(specs), reasoning=False
        )
    else:
        parse, parse_unclosed = _BLOCK_PARSERS[family.name], _UNCLOSED_BLOCK_PARSERS.get(family.name)
        tool_parser = BlockTools(*family.tool_block, parse, specs, parse_unclosed)
    return Composed(reasoning, tool_parser)
