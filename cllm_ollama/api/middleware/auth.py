"""The optional API key (CLLM_API_KEY): with keys set, every request but the health check needs one.

A key comes as ``Authorization: Bearer <key>`` (Ollama's clients, the OpenAI SDK, Claude Code's
auth token) or as ``x-api-key: <key>`` (the Anthropic SDK). Without a valid one the answer is a 401
in the path's dialect, as the real services word it. No key, sent or configured, is ever logged.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ..encoders import JSONResponse
from ..errors import dialect_for

# A refused request's body is read and dropped up to this size, so that the connection closes cleanly
# (or carries the next request): closing it with unread bytes resets it, and the client may lose the 401.
_DRAIN_LIMIT = 1 << 20

# GET|HEAD / is the health check (Ollama issue #1378): load balancers and probes carry no key.
_EXEMPT = frozenset({("GET", "/"), ("HEAD", "/")})
# With CLLM_METRICS_PUBLIC: scrapers that cannot send a key (the inference gateway's endpoint
# picker), as vLLM leaves /metrics open beside its --api-key.
_METRICS = frozenset({("GET", "/metrics"), ("HEAD", "/metrics")})

# What each dialect's service says when no key came and when a wrong one did.
_MISSING = {
    "ollama": "unauthorized",
    "openai": "You didn't provide an API key. You need to provide your API key in an Authorization header "
    "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
    "anthropic": "x-api-key header is required",
}
_WRONG = {
    "ollama": "unauthorized",
    "openai": "Incorrect API key provided.",
    "anthropic": "invalid x-api-key",
}


# Query parameters that carry credentials (a key refused in a query string is still in the URL).
_SECRET_PARAM = re.compile(
    r"(?i)([?&](?:key|api[-_]?key|x-api-key|token|access[-_]token|auth|password|secret|sig|signature)=)[^&#]*"
)


def redact_query(path: str) -> str:
    """``path`` with the values of credential-carrying query parameters replaced by ``***``."""
    return _SECRET_PARAM.sub(r"\1***", path) if "?" in path else path


class AccessLogRedaction(logging.Filter):
    """uvicorn's access log line without the credentials a client put in a query string."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        # uvicorn's access record: (client, method, path with query, HTTP version, status).
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            record.args = (*args[:2], redact_query(args[2]), *args[3:])
        return True


def _digest(key: bytes) -> bytes:
    # Comparing digests keeps compare_digest's time independent of the keys' lengths too.
    return hashlib.sha256(key).digest()


def presented_keys(headers: Headers) -> list[bytes]:
    """The keys a request carries: a Bearer token (any case of the scheme) and an x-api-key value."""
    keys = []
    scheme, _, token = headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        keys.append(token.strip().encode("latin-1"))  # the header's raw bytes back, as Starlette decoded them
    api_key = headers.get("x-api-key", "").strip()
    if api_key:
        keys.append(api_key.encode("latin-1"))
    return keys


def _is_preflight(scope: Scope, headers: Headers) -> bool:
    # Browsers never send credentials on a CORS preflight; the CORS middleware answers it.
    return scope["method"] == "OPTIONS" and "access-control-request-method" in headers


class ApiKeyRequired:
    """ASGI middleware: 401 unless the request carries one of ``keys`` (every key is always compared)."""

    def __init__(self, app: ASGIApp, keys: tuple[str, ...], public_metrics: bool = False) -> None:
        self.app = app
        self.digests = tuple(_digest(k.encode()) for k in keys)
        self.exempt = _EXEMPT | _METRICS if public_metrics else _EXEMPT

    def accepts(self, presented: list[bytes]) -> bool:
        ok = False
        for given in map(_digest, presented):
            for digest in self.digests:
                ok |= hmac.compare_digest(given, digest)
        return ok

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.digests or (scope["method"], scope["path"]) in self.exempt:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        presented = presented_keys(headers)
        if _is_preflight(scope, headers) or self.accepts(presented):
            await self.app(scope, receive, send)
            return
        drained = await _drain(headers, receive)
        await refusal(scope["path"], missing=not presented, close=not drained)(scope, receive, send)


async def _drain(headers: Headers, receive: Receive) -> bool:
    """Read and drop the request body; False when it is larger than ``_DRAIN_LIMIT`` or the client left."""
    length = headers.get("content-length", "")
    if "transfer-encoding" not in headers and length in ("", "0"):
        return True
    if length.isdigit() and int(length) > _DRAIN_LIMIT:
        return False
    received = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return False
        received += len(message.get("body", b""))
        if received > _DRAIN_LIMIT:
            return False
        if not message.get("more_body", False):
            return True


def refusal(path: str, *, missing: bool, close: bool = False) -> JSONResponse:
    """The 401 for ``path``: its dialect's error body, with the service's wording for a missing or wrong key."""
    dialect = dialect_for(path)
    body: dict[str, Any] = dialect.body(401, (_MISSING if missing else _WRONG)[dialect.name])
    if dialect.name == "openai" and not missing:
        body["error"]["code"] = "invalid_api_key"
    headers = {"WWW-Authenticate": "Bearer"}
    if close:
        # The rest of the body is never read, so the connection cannot be reused.
        headers["Connection"] = "close"
    return JSONResponse(body, status_code=401, headers=headers)
