"""OpenAI's Responses API (/v1/responses), stateless as Ollama serves it: a chat underneath.

Input items become chat messages, the generation's chunks become output items (reasoning,
message, function calls), streamed as typed SSE events. What agents such as Codex send beyond
plain functions is met as Ollama meets it (``openai/responses.go``): ``namespace`` tools become
their member functions under qualified names (and calls go back out with their namespace);
tools that run on OpenAI's side (``web_search`` and the like) are echoed, never offered to the
model, so a client that declares them is served instead of refused.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
from starlette.responses import Response

from ...chatformat.parsers import Delta
from ...errors import InvalidRequest
from ..encoders import SSEEvents, dumps
from ..endpoint import Decoded, Endpoint
from ..errors import OPENAI
from ..lifecycle import Chunk
from ..media import Media
from ..ollama.chat import ChatCall, start_chat
from ..output_shapes import Usage, truncation
from ..schemas.ollama import ChatRequest
from ..schemas.openai import CONTENT_TYPE, ContentPart, ResponsesInputItem, ResponsesRequest, ResponsesTool
from ..tool_calls import name_tool_results, tool_call_id
from ..tool_choice import openai_tool_choice
from .endpoints import content_and_media, format_value, sampling_options, think_value, tool_arguments
from .errors import decode

# `include` values this server answers; the others (file search results, logprobs, ...) ask for
# what it never produces, and are ignored as Ollama ignores them all.
_ENCRYPTED_REASONING = "reasoning.encrypted_content"


def _id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


_PARTS = {"input_text": "text", "output_text": "text", "input_image": "image_url"}


def _content(content: str | list[ContentPart] | None) -> tuple[str, list[Media]]:
    """Input content: a string or parts of type input_text/output_text (a missing text is empty, as
    Go's zero; the texts run on with nothing between them, as Ollama's ``content += v.Text``), and
    input_image (a data URL, checked as a chat message's ``image_url`` is)."""
    if isinstance(content, list):
        content = [_chat_part(p) for p in content]
    return content_and_media(content, unknown=CONTENT_TYPE)


def _chat_part(part: ContentPart) -> ContentPart:
    kind = _PARTS.get(part.type) if isinstance(part.type, str) else None
    if kind == "text":
        return ContentPart(type=kind, text=part.text or "")
    return ContentPart(type=kind, image_url=part.image_url) if kind else part


def _output(output: object) -> tuple[str, list[Media]]:
    """A function call's output, Go's ``json.RawMessage``: a string; the text and images of parts
    (their shapes checked as a message's are; what is no object is skipped: a tool that returns a
    picture, Codex's view_image, shows it to a model that sees, as in Ollama); else the JSON as sent."""
    if isinstance(output, str):
        return output, []
    if isinstance(output, list):
        try:
            parts = msgspec.convert([p for p in output if isinstance(p, dict)], list[ContentPart])
        except msgspec.ValidationError:
            raise InvalidRequest("invalid message format") from None
        return _content(parts)
    return dumps(output).decode(), []


@dataclass
class _Conversation:
    """Input items folded into chat messages, as Ollama's ``FromResponsesRequest`` folds them."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    thinking: str = ""  # a reasoning item's text, for the assistant turn that follows it

    def _assistant_turn(self) -> dict[str, Any]:
        """The assistant message a function call joins: the last one, or a new one."""
        if not self.messages or self.messages[-1]["role"] != "assistant":
            self.messages.append({"role": "assistant", "content": ""})
        return self.messages[-1]

    def _take_thinking(self, message: dict[str, Any]) -> None:
        if self.thinking:
            message["thinking"], self.thinking = self.thinking, ""

    def message(self, item: ResponsesInputItem, answers: str | None) -> None:
        """A message; an assistant's that stands between a call and its output (``answers``
        names that output's call) joins the call's turn, so the output follows its call."""
        role = "system" if item.role == "developer" else item.role or "user"
        text, media = _content(item.content)
        message: dict[str, Any] = {"role": role, "content": text} | ({"images": media} if media else {})
        last = self.messages[-1] if self.messages else None
        calls = last.get("tool_calls", []) if last is not None and last["role"] == "assistant" else []
        if role == "assistant" and answers is not None and any(call.get("id") == answers for call in calls):
            assert last is not None
            last["content"] = "\n".join(t for t in (last["content"], message["content"]) if t)
            self._take_thinking(last)
            return
        if role == "assistant":
            self._take_thinking(message)
        self.messages.append(message)

    def function_call(self, item: ResponsesInputItem) -> None:
        name = _qualified(item.namespace or "", item.name or "")
        call = {"id": item.call_id or "", "function": {"name": name, "arguments": tool_arguments(item.arguments)}}
        turn = self._assistant_turn()
        turn.setdefault("tool_calls", []).append(call)
        self._take_thinking(turn)

    def function_call_output(self, item: ResponsesInputItem) -> None:
        text, media = _output(item.output)
        message: dict[str, Any] = {"role": "tool", "content": text, "tool_call_id": item.call_id or ""}
        self.messages.append(message | {"images": media} if media else message)

    def reasoning(self, item: ResponsesInputItem) -> None:
        """Ollama returns its thinking as the item's ``encrypted_content``; a summary stands in for it."""
        summary = "\n".join(s.text or "" for s in item.summary or ())
        self.thinking = item.encrypted_content or summary


def _messages(req: ResponsesRequest) -> list[dict[str, Any]]:
    """The chat messages: ``instructions`` as the system message, then the input items.

    An input that holds no message (only reasoning items, say) is refused here, before any
    model is loaded for it.
    """
    items, instructions = req.input, req.instructions
    system = [{"role": "system", "content": instructions}] if instructions else []
    if isinstance(items, str):
        return [*system, {"role": "user", "content": items}]
    if not items:
        raise InvalidRequest("input must be a string or a non-empty list of items")
    conversation = _Conversation()
    for i, item in enumerate(items):
        kind = item.type or "message"
        if kind == "message":
            after = items[i + 1] if i + 1 < len(items) else None
            answers = after.call_id if after is not None and after.type == "function_call_output" else None
            conversation.message(item, answers)
        elif kind == "function_call":
            conversation.function_call(item)
        elif kind == "function_call_output":
            conversation.function_call_output(item)
        elif kind == "reasoning":
            conversation.reasoning(item)
        elif kind != "web_search_call":  # a search's history: the message after it holds what it found
            raise InvalidRequest(f"unsupported input item type: {kind}")
    if not conversation.messages:
        raise InvalidRequest("input is required")
    if conversation.thinking:  # reasoning no message followed: its own assistant turn, as in Ollama
        conversation.messages.append({"role": "assistant", "content": "", "thinking": conversation.thinking})
    return name_tool_results(system + conversation.messages)


def _qualified(namespace: str, name: str) -> str:
    """The flat name the model sees for ``name`` in ``namespace`` (Ollama's ``ns.name``)."""
    return f"{namespace}.{name}" if namespace and not name.startswith(f"{namespace}.") else name


@dataclass(frozen=True)
class _Tools:
    """The declared tools as the chat takes them, and how a call's flat name maps back."""

    chat: list[dict[str, Any]]
    namespaced: dict[str, tuple[str, str]]  # qualified name -> (namespace, member name)

    def call_names(self, name: str) -> dict[str, str]:
        """A function call item's ``namespace`` and ``name`` fields for a called tool."""
        if name in self.namespaced:
            namespace, member = self.namespaced[name]
            return {"namespace": namespace, "name": member}
        return {"name": name}


def _declare(tool: ResponsesTool, namespace: str, out: _Tools) -> None:
    """One declaration into ``out``: a function, a namespace's members (qualified, recursively),
    or a tool that runs on OpenAI's side, which the model here cannot call and is not shown."""
    if tool.type == "namespace":
        inner = _qualified(namespace, tool.name or "")
        for member in tool.tools or []:
            _declare(member, inner, out)
    elif tool.type == "function":
        function = {k: v for k in ("name", "description", "parameters") if (v := getattr(tool, k)) is not None}
        name = tool.name or ""
        if namespace:
            function["name"] = _qualified(namespace, name)
            out.namespaced[function["name"]] = (namespace, name.removeprefix(f"{namespace}."))
        out.chat.append({"type": "function", "function": function})


def _tools(req: ResponsesRequest) -> _Tools:
    """Responses tools are flat (``{"type":"function","name",...}``); chat tools nest ``function``."""
    out = _Tools([], {})
    for tool in req.tools or []:
        _declare(tool, "", out)
    return out


def _format(req: ResponsesRequest) -> object:
    fmt = req.text.format if req.text is not None else None
    if fmt is None:
        return None
    return format_value(fmt.type or "", fmt.schema)


def _message(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": content}


class ResponseEncoder:
    """The response object, filled in as the generation goes; streamed as typed events."""

    def __init__(self, body: dict[str, Any], model: str, tools: _Tools) -> None:
        self.tools = tools
        include = body.get("include") or []
        self.encrypted = _ENCRYPTED_REASONING in include
        reasoning = body.get("reasoning") or {}
        self.base: dict[str, Any] = {
            "id": _id("resp"),
            "object": "response",
            "created_at": int(time.time()),
            "model": model,
            "error": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "metadata": body.get("metadata") or {},
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "temperature": body.get("temperature", 1.0),
            "top_p": body.get("top_p", 1.0),
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],  # as declared: namespaces and hosted tools included
            "text": body.get("text") or {"format": {"type": "text"}},
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "truncation": body.get("truncation") or "disabled",
            # Stateless as Ollama's: nothing is stored, an earlier response is not looked up.
            "store": False,
            "previous_response_id": None,
            "prompt_cache_key": body.get("prompt_cache_key"),
        }

    def snapshot(self, status: str, output: list[dict[str, Any]], final: Chunk | None = None) -> dict[str, Any]:
        out = self.base | {"status": status, "output": output, "incomplete_details": None, "usage": None}
        if final is not None:
            out["completed_at"] = int(time.time())
            if final.done_reason == "length":
                out |= {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}
            u = Usage.of(final.stats)
            out["usage"] = {
                "input_tokens": u.prompt,
                "input_tokens_details": {"cached_tokens": u.cached},
                "output_tokens": u.completion,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": u.total,
            } | truncation(final.truncated)
        return out

    def whole(self, final: Chunk) -> dict[str, Any]:
        """The items the stream would have sent, in the same order, at once."""
        items = _StreamedItems(self.tools, self.encrypted)
        delta = final.delta
        if delta.thinking:
            items.reasoning(delta.thinking)
        if delta.content or not delta.tool_calls:
            items.text(delta.content)
        for call in delta.tool_calls:
            items.function_call(call)
        items.close()
        return self.snapshot("completed", items.done, final)

    async def stream(self, chunks: AsyncIterator[Chunk]) -> AsyncGenerator[dict[str, Any], None]:
        """Created, then each output item as it comes (reasoning, message, function calls: added,
        its deltas, done), then the completed response holding those very items.

        Nothing goes out before the first chunk: until then an error keeps its HTTP status.
        """
        items = _StreamedItems(self.tools, self.encrypted)
        begun = False
        async for chunk in chunks:
            if not begun:
                begun = True
                yield {"type": "response.created", "response": self.snapshot("in_progress", [])}
                yield {"type": "response.in_progress", "response": self.snapshot("in_progress", [])}
            delta = chunk.delta
            if delta.thinking:
                for event in items.reasoning(delta.thinking):
                    yield event
            if delta.content:
                for event in items.text(delta.content):
                    yield event
            for call in delta.tool_calls:
                for event in items.function_call(call):
                    yield event
            if chunk.done:
                if not items.done and items.is_empty():  # nothing said: one empty message, as `whole` gives
                    for event in items.text(""):
                        yield event
                for event in items.close():
                    yield event
                final = Chunk(items.whole, True, chunk.done_reason, chunk.stats, truncated=chunk.truncated)
                yield {"type": "response.completed", "response": self.snapshot("completed", items.done, final)}


class _StreamedItems:
    """The output items of a response, one open at a time, with the events that stream them."""

    def __init__(self, tools: _Tools, encrypted: bool) -> None:
        self.tools = tools
        self.encrypted = encrypted  # reasoning items carry their text as `encrypted_content`, as Ollama's do
        self.done: list[dict[str, Any]] = []  # finished items, in output order
        self.whole = Delta()
        self._open: dict[str, Any] | None = None  # the item being streamed
        self._text = ""

    def is_empty(self) -> bool:
        return self._open is None

    def _where(self) -> dict[str, Any]:
        assert self._open is not None
        return {"item_id": self._open["id"], "output_index": len(self.done)}

    def _begin(self, item: dict[str, Any]) -> dict[str, Any]:
        self._open, self._text = item, ""
        return {"type": "response.output_item.added", "output_index": len(self.done), "item": item}

    def reasoning(self, text: str) -> list[dict[str, Any]]:
        self.whole.thinking += text
        events = []
        if self._open is None or self._open["type"] != "reasoning":
            events += self.close()
            events.append(self._begin({"type": "reasoning", "id": _id("rs"), "summary": []}))
            part = {"type": "summary_text", "text": ""}
            events.append(
                {"type": "response.reasoning_summary_part.added", **self._where(), "summary_index": 0} | {"part": part}
            )
        self._text += text
        events.append(
            {"type": "response.reasoning_summary_text.delta", **self._where(), "summary_index": 0, "delta": text}
        )
        return events

    def text(self, text: str) -> list[dict[str, Any]]:
        self.whole.content += text
        events = []
        if self._open is None or self._open["type"] != "message":
            events += self.close()
            events.append(self._begin(_message(_id("msg"), "", "in_progress")))
            part = {"type": "output_text", "text": "", "annotations": []}
            events.append({"type": "response.content_part.added", **self._where(), "content_index": 0, "part": part})
        self._text += text
        if text:
            events.append({"type": "response.output_text.delta", **self._where(), "content_index": 0, "delta": text})
        return events

    def function_call(self, call: dict[str, Any]) -> list[dict[str, Any]]:
        """A call comes whole from the parser: added, its arguments as one delta, done.

        A namespace member's call goes out under its namespace, as the client declared it.
        """
        self.whole.tool_calls.append(call)
        events = self.close()
        arguments = dumps(call["function"]["arguments"]).decode()
        item = {"type": "function_call", "id": _id("fc"), "call_id": call.get("id") or tool_call_id()}
        item |= self.tools.call_names(call["function"]["name"]) | {"arguments": "", "status": "in_progress"}
        events.append(self._begin(item))
        where = self._where()
        events.append({"type": "response.function_call_arguments.delta", **where, "delta": arguments})
        events.append({"type": "response.function_call_arguments.done", **where, "arguments": arguments})
        self._text = arguments
        return events + self.close()

    def close(self) -> list[dict[str, Any]]:
        """The open item's done events, and the item moved to ``done``."""
        item, text = self._open, self._text
        if item is None:
            return []
        where = self._where()
        events: list[dict[str, Any]] = []
        if item["type"] == "reasoning":
            item = item | {"summary": [{"type": "summary_text", "text": text}]}
            if self.encrypted:
                item["encrypted_content"] = text
            events.append({"type": "response.reasoning_summary_text.done", **where, "summary_index": 0, "text": text})
            part: dict[str, Any] = {"type": "summary_text", "text": text}
            events.append({"type": "response.reasoning_summary_part.done", **where, "summary_index": 0, "part": part})
        elif item["type"] == "message":
            item = _message(item["id"], text)
            events.append({"type": "response.output_text.done", **where, "content_index": 0, "text": text})
            part = {"type": "output_text", "text": text, "annotations": []}
            events.append({"type": "response.content_part.done", **where, "content_index": 0, "part": part})
        else:
            item = item | {"arguments": text, "status": "completed"}
        events.append({"type": "response.output_item.done", "output_index": where["output_index"], "item": item})
        self.done.append(item)
        self._open = None
        return events


def _decode(body: dict[str, Any]) -> Decoded[ChatCall]:
    req = decode(body, ResponsesRequest)
    options = sampling_options(req, top_p=None)  # Ollama's Responses leaves top_p to the model
    if req.max_output_tokens is not None:
        options["num_predict"] = req.max_output_tokens
    tools = _tools(req)
    model, messages = req.model or "", _messages(req)
    native = ChatRequest(
        model=model, options=options, format=_format(req), think=think_value(req.reasoning_effort, req.reasoning)
    )
    choice = openai_tool_choice(req.tool_choice, req.parallel_tool_calls, flat=True)
    call = ChatCall.of(native, messages, tools.chat or None, tool_choice=choice)
    return Decoded(call, bool(req.stream), lambda gen: ResponseEncoder(body, model, tools))


def _refuse_load(decoded: Decoded[ChatCall], reason: str) -> Response:
    """Unreachable from a valid body (``_messages`` refuses an input without messages); kept
    because a Responses request is never a load call."""
    raise InvalidRequest("input is required")


responses = Endpoint(OPENAI, ResponsesRequest, _decode, start_chat, SSEEvents, _refuse_load).handler()
