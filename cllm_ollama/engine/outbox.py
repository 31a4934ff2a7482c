"""Where each request's events go: its sink, and the one hop per event loop a step's events take.

The engine thread publishes; a request's reader (an event loop's task, or a thread) consumes.
A reader too far behind pauses its own slot, never the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .request import Event

# A reader more than this many events behind pauses its own slot (not the others).
MAX_BUFFERED_EVENTS = 256


class EventQueue(Protocol):
    def put_nowait(self, item: Event, /) -> None: ...


@dataclass(eq=False)
class Sink:
    """Where one request's events go.

    With a ``loop``, events reach ``queue`` through one ``call_soon_threadsafe`` per step (an
    ``asyncio.Queue``); without, they are put directly (a thread-safe queue). ``published``
    and ``consumed`` are each written by one thread only, so their difference safely says
    how far the reader is behind.
    """

    queue: EventQueue
    loop: asyncio.AbstractEventLoop | None = None
    published: int = 0
    consumed: int = 0

    @property
    def backlog(self) -> int:
        return self.published - self.consumed

    @property
    def behind(self) -> bool:
        """Too far behind: the engine pauses this request's slot until the reader catches up."""
        return self.backlog > MAX_BUFFERED_EVENTS

    def consume(self) -> bool:
        """Count one event read; True when that ends a pause (the engine should be woken)."""
        self.consumed += 1
        return self.backlog == MAX_BUFFERED_EVENTS


def _deliver(items: list[tuple[Sink, Event]]) -> None:
    for sink, event in items:
        sink.queue.put_nowait(event)


class Outbox:
    """The sinks of the requests the engine knows, by request id (engine thread only).

    ``on_finish`` is told each request id whose last event goes out, so that what the request
    held (its sampler, its media) is released with it.
    """

    def __init__(self, on_finish: Callable[[int], None]) -> None:
        self.sinks: dict[int, Sink] = {}
        self._on_finish = on_finish

    def paused(self, request_id: int) -> bool:
        """The scheduler's question: is this request's reader too far behind?"""
        sink = self.sinks.get(request_id)
        return sink is not None and sink.behind

    def emit(self, events: list[Event]) -> None:
        """Publish a step's events: one hop per event loop, however many requests it serves."""
        if not events:
            return
        by_loop: dict[asyncio.AbstractEventLoop | None, list[tuple[Sink, Event]]] = {}
        for event in events:
            if event.finish is not None:
                sink = self.sinks.pop(event.request_id, None)
                self._on_finish(event.request_id)
            else:
                sink = self.sinks.get(event.request_id)
            if sink is not None:
                sink.published += 1
                by_loop.setdefault(sink.loop, []).append((sink, event))
        for loop, items in by_loop.items():
            if loop is None:
                _deliver(items)
            else:
                # A closed loop means nobody is listening any more.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_deliver, items)
