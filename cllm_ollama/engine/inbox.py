"""What other threads post to the engine thread, and the one lock and condition it sleeps on.

Client threads add requests, abort them and reserve places for them; the disk cache's IO
thread posts the states it read; the media thread and readers that caught up wake it. The
engine thread drains it all at once, under the lock, at the start of each pass.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from ..errors import EngineError
from .binding import Sampler
from .disk_cache import Read
from .outbox import Sink
from .request import Request

T = TypeVar("T")

# A request as submitted: what the engine registers when it takes it from the inbox.
Add = tuple[Request, Sampler | None, Sink]


@dataclass
class Drained:
    """One pass's posts: adds (already handed to ``take``), aborts, disk reads done, closing."""

    aborts: list[int] = field(default_factory=list)
    loaded: list[tuple[int, Read | None]] = field(default_factory=list)
    closing: bool = False


class Inbox:
    """``submit``, ``abort``, ``reserve`` and ``wake`` from any thread; the rest is the engine's."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._adds: list[Add] = []
        self._reserved = 0  # requests counted as queued before their submit (``reserve``)
        self._aborts: list[int] = []
        self._loaded: list[tuple[int, Read | None]] = []  # disk reads done (request id, state)
        self._closing = False
        # Set when the engine thread stopped for good: why (``submit`` says it).
        self.dead: str | None = None

    def _news(self) -> bool:
        """Anything posted (the lock is held)."""
        return bool(self._adds or self._aborts or self._closing or self._loaded)

    # -- any thread -------------------------------------------------------------------------

    def reserve(self) -> None:
        """Count a request as queued before it is submitted (its sampler is still being built)."""
        with self._cv:
            self._reserved += 1

    def unreserve(self) -> None:
        """A reserved request will not be submitted after all."""
        with self._cv:
            self._reserved -= 1

    def submit(self, add: Add, *, reserved: bool = False) -> None:
        """Queue ``add``; with ``reserved`` it takes the place ``reserve`` held for it. A refused
        one's sampler is closed here (nobody else holds it)."""
        with self._cv:
            if reserved:
                self._reserved -= 1
            if self._closing:
                if add[1] is not None:
                    add[1].close()
                if self.dead is not None:
                    raise EngineError(f"the model's engine stopped ({self.dead}); the next request loads it again")
                raise EngineError("model is being unloaded")
            self._adds.append(add)
            self._cv.notify()

    def abort(self, request_id: int) -> None:
        with self._cv:
            self._aborts.append(request_id)
            self._cv.notify()

    def wake(self) -> None:
        """Something the engine waits for happened (a reader caught up, an encode ended)."""
        with self._cv:
            self._cv.notify()

    def read_done(self, request_id: int) -> Callable[[Read | None], None]:
        """What the disk cache's IO thread calls with a read state: it wakes the engine thread."""

        def done(state: Read | None) -> None:
            with self._cv:
                self._loaded.append((request_id, state))
                self._cv.notify()

        return done

    def queued(self, read: Callable[[], T]) -> tuple[int, T]:
        """Requests queued here (reserved or submitted), and ``read()`` under the same lock that
        ``take`` moves requests into the engine with: none is counted twice or missed."""
        with self._cv:
            return len(self._adds) + self._reserved, read()

    def close(self) -> None:
        """Refuse new requests; the engine thread ends every known one and stops."""
        with self._cv:
            self._closing = True
            self._cv.notify()

    # -- the engine thread ------------------------------------------------------------------

    def quiet(self) -> bool:
        """Nothing posted since the last ``take``, and no request on its way (``reserve``): work
        the engine may do now (a state saved to disk while nothing runs) keeps no one waiting."""
        with self._cv:
            return not (self._news() or self._reserved)

    def take(
        self, has_work: Callable[[], bool], register: Callable[[Add], None], idle: Callable[[bool], None]
    ) -> Drained:
        """Wait until something is posted or ``has_work()``, then drain: each add goes to
        ``register`` under the lock (see ``queued``). ``idle(True)`` before a wait, ``idle(False)``
        after it."""
        with self._cv:
            if not (self._news() or has_work()):
                idle(True)
                while not (self._news() or has_work()):
                    self._cv.wait()
                idle(False)
            adds, self._adds = self._adds, []
            drained = Drained(self._aborts, self._loaded, self._closing)
            self._aborts, self._loaded = [], []
            for add in adds:
                register(add)
        return drained

    def sleep_unless(self, idle: Callable[[], bool]) -> None:
        """Sleep until the next post or wake-up, unless one came already or ``idle()`` is False;
        checked under the lock that posts and ``wake`` take, so a wake-up cannot slip past."""
        with self._cv:
            if not self._news() and idle():
                self._cv.wait()

    def stop(self, reason: str) -> list[Add]:
        """The engine thread stops for good (``reason``): refuse new requests; the queued ones."""
        with self._cv:
            self.dead = reason
            self._closing = True  # submit() now refuses instead of queueing forever
            adds, self._adds = self._adds, []
        return adds
