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
from .fields import keep_alive_of
from .lifecycle import lease
from .options import resolve_options
from .resolve import resolve_model
from .wire import bool_field, decode_error, list_field, string_field


def token_ids(body: dict[str, Any], struct: str) -> list[int]:
    """``tokens``: a list of integers (Go's decode error for anything else)."""
    tokens = list_field(body, "tokens", struct, "[]int") or []
    for token in tokens:
        if not isinstance(token, int) or isinstance(token, bool):
            raise decode_error(token, f"{struct}.tokens", "int")
    return tokens


T = TypeVar("T")


async def _with_model(
    request: Request, body: dict[str, Any], struct: str, work: Callable[[EngineClient], T]
) -> tuple[T, int]:
    """``work(loaded)`` run off the event loop on the named model, held for it; and the load time (ns)."""
    name = string_field(body, "model", struct)
    model = await resolve_model(request.app.state.store, name, empty_message="model is required", empty_status=400)
    options = resolve_options(body.get("options"), model.record.params, request_type=struct)
    t0 = time.perf_counter_ns()
    async with lease(request.app.state.pool, model, options, keep_alive_of(body)) as entry:
        load_ns = time.perf_counter_ns() - t0
        return await run_in_threadpool(work, entry.model), load_ns


async def api_tokenize(request: Request) -> Response:
    t_start = time.perf_counter_ns()
    body = await read_json(request)
    content = string_field(body, "content", "TokenizeRequest")
    tokens, load_ns = await _with_model(
        request, body, "TokenizeRequest", lambda m: m.tokenize(content, add_special=False) if content else []
    )
    return JSONResponse(_native(body, {"tokens": tokens}, t_start, load_ns))


async def api_detokenize(request: Request) -> Response:
    t_start = time.perf_counter_ns()
    body = await read_json(request)
    tokens = token_ids(body, "DetokenizeRequest")
    content, load_ns = await _with_model(request, body, "DetokenizeRequest", lambda m: m.detokenize(tokens))
    return JSONResponse(_native(body, {"content": content}, t_start, load_ns))


def _native(body: dict[str, Any], out: dict[str, Any], t_start: int, load_ns: int) -> dict[str, Any]:
    total = time.perf_counter_ns() - t_start
    return {"model": body.get("model"), **out, "total_duration": total, "load_duration": load_ns}


async def tokenize(request: Request) -> Response:
    body = await read_json(request)
    struct = "TokenizeRequest"
    content = body.get("content")
    if not isinstance(content, str):
        raise InvalidRequest('"content" must be a string')
    add_special = bool(bool_field(body, "add_special", struct))
    parse_special = bool_field(body, "parse_special", struct) is not False
    with_pieces = bool(bool_field(body, "with_pieces", struct))

    def work(loaded: EngineClient) -> list[Any]:
        tokens = loaded.tokenize(content, add_special=add_special, parse_special=parse_special) if content else []
        if not with_pieces:
            return tokens
        return [{"id": t, "piece": _piece(loaded.token_piece(t))} for t in tokens]

    tokens, _ = await _with_model(request, body, struct, work)
    return JSONResponse({"tokens": tokens})


def _piece(raw: bytes) -> str | list[int]:
    """A token's piece as llama-server writes it: text when it is valid UTF-8, else its bytes."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return list(raw)


async def detokenize(request: Request) -> Response:
    body = await read_json(request)
    tokens = token_ids(body, "DetokenizeRequest")
    content, _ = await _with_model(request, body, "DetokenizeRequest", lambda m: m.detokenize(tokens))
    return JSONResponse({"content": content})
