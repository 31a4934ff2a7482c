"""Health and version: what clients probe before anything else."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from ... import OLLAMA_COMPAT_VERSION
from ..encoders import JSONResponse


async def root(request: Request) -> Response:
    return PlainTextResponse("Ollama is running")


async def version(request: Request) -> Response:
    return JSONResponse({"version": OLLAMA_COMPAT_VERSION})
