"""Progress streams: blocking store work (pull, create) in a thread, its statuses as NDJSON or one JSON.

Errors before the first status keep their HTTP status; after it they become a final ``{"error"}``
line, as in Ollama's ``streamResponse``. A client that goes away cancels the work at its next status.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any

from starlette.responses import Response

from ...errors import RequestCanceled
from ..encoders import NDJSON, JSONResponse
from ..streaming import StreamResponse

Report = Callable[[dict[str, Any]], None]
_DONE = object()


async def progress_events(work: Callable[[Report], object]) -> AsyncGenerator[dict[str, Any], None]:
    """Run ``work(report)`` on its own thread; yield each reported status; re-raise its error."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    abandoned = threading.Event()

    def report(event: dict[str, Any]) -> None:
        if abandoned.is_set():
            raise RequestCanceled()
        loop.call_soon_threadsafe(queue.put_nowait, event)

    def run() -> None:
        try:
            work(report)
            result: Any = _DONE
        except BaseException as exc:  # handed to the event loop, raised there
            result = exc
        if not abandoned.is_set():
            loop.call_soon_threadsafe(queue.put_nowait, result)

    # A plain thread, not the shared pool: a long pull must not starve other blocking calls.
    threading.Thread(target=run, name="cllm-progress", daemon=True).start()
    try:
        while (item := await queue.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        abandoned.set()


async def progress_response(events: AsyncGenerator[dict[str, Any], None], stream: bool) -> Response:
    """NDJSON when ``stream``, else the last status (errors raise, keeping their status code)."""
    if not stream:
        last: dict[str, Any] = {}
        async with aclosing(events):
            async for event in events:
                last = event
        return JSONResponse(last)
    return await StreamResponse(NDJSON(), events).start()
