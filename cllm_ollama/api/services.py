"""What the app's handlers share, made once per app and kept on ``app.state`` in one typed place.

Starlette's ``app.state`` is untyped: a look-up there is unchecked and a misspelt name is found
at run time. ``Services`` names each shared service with its type, and ``services()`` is the
one way to reach them from a request (or the app).
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp

from ..config import Settings
from ..engine.pool import ModelPool
from ..store.store import ModelStore
from .middleware.drain import Drain
from .middleware.metrics import ServerMetrics


class Services:
    """The settings, the model store, metrics, the drain and (once the app has started) the pool."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.store = ModelStore(settings.models_dir)
        self.metrics = ServerMetrics(lambda: self.started_pool)
        self.drain = Drain(settings.shutdown_grace)  # the server begins it when it stops (cllm serve)
        # Made by the app's lifespan, when it starts (a pool needs the running event loop).
        self.started_pool: ModelPool | None = None

    @property
    def pool(self) -> ModelPool:
        """The model pool; a handler runs only on a started app, where it exists."""
        if self.started_pool is None:
            raise RuntimeError("the model pool is made when the app starts (its lifespan)")
        return self.started_pool

    @pool.setter
    def pool(self, pool: ModelPool) -> None:
        self.started_pool = pool


def services(owner: HTTPConnection | ASGIApp) -> Services:
    """The ``Services`` of a request's app (or of the app itself); LookupError on an app that has
    none (one not made by ``create_app``)."""
    app = owner.app if isinstance(owner, HTTPConnection) else owner
    found = getattr(getattr(app, "state", None), "services", None)
    if not isinstance(found, Services):
        raise LookupError("this app has no cllm services: create_app installs them")
    return found


def install(app: Starlette, made: Services) -> None:
    """Keep ``made`` on ``app``: the one write to ``app.state``."""
    app.state.services = made
