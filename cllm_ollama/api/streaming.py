"""Streams and disconnects: the one streaming response (NDJSON and SSE alike), and the watch
for a client that leaves before any response exists to notice it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from ..errors import CllmError, RequestCanceled
from .encoders import Framing
from .errors import describe

T = TypeVar("T")
log = logging.getLogger("cllm.api")


class StreamResponse(StreamingResponse):
    """``objects`` in ``framing``, closing them and every generator ``behind`` them when it ends.

    ``behind`` are the generators ``objects`` reads, innermost last (a generation's chunks
    behind an encoder's objects). Starlette cancels the sending task when the client leaves; a
    generator suspended at a ``yield`` at that moment would only be finalized by the garbage
    collector, its slot held until then: each is closed here, outermost first, at once.

    An error after the first byte ends the stream with the framing's last words, mapped as the
    error boundary maps it before the first byte (``errors.describe``).
    """

    def __init__(
        self, framing: Framing, objects: AsyncGenerator[dict[str, Any], None], *behind: AsyncGenerator[Any, None]
    ) -> None:
        self._framing = framing
        self._objects = objects
        self._sources = (objects, *behind)
        self._first: list[dict[str, Any]] = []
        self._request: Request | None = None
        self._body = self._frames()
        super().__init__(self._body, media_type=framing.media_type)

    async def start(self, request: Request | None = None) -> StreamResponse:
        """Wait for the first object, so that errors until then still get their HTTP status.

        No response exists yet to notice the client leaving: given the ``request``, watch for
        that here, so that a request waiting for a slot (or its prompt) stops when its client
        is gone.
        """
        first = anext(self._objects)
        try:
            self._first = [await (first if request is None else until_disconnect(request, first))]
        except StopAsyncIteration:
            pass
        except BaseException:
            await self.aclose()
            raise
        return self

    async def _frames(self) -> AsyncGenerator[bytes, None]:
        framing = self._framing
        try:
            for obj in self._first:
                yield framing.frame(obj)
            async for obj in self._objects:
                yield framing.frame(obj)
        except Exception as exc:
            if not isinstance(exc, CllmError):
                log.exception("stream failed")
            assert self._request is not None
            yield framing.error(*describe(self._request, exc))
        yield framing.end()

    async def aclose(self) -> None:
        await self._body.aclose()
        for source in self._sources:
            await source.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._request = Request(scope, receive)
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.aclose()


async def until_disconnect(request: Request, work: Awaitable[T]) -> T:
    """Run ``work`` but cancel it if the client goes away (before a response has started)."""
    task = asyncio.ensure_future(work)

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(watch())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
            # Let the work unwind (give back its model, abort its engine request) before answering.
            await asyncio.gather(task, return_exceptions=True)
    if task.cancelled():
        raise RequestCanceled()
    return task.result()
