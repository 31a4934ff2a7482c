"""POST /api/generate: a completion for one prompt, streamed as NDJSON (or one object)."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..engine.client import LoadedModel
from ..errors import InvalidRequest
from .encoders import JSONResponse
from .errors import read_json
from .inference import (
    Chunk,
    Generation,
    Rendered,
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
from .render_budget import RenderBudget
from .wire import bool_field, created_at, decode_error, images_field, list_field, string_field

_REQUEST = "GenerateRequest"


async def start_generate(request: Request, body: dict[str, Any], t_start: int) -> Generation | str:
    """Validate a generate body and start it: a running Generation, or a load/unload sentinel's reason."""
    shared = SharedFields.of(body, _REQUEST)
    name = string_field(body, "model", _REQUEST)
    prompt = string_field(body, "prompt", _REQUEST)
    suffix = string_field(body, "suffix", _REQUEST)
    system = string_field(body, "system", _REQUEST)
    template = string_field(body, "template", _REQUEST)
    raw = bool(bool_field(body, "raw", _REQUEST))
    context = _context(body)
    images = images_field(body, _REQUEST)
    model = await resolve_model(request.app.state.store, name, empty_message="model '' not found", empty_status=404)
    if raw and (template or system or context):
        raise InvalidRequest("raw mode does not support template, system, or context")
    pool = request.app.state.pool
    if not prompt and not images:
        return await sentinel(pool, model, shared.keep_alive, resolve_options(body.get("options"), model.record.params))
    if not model.has("completion"):
        raise InvalidRequest(f'"{name}" does not support generate')
    thinking = thinking_for(model, body, name)
    if suffix and not model.has("insert"):
        raise InvalidRequest(f"{model.full_name} does not support insert")
    check_images(model, images)
    options = resolve_options(body.get("options"), model.record.params)
    system = system or model.record.system or ""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    if not context:
        messages += model.record.messages
    messages.append({"role": "user", "content": prompt})
    templated = chat_prompt(model, messages, thinking=thinking, go_template=template or None)

    def render(loaded: LoadedModel, limit: int | None, budget: RenderBudget | None) -> Rendered:
        if suffix:
            return _fill_in_the_middle(loaded, prompt, suffix)
        if raw:
            return Rendered(loaded.tokenize(prompt, add_special=True), prompt)
        rendered = templated(loaded, limit, budget)
        return Rendered(list(context) + rendered.tokens, rendered.text)

    return await prepare(
        pool,
        model,
        options,
        shared,
        render,
        thinking=thinking,
        tools=False,
        t_start=t_start,
        http_request=request,
    )


def _context(body: dict[str, Any]) -> list[int]:
    """The deprecated ``context``: token ids from an earlier answer."""
    context = list_field(body, "context", _REQUEST, "[]int") or []
    for token in context:
        if not isinstance(token, int) or isinstance(token, bool):
            raise decode_error(token, f"{_REQUEST}.context", "int")
    return context


async def generate(request: Request) -> Response:
    t_start = time.perf_counter_ns()
    body = await read_json(request)
    name = body.get("model")
    stream = bool_field(body, "stream", _REQUEST) is not False
    gen = await start_generate(request, body, t_start)
    raw = bool(body.get("raw"))
    if isinstance(gen, str):
        return JSONResponse(
            {"model": name, "created_at": created_at(), "response": "", "done": True, "done_reason": gen}
        )

    def encode(chunk: Chunk) -> dict[str, Any]:
        obj: dict[str, Any] = {"model": name, "created_at": created_at(), "response": chunk.delta.content}
        if chunk.delta.thinking:
            obj["thinking"] = chunk.delta.thinking
        if chunk.logprobs:
            obj["logprobs"] = chunk.logprobs
        obj["done"] = chunk.done
        if chunk.done:
            obj["done_reason"] = chunk.done_reason
            if not raw:
                obj["context"] = [*gen.request.prompt, *gen.generated]
            obj |= metrics(gen, chunk.stats)
        return obj

    return await respond(request, gen, encode, stream=stream)


def _fill_in_the_middle(loaded: LoadedModel, prompt: str, suffix: str) -> Rendered:
    """``<fim_pre>prompt<fim_suf>suffix<fim_mid>``: the infill layout llama.cpp's server uses."""
    fim = loaded.fim_tokens()
    if fim is None:
        raise InvalidRequest("this model's vocabulary has no fill-in-the-middle tokens")
    pre, suf, mid = fim
    tokens = [pre, *loaded.tokenize(prompt, add_special=False), suf, *loaded.tokenize(suffix, add_special=False), mid]
    return Rendered(tokens, prompt)
