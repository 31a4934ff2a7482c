"""Health, version and metrics: what clients and scrapers probe before anything else."""

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


async def status(request: Request) -> Response:
    """GET /api/status: Ollama's cloud switch, which ``ollama launch`` reads to decide whether to offer
    ``:cloud`` models. cllm proxies nothing to ollama.com, so its cloud is always off; ``source`` says
    whether ``OLLAMA_NO_CLOUD`` turns it off as well, as Ollama reports it ("none" otherwise)."""
    source = "env" if services(request).settings.no_cloud else "none"
    return JSONResponse({"cloud": {"disabled": True, "source": source}})


async def metrics(request: Request) -> Response:
    """GET /metrics: the app's own registry as Prometheus text (``middleware.metrics``)."""
    return services(request).metrics.response()
