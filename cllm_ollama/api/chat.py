"""POST /api/chat: a reply to a conversation, with thinking and tool calls, as NDJSON (or one object)."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..errors import InvalidRequest
from .encoders import JSONResponse
from .errors import read_json
from .inference import (
    Chunk,
    Generation,
    SharedFields,
    chat_prompt,
    check_images,
    metrics,
    prepare,
    resolve_model,
    respond,
    sentinel,
    thinking_for,
)
from .options import resolve_options
from .template import strip_think_tags
from .wire import created_at, string_field, tool_calls_json

_THINK_TAG_FAMILIES = ("qwen3", "deepseek-r1", "deepseek2")


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Validate messages the way Go would decode them; roles are lower-cased as Ollama does."""
    raw = body.get("messages")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidRequest(
            "json: cannot unmarshal messages into Go struct field ChatRequest.messages of type []api.Message"
        )
    out = []
    for m in raw:
        if not isinstance(m, dict):
            raise InvalidRequest("json: cannot unmarshal message into Go value of type api.Message")
        message = dict(m)
        message["role"] = string_field(m, "role", "Message").lower()
        message["content"] = string_field(m, "content", "Message")
        calls = m.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise InvalidRequest("json: cannot unmarshal tool_calls into Go struct field Message.tool_calls")
        out.append(message)
    return out


async def start_chat(request: Request, body: dict[str, Any], t_start: int) -> Generation | str:
    """Validate a chat body and start it: a running Generation, or a load/unload sentinel's reason."""
    shared = SharedFields.of(body)
    name = string_field(body, "model", "ChatRequest")
    model = await resolve_model(request.app.state.store, name, empty_message="model is required", empty_status=400)
    messages = _messages(body)
    pool = request.app.state.pool
    if not messages:
        options = resolve_options(body.get("options"), model.record.params, request_type="ChatRequest")
        return await sentinel(pool, model, shared.keep_alive, options)
    if not model.has("completion"):
        raise InvalidRequest(f'"{name}" does not support chat')
    tools = body.get("tools") or None
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools)):
        raise InvalidRequest("json: cannot unmarshal tools into Go struct field ChatRequest.tools of type api.Tools")
    if tools and not model.has("tools"):
        raise InvalidRequest(f"{model.full_name} does not support tools")
    thinking = thinking_for(model, body, name)
    for m in messages:
        check_images(model, m.get("images"))
    options = resolve_options(body.get("options"), model.record.params, request_type="ChatRequest")
    messages = list(model.record.messages) + messages
    if model.record.system and messages[0]["role"] != "system":
        messages.insert(0, {"role": "system", "content": model.record.system})
    if model.info.architecture in _THINK_TAG_FAMILIES:
        messages = strip_think_tags(messages)
    return await prepare(
        pool,
        model,
        options,
        shared,
        chat_prompt(model, messages, thinking=thinking, tools=tools),
        thinking=thinking,
        tools=bool(tools),
        t_start=t_start,
        http_request=request,
    )


async def chat(request: Request) -> Response:
    t_start = time.perf_counter_ns()
    body = await read_json(request)
    name = body.get("model")
    gen = await start_chat(request, body, t_start)
    if isinstance(gen, str):
        message = {"role": "assistant", "content": ""}
        return JSONResponse(
            {"model": name, "created_at": created_at(), "message": message, "done": True, "done_reason": gen}
        )
    n_calls = 0

    def encode(chunk: Chunk) -> dict[str, Any]:
        nonlocal n_calls
        message: dict[str, Any] = {"role": "assistant", "content": chunk.delta.content}
        if chunk.delta.thinking:
            message["thinking"] = chunk.delta.thinking
        if chunk.delta.tool_calls:
            message["tool_calls"] = tool_calls_json(chunk.delta.tool_calls, n_calls)
            n_calls += len(chunk.delta.tool_calls)
        obj: dict[str, Any] = {
            "model": name,
            "created_at": created_at(),
            "message": message,
            "done": chunk.done,
        }
        if chunk.logprobs:
            obj["logprobs"] = chunk.logprobs
        if chunk.done:
            obj["done_reason"] = chunk.done_reason
            obj |= metrics(gen, chunk.stats)
        return obj

    return await respond(request, gen, encode, stream=body.get("stream") is not False)
