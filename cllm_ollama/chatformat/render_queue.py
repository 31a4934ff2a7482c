"""Renders queued fairly across models, so that no model's template can take every render worker.

A chat template is code any client can supply (``/api/create``); one that never ends holds a render
worker until the render timeout. Renders are granted in turn across models: each model has a queue
of its own, a freed worker goes to the next model that waits (round robin), and no model holds more
than all workers but one, so another model's render always finds a worker free or next. A render
that timed out is remembered (``prompt.TimedOut``) and refused at once when it comes again.

The common case costs one dictionary lookup and no wait: a worker is free and nobody queues.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections import OrderedDict, deque

import anyio

from ..errors import RequestCanceled
from . import jinja_workers
from .prompt import Rendered, Renderer, Tokenizer
from .render_budget import RenderBudget


class FairQueue:
    """Up to ``capacity`` holders at once, granted round robin across keys; one key holds at most
    ``capacity - 1`` (at least one). Used on one event loop only."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.per_key = max(1, capacity - 1)
        self.held: dict[str, int] = {}
        self.running = 0
        # Keys with waiters, in the order they are served: a key served goes to the back.
        self._waiting: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()

    async def acquire(self, key: str) -> None:
        if not self._waiting and self._may_run(key):  # the common case: no queue
            self._grant(key)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, deque()).append(future)
        self._dispatch()
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # granted as it was cancelled: give it back
                self.release(key)
            else:
                self._forget(key, future)
            raise

    def release(self, key: str) -> None:
        self.running -= 1
        self.held[key] -= 1
        if not self.held[key]:
            del self.held[key]
        if key in self._waiting:  # the slot a model frees goes to the other models first
            self._waiting.move_to_end(key)
        self._dispatch()

    def _may_run(self, key: str) -> bool:
        return self.running < self.capacity and self.held.get(key, 0) < self.per_key

    def _grant(self, key: str) -> None:
        self.running += 1
        self.held[key] = self.held.get(key, 0) + 1

    def _dispatch(self) -> None:
        while self.running < self.capacity:
            key = next((k for k in self._waiting if self._may_run(k)), None)
            if key is None:
                return
            waiters = self._waiting.pop(key)
            future = waiters.popleft()
            if waiters:
                self._waiting[key] = waiters  # to the back: the other models go first
            if not future.done():
                self._grant(key)
                future.set_result(None)

    def _forget(self, key: str, future: asyncio.Future[None]) -> None:
        waiters = self._waiting.get(key)
        if waiters is not None:
            with contextlib.suppress(ValueError):
                waiters.remove(future)
            if not waiters:
                del self._waiting[key]


class _Renders:
    """One event loop's queue and threads (anyio's limiters are bound to the loop that uses them)."""

    def __init__(self) -> None:
        self.queue = FairQueue(jinja_workers.WORKERS)
        # Threads of their own, as many as there are workers: a flood of renders waits in the queue
        # instead of taking the threads every other endpoint needs.
        self.threads = anyio.CapacityLimiter(jinja_workers.WORKERS)


_per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Renders] = weakref.WeakKeyDictionary()


def renders() -> _Renders:
    loop = asyncio.get_running_loop()
    state = _per_loop.get(loop)
    if state is None:
        state = _per_loop[loop] = _Renders()
    return state


async def render_prompt(
    render: Renderer, loaded: Tokenizer, limit: int | None, *, timeout: float, key: str = ""
) -> Rendered:
    """Run ``render`` under the render ``timeout``, in turn with the other renders of model ``key``.
    If cancelled (the client left), stop it, and wait until it has stopped if it had begun: it uses
    ``loaded``, which its caller holds only until this returns."""
    loop = asyncio.get_running_loop()
    state = renders()
    cancel, began = threading.Event(), threading.Event()
    ended = asyncio.Event()

    def work() -> Rendered:
        began.set()
        try:
            if cancel.is_set():  # cancelled before it began: never touch the model
                raise RequestCanceled()
            return render(loaded, limit, RenderBudget(timeout, cancel=cancel))
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
                loop.call_soon_threadsafe(ended.set)

    await state.queue.acquire(key)
    try:
        return await anyio.to_thread.run_sync(work, limiter=state.threads)
    except asyncio.CancelledError:
        # NOTE: set before looking at ``began``, which ``work`` sets before looking at ``cancel``:
        # either it sees the cancel, or it is waited for.
        cancel.set()
        if began.is_set():
            await ended.wait()
        raise
    finally:
        state.queue.release(key)
