"""Builds the ASGI application: routes, the error boundary, metrics, CORS, API keys, body limits, the model pool."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware

from .api.errors import EXCEPTION_HANDLERS
from .api.middleware.auth import ApiKeyRequired
from .api.middleware.cors import cors_middleware
from .api.middleware.hosts import LocalHostsOnly, is_loopback
from .api.middleware.limits import BodyLimit
from .api.middleware.metrics import RequestCounter
from .api.middleware.shutdown import DrainMiddleware
from .api.routes import ROUTES
from .api.services import Services, install
from .chatformat import jinja_workers
from .config import Settings
from .engine.frontdoor import LoadSpec
from .engine.pool import ModelPool


def create_app(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings.from_env()
    shared = Services(settings)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if not settings.noprune:
            # As Ollama does, and only here: before the first request none of our pulls, uploads
            # or creates is in flight (another process's recent files are spared by their age).
            await run_in_threadpool(shared.store.prune)
        # Startup repair: a model missing a blob (older version, crash, hand edit) is named once in the log.
        await run_in_threadpool(shared.store.report_broken)
        shared.pool = ModelPool(
            defaults=LoadSpec.from_settings(settings),
            max_loaded=settings.max_loaded_models,
            max_queue=settings.max_queue,
            default_keep_alive=settings.keep_alive,
            media=settings.media,
        )
        try:
            yield
        finally:
            try:
                await shared.pool.close()
            finally:
                # The render workers are the server's too: they stop with it.
                await run_in_threadpool(jinja_workers.close_workers)

    # The key is checked inside CORS, so that a 401 to an allowed origin carries its CORS headers
    # (the browser shows it) and preflights, which never carry a key, are answered before it.
    app = Starlette(
        routes=ROUTES,
        middleware=[
            Middleware(RequestCounter, routes=ROUTES, metrics=shared.metrics),
            Middleware(DrainMiddleware, drain=shared.drain),
            cors_middleware(settings.origins),
        ]
        + ([Middleware(LocalHostsOnly)] if is_loopback(settings.host.host) else [])
        + (
            [Middleware(ApiKeyRequired, keys=settings.api_keys, public_metrics=settings.metrics_public)]
            if settings.api_keys
            else []
        )
        + [Middleware(BodyLimit, max_size=settings.max_body_size)],
        exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
        lifespan=lifespan,
    )
    install(app, shared)
    return app
