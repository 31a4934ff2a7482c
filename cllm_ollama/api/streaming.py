"""Streams and disconnects: the one streaming response (NDJSON and SSE alike, kept alive while
a long prefill has nothing to send), and the watch for a client that leaves before any
response exists to notice it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from ..errors import CllmError, RequestCanceled
from .encoders import Framing
from .errors import describe
from .services import services

T = TypeVar("T")
log = logging.getLogger("cllm.api")


class StreamResponse(StreamingResponse):
    """``objects`` in ``framing``, closing them and every generator ``behind`` them when it ends.

    ``behind`` are the generators ``objects`` reads, innermost last (a generation's chunks
    behind an encoder's objects). Starlette cancels the sending task when the client leaves; a
    generator suspended at a ``yield`` at that moment would only be finalized by the garbage
    collector, its slot held until then: each is closed here, outermost first, at once.

    A request that is ``admitted`` (everything that can be refused with a status was checked)
    gets its headers then, not at its first object, and a keep-alive every
    ``Settings.stream_keepalive`` seconds until that object comes: a long prefill sends nothing
    else, and clients with read timeouts would give up and send it again. ``idle`` is the
    encoder's object for "no output yet", for a framing without keep-alives of its own.

    An error after the first byte ends the stream with the framing's last words, mapped as the
    error boundary maps it before the first byte (``errors.describe``).
    """

    def __init__(
        self,
        framing: Framing,
        objects: AsyncGenerator[dict[str, Any], None],
        *behind: AsyncGenerator[Any, None],
        idle: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self._framing = framing
        self._objects = objects
        self._sources = (objects, *behind)
        self._first: list[dict[str, Any]] = []
        # The first object, still on its way when the headers went out at admission.
        self._pending: asyncio.Future[dict[str, Any]] | None = None
        self._idle = idle
        self._interval = 0.0
        self._request: Request | None = None
        self._body = self._frames()
        super().__init__(self._body, media_type=framing.media_type)

    async def start(self, request: Request | None = None, admitted: asyncio.Event | None = None) -> StreamResponse:
        """Wait for the first object (or for ``admitted``), so that errors until then still get
        their HTTP status.

        No response exists yet to notice the client leaving: given the ``request``, watch for
        that here, so that a request waiting for a slot (or its prompt) stops when its client
        is gone.
        """
        if request is not None and admitted is not None:
            self._interval = services(request).settings.stream_keepalive
        try:
            opening = self._opening(admitted)
            await (opening if request is None else until_disconnect(request, opening))
        except BaseException:
            await self.aclose()
            raise
        return self

    async def _opening(self, admitted: asyncio.Event | None) -> None:
        first = self._pending = asyncio.ensure_future(anext(self._objects))
        waits: set[asyncio.Future[Any]] = {first}
        if admitted is not None:
            waits.add(asyncio.ensure_future(admitted.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for other in waits - {first}:
                other.cancel()
        if first.done():
            self._take(first)

    def _take(self, first: asyncio.Future[dict[str, Any]]) -> None:
        """The first object has come (or the end, or an error, raised here)."""
        self._pending = None
        with contextlib.suppress(StopAsyncIteration):
            self._first = [first.result()]

    async def _frames(self) -> AsyncGenerator[bytes, None]:
        framing = self._framing
        try:
            if self._pending is not None:
                first = self._pending
                while not (await asyncio.wait({first}, timeout=self._interval))[0]:
                    yield framing.keepalive(self._idle() if self._idle is not None else None)
                self._take(first)
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
        if self._pending is not None:
            # The first object's task still runs the generators: stop it before closing them.
            self._pending.cancel()
            await asyncio.gather(self._pending, return_exceptions=True)
            self._pending = None
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
