"""OpenAI's Responses API (/v1/responses), stateless as Ollama serves it: a chat underneath.

Input items become chat messages, the generation's chunks become output items (reasoning,
message, function calls), streamed as typed SSE events.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from starlette.responses import Response

from ...chatformat.parsers import Delta
from ...errors import InvalidRequest
from ..encoders import SSEEvents, dumps
from ..endpoint import Decoded, Endpoint
from ..errors import OPENAI
from ..lifecycle import Chunk
from ..ollama.chat import start_chat
from ..shapes import Usage, truncation
from ..wire import bool_field, decode_error, int_field, list_field, object_field, string_field, tool_call_id
from .endpoints import content_and_images, format_value, sampling_options, think_value, tool_arguments

_REQUEST = "ResponsesRequest"


def _id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _text(content: object) -> str:
    """Input content: a string or parts of type input_text/output_text (images are refused)."""
    if isinstance(content, list):
        parts = [
            {"type": "text", "text": p.get("text", "")} if p.get("type") in ("input_text", "output_text") else p
            for p in content
            if isinstance(p, dict)
        ]
        text, images = content_and_images(parts)
        if images:
            raise InvalidRequest("images are not supported")
        return text
    return content_and_images(content)[0]


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if instructions := string_field(body, "instructions", _REQUEST):
        messages.append({"role": "system", "content": instructions})
    raw = body.get("input")
    if isinstance(raw, str):
        return [*messages, {"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise InvalidRequest("input must be a string or a non-empty list of items")
    where = f"{_REQUEST}.input"
    for item in raw:
        if not isinstance(item, dict):
            raise InvalidRequest("invalid input item")
        kind = string_field(item, "type", where) or "message"
        for key in ("role", "name", "call_id"):
            string_field(item, key, where)
        if kind == "message":
            role = "system" if item.get("role") == "developer" else item.get("role") or "user"
            messages.append({"role": role, "content": _text(item.get("content"))})
        elif kind == "function_call":
            call = {"function": {"name": item.get("name") or "", "arguments": tool_arguments(item.get("arguments"))}}
            if messages and messages[-1]["role"] == "assistant" and not messages[-1]["content"]:
                messages[-1].setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append({"role": "tool", "content": output if isinstance(output, str) else dumps(output).decode()})
        elif kind != "reasoning":
            raise InvalidRequest(f"unsupported input item type: {kind}")
    return messages


def _tools(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Responses tools are flat (``{"type":"function","name",...}``); chat tools nest ``function``."""
    out = []
    for tool in list_field(body, "tools", _REQUEST, "[]openai.ResponsesTool") or []:
        if not isinstance(tool, dict):
            raise decode_error(tool, f"{_REQUEST}.tools", "openai.ResponsesTool")
        if tool.get("type") != "function":
            raise InvalidRequest("only function tools are supported")
        for key in ("name", "description"):
            string_field(tool, key, f"ResponsesTool.{_REQUEST}.tools")
        object_field(tool, "parameters", f"ResponsesTool.{_REQUEST}.tools", "map[string]interface {}")
        fields = {k: tool[k] for k in ("name", "description", "parameters") if k in tool}
        out.append({"type": "function", "function": fields})
    return out or None


def _format(body: dict[str, Any]) -> object:
    text = object_field(body, "text", _REQUEST, "openai.ResponsesText") or {}
    fmt = object_field(text, "format", "ResponsesText.text", "openai.ResponsesTextFormat") or {}
    return format_value(string_field(fmt, "type", "ResponsesTextFormat.text.format"), fmt.get("schema"))


def _output(final: Chunk) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if final.delta.thinking:
        items.append(
            {"type": "reasoning", "id": _id("rs"), "summary": [{"type": "summary_text", "text": final.delta.thinking}]}
        )
    if final.delta.content or not final.delta.tool_calls:
        items.append(_message(_id("msg"), final.delta.content))
    for call in final.delta.tool_calls:
        items.append(
            {
                "type": "function_call",
                "id": _id("fc"),
                "call_id": f"call_{tool_call_id()}",
                "name": call["function"]["name"],
                "arguments": dumps(call["function"]["arguments"]).decode(),
                "status": "completed",
            }
        )
    return items


def _message(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": content}


class ResponseEncoder:
    """The response object, filled in as the generation goes; streamed as typed events."""

    def __init__(self, body: dict[str, Any], model: str) -> None:
        self.base: dict[str, Any] = {
            "id": _id("resp"),
            "object": "response",
            "created_at": int(time.time()),
            "model": model,
            "error": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "metadata": body.get("metadata") or {},
            "parallel_tool_calls": True,
            "temperature": body.get("temperature", 1.0),
            "top_p": body.get("top_p", 1.0),
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "text": body.get("text") or {"format": {"type": "text"}},
            # Stateless as Ollama's: an earlier response is not looked up (the field is accepted).
            "previous_response_id": None,
        }

    def snapshot(self, status: str, output: list[dict[str, Any]], final: Chunk | None = None) -> dict[str, Any]:
        out = self.base | {"status": status, "output": output, "incomplete_details": None, "usage": None}
        if final is not None:
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
        return self.snapshot("completed", _output(final), final)

    async def stream(self, chunks: AsyncIterator[Chunk]) -> AsyncGenerator[dict[str, Any], None]:
        """Created, then each output item as it comes (reasoning, message, function calls: added,
        its deltas, done), then the completed response holding those very items.

        Nothing goes out before the first chunk: until then an error keeps its HTTP status.
        """
        items = _StreamedItems()
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
                for event in items.close():
                    yield event
                final = Chunk(items.whole, True, chunk.done_reason, chunk.stats)
                output = items.done if items.done else _output(final)
                yield {"type": "response.completed", "response": self.snapshot("completed", output, final)}


class _StreamedItems:
    """The output items of a streamed response, one open at a time, as Ollama streams them."""

    def __init__(self) -> None:
        self.done: list[dict[str, Any]] = []  # finished items, in output order
        self.whole = Delta()
        self._open: dict[str, Any] | None = None  # the item being streamed
        self._text = ""

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
        events.append({"type": "response.output_text.delta", **self._where(), "content_index": 0, "delta": text})
        return events

    def function_call(self, call: dict[str, Any]) -> list[dict[str, Any]]:
        """A call comes whole from the parser: added, its arguments as one delta, done."""
        self.whole.tool_calls.append(call)
        events = self.close()
        arguments = dumps(call["function"]["arguments"]).decode()
        item = {
            "type": "function_call",
            "id": _id("fc"),
            "call_id": f"call_{tool_call_id()}",
            "name": call["function"]["name"],
            "arguments": "",
            "status": "in_progress",
        }
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
            events.append({"type": "response.reasoning_summary_text.done", **where, "summary_index": 0, "text": text})
            part = {"type": "summary_text", "text": text}
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


def _decode(body: dict[str, Any]) -> Decoded:
    options = sampling_options(body, _REQUEST)
    if (max_output_tokens := int_field(body, "max_output_tokens", _REQUEST)) is not None:
        options["num_predict"] = max_output_tokens
    native: dict[str, Any] = {
        "model": string_field(body, "model", _REQUEST),
        "messages": _messages(body),
        "options": options,
        "format": _format(body),
        "tools": _tools(body),
        "think": think_value(body, _REQUEST, "ResponsesReasoning"),
    }
    string_field(body, "truncation", _REQUEST)
    string_field(body, "previous_response_id", _REQUEST)
    stream = bool(bool_field(body, "stream", _REQUEST))
    return Decoded(native, stream, lambda gen: ResponseEncoder(body, native["model"]))


def _refuse_load(decoded: Decoded, reason: str) -> Response:
    raise InvalidRequest("input is required")


responses = Endpoint(OPENAI, _decode, start_chat, SSEEvents, _refuse_load).handler()
