"""POST /api/generate: a completion for one prompt, streamed as NDJSON (or one object)."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ...chatformat.prompt import ChatPrompt, Rendered, Tokenizer
from ...chatformat.render_budget import RenderBudget
from ...errors import InvalidRequest
from ..encoders import NDJSON, JSONResponse
from ..endpoint import Decoded, EachChunk, Endpoint
from ..errors import OLLAMA
from ..lifecycle import Chunk, Generation, sentinel
from ..media import tag_media
from ..options import resolve_options
from ..output_shapes import created_at, metrics, truncation
from ..request_fields import SharedFields, check_media, decoded_media, think_level, thinking_for
from ..resolve import resolve_model
from ..schemas.ollama import GenerateRequest
from ..services import services
from .errors import decode


async def start_generate(request: Request, req: GenerateRequest, t_start: int) -> Generation | str:
    """Check a generate request (decoded once: from /api/generate, or built by /v1/completions)
    against its model: its Generation, or a load/unload call's reason once done."""
    shared = SharedFields.of(req)
    name, prompt, suffix, template = req.model or "", req.prompt or "", req.suffix or "", req.template or ""
    system, raw, context = req.system or "", bool(req.raw), req.context or []
    media = decoded_media(req.images)
    model = await resolve_model(services(request).store, name, empty_message="model '' not found", empty_status=404)
    if raw and (template or system or context):
        raise InvalidRequest("raw mode does not support template, system, or context")
    if not prompt and not media:
        options = resolve_options(req.options, model.record.params)
        return await sentinel(services(request).pool, model, shared.keep_alive, options)
    if not model.has("completion"):
        raise InvalidRequest(f'"{name}" does not support generate')
    thinking = thinking_for(model, req, name)
    if suffix and not model.has("insert"):
        raise InvalidRequest(f"{model.full_name} does not support insert")
    check_media(model, media)
    options = resolve_options(req.options, model.record.params)
    system = system or model.record.system or ""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    if not context:
        messages += model.record.messages
    messages.append(
        {"role": "user", "content": prompt, "images": media} if media else {"role": "user", "content": prompt}
    )
    messages, tagged = tag_media(messages, clear=True, renderer=model.record.renderer_in_use)
    if media and (suffix or context):
        raise InvalidRequest("images cannot be combined with suffix or context")
    think_set = req.think is not None
    templated = ChatPrompt(
        model,
        messages,
        thinking=thinking,
        go_template=template or None,
        think_set=think_set,
        think_level=think_level(model, req),
    )

    def render(loaded: Tokenizer, limit: int | None, budget: RenderBudget | None) -> Rendered:
        if suffix:
            return _fill_in_the_middle(loaded, prompt, suffix)
        if raw:
            return Rendered(loaded.tokenize(prompt, add_special=True), prompt)
        rendered = templated(loaded, limit, budget)
        return replace(rendered, tokens=list(context) + rendered.tokens)

    # A raw prompt places its media where its own [img-N] tags stand (else first).
    return Generation(
        request, model, options, shared, render, thinking=thinking, tools=False, t_start=t_start, media=tagged, raw=raw
    )


def _fill_in_the_middle(loaded: Tokenizer, prompt: str, suffix: str) -> Rendered:
    """``<fim_pre>prompt<fim_suf>suffix<fim_mid>``: the infill layout llama.cpp's server uses."""
    fim = loaded.fim_tokens()
    if fim is None:
        raise InvalidRequest("this model's vocabulary has no fill-in-the-middle tokens")
    pre, suf, mid = fim
    tokens = [pre, *loaded.tokenize(prompt, add_special=False), suf, *loaded.tokenize(suffix, add_special=False), mid]
    return Rendered(tokens, prompt)


def _encode(name: object, raw: bool, gen: Generation, chunk: Chunk) -> dict[str, Any]:
    obj: dict[str, Any] = {"model": name, "created_at": created_at(), "response": chunk.delta.content}
    if chunk.delta.thinking:
        obj["thinking"] = chunk.delta.thinking
    if chunk.logprobs:
        obj["logprobs"] = chunk.logprobs
    obj["done"] = chunk.done
    if chunk.done:
        obj["done_reason"] = chunk.done_reason
        if not raw:
            assert gen.request is not None
            # An image's cells are no token ids: a context sent back carries the text only.
            obj["context"] = [t for t in gen.request.prompt if t >= 0] + gen.generated
        obj |= metrics(gen.t_start, gen.load_ns, chunk.stats) | truncation(chunk.truncated)
    return obj


def _decode(body: dict[str, Any]) -> Decoded[GenerateRequest]:
    req = decode(body, GenerateRequest)
    name, raw = req.model, bool(req.raw)
    render_only = bool(req.debug_render_only)
    return Decoded(req, req.stream is not False, lambda gen: EachChunk(partial(_encode, name, raw, gen)), render_only)


def _loaded(decoded: Decoded[GenerateRequest], reason: str) -> Response:
    name = decoded.native.model
    return JSONResponse(
        {"model": name, "created_at": created_at(), "response": "", "done": True, "done_reason": reason}
    )


generate = Endpoint(OLLAMA, GenerateRequest, _decode, start_generate, NDJSON, _loaded).handler()
