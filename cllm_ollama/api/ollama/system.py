"""Health, version and metrics: what clients and scrapers probe before anything else (the cloud's
status is in ``cloud``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from ... import OLLAMA_COMPAT_VERSION
from ..encoders import JSONResponse
from ..services import services


async def root(request: Request) -> Response:
    return PlainTextResponse("Ollama is running")


async def version(request: Request) -> Response:
    return JSONResponse({"version": OLLAMA_COMPAT_VERSION})


async def metrics(request: Request) -> Response:
    """GET /metrics: the app's own registry as Prometheus text (``middleware.metrics``)."""
    return services(request).metrics.response()
