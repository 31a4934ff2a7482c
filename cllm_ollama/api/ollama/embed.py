"""POST /api/embed (batched, normalised) and the legacy POST /api/embeddings (one, raw)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ...errors import InvalidRequest, NotFound
from ..encoders import JSONResponse
from ..errors import read_json
from ..lifecycle import lease
from ..options import resolve_options
from ..request_fields import keep_alive_of
from ..resolve import ResolvedModel, checked_reference, resolve_model
from ..schemas.ollama import EmbeddingRequest, EmbedRequest
from ..services import services
from .errors import decode_bound


async def _resolve(request: Request, name: str, *, empty_message: str, empty_status: int) -> ResolvedModel:
    try:
        return await resolve_model(
            services(request).store, name, empty_message=empty_message, empty_status=empty_status
        )
    except NotFound:
        # The one place Ollama still says "try pulling it first" (handleScheduleError).
        raise NotFound(f'model "{name}" not found, try pulling it first') from None


async def embed_texts(
    request: Request, name: str, body: dict[str, Any], texts: list[str], *, normalize: bool = True
) -> tuple[list[list[float]], int, int]:
    """Vectors for ``texts``, the prompt token count, and how long loading took (ns)."""
    model = await _resolve(request, name, empty_message="model '' not found", empty_status=404)
    return await _embed(request, model, body, texts, normalize=normalize)


async def _embed(
    request: Request, model: ResolvedModel, body: dict[str, Any], texts: list[str], *, normalize: bool
) -> tuple[list[list[float]], int, int]:
    if model.has("rerank"):  # its pooled output is two classifier scores, not an embedding
        raise InvalidRequest(f'"{model.requested}" does not support embeddings')
    options = resolve_options(body.get("options"), model.record.params, request_type="EmbedRequest")
    pool = services(request).pool
    t0 = time.perf_counter_ns()
    async with lease(pool, model, options, keep_alive_of(body)) as entry:
        load_ns = time.perf_counter_ns() - t0
        loaded = entry.model
        if not texts:
            return [], 0, load_ns
        inputs = await run_in_threadpool(lambda: [loaded.tokenize(t, add_special=True) for t in texts])
        limit = loaded.embedder.n_ctx
        if any(len(tokens) > limit for tokens in inputs):
            if body.get("truncate") is False:
                raise InvalidRequest("the input length exceeds the context length")
            inputs = await run_in_threadpool(
                lambda: [
                    cut_text(tokens, loaded.tokenize(t, add_special=False), limit) if len(tokens) > limit else tokens
                    for t, tokens in zip(texts, inputs, strict=True)
                ]
            )
        if any(not tokens for tokens in inputs):
            raise InvalidRequest("cannot embed an empty input")
        vectors = await loaded.embedder.embed(inputs, normalize=normalize)
    # Ollama cuts to ``dimensions`` only where it is positive and below the vector's size; any
    # other value is ignored (the decode checked its type).
    dimensions = body.get("dimensions")
    if isinstance(dimensions, int) and dimensions > 0:
        vectors = [_cut(v, dimensions) if dimensions < len(v) else v for v in vectors]
    return [v.tolist() for v in vectors], sum(len(t) for t in inputs), load_ns


def cut_text(tokens: list[int], text: list[int], limit: int) -> list[int]:
    """``tokens`` (an input's ``text`` tokens with the special tokens the model adds around them)
    cut to ``limit`` in the text, the specials kept at both ends, as Ollama's cut of the text
    does: an embedder that pools the last token (Qwen3-Embedding) reads its end-of-text token."""
    for lead in range(len(tokens) - len(text) + 1):
        if tokens[lead : lead + len(text)] == text:
            trail = tokens[lead + len(text) :]
            room = limit - lead - len(trail)
            return tokens[:lead] + text[:room] + trail if room > 0 else tokens[:limit]
    return tokens[:limit]


def _cut(vector: np.ndarray, dimensions: int) -> np.ndarray:
    cut = vector[:dimensions]
    norm = float(np.linalg.norm(cut))
    return cut / norm if norm > 0 else cut


async def embed(request: Request) -> Response:
    t_start = time.perf_counter_ns()
    body = await read_json(request, EmbedRequest)
    req = decode_bound(body, EmbedRequest)
    name = req.model or ""
    missing = f"model '{name}' not found"
    checked_reference(name, empty_message=missing, empty_status=404)  # before the input, as EmbedHandler
    texts = _texts(req.input)
    model = await _resolve(request, name, empty_message=missing, empty_status=404)
    vectors, n_prompt, load_ns = await _embed(request, model, body, texts, normalize=True)
    out: dict[str, Any] = {"model": name, "embeddings": vectors}
    if texts:
        out |= {
            "total_duration": time.perf_counter_ns() - t_start,
            "load_duration": load_ns,
            "prompt_eval_count": n_prompt,
        }
    return JSONResponse(out)


async def embeddings(request: Request) -> Response:
    body = await read_json(request, EmbeddingRequest)
    req = decode_bound(body, EmbeddingRequest)
    name, prompt = req.model or "", req.prompt or ""
    model = await _resolve(request, name, empty_message="model is required", empty_status=400)
    vectors, _, _ = await _embed(request, model, body, [prompt] if prompt else [], normalize=False)
    return JSONResponse({"embedding": vectors[0] if vectors else []})


def _texts(raw: object) -> list[str]:
    """EmbedHandler's ``input``: a string (none if empty) or strings; anything else is a 400."""
    if raw is None or raw == "":
        return []
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and all(isinstance(t, str) for t in raw):
        return raw
    raise InvalidRequest("invalid input type")
