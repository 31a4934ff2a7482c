"""Ollama's DNS-rebinding guard: on a loopback address, only requests for a local Host are served.

Without it, a web page whose domain resolves to 127.0.0.1 could drive pull, create and delete
through the user's browser; CORS does not stop that.
"""

from __future__ import annotations

import ipaddress
import socket

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

_LOCAL_SUFFIXES = (".localhost", ".local", ".internal")


def is_loopback(host: str) -> bool:
    """Whether the server listens on loopback only (the guard applies only then)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def allowed_host(host_header: str) -> bool:
    """Ollama's allowedHost: a local name, a loopback/private/unspecified IP, or this machine."""
    if host_header.startswith("["):  # [v6]:port
        host = host_header[1:].split("]", 1)[0]
    elif host_header.count(":") == 1:  # name:port or v4:port
        host = host_header.rsplit(":", 1)[0]
    else:  # bare name, v4 or v6
        host = host_header
    host = host.lower()
    if not host or host == "localhost" or host.endswith(_LOCAL_SUFFIXES):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host == socket.gethostname().lower()
    return ip.is_loopback or ip.is_private or ip.is_unspecified or ip.is_link_local


class LocalHostsOnly:
    """ASGI middleware: 403 with an empty body for a foreign Host header."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not allowed_host(Headers(scope=scope).get("host", "")):
            await Response(status_code=403)(scope, receive, send)
            return
        await self.app(scope, receive, send)
