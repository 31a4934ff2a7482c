"""POST /api/generate: a completion for one prompt, streamed as NDJSON (or one object)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ...chatformat.gotemplate import TemplateError, parse_ollama, render_ollama
from ...chatformat.prompt import ChatPrompt, Rendered, Tokenizer
from ...chatformat.render_budget import RenderBudget
from ...errors import InvalidRequest
from ..encoders import NDJSON, JSONResponse
from ..endpoint import Decoded, EachChunk, Endpoint
from ..errors import OLLAMA
from ..lifecycle import Chunk, Generation, preload, unload
from ..media import tag_media
from ..options import resolve_options
from ..output_shapes import created_at, metrics, truncation
from ..request_fields import SharedFields, check_media, decoded_media, think_level, thinking_for
from ..resolve import ResolvedModel, resolve_model
from ..schemas.ollama import GenerateRequest
from ..services import services
from .errors import decode_bound

log = logging.getLogger("cllm.api")


async def start_generate(request: Request, req: GenerateRequest, t_start: int) -> Generation | str:
    """Check a generate request (decoded once: from /api/generate, or built by /v1/completions)
    against its model, in GenerateHandler's order: its Generation, or a load/unload call's reason
    once done. An unload is answered before anything else is read; a load only once the request
    passed what Ollama checks before it loads (``ollama run`` sends ``think`` with its load for that)."""
    shared = SharedFields.of(req)
    name, prompt, suffix, template = req.model or "", req.prompt or "", req.suffix or "", req.template or ""
    system, raw, context = req.system or "", bool(req.raw), req.context or []
    media = decoded_media(req.images)
    pool = services(request).pool
    missing = f"model '{name}' not found"
    model = await resolve_model(services(request).store, name, empty_message=missing, empty_status=404)
    if not prompt and shared.keep_alive == 0:
        return await unload(pool, model)
    thinking = _checked(model, req)
    options = resolve_options(req.options, model.record.params)
    if not prompt:  # Ollama tests the prompt alone: images or a suffix without one still just load
        return await preload(pool, model, shared.keep_alive, options)
    check_media(model, media)
    system = system or model.record.system or ""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    if not context:
        messages += model.record.messages
    messages.append(
        {"role": "user", "content": prompt, "images": media} if media else {"role": "user", "content": prompt}
    )
    messages, tagged = tag_media(messages, clear=True, renderer=model.record.renderer_in_use)
    if media and suffix:
        raise InvalidRequest("images cannot be combined with a suffix")
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
        if suffix and not raw:  # raw: the prompt as it is, its suffix unread (GenerateHandler)
            go_template = _infill_template(template, model.record.template)
            rendered = _fill_in_the_middle(loaded, prompt, suffix, go_template, budget, templated.go_think())
        elif raw:
            return Rendered(loaded.tokenize(prompt, add_special=True), prompt)
        else:
            rendered = templated(loaded, limit, budget)
        return rendered if media else replace(rendered, tokens=list(context) + rendered.tokens)

    # A raw prompt places its media where its own [img-N] tags stand (else first).
    return Generation(
        request,
        model,
        options,
        shared,
        render,
        thinking=thinking,
        tools=False,
        t_start=t_start,
        media=tagged,
        raw=raw,
        media_context=tuple(context) if media else (),
    )


def _checked(model: ResolvedModel, req: GenerateRequest) -> bool:
    """What GenerateHandler refuses before it loads the model, in its order: raw mode's
    conflicts, ``think`` on a model that cannot, then the capabilities (scheduleRunner's
    CheckCapabilities: completion, then insert for a suffix). Whether to think."""
    name = req.model or ""
    if req.raw and (req.template or req.system or req.context):
        raise InvalidRequest("raw mode does not support template, system, or context")
    thinking = thinking_for(model, req, name)
    if not model.has("completion"):
        raise InvalidRequest(f'"{name}" does not support generate')
    if req.suffix and not model.has("insert"):
        raise InvalidRequest(f"{model.full_name} does not support insert")
    return thinking


def _infill_template(request_template: str, model_template: str | None) -> str | None:
    """The Go template a suffix is rendered with, as GenerateHandler picks it: the request's
    (executed whatever it names), else the model's where it names ``.Suffix`` (what gives Ollama's
    models insert); None: the vocabulary's FIM tokens, cllm's other way to insert."""
    if request_template:
        return request_template
    if not model_template:
        return None
    try:
        named = "suffix" in parse_ollama(model_template).vars
    except TemplateError as e:  # its chats fall back too (``render_any``): the FIM tokens serve here
        log.warning("the model's template cannot be parsed (%s): a suffix goes between its FIM tokens", e.message)
        return None
    return model_template if named else None


def _fill_in_the_middle(
    loaded: Tokenizer,
    prompt: str,
    suffix: str,
    go_template: str | None,
    budget: RenderBudget | None,
    think: Mapping[str, Any],
) -> Rendered:
    """``go_template`` executed with ``{Prompt, Suffix}`` (and ``think``'s values), as Ollama's
    Template.Execute does with a suffix, tokenized as any Go template's render is (the tokenizer
    adds BOS); without one, ``<fim_pre>prompt<fim_suf>suffix<fim_mid>``, llama.cpp's infill layout."""
    if go_template is not None:
        text = render_ollama(go_template, [], prompt=prompt, suffix=suffix, budget=budget, **think)
        return Rendered(loaded.tokenize(text, add_special=True), text)
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
    req = decode_bound(body, GenerateRequest)
    name, raw = req.model, bool(req.raw)
    render_only = bool(req.debug_render_only)
    return Decoded(req, req.stream is not False, lambda gen: EachChunk(partial(_encode, name, raw, gen)), render_only)


def _loaded(decoded: Decoded[GenerateRequest], reason: str) -> Response:
    name = decoded.native.model
    return JSONResponse(
        {"model": name, "created_at": created_at(), "response": "", "done": True, "done_reason": reason}
    )


generate = Endpoint(OLLAMA, GenerateRequest, _decode, start_generate, NDJSON, _loaded).handler()
