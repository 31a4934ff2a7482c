"""Rerank (Ollama #3368): a reranker GGUF (rank pooling) scores each document for a query.

``/v1/rerank``, ``/rerank`` and ``/v2/rerank`` (Cohere's v2 path, which LangChain's
``CohereRerank`` calls) in the Jina/Cohere shape llama-server and vLLM serve, which LangChain's,
LlamaIndex's and LiteLLM's rerankers call: ``query``, ``documents`` (texts, or
``{"text": ...}``), ``top_n``, ``return_documents``; ``results`` of ``{index, relevance_score}``,
best first. ``/api/rerank`` as Ollama's open proposals shape it: the same request with
``keep_alive`` and ``options``, a native response with each result's ``document`` and the
durations. The pairs of concurrent requests share decodes (``engine.embedder``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..errors import InvalidRequest
from .encoders import JSONResponse
from .errors import OPENAI, read_json
from .lifecycle import lease
from .ollama.errors import decode
from .options import resolve_options
from .request_fields import parse_keep_alive_field
from .resolve import resolve_model
from .schemas.ollama import RerankRequest
from .services import services

_REQUEST = "RerankRequest"


@dataclass(frozen=True)
class Ranked:
    """Every document's score, best first (at most ``top_n``), and what scoring them took."""

    order: list[tuple[int, float]]  # (index in the request, relevance score)
    documents: list[str]
    prompt_tokens: int
    load_ns: int


def _documents(body: dict[str, Any]) -> list[str]:
    raw = body.get("documents")
    if not isinstance(raw, list) or not raw:
        raise InvalidRequest('"documents" must be a non-empty array')
    texts = []
    for doc in raw:
        if isinstance(doc, dict):  # Cohere's and Jina's {"text": ...}
            doc = doc.get("text")
        if not isinstance(doc, str):
            raise InvalidRequest('"documents" must hold strings or {"text": string} objects')
        texts.append(doc)
    return texts


async def _rank(request: Request, body: dict[str, Any]) -> Ranked:
    req = decode(body, RerankRequest)
    name = req.model or ""
    query = req.query
    if not isinstance(query, str) or not query:
        raise InvalidRequest('"query" must be a non-empty string')
    documents = _documents(body)
    top_n = req.top_n
    if top_n is not None and top_n < 1:
        raise InvalidRequest('"top_n" must be a positive integer')
    model = await resolve_model(services(request).store, name, empty_message="model is required", empty_status=400)
    if not model.has("rerank"):
        raise InvalidRequest(f'"{name}" does not support rerank')
    options = resolve_options(req.options, model.record.params, request_type=_REQUEST)
    t0 = time.perf_counter_ns()
    async with lease(services(request).pool, model, options, parse_keep_alive_field(req.keep_alive)) as entry:
        load_ns = time.perf_counter_ns() - t0
        scores, n_tokens = await entry.model.embedder.rank(query, documents)
    order = sorted(enumerate(scores), key=lambda item: item[1], reverse=True)[:top_n]
    return Ranked(order, documents, n_tokens, load_ns)


async def _jina(request: Request) -> Response:
    body = await read_json(request, RerankRequest)
    ranked = await _rank(request, body)
    return_documents = bool(body.get("return_documents"))  # its type was checked with the rest, in _rank
    results = []
    for index, score in ranked.order:
        result: dict[str, Any] = {"index": index, "relevance_score": score}
        if return_documents:
            result["document"] = {"text": ranked.documents[index]}
        results.append(result)
    usage = {"prompt_tokens": ranked.prompt_tokens, "total_tokens": ranked.prompt_tokens}
    return JSONResponse({"model": body.get("model"), "object": "list", "usage": usage, "results": results})


v1_rerank = OPENAI.boundary(_jina)
# Outside /v1 a path answers errors in Ollama's shape (errors.dialect_for), the app's default.
rerank = _jina


async def api_rerank(request: Request) -> Response:
    t_start = time.perf_counter_ns()
    body = await read_json(request, RerankRequest)
    ranked = await _rank(request, body)
    results = [
        {"index": index, "document": ranked.documents[index], "relevance_score": score} for index, score in ranked.order
    ]
    return JSONResponse(
        {
            "model": body.get("model"),
            "results": results,
            "total_duration": time.perf_counter_ns() - t_start,
            "load_duration": ranked.load_ns,
            "prompt_eval_count": ranked.prompt_tokens,
        }
    )
