"""Anthropic's Messages API (/v1/messages), as Ollama serves it: a chat underneath.

The request's system, content blocks (text, image, tool_use, tool_result, thinking, and the
server_tool_use and web_search_tool_result a history carries), tools and sampling fields become a
native chat body; the generation's chunks become Anthropic's content blocks, streamed as its typed
SSE events in its order. Errors are Anthropic's ``{"type": "error", "error": {"type", "message"}}``,
before and after the first byte.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import replace
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ...chatformat.gotemplate.values import as_decoded, go_json
from ...chatformat.parsers import Delta
from ...errors import InvalidRequest
from ..encoders import AnthropicSSE, dumps
from ..endpoint import Decoded, Endpoint
from ..errors import ANTHROPIC
from ..lifecycle import Chunk, Generation
from ..media import Media, checked_media
from ..ollama.chat import ChatCall, start_chat
from ..output_shapes import Usage, truncation
from ..resolve import resolve_model
from ..schemas.anthropic import ContentBlock, ImageSource, MessageParam, MessagesRequest
from ..schemas.go import decode_error
from ..schemas.ollama import ChatRequest
from ..services import services
from ..tool_calls import name_tool_results, random_id
from ..tool_choice import AUTO, ToolChoice, anthropic_tool_choice
from .errors import decode

_REQUEST = "MessagesRequest"
_EFFORTS = ("low", "medium", "high", "max")
# Claude Code's first system block, "x-anthropic-billing-header: cc_version=2.1.101.e51;
# cc_entrypoint=cli; cch=a5145;": the version's suffix hashes the first user message and ``cch``
# the whole body, so it differs between sessions and between requests. At the prompt's very
# start it would leave nothing to reuse. Its ``key=value;`` pairs (and the line's end) are
# dropped, as CLAUDE_CODE_ATTRIBUTION_HEADER=0 drops the block in the client; any text after
# them on the same line stays.
_BILLING_HEADER = re.compile(
    r"\Ax-anthropic-billing-header:(?:[ \t]*[\w.-]+=[^;\n]*;)*(?:[ \t]*[\w.-]+=[^;\n]*(?=\n|\Z))?[ \t]*\n?"
)


def _id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def without_billing_header(text: str) -> str:
    """``text`` without Claude Code's per-request billing header at its start (a no-op otherwise)."""
    return _BILLING_HEADER.sub("", text, count=1) if text.startswith("x-anthropic-billing-header:") else text


def _system(value: object) -> str:
    """A string, or text blocks joined (other blocks are skipped, as Ollama does), each without
    Claude Code's billing header; any other value is no system prompt."""
    if isinstance(value, str):
        return without_billing_header(value)
    if isinstance(value, list):
        return "".join(
            without_billing_header(b["text"])
            for b in value
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""  # another type is ignored, as Ollama's type switch ignores it


def _image(source: ImageSource | dict[str, Any] | None) -> Media:
    """An image block's data, decoded: its typed source, or a tool result's raw one (Go's ``any``)."""
    if isinstance(source, dict):
        kind, data = source.get("type"), source.get("data")
    elif source is not None:
        kind, data = source.type, source.data
    else:
        raise InvalidRequest("invalid image source")
    if kind != "base64":
        raise InvalidRequest(f"invalid image source type: {kind}. Only base64 images are supported.")
    return checked_media(data, not_a_string="invalid base64 image data", invalid="invalid base64 image data")


def _tool_result(content: object) -> tuple[str, list[Media]]:
    """A tool result's content, ``any`` in Go: a string, or blocks (what is no object is skipped)."""
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    images: list[Media] = []
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "image":
                source = block.get("source")
                images.append(_image(source if isinstance(source, dict) else None))
    return "".join(texts), images


def _web_search_error(item: dict[str, Any]) -> str:
    """A web search's error (``web_search_tool_result_error``) as Ollama words it, with its code."""
    code = item.get("error_code")
    return f"web_search_tool_result_error: {code}" if isinstance(code, str) and code else "web_search_tool_result_error"


def _web_search_result(content: object) -> str:
    """A ``web_search_tool_result``'s content as the ``tool`` message Ollama makes of it
    (``formatWebSearchToolResultContent``): ``- Title: URL`` per result, or the error and its code;
    anything else as Go's JSON of it."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        lines: list[str] = []
        for item in content:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "web_search_result":
                title, url = item.get("title"), item.get("url")
                lines.append(f"- {title if isinstance(title, str) else ''}: {url if isinstance(url, str) else ''}\n")
            elif item.get("type") == "web_search_tool_result_error":
                return _web_search_error(item)
        return "".join(lines)
    if isinstance(content, dict) and content.get("type") == "web_search_tool_result_error":
        return _web_search_error(content)
    return go_json(as_decoded(content))


def _tool_message(content: str, call_id: str | None, images: list[Media] | None = None) -> dict[str, Any]:
    """A tool's result as a native ``tool`` message, tied to its call where the block names it."""
    tool: dict[str, Any] = {"role": "tool", "content": content}
    if images:
        tool["images"] = images
    if call_id:
        tool["tool_call_id"] = call_id
    return tool


def _message(m: MessageParam, sent: bool) -> list[dict[str, Any]]:
    """One Anthropic message as native ones: tool results first (each its own ``tool`` message).
    ``sent``: whether its ``content`` was in the body; a null one is an empty text, as Go decodes
    null into a string."""
    role = (m.role or "").lower()
    content = "" if m.content is None and sent else m.content
    blocks = [ContentBlock(type="text", text=content)] if isinstance(content, str) else content
    if blocks is None:
        raise decode_error(None, f"{_REQUEST}.messages.content", "[]anthropic.ContentBlock")
    text: list[str] = []
    images: list[Media] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    thinking = ""
    for block in blocks:
        kind = block.type
        if kind == "text":
            text.append(block.text or "")
        elif kind == "image":
            images.append(_image(block.source))
        elif kind in ("tool_use", "server_tool_use"):
            # A server tool's call (a web search Anthropic ran) is a call in the history, as Ollama
            # makes it, unchecked.
            if kind == "tool_use" and not block.id:
                raise InvalidRequest("tool_use block missing required 'id' field")
            if kind == "tool_use" and not block.name:
                raise InvalidRequest("tool_use block missing required 'name' field")
            function = {"name": block.name or "", "arguments": block.input or {}}
            calls.append(({"id": block.id} if block.id else {}) | {"function": function})
        elif kind == "tool_result":
            result, result_images = _tool_result(block.content)
            results.append(_tool_message(result, block.tool_use_id, result_images))
        elif kind == "web_search_tool_result":
            results.append(_tool_message(_web_search_result(block.content), block.tool_use_id))
        elif kind == "thinking":
            thinking = block.thinking or ""
        # Other kinds (redacted_thinking, document, web_fetch_tool_result...) are skipped, as Ollama
        # skips them.
    out: list[dict[str, Any]] = results if role == "user" else []
    joined = "".join(text)
    if joined or images or calls or thinking:  # an all-empty text is no turn, as in Ollama
        message: dict[str, Any] = {"role": role, "content": joined}
        if images:
            message["images"] = images
        if calls:
            message["tool_calls"] = calls
        if thinking:
            message["thinking"] = thinking
        out.append(message)
    return out if role == "user" else out + results


# What a model is shown of Anthropic's client tools, which the client runs (so they are functions to
# the model, as Ollama's convertTool makes every tool but web search) but which come without a
# schema: the input Anthropic documents for each, where it is well known.
_FIELDS: dict[str, dict[str, Any]] = {
    "path": {"type": "string", "description": "The path of the file or directory"},
    "file_text": {"type": "string", "description": "create: the new file's content"},
    "old_str": {"type": "string", "description": "str_replace: the exact text to replace, found once"},
    "new_str": {"type": "string", "description": "str_replace: the text that replaces old_str"},
    "insert_line": {"type": "integer", "description": "insert: the line to insert after (0: the start)"},
    "insert_text": {"type": "string", "description": "insert: the text to insert"},
    "old_path": {"type": "string", "description": "rename: the current path"},
    "new_path": {"type": "string", "description": "rename: the new path"},
    "view_range": {
        "type": "array",
        "items": {"type": "integer"},
        "description": "view: [first, last] line (-1: the end)",
    },
}
_EDITS = ("view", "create", "str_replace", "insert")
_EDITOR = ("path", "file_text", "old_str", "new_str", "insert_line", "view_range")
_MEMORY = (*_EDITOR, "insert_text", "old_path", "new_path")


def _commands(commands: tuple[str, ...], fields: tuple[str, ...], required: str = "") -> dict[str, Any]:
    """A command tool's input (text editor, memory): a ``command`` and the fields its commands take."""
    properties = {"command": {"type": "string", "enum": list(commands)}} | {f: _FIELDS[f] for f in fields}
    return {"type": "object", "properties": properties, "required": ["command", required] if required else ["command"]}


_BASH = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The command to run (required unless restarting)"},
        "restart": {"type": "boolean", "description": "true to restart the shell"},
    },
}
_EDITING = "View, create and edit text files"
# Each type's prefixes with the tool's description and input, the older text editors
# (str_replace_editor, which can undo an edit) before the rest: the first match wins.
_CLIENT_TOOLS: tuple[tuple[str | tuple[str, ...], str, dict[str, Any]], ...] = (
    ("bash_", "Run a command in a persistent bash shell", _BASH),
    (
        ("text_editor_20241022", "text_editor_20250124"),
        _EDITING,
        _commands((*_EDITS, "undo_edit"), _EDITOR, "path"),
    ),
    ("text_editor_", _EDITING, _commands(_EDITS, _EDITOR, "path")),
    (
        "memory_",
        "Keep memory files under /memories, across conversations",
        _commands((*_EDITS, "delete", "rename"), _MEMORY),
    ),
    ("computer_", "Use the computer: screenshots, mouse and keyboard", {"type": "object"}),
)


def _client_tool(i: int, kind: str) -> tuple[str, dict[str, Any]]:
    """The description and input schema of Anthropic's client tool of type ``kind``. Its server
    tools (``web_search_*``, ``web_fetch_*``, ``code_execution_*``...) run on Anthropic's side:
    cllm runs none, and a model handed one as a plain function would call a tool nobody runs;
    Anthropic answers a tool type it does not offer with invalid_request_error, naming the tool,
    and so does cllm."""
    for prefix, description, schema in _CLIENT_TOOLS:
        if kind.startswith(prefix):
            return description, schema
    raise InvalidRequest(
        f"tools.{i}: tool type '{kind}' is not supported by this server: only custom tools and Anthropic's "
        "client tools (bash_*, text_editor_*, memory_*, computer_*) can be declared; cllm runs no server tools"
    )


def _tools(req: MessagesRequest) -> list[dict[str, Any]] | None:
    """The tools as native functions: custom ones as declared, Anthropic's client tools with the
    description and input it documents (where the request gives none)."""
    tools = []
    for i, tool in enumerate(req.tools or []):
        name, description, schema = tool.name or "", tool.description or "", tool.input_schema
        if schema is not None and not isinstance(schema, dict):
            raise InvalidRequest(f'invalid input_schema for tool "{name}"')
        if tool.type not in (None, "", "custom"):
            documented, documented_schema = _client_tool(i, tool.type)
            description, schema = description or documented, schema or documented_schema
        function = {"name": name, "description": description, "parameters": schema or {"type": "object"}}
        tools.append({"type": "function", "function": function})
    return tools or None


def _tool_choice(req: MessagesRequest) -> ToolChoice:
    """``tool_choice``, enforced (Ollama accepts it and does not): ``tool_choice.ToolChoice``."""
    choice = req.tool_choice
    if choice is None:
        return AUTO
    return anthropic_tool_choice(choice.type or None, choice.name, choice.disable_parallel_tool_use)


def _think(req: MessagesRequest) -> object:
    """``thinking.type`` enabled/disabled, else ``output_config.effort`` as a level (budget is not enforced)."""
    kind = req.thinking.type if req.thinking is not None else None
    if kind == "enabled":
        return True
    if kind == "disabled":
        return False
    effort = ((req.output_config.effort if req.output_config is not None else None) or "").strip().lower()
    effort = "high" if effort == "xhigh" else effort
    return effort if effort in _EFFORTS else None


def _marked(blocks: object) -> bool:
    """Whether a list of blocks (system, tools or a message's content) marks a breakpoint."""
    return isinstance(blocks, list) and any(isinstance(b, dict) and b.get("cache_control") is not None for b in blocks)


def _cache_hinted(body: dict[str, Any]) -> bool:
    """Whether the request marks ``cache_control`` breakpoints (on system, tools or messages):
    it asks for its prefix to be kept, and is told what was written to the cache and read from it."""
    messages = body.get("messages") or ()
    return (
        _marked(body.get("system"))
        or _marked(body.get("tools"))
        or any(isinstance(m, dict) and _marked(m.get("content")) for m in messages)
    )


def _cache_ends(body: dict[str, Any], ends: list[int], system: bool) -> tuple[int, ...]:
    """The ``cache_control`` breakpoints as the engine's hints: each as the count of native
    messages after it (``start_chat``'s ``cache_ends``). ``ends[i]``: native messages up to the end
    of Anthropic message ``i``; a breakpoint on tools or system ends the system message (tools
    are rendered in or before it)."""
    total = ends[-1] if ends else 0
    out = {total - end for m, end in zip(body.get("messages") or (), ends, strict=False) if _marked(m.get("content"))}
    if _marked(body.get("tools")) or _marked(body.get("system")):
        out.add(total - system)
    return tuple(sorted(out))


def _decode(body: dict[str, Any]) -> Decoded[ChatCall]:
    req = decode(body, MessagesRequest)
    model, max_tokens, stream = req.model or "", req.max_tokens, bool(req.stream)
    options: dict[str, Any] = {}
    for key in ("temperature", "top_p", "top_k"):
        if (value := getattr(req, key)) is not None:
            options[key] = value
    stops = req.stop_sequences or []
    choice = _tool_choice(req)
    tools = _tools(req) if choice.mode != "none" else None  # none: no tools shown, no calls read
    think = _think(req)
    messages: list[dict[str, Any]] = []
    if system := _system(req.system):
        messages.append({"role": "system", "content": system})
    ends: list[int] = []  # native messages up to each Anthropic one's end
    for m, sent in zip(req.messages or [], body.get("messages") or [], strict=True):
        messages += _message(m, "content" in sent)
        ends.append(len(messages))
    if not model:
        raise InvalidRequest("model is required")
    if max_tokens is None or max_tokens <= 0:
        raise InvalidRequest("max_tokens is required and must be positive")
    if not req.messages or not messages:
        # No message left (content lists all empty) would be a load call to /api/chat: refused
        # here, before the model is loaded (and another perhaps evicted) for nothing.
        raise InvalidRequest("messages is required")
    options["num_predict"] = max_tokens
    if stops:
        options["stop"] = stops
    hinted = _cache_hinted(body)
    cache_ends = _cache_ends(body, ends, bool(system)) if hinted else ()
    native = ChatRequest(model=model, options=options, think=think)
    call = ChatCall.of(native, name_tool_results(messages), tools, cache_ends, tool_choice=choice)
    return Decoded(call, stream, lambda gen: MessagesEncoder(model, gen, hinted))


async def _start(request: Request, call: ChatCall, t_start: int) -> Generation | str:
    """A chat; ``think`` is dropped for a model that cannot think (Ollama relaxes it for agents)."""
    if call.req.think:
        model = await resolve_model(
            services(request).store, call.req.model or "", empty_message="model is required", empty_status=400
        )
        if not model.has("thinking"):
            call = replace(call, req=msgspec.structs.replace(call.req, think=None))
    return await start_chat(request, call, t_start)


def _stop_reason(done_reason: str, had_tool_calls: bool) -> str:
    if had_tool_calls:
        return "tool_use"
    return {"stop": "end_turn", "length": "max_tokens"}.get(done_reason, "stop_sequence")


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    function = call["function"]
    return {
        "type": "tool_use",
        "id": f"toolu_{random_id()}",
        "name": function["name"],
        "input": function["arguments"],
    }


class MessagesEncoder:
    """A message object, or its stream: one content block per thinking, text and tool call."""

    def __init__(self, model: str, gen: Generation, cache_hinted: bool = False) -> None:
        self.model = model
        self.gen = gen
        self.id = _id("msg")
        self.cache_hinted = cache_hinted

    def _message(self, content: list[dict[str, Any]], usage: dict[str, int], stop_reason: str | None) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }

    def _usage(self, final: Chunk) -> dict[str, int]:
        """Anthropic's counters, which add up to the prompt: tokens read from the prompt cache
        (KV reused, from a slot, RAM or disk), tokens computed up to the last ``cache_control``
        breakpoint (written to the cache: the breakpoints' states are saved), and the tokens after
        it, as Anthropic counts them. Ollama's two counters alone where nothing was cached or asked
        to be."""
        u = Usage.of(final.stats)
        if not (self.cache_hinted or u.cached):
            return {"input_tokens": u.prompt, "output_tokens": u.completion}
        request = self.gen.request
        marked = max(request.keep, default=0) if request is not None else 0
        created = max(0, marked - u.cached)
        return {
            "input_tokens": u.prompt - u.cached - created,
            "output_tokens": u.completion,
            "cache_creation_input_tokens": created,
            "cache_read_input_tokens": u.cached,
        }

    def whole(self, final: Chunk) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if final.delta.thinking:
            content.append({"type": "thinking", "thinking": final.delta.thinking, "signature": ""})
        if final.delta.content:
            content.append({"type": "text", "text": final.delta.content})
        content += [_tool_use(call) for call in final.delta.tool_calls]
        stop = _stop_reason(final.done_reason, bool(final.delta.tool_calls))
        return self._message(content, self._usage(final) | truncation(final.truncated), stop)

    async def stream(self, chunks: AsyncIterator[Chunk]) -> AsyncGenerator[dict[str, Any], None]:
        """Ollama's order: thinking block, text block, each tool call as a whole block, then the end."""
        index = 0
        open_kind = ""  # the block now open: "thinking", "text" or none
        n_calls = 0
        begun = False
        for_delta = {"thinking": "thinking_delta", "text": "text_delta"}

        def block(kind: str) -> dict[str, Any]:
            return {"type": "content_block_start", "index": index, "content_block": {"type": kind, kind: ""}}

        async for chunk in chunks:
            if not begun:
                begun = True
                # The prompt is known by the first chunk (Ollama estimates it from the request's length).
                prompt = len(self.gen.request.prompt) if self.gen.request is not None else 0
                # How much of it is cached is known at the end (message_delta's usage).
                usage = {"input_tokens": prompt, "output_tokens": 0} | truncation(self.gen.truncated)
                yield {"type": "message_start", "message": self._message([], usage, None)}
            delta: Delta = chunk.delta
            for kind, text in (("thinking", delta.thinking), ("text", delta.content)):
                if not text:
                    continue
                if open_kind != kind:
                    if open_kind:
                        yield {"type": "content_block_stop", "index": index}
                        index += 1
                    open_kind = kind
                    yield block(kind)
                payload = {"type": for_delta[kind], kind: text}
                yield {"type": "content_block_delta", "index": index, "delta": payload}
            for call in delta.tool_calls:
                if open_kind:
                    yield {"type": "content_block_stop", "index": index}
                    index += 1
                    open_kind = ""
                use = _tool_use(call)
                yield {"type": "content_block_start", "index": index, "content_block": use | {"input": {}}}
                partial = {"type": "input_json_delta", "partial_json": dumps(use["input"]).decode()}
                yield {"type": "content_block_delta", "index": index, "delta": partial}
                yield {"type": "content_block_stop", "index": index}
                index += 1
                n_calls += 1
            if chunk.done:
                if open_kind:
                    yield {"type": "content_block_stop", "index": index}
                stop = {"stop_reason": _stop_reason(chunk.done_reason, n_calls > 0), "stop_sequence": None}
                yield {"type": "message_delta", "delta": stop, "usage": self._usage(chunk)}
                yield {"type": "message_stop"}


def _refuse_load(decoded: Decoded[ChatCall], reason: str) -> Response:
    raise InvalidRequest("messages is required")


messages = Endpoint(ANTHROPIC, MessagesRequest, _decode, _start, AnthropicSSE, _refuse_load).handler()


def count_call(body: dict[str, Any]) -> ChatCall:
    """A ``/v1/messages/count_tokens`` body as the chat it counts: a messages body without
    ``max_tokens`` (nor ``stream``), checked as one."""
    return _decode({**body, "max_tokens": 1, "stream": False}).native


# The start of a messages chat (``think`` dropped for a model that cannot think), for count_tokens.
start_messages = _start
