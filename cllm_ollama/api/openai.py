"""OpenAI-compatible /v1/*: translate the request onto the native handlers, and the output back.

As Ollama's middleware does, there is no second engine path: a chat completion is an
/api/chat generation; only the shapes of requests, chunks and errors differ.
"""

from __future__ import annotations

import base64
import logging
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import numpy as np
import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..errors import CllmError, InvalidRequest, NotFound
from ..store.store import ModelRecord
from .chat import start_chat
from .embed import embed_texts
from .encoders import JSONResponse, dumps
from .errors import read_json
from .generate import start_generate
from .inference import Chunk, Generation, collect, releasing_on_error, started, until_disconnect
from .wire import tool_call_id

log = logging.getLogger("cllm.api")

_EFFORT = {"none": False, "minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "max"}
_EFFORT |= {"ultra": "max", "max": "max"}


def openai_error(status: int, message: str) -> JSONResponse:
    kind = {400: "invalid_request_error", 404: "not_found_error"}.get(status, "api_error")
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": None}}, status_code=status)


def openai_errors(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """OpenAI clients parse ``{"error": {"message", "type"}}``, not Ollama's ``{"error": msg}``."""

    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except CllmError as exc:
            return openai_error(exc.status_code, exc.message)
        except Exception as exc:
            log.exception("unhandled error on %s", request.url.path)
            return openai_error(500, f"internal error: {exc}")

    return wrapped


def sampling_options(body: dict[str, Any]) -> dict[str, Any]:
    """Sampling fields onto Ollama options; temperature and top_p default to 1.0 as in OpenAI."""
    options: dict[str, Any] = {
        "temperature": body["temperature"] if body.get("temperature") is not None else 1.0,
        "top_p": body["top_p"] if body.get("top_p") is not None else 1.0,
    }
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None:
        options["num_predict"] = max_tokens
    for ours, theirs in (("seed", "seed"), ("frequency_penalty", "frequency_penalty")):
        if body.get(theirs) is not None:
            options[ours] = body[theirs]
    if body.get("presence_penalty") is not None:
        options["presence_penalty"] = body["presence_penalty"]
    stop = body.get("stop")
    if stop is not None:
        options["stop"] = [stop] if isinstance(stop, str) else stop
    return options


def _format(body: dict[str, Any]) -> object:
    fmt = body.get("response_format") or {}
    if not isinstance(fmt, dict):
        raise InvalidRequest("response_format must be an object")
    if fmt.get("type") == "json_object":
        return "json"
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema")
    return None


def content_and_images(content: object) -> tuple[str, list[str]]:
    if content is None or isinstance(content, str):
        return content or "", []
    if not isinstance(content, list):
        raise InvalidRequest("invalid message content type")
    texts, images = [], []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(str(part.get("text", "")))
        elif kind == "image_url":
            url = part["image_url"]["url"] if isinstance(part.get("image_url"), dict) else part.get("image_url")
            if not isinstance(url, str) or not url.startswith("data:"):
                raise InvalidRequest("image URLs are not currently supported, please use base64 encoded data instead")
            images.append(url.split(",", 1)[-1])
        else:
            raise InvalidRequest(f"invalid message content type: {kind}")
    return "\n".join(texts), images


def _messages(raw: object) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        raise InvalidRequest(f"{orjson.dumps(raw).decode() if raw is not None else '[]'} is too short - 'messages'")
    out = []
    for m in raw:
        if not isinstance(m, dict):
            raise InvalidRequest("invalid message")
        content, images = content_and_images(m.get("content"))
        message: dict[str, Any] = {"role": m.get("role", "user"), "content": content}
        if images:
            message["images"] = images
        if m.get("reasoning"):
            message["thinking"] = m["reasoning"]
        if m.get("tool_calls"):
            message["tool_calls"] = [
                {"function": {"name": f["name"], "arguments": tool_arguments(f.get("arguments"))}}
                for f in (c["function"] for c in m["tool_calls"])
            ]
        if m.get("role") == "tool":
            if m.get("name"):
                message["tool_name"] = m["name"]
            if m.get("tool_call_id"):
                message["tool_call_id"] = m["tool_call_id"]
        out.append(message)
    return out


def tool_arguments(value: object) -> object:
    if isinstance(value, str):
        try:
            return orjson.loads(value or "{}")
        except orjson.JSONDecodeError as exc:
            raise InvalidRequest(f"invalid tool call arguments: {exc}") from exc
    return value or {}


def think_value(body: dict[str, Any]) -> object:
    effort = body.get("reasoning_effort")
    if effort is None and isinstance(body.get("reasoning"), dict):
        effort = body["reasoning"].get("effort")
    if effort is None:
        return None
    if effort not in _EFFORT:
        raise InvalidRequest(f'invalid reasoning value: \'{effort}\' (must be "high", "medium", "low", or "none")')
    return _EFFORT[effort]


def _usage(chunk: Chunk) -> dict[str, Any]:
    """OpenAI's usage; ``cached_tokens`` counts prompt tokens whose KV was reused, not computed."""
    prompt = chunk.stats.prompt_tokens if chunk.stats else 0
    completion = chunk.stats.eval_tokens if chunk.stats else 0
    cached = chunk.stats.prompt_cached if chunk.stats else 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def _finish_reason(chunk: Chunk, had_tool_calls: bool) -> str:
    if had_tool_calls:
        return "tool_calls"
    return "length" if chunk.done_reason == "length" else "stop"


def _tool_calls(calls: list[dict[str, Any]], start: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{tool_call_id()}",
            "index": start + i,
            "type": "function",
            "function": {"name": c["function"]["name"], "arguments": dumps(c["function"]["arguments"]).decode()},
        }
        for i, c in enumerate(calls)
    ]


def _sse(objects: AsyncGenerator[dict[str, Any], None]) -> StreamingResponse:
    async def lines() -> AsyncGenerator[bytes, None]:
        try:
            async for obj in objects:
                yield b"data: " + dumps(obj) + b"\n\n"
        except CllmError as exc:
            yield b"data: " + dumps({"error": {"message": exc.message, "type": "api_error"}}) + b"\n\n"
        finally:
            await objects.aclose()
        yield b"data: [DONE]\n\n"

    return StreamingResponse(lines(), media_type="text/event-stream")


def _include_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise InvalidRequest("stream_options must be an object")
    return bool(options.get("include_usage"))


def _sentinel(gen: Generation | str) -> Generation:
    if isinstance(gen, str):  # cannot happen: OpenAI requests always carry a prompt
        raise InvalidRequest("empty request")
    return gen


@openai_errors
async def chat_completions(request: Request) -> Response:
    t_start = time.perf_counter_ns()
    body = await read_json(request)
    native: dict[str, Any] = {
        "model": body.get("model") or "",
        "messages": _messages(body.get("messages")),
        "options": sampling_options(body),
        "format": _format(body),
        "tools": body.get("tools") or None,
        "think": think_value(body),
        "logprobs": bool(body.get("logprobs")),
        "top_logprobs": body.get("top_logprobs") or 0,
    }
    include_usage = _include_usage(body)
    gen = _sentinel(await start_chat(request, native, t_start))
    return await releasing_on_error(gen, _chat_response(request, body, gen, native["model"], include_usage))


async def _chat_response(
    request: Request, body: dict[str, Any], gen: Generation, model: str, include_usage: bool
) -> Response:
    cid, created = f"chatcmpl-{random.randint(0, 998)}", int(time.time())
    base = {"id": cid, "created": created, "model": model, "system_fingerprint": "fp_ollama"}
    if not body.get("stream"):
        final = await until_disconnect(request, collect(gen.chunks()))
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
        return JSONResponse(base | {"object": "chat.completion", "choices": [choice], "usage": _usage(final)})

    async def chunks() -> AsyncGenerator[dict[str, Any], None]:
        n_calls = 0
        first = True
        async for chunk in gen.chunks():
            delta: dict[str, Any] = {}
            if first:
                delta["role"] = "assistant"
                first = False
            if chunk.delta.content or (not chunk.done and not chunk.delta.thinking and not chunk.delta.tool_calls):
                delta["content"] = chunk.delta.content
            if chunk.delta.thinking:
                delta["reasoning"] = chunk.delta.thinking
            if chunk.delta.tool_calls:
                delta["tool_calls"] = _tool_calls(chunk.delta.tool_calls, n_calls)
                n_calls += len(chunk.delta.tool_calls)
            logprobs = {"content": chunk.logprobs} if chunk.logprobs else None
            if not chunk.done:
                choice = {"index": 0, "delta": delta, "logprobs": logprobs}
                yield base | {"object": "chat.completion.chunk", "choices": [choice]}
                continue
            finish = {"index": 0, "delta": delta, "finish_reason": _finish_reason(chunk, n_calls > 0)}
            yield base | {"object": "chat.completion.chunk", "choices": [finish]}
            if include_usage:
                yield base | {"object": "chat.completion.chunk", "choices": [], "usage": _usage(chunk)}

    stream = await started(request, chunks())
    return _sse(stream)


@openai_errors
async def completions(request: Request) -> Response:
    t_start = time.perf_counter_ns()
    body = await read_json(request)
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise InvalidRequest("invalid prompt: only a string is supported")
    native = {
        "model": body.get("model") or "",
        "prompt": prompt,
        "suffix": body.get("suffix") or "",
        "raw": True,
        "options": sampling_options(body),
    }
    if not prompt:
        raise InvalidRequest("prompt is required")
    include_usage = _include_usage(body)
    gen = _sentinel(await start_generate(request, native, t_start))
    return await releasing_on_error(gen, _completion_response(request, body, gen, native["model"], include_usage))


async def _completion_response(
    request: Request, body: dict[str, Any], gen: Generation, model: str, include_usage: bool
) -> Response:
    base = {"id": f"cmpl-{random.randint(0, 998)}", "created": int(time.time()), "model": model}
    base["system_fingerprint"] = "fp_ollama"
    if not body.get("stream"):
        final = await until_disconnect(request, collect(gen.chunks()))
        choice = {
            "text": final.delta.content,
            "index": 0,
            "logprobs": None,
            "finish_reason": _finish_reason(final, False),
        }
        return JSONResponse(base | {"object": "text_completion", "choices": [choice], "usage": _usage(final)})

    async def chunks() -> AsyncGenerator[dict[str, Any], None]:
        async for chunk in gen.chunks():
            choice: dict[str, Any] = {"text": chunk.delta.content, "index": 0, "logprobs": None}
            choice["finish_reason"] = _finish_reason(chunk, False) if chunk.done else None
            yield base | {"object": "text_completion", "choices": [choice]}
            if chunk.done and include_usage:
                yield base | {"object": "text_completion", "choices": [], "usage": _usage(chunk)}

    stream = await started(request, chunks())
    return _sse(stream)


@openai_errors
async def embeddings(request: Request) -> Response:
    body = await read_json(request)
    encoding = body.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise InvalidRequest(
            f"Invalid value for 'encoding_format' = {encoding}. Supported values: ['float', 'base64']."
        )
    raw = body.get("input")
    if isinstance(raw, str):
        texts = [raw]
    elif isinstance(raw, list) and raw and all(isinstance(t, str) for t in raw):
        texts = raw
    else:
        raise InvalidRequest("invalid input type")
    name = body.get("model") or ""
    vectors, n_prompt, _ = await embed_texts(request, name, {"dimensions": body.get("dimensions")}, texts)
    data = []
    for i, vector in enumerate(vectors):
        value: object = vector
        if encoding == "base64":
            value = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
        data.append({"object": "embedding", "embedding": value, "index": i})
    usage = {"prompt_tokens": n_prompt, "total_tokens": n_prompt}
    return JSONResponse({"object": "list", "data": data, "model": name, "usage": usage})


def _model_object(record: ModelRecord) -> dict[str, Any]:
    created = int(record.modified_at.timestamp())
    return {"id": record.short_name, "object": "model", "created": created, "owned_by": record.name.namespace}


async def list_records(request: Request) -> list[ModelRecord]:
    return await run_in_threadpool(request.app.state.store.list_models)  # type: ignore[no-any-return]


@openai_errors
async def models(request: Request) -> Response:
    records = await list_records(request)
    return JSONResponse({"object": "list", "data": [_model_object(r) for r in records] or None})


@openai_errors
async def model(request: Request) -> Response:
    name = request.path_params["model"]
    for record in await list_records(request):
        if record.short_name == name or record.short_name == f"{name}:latest":
            return JSONResponse(_model_object(record))
    raise NotFound(f"model '{name}' not found")
