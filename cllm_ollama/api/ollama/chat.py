"""POST /api/chat: a reply to a conversation, with thinking and tool calls, as NDJSON (or one object)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ...chatformat.jinja import strip_think_tags
from ...chatformat.prompt import chat_prompt
from ...errors import InvalidRequest
from ...model_families import strips_think_history
from ..encoders import NDJSON, JSONResponse
from ..endpoint import Decoded, EachChunk, Encoder, Endpoint
from ..errors import OLLAMA
from ..fields import SharedFields, check_images, think_level, thinking_for
from ..images import tag_images
from ..lifecycle import Chunk, Generation, sentinel
from ..options import resolve_options
from ..resolve import resolve_model
from ..shapes import metrics, truncation
from ..wire import (
    bool_field,
    created_at,
    decode_error,
    images_field,
    int_field,
    list_field,
    object_field,
    string_field,
    tool_calls_json,
)

_REQUEST = "ChatRequest"


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Validate messages the way Go would decode them; roles are lower-cased as Ollama does."""
    raw = list_field(body, "messages", _REQUEST, "[]api.Message") or []
    return [_message(m) for m in raw]


def _message(m: object) -> dict[str, Any]:
    # api.Message decodes itself (to lower-case the role), so Go names the path from ChatRequest.
    where = f"{_REQUEST}.messages"
    if not isinstance(m, dict):
        raise decode_error(m, where, "api.Message")
    message = dict(m)
    message["role"] = string_field(m, "role", where).lower()
    message["content"] = string_field(m, "content", where)
    for key in ("thinking", "tool_name", "tool_call_id"):
        string_field(m, key, where)
    images_field(m, where)
    for call in list_field(m, "tool_calls", where, "[]api.ToolCall") or []:
        if not isinstance(call, dict):
            raise decode_error(call, f"{where}.tool_calls", "api.ToolCall")
        string_field(call, "id", f"{where}.tool_calls")
        function = object_field(call, "function", f"{where}.tool_calls", "api.ToolCallFunction") or {}
        string_field(function, "name", f"{where}.tool_calls.function")
        int_field(function, "index", f"{where}.tool_calls.function")
        object_field(function, "arguments", f"{where}.tool_calls.function", "api.ToolCallFunctionArguments")
    return message


def decode_tools(body: dict[str, Any], struct: str) -> list[dict[str, Any]] | None:
    """``tools`` as Go decodes []api.Tool (``struct`` is the request type); None when empty."""
    tools = list_field(body, "tools", struct, "api.Tools") or []
    where = f"{struct}.tools"
    for tool in tools:
        if not isinstance(tool, dict):
            raise decode_error(tool, where, "api.Tool")
        string_field(tool, "type", where)
        function = object_field(tool, "function", where, "api.ToolFunction") or {}
        for key in ("name", "description"):
            string_field(function, key, f"{where}.function")
        object_field(function, "parameters", f"{where}.function", "api.ToolFunctionParameters")
    return tools or None


async def start_chat(
    request: Request, body: dict[str, Any], t_start: int, *, cache_ends: tuple[int, ...] = ()
) -> Generation | str:
    """Validate a chat body: its Generation, or a load/unload call's reason once done.

    ``cache_ends``: prefixes to keep (Anthropic's breakpoints), each as the count of the body's
    messages after it (counted from the end: the model's own messages go before them)."""
    shared = SharedFields.of(body, _REQUEST)
    name = string_field(body, "model", _REQUEST)
    messages = _messages(body)
    tools = decode_tools(body, _REQUEST)
    model = await resolve_model(request.app.state.store, name, empty_message="model is required", empty_status=400)
    if not messages:
        options = resolve_options(body.get("options"), model.record.params, request_type="ChatRequest")
        return await sentinel(request.app.state.pool, model, shared.keep_alive, options)
    if not model.has("completion"):
        raise InvalidRequest(f'"{name}" does not support chat')
    if tools and not model.has("tools"):
        raise InvalidRequest(f"{model.full_name} does not support tools")
    thinking = thinking_for(model, body, name)
    for m in messages:
        check_images(model, m.get("images"))
    options = resolve_options(body.get("options"), model.record.params, request_type="ChatRequest")
    messages = list(model.record.messages) + messages
    if model.record.system and messages[0]["role"] != "system":
        messages.insert(0, {"role": "system", "content": model.record.system})
    if strips_think_history(model.info.architecture, model.record.name.model):
        messages = strip_think_tags(messages)
    messages, images = tag_images(messages)
    think_set = body.get("think") is not None
    render = chat_prompt(
        model,
        messages,
        thinking=thinking,
        tools=tools,
        think_set=think_set,
        think_level=think_level(body),
        cache_ends=cache_ends,
    )
    return Generation(
        request,
        model,
        options,
        shared,
        render,
        thinking=thinking,
        tools=bool(tools),
        t_start=t_start,
        tool_specs=tools,
        images=images,
    )


def _encoder(name: object, gen: Generation) -> Encoder:
    n_calls = 0

    def encode(chunk: Chunk) -> dict[str, Any]:
        nonlocal n_calls
        message: dict[str, Any] = {"role": "assistant", "content": chunk.delta.content}
        if chunk.delta.thinking:
            message["thinking"] = chunk.delta.thinking
        if chunk.delta.tool_calls:
            message["tool_calls"] = tool_calls_json(chunk.delta.tool_calls, n_calls)
            n_calls += len(chunk.delta.tool_calls)
        obj: dict[str, Any] = {"model": name, "created_at": created_at(), "message": message, "done": chunk.done}
        if chunk.logprobs:
            obj["logprobs"] = chunk.logprobs
        if chunk.done:
            obj["done_reason"] = chunk.done_reason
            obj |= metrics(gen.t_start, gen.load_ns, chunk.stats) | truncation(chunk.truncated)
        return obj

    return EachChunk(encode)


def _decode(body: dict[str, Any]) -> Decoded:
    stream = bool_field(body, "stream", _REQUEST) is not False
    name = body.get("model")
    return Decoded(body, stream, lambda gen: _encoder(name, gen))


def _loaded(decoded: Decoded, reason: str) -> Response:
    message = {"role": "assistant", "content": ""}
    obj = {"model": decoded.native.get("model"), "created_at": created_at(), "message": message, "done": True}
    return JSONResponse(obj | {"done_reason": reason})


chat = Endpoint(OLLAMA, _decode, start_chat, NDJSON, _loaded).handler()
