"""Ollama's CORS policy: local origins and app schemes by default, plus OLLAMA_ORIGINS.

A foreign origin is refused outright (403, empty body), as gin-contrib/cors does for Ollama:
the browser would hide the answer, but a "simple" cross-site request would still run.
"""

from __future__ import annotations

import re

from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

_DEFAULT_ORIGINS = [
    f"{scheme}://{host}{port}"
    for scheme in ("http", "https")
    for host in ("localhost", "127.0.0.1", "0.0.0.0")
    for port in ("", ":*")
] + ["app://*", "file://*", "tauri://*", "vscode-webview://*", "vscode-file://*"]

_ALLOWED_HEADERS = [
    "Authorization",
    "Content-Type",
    "User-Agent",
    "Accept",
    "X-Requested-With",
    "OpenAI-Beta",
    "x-stainless-arch",
    "x-stainless-async",
    "x-stainless-custom-poll-interval",
    "x-stainless-helper-method",
    "x-stainless-lang",
    "x-stainless-os",
    "x-stainless-package-version",
    "x-stainless-poll-helper",
    "x-stainless-retry-count",
    "x-stainless-runtime",
    "x-stainless-runtime-version",
    "x-stainless-timeout",
    # Anthropic's SDK (Ollama's list lacks them: a browser's preflight there fails).
    "x-api-key",
    "anthropic-version",
    "anthropic-beta",
    "anthropic-dangerous-direct-browser-access",
]


def origin_regex(extra: tuple[str, ...]) -> str:
    """One regex for every allowed origin; ``*`` in an origin is a wildcard, as in gin-contrib/cors,
    which lowercases the origins without one (``https://MyApp.example`` lets ``https://myapp.example`` in)."""
    globs = _DEFAULT_ORIGINS + [o if "*" in o else o.lower() for o in extra]
    if "*" in extra:
        return ".*"
    return "|".join(re.escape(g).replace(r"\*", ".*") for g in globs)


class RefusingCORSMiddleware(CORSMiddleware):
    """Starlette's CORS headers and preflight, plus gin-contrib/cors's 403 for a foreign Origin.

    As in gin-contrib/cors: no Origin header (or an empty one), or an Origin naming this very
    server (``http://`` + Host), is not a CORS request and passes. Browser-extension origins
    are not allowed by default there either (``AllowBrowserExtensions`` only lets them be
    configured): they need OLLAMA_ORIGINS, e.g. ``chrome-extension://*``.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            origin = headers.get("origin", "")
            host = headers.get("host", "")
            if origin and origin not in (f"http://{host}", f"https://{host}") and not self.is_allowed_origin(origin):
                await Response(status_code=403)(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def cors_middleware(extra_origins: tuple[str, ...]) -> Middleware:
    return Middleware(
        RefusingCORSMiddleware,
        allow_origin_regex=origin_regex(extra_origins),
        allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"],
        allow_headers=_ALLOWED_HEADERS,
    )
