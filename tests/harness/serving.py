"""Run an ASGI app under a real uvicorn server in a thread, for clients that need real sockets."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.types import ASGIApp

STARTUP_TIMEOUT_S = 60.0


class _ThreadServer(uvicorn.Server):
    """Says when it is listening (or has given up), instead of being polled."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.settled = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets=sockets)
        finally:
            self.settled.set()


@contextmanager
def serve_in_thread(app: ASGIApp) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 at a free port; yields the base URL, stops the server on exit.

    The lifespan runs (startup before the URL is handed out, shutdown on exit).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = _ThreadServer(uvicorn.Config(app, lifespan="on", log_level="warning", ws="none"))

    def run() -> None:
        try:
            server.run(sockets=[sock])
        finally:
            server.settled.set()  # also when it failed before startup

    thread = threading.Thread(target=run, name="uvicorn", daemon=True)
    thread.start()
    try:
        if not server.settled.wait(STARTUP_TIMEOUT_S) or not server.started:
            raise RuntimeError("uvicorn did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(STARTUP_TIMEOUT_S)
        sock.close()
