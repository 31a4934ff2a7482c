"""Model management endpoints: tags, show, copy, delete, create, blobs, pull, push."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ..errors import CllmError


async def _todo(request: Request) -> Response:
    raise CllmError("not implemented yet", 501)


tags = show = copy = delete = create = blob_exists = blob_upload = pull = push = _todo
