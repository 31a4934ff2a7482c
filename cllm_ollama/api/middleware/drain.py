"""The server's shutdown as state the app shares (``Services.drain``): whether it began, and
when its grace period ends. ``shutdown.DrainMiddleware`` acts on it; ``cllm serve`` begins it."""

from __future__ import annotations

import asyncio


class Drain:
    """The server's shutdown, as the app sees it: not started, in its grace period, or over."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.stopping = False
        self._expired: asyncio.Future[None] | None = None

    def begin(self) -> None:
        """Start the grace period; call on the event loop, once shutdown has begun."""
        if not self.stopping:
            self.stopping = True
            asyncio.get_running_loop().call_later(self.grace, self._expire)

    def expired(self) -> asyncio.Future[None]:
        """Done when the grace period is over (one future that every request waits on)."""
        loop = asyncio.get_running_loop()
        if self._expired is None or self._expired.get_loop() is not loop:
            self._expired = loop.create_future()
        return self._expired

    def _expire(self) -> None:
        if not self.expired().done():
            self.expired().set_result(None)
