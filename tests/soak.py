"""A soak: many concurrent clients for minutes against a ``cllm serve`` process, on loopback only.

``python -m tests.soak --clients 30 --minutes 3`` starts the server on a scratch store with the test
models (tests/schema_fuzz.py's ``cllm_serve``), then each client sends, until the time or the request
budget is spent, a random mix of valid streaming and non-streaming generate/chat/embed and /v1
requests, requests it abandons on purpose (mid-stream, or while waiting for a non-streamed answer),
and malformed ones. It prints the requests tried, statuses, crashes (the server process died),
hangs (no answer within ``--timeout``), unexpected answers (a 5xx Ollama would not give, an error in
the wrong shape, a stream cut short), the server's RSS before/after and whether every slot is free
at the end (each model unloads when asked: one still held by a request would stay in /api/ps).

Beside them, ``--store-clients`` churn the store: create, copy, delete, pull (from a loopback
stand-in registry), show and generate on two shared names, where only a success or Ollama's 404
for a vanished name is right; the verdict says whether every manifest's blobs are present at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.fakeregistry import fake_registry
from tests.schema_fuzz import (
    Afterwards,
    LiveServer,
    allowed_5xx,
    check_ndjson,
    check_sse,
    cllm_serve,
    error_message,
    rss_kib,
)
from tests.store_check import missing_blobs, publish

SHARED = ("shared-a", "shared-b")  # the names the store-churn clients fight over
PROMPTS = ["Hello", "Why is the sky blue?", "def add(a, b):", "Once upon a time", "1, 2, 3,", "Translate: chat"]


@dataclass
class Soak:
    url: str
    timeout: float
    deadline: float
    budget: int
    rng: random.Random
    tried: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    abandoned: int = 0
    hangs: int = 0
    connection_errors: int = 0
    failures: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)

    def more(self) -> bool:
        return time.monotonic() < self.deadline and self.tried < self.budget

    # ------------------------------------------------------------ request bodies

    def _model(self) -> str:
        return self.rng.choice(("tiny", "tiny", "endless"))

    def _n(self) -> int:
        return self.rng.randint(1, 24)

    def generate(self, stream: bool) -> tuple[str, dict[str, Any]]:
        options = {"num_predict": self._n(), "temperature": self.rng.choice((0, 0.8))}
        return "/api/generate", {
            "model": self._model(),
            "prompt": self.rng.choice(PROMPTS),
            "stream": stream,
            "options": options,
        }

    def chat(self, stream: bool) -> tuple[str, dict[str, Any]]:
        messages = [{"role": "user", "content": self.rng.choice(PROMPTS)}]
        body = {"model": self._model(), "messages": messages, "stream": stream, "options": {"num_predict": self._n()}}
        if self.rng.random() < 0.3:
            body["think"] = False
        if self.rng.random() < 0.2:
            body["format"] = "json"
        return "/api/chat", body

    def embed(self) -> tuple[str, dict[str, Any]]:
        inputs = self.rng.sample(PROMPTS, self.rng.randint(1, 3))
        return "/api/embed", {"model": self._model(), "input": inputs}

    def v1(self, stream: bool) -> tuple[str, dict[str, Any]]:
        kind = self.rng.choice(("chat", "completions", "embeddings", "responses"))
        model, n, prompt = self._model(), self._n(), self.rng.choice(PROMPTS)
        if kind == "chat":
            messages = [{"role": "user", "content": prompt}]
            return "/v1/chat/completions", {"model": model, "messages": messages, "max_tokens": n, "stream": stream}
        if kind == "completions":
            return "/v1/completions", {"model": model, "prompt": prompt, "max_tokens": n, "stream": stream}
        if kind == "embeddings":
            return "/v1/embeddings", {"model": model, "input": prompt}
        return "/v1/responses", {"model": model, "input": prompt, "max_output_tokens": n, "stream": stream}

    def malformed(self) -> tuple[str, bytes]:
        """Requests Ollama refuses: broken JSON, wrong types, unknown models, bad formats and options."""
        model = self._model()
        bodies: list[tuple[str, object]] = [
            ("/api/generate", b'{"model": "tiny", "prompt": '),
            ("/api/chat", b"\xff\xfe not json"),
            ("/api/generate", {"model": model, "prompt": 5}),
            ("/api/chat", {"model": model, "messages": "hi"}),
            ("/api/chat", {"model": model, "messages": [{"role": "user", "content": "hi", "tool_calls": [5]}]}),
            ("/api/generate", {"model": "no-such-model", "prompt": "hi"}),
            ("/api/generate", {"model": model, "prompt": "hi", "options": {"num_ctx": "big"}}),
            ("/api/generate", {"model": model, "prompt": "hi", "format": "yaml"}),
            ("/api/generate", {"model": model, "prompt": "hi", "format": {"type": "string", "maxLength": 100000}}),
            ("/api/generate", {"model": model, "prompt": "hi", "template": "{{range 5}}x{{end}}"}),
            ("/api/generate", {"model": model, "prompt": "hi", "keep_alive": "3600"}),
            ("/api/embed", {"model": model, "input": [1, 2]}),
            ("/v1/chat/completions", {"model": model, "messages": [], "max_tokens": 2}),
            ("/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": "x"}], "top_p": []}),
            ("/v1/completions", {"model": model, "prompt": ["a"]}),
            ("/v1/embeddings", {"model": model, "input": "x", "encoding_format": "hex"}),
            ("/v1/responses", {"model": model, "input": "x", "text": "x"}),
            ("/api/show", {"model": {}}),
            ("/api/copy", {"source": "tiny", "destination": "bad name!"}),
        ]
        path, body = self.rng.choice(bodies)
        return path, body if isinstance(body, bytes) else json.dumps(body).encode()

    # ------------------------------------------------------------ sending

    def _check(self, path: str, response: httpx.Response, text: str) -> None:
        status = response.status_code
        self.statuses[status] += 1
        problems: list[str] = []
        if status >= 400:
            try:
                message = error_message(path, json.loads(text))
            except ValueError:
                message = None
            if message is None:
                problems.append(f"{status} not in the endpoint's error shape: {text[:200]!r}")
            elif status >= 500 and not allowed_5xx(status, message):
                problems.append(f"{status} {message[:200]!r}")
        else:
            ctype = response.headers.get("content-type", "")
            if ctype.startswith("application/x-ndjson"):
                problems += check_ndjson(text)
            elif ctype.startswith("text/event-stream"):
                problems += check_sse(path, text)
        self.failures += [f"{path}: {p}" for p in problems]

    def _hang(self, failure: str) -> None:
        self.hangs += 1
        self.failures.append(failure)

    def _lost(self, path: str, exc: httpx.TransportError) -> None:
        """The connection refused or cut: a server that died or dropped a request."""
        self.connection_errors += 1
        self.failures.append(f"{path}: {exc!r}")

    async def send(self, client: httpx.AsyncClient, path: str, content: bytes, kind: str) -> None:
        self.tried += 1
        self.kinds[kind] += 1
        t0 = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout):
                response = await client.post(path, content=content)
            self._check(path, response, response.text)
        except TimeoutError:
            self._hang(f"{path}: no answer in {self.timeout:.0f} s: {content[:200]!r}")
        except httpx.TransportError as exc:
            self._lost(path, exc)
        self.latencies.append(time.monotonic() - t0)

    async def abandon_stream(self, client: httpx.AsyncClient) -> None:
        """Read a few lines of a long stream, then hang up."""
        path, body = self.rng.choice((self.generate(True), self.chat(True), self.v1(True)))
        if "options" in body:
            body["options"]["num_predict"] = 200
        elif "max_tokens" in body:
            body["max_tokens"] = 200
        elif "max_output_tokens" in body:
            body["max_output_tokens"] = 200
        body["model"] = "endless"
        self.tried += 1
        self.kinds["abandoned mid-stream"] += 1
        keep = self.rng.randint(0, 4)
        try:
            async with asyncio.timeout(self.timeout), client.stream("POST", path, json=body) as response:
                self.statuses[response.status_code] += 1
                lines = 0
                async for _ in response.aiter_lines():
                    lines += 1
                    if lines > keep:
                        break
            self.abandoned += 1
        except TimeoutError:
            self._hang(f"{path}: no first lines in {self.timeout:.0f} s")
        except httpx.TransportError as exc:
            self._lost(path, exc)

    async def abandon_waiting(self, client: httpx.AsyncClient) -> None:
        """A non-streamed request given up before its answer (the server must free its slot)."""
        path, body = self.generate(False) if self.rng.random() < 0.5 else self.chat(False)
        body["model"], body["options"]["num_predict"] = "endless", 200
        self.tried += 1
        self.kinds["abandoned waiting"] += 1
        try:
            async with asyncio.timeout(self.rng.uniform(0.05, 1.0)):
                response = await client.post(path, json=body)
            self._check(path, response, response.text)  # it was quicker than the client's patience
        except TimeoutError:
            self.abandoned += 1
        except httpx.TransportError as exc:
            self._lost(path, exc)

    async def client(self) -> None:
        actions: list[tuple[float, Callable[[httpx.AsyncClient], Awaitable[None]]]] = [
            (4, lambda c: self._valid(c, *self.generate(self.rng.random() < 0.5), "generate")),
            (4, lambda c: self._valid(c, *self.chat(self.rng.random() < 0.5), "chat")),
            (2, lambda c: self._valid(c, *self.embed(), "embed")),
            (4, lambda c: self._valid(c, *self.v1(self.rng.random() < 0.5), "v1")),
            (2, self.abandon_stream),
            (1, self.abandon_waiting),
            (3, lambda c: self.send(c, *self.malformed(), "malformed")),
            (1, self._listing),
        ]
        weights = [w for w, _ in actions]
        async with httpx.AsyncClient(base_url=self.url, timeout=None) as client:
            while self.more():
                (_, action) = self.rng.choices(actions, weights)[0]
                await action(client)

    async def store_churn(self) -> None:
        """Create, copy, delete, pull, show and generate on the shared names until the end."""
        async with httpx.AsyncClient(base_url=self.url, timeout=None) as client:
            while self.more():
                await self._churn_once(client)

    async def _churn_once(self, client: httpx.AsyncClient) -> None:
        a, b = self.rng.sample(SHARED, 2)
        # Each operation, and what Ollama answers it when a name vanished under it.
        ops: list[tuple[str, str, str, dict[str, Any], str | None]] = [
            ("create", "POST", "/api/create", {"model": a, "from": "tiny", "system": f"{self.rng.random()}"}, None),
            ("create", "POST", "/api/create", {"model": a, "from": b}, f"model '{b}:latest' not found"),
            ("copy", "POST", "/api/copy", {"source": a, "destination": b}, f'model "{a}" not found'),
            ("delete", "DELETE", "/api/delete", {"model": a}, f"model '{a}' not found"),
            ("pull", "POST", "/api/pull", {"model": a}, None),
            ("show", "POST", "/api/show", {"model": a}, f"model '{a}:latest' not found"),
            ("generate", "POST", "/api/generate", {"model": a, "prompt": "hi", "options": {"num_predict": 4}}, None),
        ]
        kind, method, path, body, vanished = self.rng.choice(ops)
        if kind == "generate":
            vanished = f"model '{a}' not found"
        self.tried += 1
        self.kinds[f"store {kind}"] += 1
        try:
            async with asyncio.timeout(self.timeout):
                response = await client.request(method, path, json={**body, "stream": False})
        except TimeoutError:
            self._hang(f"{path}: no answer in {self.timeout:.0f} s: {body!r}")
            return
        except httpx.TransportError as exc:
            self._lost(path, exc)
            return
        self.statuses[response.status_code] += 1
        if response.status_code == 200 or (response.status_code == 404 and error_text(response) == vanished):
            return
        self.failures.append(f"{path} {body!r}: {response.status_code} {response.text[:200]!r}")

    async def _valid(self, client: httpx.AsyncClient, path: str, body: dict[str, Any], kind: str) -> None:
        await self.send(client, path, json.dumps(body).encode(), kind)

    async def _listing(self, client: httpx.AsyncClient) -> None:
        path = self.rng.choice(("/api/ps", "/api/tags", "/v1/models", "/api/version"))
        self.tried += 1
        self.kinds["listing"] += 1
        try:
            async with asyncio.timeout(self.timeout):
                response = await client.get(path)
            self.statuses[response.status_code] += 1
        except TimeoutError:
            self._hang(f"GET {path}: no answer in {self.timeout:.0f} s")


def error_text(response: httpx.Response) -> str | None:
    try:
        return json.loads(response.text).get("error")
    except (ValueError, AttributeError):
        return None


async def _run(soak: Soak, clients: int, store_clients: int, server: LiveServer) -> int:
    peak = 0

    async def sample_rss() -> None:
        nonlocal peak
        while soak.more() and server.alive():
            peak = max(peak, rss_kib(server.process.pid))
            await asyncio.sleep(1)

    sampler = asyncio.create_task(sample_rss())
    await asyncio.gather(*(soak.client() for _ in range(clients)), *(soak.store_churn() for _ in range(store_clients)))
    sampler.cancel()
    return peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="python -m tests.soak")
    parser.add_argument("--clients", type=int, default=30)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--max-requests", type=int, default=100_000, help="stop after this many requests")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds after which a request is a hang")
    parser.add_argument("--parallel", type=int, default=8, help="OLLAMA_NUM_PARALLEL of the server")
    parser.add_argument("--store-clients", type=int, default=3, help="clients churning the store's shared names")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    with (
        fake_registry() as registry,
        cllm_serve(num_parallel=args.parallel, extra_env={"OLLAMA_REGISTRY_URL": registry.url}) as server,
    ):
        publish(registry, server.models, SHARED)
        # Both models loaded first, so that "before" is a server in use, not an empty one.
        asyncio.run(_warm(server.url))
        rss_before = rss_kib(server.process.pid)
        soak = Soak(
            server.url, args.timeout, time.monotonic() + args.minutes * 60, args.max_requests, random.Random(seed)
        )
        t0 = time.monotonic()
        peak = asyncio.run(_run(soak, args.clients, args.store_clients, server))
        elapsed = time.monotonic() - t0
        after = Afterwards.check(server)
        broken = missing_blobs(server.models)
    codes = ", ".join(f"{code}: {n}" for code, n in sorted(soak.statuses.items()))
    lat = sorted(soak.latencies) or [0.0]
    print(
        f"soak: seed {seed}, {args.clients} clients + {args.store_clients} store-churn clients, {elapsed:.0f} s, "
        f"server OLLAMA_NUM_PARALLEL={args.parallel}"
    )
    print(f"requests tried: {soak.tried} ({', '.join(f'{k}: {n}' for k, n in soak.kinds.most_common())})")
    print(f"statuses: {codes}")
    print(f"abandoned on purpose: {soak.abandoned}")
    print(f"unexpected answers: {len(soak.failures)}")
    print(f"hangs (over {args.timeout:.0f} s): {soak.hangs}")
    print(f"connection errors: {soak.connection_errors}")
    print(f"crashes (server process died): {0 if after.alive else 1}")
    print(f"server answers afterwards: {after.answers}")
    print(f"tracebacks in the server log: {len(after.tracebacks)}")
    print(f"every manifest's blobs present: {'yes' if not broken else 'NO: ' + '; '.join(broken[:10])}")
    print(f"latency p50/p99/max: {lat[len(lat) // 2]:.2f} / {lat[int(len(lat) * 0.99)]:.2f} / {lat[-1]:.2f} s")
    after.report_end(rss_before, soak.failures, shown=30, peak=peak)
    ok = after.ok and not soak.failures and not soak.hangs and not broken
    return 0 if ok else 1


async def _warm(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        for model in ("tiny", "endless"):
            r = await client.post(
                "/api/generate", json={"model": model, "prompt": "hi", "stream": False, "options": {"num_predict": 1}}
            )
            r.raise_for_status()


if __name__ == "__main__":
    sys.exit(main())
