"""Builds the ASGI application: routes, the error boundary, CORS, and the model pool's lifetime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette

from .api.errors import EXCEPTION_HANDLERS
from .api.routes import ROUTES
from .config import Settings
from .store.store import ModelStore


def create_app(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield

    app = Starlette(routes=ROUTES, exception_handlers=EXCEPTION_HANDLERS, lifespan=lifespan)  # type: ignore[arg-type]
    app.state.settings = settings
    app.state.store = ModelStore(settings.models_dir)
    return app
