"""Open WebUI (the PyPI ``open-webui``, in a venv of its own) and Chromium (Debian's) against a
cllm, for tests/compat/test_open_webui.py.

Open WebUI's dependencies (torch, transformers, ...) are far heavier than cllm's and pin their
own versions, so it lives in its own venv, outside the repository: ``compat/open_webui.sh``
installs it there (``OPEN_WEBUI_VENV``, default ``~/.cache/cllm-open-webui/venv``) with Chromium.
The browser is driven by ``harness/open_webui_drive.py`` under that venv's Python, with the
``playwright`` package Open WebUI itself depends on, launched on Debian's ``/usr/bin/chromium``
(playwright's own browser builds cannot be downloaded here).

:class:`ChatLog` sits between Open WebUI and cllm (Open WebUI's ``OLLAMA_BASE_URL`` points at
it) and keeps what each request carried and the status cllm gave it, so that a check can say
which of Open WebUI's requests were the picture messages and what they got.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from starlette.types import Receive, Scope, Send

from .child_server import child_process, free_port

VENV = Path(os.environ.get("OPEN_WEBUI_VENV", Path.home() / ".cache" / "cllm-open-webui" / "venv"))
DRIVER = Path(__file__).with_name("open_webui_drive.py")
CHROMIUM_NAMES = ("chromium", "chromium-browser")
READY = "cllm-ready"  # written by compat/open_webui.sh once the venv's install is whole
READY_S = 600.0  # Open WebUI's first start migrates its database and imports torch: minutes on a busy machine


def chromium() -> str | None:
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


def missing() -> str | None:
    """Why the Open WebUI check cannot run here, or None when it can."""
    if not (VENV / READY).is_file():
        return f"Open WebUI and playwright are not installed in {VENV}: run `bash compat/open_webui.sh`"
    if chromium() is None:
        return "Chromium is not installed (Debian's `chromium`): run `bash compat/open_webui.sh`"
    return None


@dataclass
class Exchange:
    """One request Open WebUI sent to its Ollama connection, and what cllm answered."""

    method: str
    path: str
    status: int = 0
    body: dict[str, Any] = field(default_factory=dict, repr=False)
    text: str = field(default="", repr=False)  # what a streamed /api/chat answered, joined
    done: bool = False  # its final chunk (``done: true``) came
    error: str = ""  # an error object in the stream (after a 200: headers sent while loading)
    _partial: bytes = field(default=b"", repr=False)

    @property
    def images(self) -> int:
        return sum(len(m.get("images") or []) for m in self.body.get("messages", []))

    @property
    def tools(self) -> int:
        return len(self.body.get("tools") or [])

    def __str__(self) -> str:
        shape = f" messages={len(self.body.get('messages', []))} images={self.images} tools={self.tools}"
        ended = f" done={self.done} error={self.error!r}"
        return f"{self.method} {self.path} -> {self.status}" + (shape + ended if self.path == "/api/chat" else "")


class ChatLog:
    """An ASGI reverse proxy to ``target`` that records every exchange (bodies of JSON requests),
    streaming the answers through as they come."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.exchanges: list[Exchange] = []

    def chats(self) -> list[Exchange]:
        return [e for e in self.exchanges if e.path == "/api/chat"]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        exchange = Exchange(scope["method"], scope["path"])
        try:
            exchange.body = json.loads(raw) if raw else {}
        except ValueError:
            exchange.body = {}
        self.exchanges.append(exchange)
        url = self.target + scope["path"] + (("?" + scope["query_string"].decode()) if scope["query_string"] else "")
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in (b"host", b"content-length")]
        async with (
            httpx.AsyncClient(timeout=None) as client,
            client.stream(scope["method"], url, headers=headers, content=raw) as response,
        ):
            exchange.status = response.status_code
            out = [
                (k, v) for k, v in response.headers.raw if k.lower() not in (b"content-length", b"transfer-encoding")
            ]
            await send({"type": "http.response.start", "status": response.status_code, "headers": out})
            async for chunk in response.aiter_raw():
                self._note(exchange, chunk)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    @staticmethod
    def _note(exchange: Exchange, chunk: bytes) -> None:
        """Read a streamed chat's NDJSON lines as they pass (a line may span chunks)."""
        if exchange.path != "/api/chat":
            return
        *lines, exchange._partial = (exchange._partial + chunk).split(b"\n")
        for line in filter(None, lines):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            exchange.text += (obj.get("message") or {}).get("content") or ""
            exchange.done = exchange.done or bool(obj.get("done"))
            exchange.error = exchange.error or str(obj.get("error") or "")


@contextmanager
def open_webui_serve(
    ollama_url: str, data_dir: Path, log: Path, model: str, settings: dict[str, str] | None = None
) -> Iterator[str]:
    """``open-webui serve`` on a free port, its Ollama connection at ``ollama_url``, no login
    (``WEBUI_AUTH=False``: the first visitor is the admin), ``model`` the default, nothing
    fetched from outside (``OFFLINE_MODE``), and ``settings`` (environment variables); yields its
    URL once ``/health`` answers."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OLLAMA_", "CLLM_", "OPENAI_"))}
    env |= {
        "DATA_DIR": str(data_dir),
        "WEBUI_AUTH": "False",
        "WEBUI_SECRET_KEY": "cllm-compat",
        "OLLAMA_BASE_URL": ollama_url,
        "ENABLE_OLLAMA_API": "True",
        "ENABLE_OPENAI_API": "False",
        "DEFAULT_MODELS": model,
        "OFFLINE_MODE": "True",
        "HF_HUB_OFFLINE": "1",
        "ENABLE_VERSION_UPDATE_CHECK": "False",
        "ANONYMIZED_TELEMETRY": "False",
        "SCARF_NO_ANALYTICS": "true",
        "DO_NOT_TRACK": "true",
        **(settings or {}),
    }
    data_dir.mkdir(parents=True, exist_ok=True)
    argv = [str(VENV / "bin" / "open-webui"), "serve", "--host", "127.0.0.1", "--port", str(port)]
    url = f"http://127.0.0.1:{port}"
    with child_process(
        argv, env=env, log=log, ready_url=f"{url}/health", ready_s=READY_S, name="open-webui", cwd=data_dir
    ):
        yield url
