"""SIGTERM with streams running: they end with an error line after a short grace, and the process exits.

The first test starts the real ``cllm serve`` as a child process, on a store holding a model
that never stops generating by itself; the others drive the drain middleware directly.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
from conftest import ENDLESS
from harness.child_server import cllm_serve
from starlette.types import Message, Receive, Scope, Send

from cllm_ollama.api.middleware.drain import Drain
from cllm_ollama.api.middleware.shutdown import DrainMiddleware
from cllm_ollama.config import ConfigError, Settings
from cllm_ollama.store.create import import_gguf
from cllm_ollama.store.store import ModelStore

GRACE_S = 1.0
EXIT_BOUND_S = 15.0  # generous: the test machine is shared and noisy


@pytest.fixture
def server(tmp_path: Path, endless_gguf: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    models = tmp_path / "models"
    import_gguf(ModelStore(models), ENDLESS, endless_gguf)
    settings = {
        "OLLAMA_NUM_PARALLEL": "2",
        "OLLAMA_CONTEXT_LENGTH": "8192",
        "CLLM_NUM_THREAD": "1",
        "CLLM_SHUTDOWN_GRACE": str(GRACE_S),
    }
    log = tmp_path / "serve.log"
    with cllm_serve(models, settings, log) as (proc, url):
        yield proc, url, log


def test_sigterm_ends_running_streams_with_an_error_and_exits(
    server: tuple[subprocess.Popen[bytes], str, Path],
) -> None:
    proc, url, log = server
    native_body = {"model": ENDLESS, "prompt": "Hi", "raw": True, "options": {"temperature": 0}}
    openai_body = {"model": ENDLESS, "messages": [{"role": "user", "content": "Hi"}], "stream": True}
    with (
        httpx.Client(base_url=url, timeout=60) as client,
        client.stream("POST", "/api/generate", json=native_body) as native,
        client.stream("POST", "/v1/chat/completions", json=openai_body) as sse,
    ):
        native_lines, sse_lines = native.iter_lines(), sse.iter_lines()
        assert not json.loads(next(native_lines))["done"]
        assert next(sse_lines).startswith("data: {")
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        native_rest = list(native_lines)
        sse_rest = [line for line in sse_lines if line]
        ended = time.monotonic() - t0
    returncode = proc.wait(timeout=EXIT_BOUND_S)
    exited = time.monotonic() - t0
    print(f"streams ended {ended:.2f} s and the process exited {exited:.2f} s after SIGTERM")
    assert json.loads(native_rest[-1]) == {"error": "server shutting down"}
    assert all("error" not in json.loads(line) for line in native_rest[:-1])
    error = {"message": "server shutting down", "type": "api_error", "param": None, "code": None}
    assert sse_rest[-2:] == ["data: " + json.dumps({"error": error}, separators=(",", ":")), "data: [DONE]"]
    assert GRACE_S <= ended < EXIT_BOUND_S and exited < EXIT_BOUND_S
    # uvicorn re-raises the signal once it has shut down cleanly.
    assert returncode in (0, -signal.SIGTERM)
    output = log.read_text()
    assert "timeout graceful shutdown exceeded" not in output, output  # the drain ended them, not the backstop
    with pytest.raises(httpx.TransportError):
        httpx.get(url, timeout=2)


async def _drained(path: str, content_type: bytes | None, *, begun_before: bool = False) -> tuple[list[Message], bool]:
    """What a client of ``path`` gets when the server stops during (or before) a request that never ends."""
    drain = Drain(0.05)
    cancelled = False

    async def endless(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal cancelled
        try:
            if content_type is not None:
                await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", content_type)]})
            while True:
                if content_type is not None:
                    await send({"type": "http.response.body", "body": b"chunk\n", "more_body": True})
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            cancelled = True
            raise

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        await asyncio.sleep(3600)
        raise AssertionError

    if begun_before:
        drain.begin()
    request = DrainMiddleware(endless, drain)({"type": "http", "path": path, "method": "POST"}, receive, send)
    if not begun_before:
        asyncio.get_running_loop().call_later(0.05, drain.begin)
    await asyncio.wait_for(request, 5)
    return sent, cancelled


SHUTDOWN_ERROR = {"message": "server shutting down", "type": "api_error", "param": None, "code": None}


@pytest.mark.parametrize(
    ("path", "content_type", "last"),
    [
        ("/api/chat", b"application/x-ndjson", b'{"error":"server shutting down"}\n'),
        ("/api/pull", b"application/x-ndjson", b'{"error":"server shutting down"}\n'),
        (
            "/v1/chat/completions",
            b"text/event-stream; charset=utf-8",
            b"data: " + orjson.dumps({"error": SHUTDOWN_ERROR}) + b"\n\ndata: [DONE]\n\n",
        ),
        (
            "/v1/responses",
            b"text/event-stream; charset=utf-8",
            b'event: error\ndata: {"type":"error","message":"server shutting down","code":null,"param":null}\n\n',
        ),
    ],
)
def test_a_stream_still_running_after_the_grace_period_ends_with_an_error(
    path: str, content_type: bytes, last: bytes
) -> None:
    sent, cancelled = asyncio.run(_drained(path, content_type))
    assert cancelled  # the request was cancelled: an engine request is aborted as for a client that left
    assert sent[-1] == {"type": "http.response.body", "body": last, "more_body": False}
    assert [m["body"] for m in sent[1:-1]] == [b"chunk\n"] * (len(sent) - 2)


@pytest.mark.parametrize("begun_before", [False, True])
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/generate", {"error": "server shutting down"}),
        ("/v1/embeddings", {"error": SHUTDOWN_ERROR}),
    ],
)
def test_a_request_with_no_answer_yet_gets_a_503(path: str, body: dict[str, object], begun_before: bool) -> None:
    """Still waiting (queued, loading) when the grace period ends, or arriving after shutdown began."""
    sent, _ = asyncio.run(_drained(path, None, begun_before=begun_before))
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 503
    assert orjson.loads(sent[1]["body"]) == body


@pytest.mark.parametrize(("value", "seconds"), [(None, 5.0), ("2.5", 2.5), ("10s", 10.0), ("1m", 60.0)])
def test_the_grace_period_comes_from_the_environment(value: str | None, seconds: float) -> None:
    env = {} if value is None else {"CLLM_SHUTDOWN_GRACE": value}
    assert Settings.from_env(env).shutdown_grace == seconds
    with pytest.raises(ConfigError, match="SHUTDOWN_GRACE"):
        Settings.from_env({"CLLM_SHUTDOWN_GRACE": "-1"})
