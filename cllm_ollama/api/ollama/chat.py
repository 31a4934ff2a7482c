"""POST /api/chat: a reply to a conversation, with thinking and tool calls, as NDJSON (or one object)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ...chatformat.jinja import strip_think_tags
from ...chatformat.prompt import ChatPrompt
from ...errors import InvalidRequest
from ...model_families import strips_think_history
from ..encoders import NDJSON, JSONResponse
from ..endpoint import Decoded, EachChunk, Encoder, Endpoint
from ..errors import OLLAMA
from ..lifecycle import Chunk, Generation, preload, unload
from ..media import tag_media
from ..options import resolve_options
from ..output_shapes import created_at, metrics, truncation
from ..request_fields import SharedFields, check_media, decoded_media, think_level, thinking_for
from ..resolve import ResolvedModel, resolve_model
from ..schemas.ollama import ChatRequest
from ..services import services
from ..tool_calls import tool_calls_json
from ..tool_choice import AUTO, ToolChoice
from .errors import decode_bound


def _messages(body: dict[str, Any], req: ChatRequest) -> list[dict[str, Any]]:
    """The messages as dicts (what templates read), decoded already: their media too (``Media``)."""
    out = []
    for raw, m in zip(body.get("messages") or [], req.messages or [], strict=True):
        message = dict(raw) | {"role": m.role or "", "content": m.content or ""}
        if media := decoded_media(m.images):
            message["images"] = media
        out.append(message)
    return out


@dataclass(slots=True)  # made on every chat's path: no frozen __setattr__ round trips
class ChatCall:
    """A chat decoded once, from /api/chat or translated from another dialect: what ``start_chat`` runs.

    ``req`` holds the typed fields a generation reads (model, options, format, think...; its
    ``messages`` and ``tools`` are not read); the messages and tools are dicts, as templates read
    them, their media decoded (``media.Media``). ``cache_ends``: prefixes to keep (Anthropic's breakpoints),
    each as the count of these messages after it (counted from the end: the model's own messages
    go before them)."""

    req: ChatRequest
    shared: SharedFields
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    cache_ends: tuple[int, ...] = ()
    tool_choice: ToolChoice = AUTO  # the dialects' ``tool_choice`` (/api/chat has none)

    @classmethod
    def of(
        cls,
        req: ChatRequest,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        cache_ends: tuple[int, ...] = (),
        tool_choice: ToolChoice = AUTO,
    ) -> ChatCall:
        """A translated chat (its messages built already): the shared fields read, in Ollama's order."""
        return cls(req, SharedFields.of(req), messages, tools, cache_ends, tool_choice)


async def start_chat(request: Request, call: ChatCall, t_start: int) -> Generation | str:
    """Check a chat against its model, in ChatHandler's order: its Generation, or a load/unload
    call's reason once done (an unload before anything else is read, a load once checked)."""
    req, shared, messages, tools, choice = call.req, call.shared, call.messages, call.tools, call.tool_choice
    # none: the model is not shown the tools, and no text is read as a call; allowed_tools: a subset.
    tools = choice.shown(tools)
    call_tools = choice.allowed(tools) if choice.forced else None  # a 400 before the model is looked up
    name = req.model or ""
    for m in messages:  # api.Message lower-cases its role as it decodes, whichever dialect built it
        m["role"] = m["role"].lower()
    pool = services(request).pool
    model = await resolve_model(services(request).store, name, empty_message="model is required", empty_status=400)
    if not messages and shared.keep_alive == 0:
        return await unload(pool, model)
    # A forced call is the whole output (its grammar leaves no room for thinking).
    thinking = _checked(model, req, bool(tools)) and call_tools is None
    options = resolve_options(req.options, model.record.params, request_type="ChatRequest")
    if not messages:
        return await preload(pool, model, shared.keep_alive, options)
    for m in messages:
        check_media(model, m.get("images"))
    # The Modelfile's SYSTEM goes first unless the client's own first message is a system one (the
    # Modelfile's MESSAGEs, which go before the client's, are not asked), as in Ollama.
    system = [{"role": "system", "content": model.record.system}] if model.record.system else []
    messages = [*(system if messages[0]["role"] != "system" else []), *model.record.messages, *messages]
    if strips_think_history(model.info.architecture, model.record.name.model):
        messages = strip_think_tags(messages)
    messages, media = tag_media(messages, renderer=model.record.renderer_in_use)
    think_set = req.think is not None
    render = ChatPrompt(
        model,
        messages,
        thinking=thinking,
        tools=tools,
        think_set=think_set,
        think_level=think_level(model, req),
        cache_ends=call.cache_ends,
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
        call_tools=call_tools,
        many_calls=choice.parallel,
        media=media,
    )


def _checked(model: ResolvedModel, req: ChatRequest, tools: bool) -> bool:
    """What ChatHandler refuses before it loads the model, in its order: ``think`` on a model
    that cannot, then the capabilities (scheduleRunner's CheckCapabilities: completion, then
    tools where any are shown). Whether the model may think."""
    name = req.model or ""
    thinking = thinking_for(model, req, name, chat=True)
    if not model.has("completion"):
        raise InvalidRequest(f'"{name}" does not support chat')
    if tools and not model.has("tools"):
        raise InvalidRequest(f"{model.full_name} does not support tools")
    return thinking


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


def _decode(body: dict[str, Any]) -> Decoded[ChatCall]:
    req = decode_bound(body, ChatRequest)
    shared = SharedFields.of(req)  # before the messages' images, in Ollama's order
    call = ChatCall(req, shared, _messages(body, req), body.get("tools") or None)
    return Decoded(call, req.stream is not False, lambda gen: _encoder(req.model, gen), bool(req.debug_render_only))


def _loaded(decoded: Decoded[ChatCall], reason: str) -> Response:
    message = {"role": "assistant", "content": ""}
    obj = {"model": decoded.native.req.model, "created_at": created_at(), "message": message, "done": True}
    return JSONResponse(obj | {"done_reason": reason})


chat = Endpoint(OLLAMA, ChatRequest, _decode, start_chat, NDJSON, _loaded).handler()
