"""Placeholder until the engine lands."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ..errors import CllmError


async def _todo(request: Request) -> Response:
    raise CllmError("not implemented yet", 501)


ps = generate = chat = embed = embeddings = _todo
