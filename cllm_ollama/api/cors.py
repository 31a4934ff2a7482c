"""Ollama's CORS policy: local origins and app schemes by default, plus OLLAMA_ORIGINS."""

from __future__ import annotations

import re

from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware

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
]


def origin_regex(extra: tuple[str, ...]) -> str:
    """One regex for every allowed origin; ``*`` in an origin is a wildcard, as in gin-contrib/cors."""
    globs = _DEFAULT_ORIGINS + list(extra)
    if "*" in extra:
        return ".*"
    return "|".join(re.escape(g).replace(r"\*", ".*") for g in globs)


def cors_middleware(extra_origins: tuple[str, ...]) -> Middleware:
    return Middleware(
        CORSMiddleware,
        allow_origin_regex=origin_regex(extra_origins),
        allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"],
        allow_headers=_ALLOWED_HEADERS,
    )
