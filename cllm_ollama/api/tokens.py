"""Tokenize and detokenize with a model's own vocabulary, in two shapes.

``/api/tokenize`` and ``/api/detokenize`` as Ollama's proposals (PRs #12030, #16820) shape them:
``content`` in, ``tokens`` out (and back), with the model named, loaded on demand like any
request, and the durations of a native response. ``/tokenize`` and ``/detokenize`` as
llama-server serves them (``add_special``, ``parse_special``, ``with_pieces``), with a
``model`` field since one server holds many. Both tokenize as Ollama's runner and llama-server
do by default: no BOS added, special tokens in the text parsed as such. Errors are Ollama's
``{"error": message}`` on all four, as on every path outside ``/v1`` (``errors.dialect_for``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ..engine.frontdoor import EngineClient
from ..errors import InvalidRequest
from .encoders import JSONResponse
from .errors import read_json
from .lifecycle import lease
from .ollama.errors import decode
from .options import resolve_options
from .request_fields import parse_keep_alive_field
from .resolve import resolve_model
from .schemas.ollama import (
    DetokenizeRequest,
    ModelCall,
    ServerDetokenizeRequest,
    ServerTokenizeRequest,
    TokenizeRequest,
)
from .services import services

T = TypeVar("T")


async def _with_model(request: Request, req: ModelCall, work: Callable[[EngineClient], T]) -> tuple[T, int]:
    """``work(loaded)`` run off the event loop on the named model, held for it; and the load time (ns)."""
    name = req.model or ""
    model = await resolve_model(services(request).store, name, empty_message="model is required", empty_status=400)
    options = resolve_options(req.options, model.record.params, request_type=req.go_name or "")
    t0 = time.perf_counter_ns()
    async with lease(services(request).pool, model, options, parse_keep_alive_field(req.keep_alive)) as entry:
        load_ns = time.perf_counter_ns() - t0
        return await run_in_threadpool(work, entry.model), load_ns


async def api_tokenize(request: Request) -> Response:
    t_start = time.perf_counter_ns()
    req = decode(await read_json(request, TokenizeRequest), TokenizeRequest)
    content = req.content or ""
    tokens, load_ns = await _with_model(
        request, req, lambda m: m.tokenize(content, add_special=False) if content else []
    )
    return JSONResponse(_native(req, {"tokens": tokens}, t_start, load_ns))


async def api_detokenize(request: Request) -> Response:
    t_start = time.perf_counter_ns()
    req = decode(await read_json(request, DetokenizeRequest), DetokenizeRequest)
    tokens = req.tokens or []
    content, load_ns = await _with_model(request, req, lambda m: m.detokenize(tokens))
    return JSONResponse(_native(req, {"content": content}, t_start, load_ns))


def _native(req: ModelCall, out: dict[str, Any], t_start: int, load_ns: int) -> dict[str, Any]:
    total = time.perf_counter_ns() - t_start
    return {"model": req.model, **out, "total_duration": total, "load_duration": load_ns}


async def tokenize(request: Request) -> Response:
    req = decode(await read_json(request, ServerTokenizeRequest), ServerTokenizeRequest)
    content = req.content
    if not isinstance(content, str):
        raise InvalidRequest('"content" must be a string')
    add_special, parse_special, with_pieces = (
        bool(req.add_special),
        req.parse_special is not False,
        bool(req.with_pieces),
    )

    def work(loaded: EngineClient) -> list[Any]:
        tokens = loaded.tokenize(content, add_special=add_special, parse_special=parse_special) if content else []
        if not with_pieces:
            return tokens
        return [{"id": t, "piece": _piece(loaded.token_piece(t))} for t in tokens]

    tokens, _ = await _with_model(request, req, work)
    return JSONResponse({"tokens": tokens})


def _piece(raw: bytes) -> str | list[int]:
    """A token's piece as llama-server writes it: text when it is valid UTF-8, else its bytes."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return list(raw)


async def detokenize(request: Request) -> Response:
    req = decode(await read_json(request, ServerDetokenizeRequest), ServerDetokenizeRequest)
    tokens = req.tokens or []
    content, _ = await _with_model(request, req, lambda m: m.detokenize(tokens))
    return JSONResponse({"content": content})
