"""OpenAI-compatible /v1/*: translate the request onto the native handlers, and the output back.

As Ollama's middleware does, there is no second engine path: a chat completion is an
/api/chat generation; only the shapes of requests, chunks and errors differ.
"""

from __future__ import annotations

import base64
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import numpy as np
import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ...errors import InvalidRequest, NotFound
from ...gostrconv import go_quote
from ...store.names import parse_name
from ...store.store import ModelRecord
from ..encoders import SSE, JSONResponse, dumps
from ..endpoint import Decoded, Endpoint
from ..errors import OPENAI, read_json
from ..lifecycle import Chunk
from ..media import PART_PLACEHOLDER, Base64Error, Media, checked_media, decode_media
from ..ollama.chat import ChatCall, start_chat
from ..ollama.embed import embed_texts
from ..ollama.generate import start_generate
from ..options import DRY_XTC, options_object
from ..output_shapes import Usage, truncation
from ..schemas.go import go_any_type
from ..schemas.ollama import ChatRequest, GenerateRequest
from ..schemas.openai import (
    BAD_ARGUMENTS,
    CONTENT_TYPE,
    ChatCompletionRequest,
    CompletionRequest,
    ContentPart,
    EmbedRequest,
    ImageURL,
    ResponsesRequest,
    ToolCall,
    ToolCallFunction,
)
from ..services import services
from ..tool_calls import name_tool_results, tool_call_id
from ..tool_choice import openai_tool_choice
from .errors import decode

_EFFORT = {"none": False, "minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "max"}
_EFFORT |= {"ultra": "max", "max": "max"}
_EFFORTS = '"minimal", "low", "medium", "high", "xhigh", "ultra", "max", or "none"'


def sampling_options(
    req: ChatCompletionRequest | CompletionRequest | ResponsesRequest,
    *,
    top_p: float | None = 1.0,
    strict_stop: bool = False,
) -> dict[str, Any]:
    """Sampling fields onto Ollama options, with Ollama's translations' defaults: temperature 1.0,
    ``top_p`` unless None (Ollama's Responses leaves it to the model). A stop list's items that are
    no strings are dropped, or refused with ``strict_stop`` (Ollama's completions).

    ``req`` is decoded already: a wrong type was Go's decode error, 400, before anything reaches
    the native options. Ollama's own ``options`` object (what the OpenAI SDKs send with
    ``extra_body``: ``num_ctx``, ``top_k``, ...) goes through as /api takes it, checked there;
    OpenAI's fields win over it.
    """
    defaults: dict[str, Any] = {"temperature": 1.0} | ({"top_p": top_p} if top_p is not None else {})
    options: dict[str, Any] = {**defaults, **options_object(req.options, req.go_name or "")}
    for key in ("temperature", "top_p", "frequency_penalty", "presence_penalty"):
        if (value := getattr(req, key)) is not None:
            options[key] = float(value)
    max_tokens = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    if max_tokens is not None:
        options["num_predict"] = max_tokens
    if req.seed is not None:
        options["seed"] = req.seed
    options |= extra_sampling(req)
    # As Ollama: a string or a list of them; other values are ignored, and so are a list's other items.
    stop = req.stop
    if isinstance(stop, str):
        options["stop"] = [stop]
    elif isinstance(stop, list):
        wrong = next((item for item in stop if not isinstance(item, str)), "")
        if wrong != "" and strict_stop:
            raise InvalidRequest(f"invalid type for 'stop' field: {_go_dynamic_type(wrong)}")
        options["stop"] = [item for item in stop if isinstance(item, str)]
    return options


# llama-server's extra body fields, the native options of the same names (checked there).
EXTRA_SAMPLING = ("grammar", *DRY_XTC)


def extra_sampling(req: Any) -> dict[str, Any]:
    """The extra fields a decoded request carries, as native options."""
    return {key: value for key in EXTRA_SAMPLING if (value := getattr(req, key, None)) is not None}


def _go_dynamic_type(value: object) -> str:
    """Go's ``%T`` of a value decoded into ``any`` (what Ollama's stop error prints)."""
    if value is None:
        return "<nil>"
    return {bool: "bool", int: "float64", float: "float64", str: "string", list: "[]interface {}"}.get(
        type(value), "map[string]interface {}"
    )


def format_value(kind: str, schema: object) -> object:
    """OpenAI's response format as Ollama's ``format``: ``"json"``, a JSON schema, or none."""
    if kind == "json_object":
        return "json"
    if kind == "json_schema":
        return schema
    return None


def _format(req: ChatCompletionRequest) -> object:
    fmt = req.response_format
    if fmt is None:
        return None
    schema = fmt.json_schema.schema if fmt.json_schema is not None else None
    return format_value((fmt.type or "").strip().lower(), schema)


# The data URLs Ollama's OpenAI layer takes (openai.go decodeImageURL); a blank type as /api/chat would.
_DATA_URL_PREFIXES = ("data:;base64,", *(f"data:image/{kind};base64," for kind in ("jpeg", "jpg", "png", "webp")))


def _image_url_data(url: str) -> Media:
    """The base64 payload of an ``image_url``, checked as Ollama checks it, decoded."""
    if url.startswith(("http://", "https://")):
        raise InvalidRequest("image URLs are not currently supported, please use base64 encoded data instead")
    prefix = next((p for p in _DATA_URL_PREFIXES if url.startswith(p)), None)
    if prefix is None:
        raise InvalidRequest("invalid image input")
    try:
        return decode_media(url[len(prefix) :])
    except Base64Error:
        raise InvalidRequest("invalid image input") from None


def input_audio_data(value: object) -> Media:
    """The base64 payload of an ``input_audio`` part, checked as Ollama checks it, decoded; its ``format``
    is not read (the bytes say what they are, as they say it to libmtmd)."""
    if not isinstance(value, dict):
        raise InvalidRequest("invalid input_audio format")
    missing = "invalid input_audio format: missing data"
    return checked_media(value.get("data"), not_a_string=missing, invalid="invalid input_audio base64 data")


def content_parts(content: list[ContentPart], unknown: str = "invalid message format") -> list[str | Media]:
    """A message's parts in order: each text, or each item (``Media``, base64): an image or, as
    Ollama carries them, an audio clip (``input_audio``), both in Ollama's ``images``, checked as
    Ollama checks them; the parts' shapes were checked by the decode. A part of another kind is
    refused with ``unknown`` (its ``%T``: the kind)."""
    parts: list[str | Media] = []
    for part in content:
        if part.type == "text":
            if part.text is None:
                raise InvalidRequest("invalid message format")
            parts.append(part.text)
        elif part.type == "image_url":
            url = part.image_url.url if isinstance(part.image_url, ImageURL) else part.image_url
            if url is None:
                raise InvalidRequest("invalid message format")
            parts.append(_image_url_data(url))
        elif part.type == "input_audio":
            parts.append(input_audio_data(part.input_audio))
        else:
            raise InvalidRequest(unknown.replace("%T", str(part.type)))
    return parts


def content_and_media(
    content: str | list[ContentPart] | None, unknown: str = "invalid message format"
) -> tuple[str, list[Media]]:
    """A message as one: its text parts run on (as Ollama's Responses translation joins them), and
    its media (``content_parts``)."""
    if content is None or isinstance(content, str):
        return content or "", []
    parts = content_parts(content, unknown)
    return "".join(p for p in parts if not isinstance(p, Media)), [p for p in parts if isinstance(p, Media)]


def _messages(req: ChatCompletionRequest) -> list[dict[str, Any]]:
    if not req.messages:
        raise InvalidRequest("[] is too short - 'messages'")
    out = []
    for m in req.messages:
        if m.content is None and m.tool_calls is None:  # optional beside tool calls only (even [])
            raise InvalidRequest(CONTENT_TYPE.replace("%T", go_any_type(None)))
        parts = content_parts(m.content) if isinstance(m.content, list) else [m.content or ""]
        # Each item's tag where the item stood among the texts, the parts joined by "\n\n": what
        # Ollama's FromChatRequest (a message of each part) and a Go template's collate (which joins
        # one role's run of messages so) make of it, in one message, so that a template that wants
        # roles to alternate (Gemma's, Mistral's) still takes it. ``tag_media`` numbers the tags.
        texts = [PART_PLACEHOLDER if isinstance(p, Media) else p.replace(PART_PLACEHOLDER, "") for p in parts]
        message: dict[str, Any] = {"role": m.role or "user", "content": "\n\n".join(texts)}
        if media := [p for p in parts if isinstance(p, Media)]:
            message["images"] = media
        if m.reasoning:
            message["thinking"] = m.reasoning
        if m.tool_calls:
            message["tool_calls"] = [_tool_call(call) for call in m.tool_calls]
        if m.role == "tool":
            if m.name:
                message["tool_name"] = m.name
            if m.tool_call_id:
                message["tool_call_id"] = m.tool_call_id
        out.append(message)
    return name_tool_results(out)


def _tool_call(call: ToolCall) -> dict[str, Any]:
    """An OpenAI tool call in a message, as Ollama's: its id kept (templates pair results with
    calls by it), arguments decoded from their JSON string."""
    function = call.function or ToolCallFunction()
    arguments = tool_arguments(function.arguments, empty_ok=False)
    made: dict[str, Any] = {"function": {"name": function.name or "", "arguments": arguments}}
    return {"id": call.id, **made} if call.id else made


def tool_arguments(value: str | dict[str, Any] | None, *, empty_ok: bool = True) -> dict[str, Any]:
    """Tool call arguments: a JSON object, or a string holding one (OpenAI's form). ``empty_ok``:
    whether none at all (or "") is no arguments, as the Responses API reads it; a chat completion's
    are Go's ``json.Unmarshal`` of the string, which refuses "" as any text that is no object."""
    if not empty_ok and value in (None, ""):
        raise InvalidRequest(BAD_ARGUMENTS)
    if isinstance(value, str):
        try:
            value = orjson.loads(value or "{}")
        except orjson.JSONDecodeError:
            raise InvalidRequest(BAD_ARGUMENTS) from None
        if value is not None and not isinstance(value, dict):  # JSON text of something else
            raise InvalidRequest(BAD_ARGUMENTS)
    return value or {}


def think_value(reasoning_effort: str | None, reasoning: Any) -> object:
    """``reasoning.effort``, else ``reasoning_effort``, as ``think`` (Ollama's order: a ``reasoning``
    object decides even where its effort is empty)."""
    effort = (reasoning.effort if reasoning is not None else reasoning_effort) or None
    if effort is None:
        return None
    if effort not in _EFFORT:
        raise InvalidRequest(f"invalid reasoning value: {go_quote(effort)} (must be {_EFFORTS})")
    return _EFFORT[effort]


def _usage(chunk: Chunk) -> dict[str, Any]:
    u = Usage.of(chunk.stats)
    return {
        "prompt_tokens": u.prompt,
        "completion_tokens": u.completion,
        "total_tokens": u.total,
        "prompt_tokens_details": {"cached_tokens": u.cached},
    } | truncation(chunk.truncated)


def _finish_reason(chunk: Chunk, had_tool_calls: bool) -> str:
    """``length`` ranks above ``tool_calls`` (Ollama #17485): tool calls only relabel a stop, and a
    generation cut at its limit says so, its last call possibly unfinished."""
    if chunk.done_reason == "length":
        return "length"
    return "tool_calls" if had_tool_calls else "stop"


def _tool_calls(calls: list[dict[str, Any]], start: int) -> list[dict[str, Any]]:
    return [
        {
            "id": c.get("id") or tool_call_id(),
            "index": start + i,
            "type": "function",
            "function": {"name": c["function"]["name"], "arguments": dumps(c["function"]["arguments"]).decode()},
        }
        for i, c in enumerate(calls)
    ]


def _include_usage(req: ChatCompletionRequest | CompletionRequest) -> bool:
    return bool(req.stream_options and req.stream_options.include_usage)


def _refuse_load(decoded: Decoded[Any], reason: str) -> Response:
    """A chat completion always has a message (the request's check): no way to load a model."""
    raise InvalidRequest("empty request")


class _Completions:
    """What chat and text completions share: one id and ``created`` for every chunk, usage last."""

    id_prefix = ""
    chunk_object = ""  # the ``object`` of each streamed chunk

    def __init__(self, model: str, include_usage: bool) -> None:
        self.base = {"id": f"{self.id_prefix}-{random.randint(0, 998)}", "created": int(time.time()), "model": model}
        self.base["system_fingerprint"] = "fp_ollama"
        self.include_usage = include_usage

    def usage_chunk(self, final: Chunk) -> dict[str, Any]:
        return self.base | {"object": self.chunk_object, "choices": [], "usage": _usage(final)}


class ChatCompletion(_Completions):
    id_prefix, chunk_object = "chatcmpl", "chat.completion.chunk"

    def whole(self, final: Chunk) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": final.delta.content}
        if final.delta.thinking:
            message["reasoning"] = final.delta.thinking
        if final.delta.tool_calls:
            message["tool_calls"] = _tool_calls(final.delta.tool_calls, 0)
        choice = {
            "index": 0,
            "message": message,
            "logprobs": {"content": final.logprobs} if final.logprobs else None,
            "finish_reason": _finish_reason(final, bool(final.delta.tool_calls)),
        }
        return self.base | {"object": "chat.completion", "choices": [choice], "usage": _usage(final)}

    async def stream(self, chunks: AsyncIterator[Chunk]) -> AsyncGenerator[dict[str, Any], None]:
        n_calls = 0
        role: dict[str, Any] = {"role": "assistant"}  # the first chunk's
        async for chunk in chunks:
            d, logprobs, reasoning = chunk.delta, chunk.logprobs, chunk.delta.thinking
            if reasoning and (d.content or d.tool_calls):
                # As Ollama's ToStreamChunks: reasoning that ends where the answer starts goes first, in a
                # chunk of its own (with the role where it is the first, and the logprobs), then the rest.
                yield self._chunk(role | {"reasoning": reasoning}, None, logprobs)
                role, logprobs, reasoning = {}, [], ""
            delta = dict(role)
            role = {}
            if d.content or (not chunk.done and not d.thinking and not d.tool_calls):
                delta["content"] = d.content
            if reasoning:
                delta["reasoning"] = reasoning
            if d.tool_calls:
                delta["tool_calls"] = _tool_calls(d.tool_calls, n_calls)
                n_calls += len(d.tool_calls)
            yield self._chunk(delta, _finish_reason(chunk, n_calls > 0) if chunk.done else None, logprobs)
            if chunk.done and self.include_usage:
                yield self.usage_chunk(chunk)

    def _chunk(self, delta: dict[str, Any], reason: str | None, logprobs: list[dict[str, Any]]) -> dict[str, Any]:
        """As Ollama's chunks: finish_reason in every one (null until the last), logprobs only where there are some."""
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": reason}
        if logprobs:
            choice["logprobs"] = {"content": logprobs}
        return self.base | {"object": self.chunk_object, "choices": [choice]}


class TextCompletion(_Completions):
    id_prefix, chunk_object = "cmpl", "text_completion"

    def whole(self, final: Chunk) -> dict[str, Any]:
        choice = {
            "text": final.delta.content,
            "index": 0,
            "logprobs": _completion_logprobs(final.logprobs),
            "finish_reason": _finish_reason(final, False),
        }
        return self.base | {"object": self.chunk_object, "choices": [choice], "usage": _usage(final)}

    def loaded(self, reason: str) -> dict[str, Any]:
        """The answer to a call that only loaded the model: no text, Ollama's ``done_reason`` as
        the finish reason, no tokens."""
        choice = {"text": "", "index": 0, "logprobs": None, "finish_reason": reason}
        return self.base | {"object": self.chunk_object, "choices": [choice], "usage": _usage(Chunk())}

    async def stream(self, chunks: AsyncIterator[Chunk]) -> AsyncGenerator[dict[str, Any], None]:
        async for chunk in chunks:
            choice: dict[str, Any] = {
                "text": chunk.delta.content,
                "index": 0,
                "logprobs": _completion_logprobs(chunk.logprobs),
            }
            choice["finish_reason"] = _finish_reason(chunk, False) if chunk.done else None
            yield self.base | {"object": self.chunk_object, "choices": [choice]}
            if chunk.done and self.include_usage:
                yield self.usage_chunk(chunk)


def _completion_logprobs(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The legacy completions shape: parallel lists of tokens, their log probabilities, the top
    alternatives of each (token to logprob) and each token's offset in the text."""
    if not entries:
        return None
    offsets, offset = [], 0
    for entry in entries:
        offsets.append(offset)
        offset += len(entry["token"])
    return {
        "tokens": [e["token"] for e in entries],
        "token_logprobs": [e["logprob"] for e in entries],
        "top_logprobs": [{t["token"]: t["logprob"] for t in e.get("top_logprobs") or []} for e in entries],
        "text_offset": offsets,
    }


def _decode_chat(body: dict[str, Any]) -> Decoded[ChatCall]:
    req = decode(body, ChatCompletionRequest)
    messages = _messages(req)  # its errors before the options', as Ollama's order has them
    native = ChatRequest(
        model=req.model or "",
        options=sampling_options(req),
        format=_format(req),
        think=think_value(req.reasoning_effort, req.reasoning),
        logprobs=bool(req.logprobs),
        top_logprobs=req.top_logprobs or 0,
    )
    # The tools were decoded as api.Tools already: the templates read them as sent.
    choice = openai_tool_choice(req.tool_choice, req.parallel_tool_calls)
    call = ChatCall.of(native, messages, body.get("tools") or None, tool_choice=choice)
    include_usage = _include_usage(req)
    return Decoded(call, bool(req.stream), lambda gen: ChatCompletion(native.model or "", include_usage))


def _decode_completion(body: dict[str, Any]) -> Decoded[GenerateRequest]:
    req = decode(body, CompletionRequest)
    prompt = req.prompt or ""
    # As Ollama's middleware: the prompt goes through the model's template (no raw), and an
    # integer ``logprobs`` asks for that many alternatives per token.
    logprobs = req.logprobs or 0
    native = GenerateRequest(
        model=req.model or "",
        prompt=prompt,
        suffix=req.suffix or "",
        # Ollama's completions also always send both penalties (0 unless given) and read a top_p of 0 as 1.
        options=sampling_options(req, strict_stop=True)
        | {
            "frequency_penalty": float(req.frequency_penalty or 0),
            "presence_penalty": float(req.presence_penalty or 0),
            "top_p": float(req.top_p) if req.top_p else 1.0,
        },
        logprobs=True if logprobs > 0 else None,
        top_logprobs=logprobs if logprobs > 0 else None,
    )
    include_usage = _include_usage(req)
    return Decoded(native, bool(req.stream), lambda gen: TextCompletion(native.model or "", include_usage))


def _completion_loaded(decoded: Decoded[GenerateRequest], reason: str) -> Response:
    """An empty prompt loads the model and generates nothing, as Ollama's completions answer it
    (its generate handler's load call): one completion, or one chunk and ``[DONE]``."""
    answer = TextCompletion(decoded.native.model or "", False).loaded(reason)
    if not decoded.stream:
        return JSONResponse(answer)
    framing = SSE()
    return Response(framing.frame(answer) + framing.end(), media_type=framing.media_type)


chat_completions = Endpoint(OPENAI, ChatCompletionRequest, _decode_chat, start_chat, SSE, _refuse_load).handler()
completions = Endpoint(OPENAI, CompletionRequest, _decode_completion, start_generate, SSE, _completion_loaded).handler()


@OPENAI.boundary
async def embeddings(request: Request) -> Response:
    req = decode(await read_json(request, EmbedRequest, OPENAI.empty_body), EmbedRequest)
    name, dimensions, encoding = req.model or "", req.dimensions, (req.encoding_format or "float").lower()
    if encoding not in ("float", "base64"):  # as Ollama's, in any case
        raise InvalidRequest(
            f"Invalid value for 'encoding_format' = {req.encoding_format}. Supported values: ['float', 'base64']."
        )
    raw = req.input
    if raw is None or raw == []:
        raise InvalidRequest("invalid input")
    if isinstance(raw, str):
        texts = [raw]
    elif isinstance(raw, list) and all(isinstance(t, str) for t in raw):
        texts = raw
    else:
        raise InvalidRequest("invalid input type")
    options = options_object(req.options, "EmbedRequest")
    vectors, n_prompt, _ = await embed_texts(request, name, {"dimensions": dimensions, "options": options}, texts)
    data = []
    for i, vector in enumerate(vectors):
        value: object = vector
        if encoding == "base64":
            value = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
        data.append({"object": "embedding", "embedding": value, "index": i})
    usage = {"prompt_tokens": n_prompt, "total_tokens": n_prompt}
    return JSONResponse({"object": "list", "data": data, "model": name, "usage": usage})


def _model_object(record: ModelRecord, asked: str | None = None) -> dict[str, Any]:
    """One model as OpenAI lists it. A retrieve names it as it was asked for (Ollama's
    ``ToModel(r, c.Param("model"))``), its owner the namespace of that name."""
    created = int(record.modified_at.timestamp())
    owner = (record.name if asked is None else parse_name(asked)).namespace
    return {"id": asked or record.short_name, "object": "model", "created": created, "owned_by": owner}


async def list_records(request: Request) -> list[ModelRecord]:
    return await run_in_threadpool(services(request).store.list_models)  # type: ignore[no-any-return]


@OPENAI.boundary
async def models(request: Request) -> Response:
    records = await list_records(request)
    return JSONResponse({"object": "list", "data": [_model_object(r) for r in records] or None})


@OPENAI.boundary
async def model(request: Request) -> Response:
    name = request.path_params["model"]
    try:
        # The store's lookup, as /api/show's: a missing tag means latest, and case does not matter.
        record = await run_in_threadpool(services(request).store.get, name)
    except InvalidRequest:
        raise NotFound(f"model '{name}' not found") from None  # the store's own words name the tag
    return JSONResponse(_model_object(record, name))
