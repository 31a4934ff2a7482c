"""GET /api/ps: the models in memory, longest remaining keep-alive first."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ...engine.pool import Entry
from ...errors import NotFound
from ..encoders import JSONResponse
from ..services import services
from .model_views import details

# Ollama shows "forever" as the largest Go duration from now: about 292 years.
_FOREVER = timedelta(microseconds=(2**63 - 1) // 1000)


def _expires_at(entry: Entry) -> str:
    if math.isinf(entry.expires_at):
        when = datetime.now(UTC) + _FOREVER
    else:
        when = datetime.fromtimestamp(entry.expires_at, UTC)
    return when.isoformat().replace("+00:00", "Z")


async def ps(request: Request) -> Response:
    models = []
    store = services(request).store
    for entry in services(request).pool.running():
        try:
            record_details = details(await run_in_threadpool(store.get, entry.name))
        except NotFound:  # deleted while loaded
            record_details = {}
        occupancy = entry.model.occupancy()
        models.append(
            {
                "name": entry.name,
                "model": entry.name,
                "size": entry.model.size_bytes,
                "digest": entry.digest,
                "details": record_details,
                "expires_at": _expires_at(entry),
                "size_vram": entry.model.size_vram,
                "context_length": entry.model.n_ctx_slot,
                "num_parallel": entry.model.n_slots,
                "requests_running": occupancy.running,
                "requests_queued": occupancy.waiting + services(request).pool.waiting_for_load[entry.name],
            }
        )
    return JSONResponse({"models": models})
