"""A real uvicorn server: the official ollama client, concurrency, disconnects and the queue limit."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import httpx
import ollama
import pytest
from polling import until
from serving import serve_in_thread
from starlette.applications import Starlette

from cllm_ollama.api.services import services
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings

pytestmark = pytest.mark.model
MODEL = "tiny"  # installed by conftest.settings
ENDLESS = "endless"  # ditto: never stops by itself
# Runs until its client leaves: the context (32k) takes the tiny model many seconds to fill.
LONG = {"model": ENDLESS, "prompt": "Hi", "raw": True, "options": {"temperature": 0, "num_predict": -1}}
GREEDY = {"temperature": 0, "num_predict": 16}
PROMPTS = ["Hello, how are you?", "The quick brown fox", "Write a poem.", "def add(a, b):", "Paris is", "Once upon"]


@pytest.fixture
def live(settings: Settings) -> Iterator[tuple[str, Starlette]]:
    app = create_app(settings)
    with serve_in_thread(app) as url:
        yield url, app


@pytest.fixture
def client(live: tuple[str, Starlette]) -> Iterator[ollama.Client]:
    """ollama-python's client on the live server, closed after the test (it pools connections)."""
    official = ollama.Client(host=live[0])
    yield official
    official.close()


def test_official_client_sync_generate_and_chat(client: ollama.Client) -> None:
    whole = client.generate(model=MODEL, prompt="Hello", options=GREEDY)
    assert whole.done and whole.done_reason == "length" and whole.eval_count == 16
    parts = list(client.generate(model=MODEL, prompt="Hello", options=GREEDY, stream=True))
    assert "".join(p.response for p in parts) == whole.response and parts[-1].context == whole.context
    messages = [{"role": "user", "content": "Hi"}]
    reply = client.chat(model=MODEL, messages=messages, options=GREEDY, think=False)
    assert reply.message.role == "assistant" and reply.done_reason == "length"
    streamed = list(client.chat(model=MODEL, messages=messages, options=GREEDY, think=False, stream=True))
    assert "".join(p.message.content or "" for p in streamed) == reply.message.content
    assert [m.model for m in client.ps().models] == ["tiny:latest"]
    with pytest.raises(ollama.ResponseError) as err:
        client.generate(model="nope", prompt="x")
    assert err.value.status_code == 404 and err.value.error == "model 'nope' not found"


def test_official_client_async(live: tuple[str, Starlette]) -> None:
    async def main() -> None:
        client = ollama.AsyncClient(host=live[0])
        try:
            whole = await client.chat(model=MODEL, messages=[{"role": "user", "content": "Hi"}], options=GREEDY)
            parts = [p async for p in await client.generate(model=MODEL, prompt="Hi", options=GREEDY, stream=True)]
            assert whole.message.role == "assistant" and parts[-1].done and parts[-1].eval_count == 16
            embedded = await client.embed(model=MODEL, input=["a", "b"])
            assert len(embedded.embeddings) == 2
        finally:
            await client.close()  # on this loop, where its pooled connections live

    asyncio.run(main())


def test_concurrent_clients_get_exactly_the_sequential_outputs(client: ollama.Client) -> None:
    def one(prompt: str) -> str:
        return client.generate(model=MODEL, prompt=prompt, raw=True, options=GREEDY).response

    sequential = [one(p) for p in PROMPTS]
    results: dict[int, str] = {}

    def worker(i: int) -> None:
        results[i] = one(PROMPTS[i])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [results[i] for i in range(len(PROMPTS))] == sequential
    assert len(set(sequential)) == len(PROMPTS)


def _runner(app: Starlette):  # type: ignore[no-untyped-def]
    (entry,) = services(app).pool.running()
    return entry.model.runner


def test_client_disconnect_mid_stream_frees_the_slot(settings: Settings) -> None:
    app = create_app(replace(settings, num_parallel=1, context_length=32768))
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30) as http:
        with http.stream("POST", "/api/generate", json=LONG) as r:
            lines = r.iter_lines()
            next(lines)
            next(lines)
        runner = _runner(app)
        until(lambda: not runner.scheduler.running_ids())
        assert runner.times.steps < 16000  # stopped when the client left, not at the context's end
        # Cut short: far fewer steps ran than filling the context would take.
        assert runner.times.steps < 16000
        out = http.post("/api/generate", json={"model": MODEL, "prompt": "Hi", "stream": False, "options": GREEDY})
        assert out.json()["eval_count"] == 16


def test_queue_full_gives_503_with_ollamas_message(settings: Settings) -> None:
    app = create_app(replace(settings, num_parallel=1, max_queue=1, context_length=32768))
    short = LONG | {"options": {"temperature": 0, "num_predict": 4}}
    with (
        serve_in_thread(app) as url,
        httpx.Client(base_url=url, timeout=30) as a,
        httpx.Client(base_url=url, timeout=30) as b,
        a.stream("POST", "/api/generate", json=LONG) as first,
    ):
        lines = first.iter_lines()  # keep it referenced: a collected iterator closes the stream
        next(lines)  # running in the only slot
        queued = threading.Thread(target=lambda: httpx.post(f"{url}/api/generate", json=short, timeout=60))
        queued.start()
        until(lambda: len(_runner(app).scheduler.waiting) == 1)
        r = b.post("/api/generate", json=short)
        assert r.status_code == 503
        assert r.json() == {"error": "server busy, please try again.  maximum pending requests exceeded"}
        first.close()  # frees the slot: the queued request runs its few tokens
        queued.join(60)
        assert not queued.is_alive()


def test_waiting_request_whose_client_leaves_is_dropped(settings: Settings) -> None:
    app = create_app(replace(settings, num_parallel=1, context_length=32768))
    long = LONG
    with (
        serve_in_thread(app) as url,
        httpx.Client(base_url=url, timeout=60) as a,
        a.stream("POST", "/api/generate", json=long) as first,
    ):
        lines = first.iter_lines()
        next(lines)
        runner = _runner(app)
        payload = json.dumps(long).encode()
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as impatient:
            impatient.sendall(
                b"POST /api/generate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(payload)}\r\n\r\n".encode()
                + payload
            )
            until(lambda: len(runner.scheduler.waiting) == 1)
            queued = runner.scheduler.waiting[0].id
        # The client is gone: its request leaves the queue without ever taking a slot.
        until(lambda: not runner.scheduler.waiting)
        assert queued not in runner.scheduler.running_ids() and len(runner.scheduler.running_ids()) == 1


def test_non_streaming_client_that_leaves_frees_its_slot(settings: Settings) -> None:
    app = create_app(replace(settings, num_parallel=1, context_length=32768))
    with serve_in_thread(app) as url:
        with httpx.Client(base_url=url, timeout=30) as warm:
            warm.post("/api/generate", json={"model": ENDLESS})  # load it first
        with httpx.Client(base_url=url, timeout=0.5) as impatient, pytest.raises(httpx.ReadTimeout):
            impatient.post("/api/generate", json=LONG | {"stream": False})
        runner = _runner(app)
        until(lambda: not runner.scheduler.running_ids())
        assert runner.times.steps < 16000  # stopped when the client left, not at the context's end


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]}),
        ("/v1/completions", {"prompt": "Hi"}),
        ("/v1/responses", {"input": "Hi"}),
    ],
)
def test_a_v1_client_that_leaves_mid_stream_frees_its_slot_at_once(
    settings: Settings, path: str, body: dict[str, object]
) -> None:
    app = create_app(replace(settings, num_parallel=1, context_length=32768))
    endless = {"model": ENDLESS, "stream": True, "temperature": 0, "max_tokens": 100000} | body
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30) as http:
        with http.stream("POST", path, json=endless) as r:
            lines = r.iter_lines()
            assert next(lines).startswith(("data: ", "event: "))
            runner = _runner(app)
            assert runner.scheduler.running_ids()
        left = time.monotonic()
        until(lambda: not runner.scheduler.running_ids(), timeout=5)
        freed = time.monotonic() - left
        (entry,) = services(app).pool.running()
        until(lambda: entry.refs == 0 and entry.model.in_flight == 0, timeout=5)
        print(f"{path}: slot freed {freed * 1000:.0f} ms after the client left")
        assert freed < 2  # at once: a step or two, not when a garbage collector gets to it


def test_an_engine_thread_killed_on_purpose_is_reported_and_reloaded_by_the_next_request(settings: Settings) -> None:
    app = create_app(replace(settings, num_parallel=1, context_length=32768))
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=60) as http:
        with http.stream("POST", "/api/generate", json=LONG) as r:
            lines = r.iter_lines()
            assert not json.loads(next(lines))["done"]
            runner = _runner(app)

            def killed(*args: object) -> None:
                raise RuntimeError("killed on purpose")

            # The step fails, and so does the recovery: the engine thread stops for good.
            runner.ctx.decode = killed  # type: ignore[method-assign]
            runner.ctx.clear = killed  # type: ignore[method-assign]
            last = json.loads(list(lines)[-1])
        assert last == {"error": "the model's engine stopped (RuntimeError: killed on purpose)"}
        runner._thread.join(10)
        assert not runner._thread.is_alive() and runner.dead == "RuntimeError: killed on purpose"
        out = http.post(
            "/api/generate", json={"model": ENDLESS, "prompt": "Hi", "raw": True, "stream": False} | {"options": GREEDY}
        )
        assert out.status_code == 200 and out.json()["eval_count"] == 16
        assert _runner(app) is not runner  # loaded again, with a new engine thread
