"""GET /api/ps: the models in memory, longest remaining keep-alive first."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ..engine.pool import Entry
from ..store.gguf_info import GGUFInfo, gguf_info
from .encoders import JSONResponse

# Ollama shows "forever" as the largest Go duration from now: about 292 years.
_FOREVER = timedelta(microseconds=(2**63 - 1) // 1000)


def details_of(info: GGUFInfo) -> dict[str, object]:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": info.family,
        "families": list(info.families),
        "parameter_size": info.parameter_size,
        "quantization_level": info.quantization_level,
    }


def _expires_at(entry: Entry) -> str:
    if math.isinf(entry.expires_at):
        when = datetime.now(UTC) + _FOREVER
    else:
        when = datetime.fromtimestamp(entry.expires_at, UTC)
    return when.isoformat().replace("+00:00", "Z")


async def ps(request: Request) -> Response:
    models = []
    for entry in request.app.state.pool.running():
        info = await run_in_threadpool(gguf_info, entry.model.spec.path)
        models.append(
            {
                "name": entry.name,
                "model": entry.name,
                "size": entry.model.size_bytes,
                "digest": entry.digest,
                "details": details_of(info),
                "expires_at": _expires_at(entry),
                "size_vram": entry.model.size_vram,
                "context_length": entry.model.n_ctx_slot,
            }
        )
    return JSONResponse({"models": models})
