"""The store races of issue 22 against a real ``cllm serve`` (subprocess, loopback, real tiny GGUFs):
each runs for a bounded time, then every status code, every manifest's blobs on disk and the server
log (no traceback) are checked; once more with the server killed (SIGKILL) mid-race and restarted."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.fakeregistry import fake_registry
from tests.polling import until
from tests.schema_fuzz import LiveServer, cllm_serve, write_store
from tests.store_check import missing_blobs, publish

RACE_S = 4.0
# What Ollama answers each operation for a name that vanished; anything else (a 500, another text) fails.
VANISHED = {
    "copy": {'model "{src}" not found'},
    "delete": {"model '{name}' not found"},
    "show": {"model '{name}:latest' not found"},
    "generate": {"model '{name}' not found"},
    "create": {"model '{src}:latest' not found"},
    "pull": set(),  # the registry has it: a pull always succeeds
}
Op = Callable[[httpx.Client, random.Random], tuple[str, httpx.Response]]


class Race:
    """Clients looping over operations until a deadline; tallies statuses and collects what is wrong."""

    def __init__(self, url: str, seconds: float) -> None:
        self.url = url
        self.deadline = time.monotonic() + seconds
        self.statuses: Counter[tuple[str, int]] = Counter()
        self.wrong: list[str] = []
        self.killed = threading.Event()  # the server was killed on purpose: lost connections are expected
        self._lock = threading.Lock()

    def client(self, ops: list[Op], seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(base_url=self.url, timeout=60) as http:
            while time.monotonic() < self.deadline and not self.killed.is_set():
                try:
                    label, response = rng.choice(ops)(http, rng)
                except httpx.TransportError as exc:
                    if not self.killed.is_set():
                        with self._lock:
                            self.wrong.append(f"connection lost: {exc!r}")
                    return
                self.check(label, response)

    def check(self, label: str, response: httpx.Response) -> None:
        op, _, names = label.partition(" ")
        args = dict(pair.split("=") for pair in names.split())
        problem = None
        if response.status_code == 404:
            error = response.json().get("error")
            if error not in {text.format(**args) for text in VANISHED[op]}:
                problem = f"{label}: 404 {error!r}"
        elif response.status_code != 200:
            problem = f"{label}: {response.status_code} {response.text[:300]!r}"
        elif response.headers.get("content-type", "").startswith("application/x-ndjson") and '"error"' in response.text:
            problem = f"{label}: a stream ended by an error: {response.text[-300:]!r}"
        with self._lock:
            self.statuses[(op, response.status_code)] += 1
            if problem:
                self.wrong.append(problem)

    def run(self, clients: list[tuple[list[Op], int]], kill: Callable[[], None] | None = None) -> None:
        threads = [threading.Thread(target=self.client, args=c) for c in clients]
        for t in threads:
            t.start()
        if kill is not None:
            time.sleep(RACE_S / 2)  # not a wait: the race is meant to be cut at a random point, not synchronised
            self.killed.set()
            kill()
        for t in threads:
            t.join(RACE_S + 120)
        assert not any(t.is_alive() for t in threads), "a client hung"


def create(name: str, base: str) -> Op:
    def op(http: httpx.Client, rng: random.Random) -> tuple[str, httpx.Response]:
        body = {"model": name, "from": base, "system": f"unique {rng.random()}", "stream": False}
        return f"create name={name} src={base}", http.post("/api/create", json=body)

    return op


def delete(name: str) -> Op:
    return lambda http, _: (f"delete name={name}", http.request("DELETE", "/api/delete", json={"model": name}))


def copy(src: str, dst: str) -> Op:
    return lambda http, _: (f"copy src={src}", http.post("/api/copy", json={"source": src, "destination": dst}))


def show(name: str) -> Op:
    return lambda http, _: (f"show name={name}", http.post("/api/show", json={"model": name}))


def generate(name: str) -> Op:
    def op(http: httpx.Client, rng: random.Random) -> tuple[str, httpx.Response]:
        body = {"model": name, "prompt": "hi", "stream": rng.random() < 0.5, "options": {"num_predict": 2}}
        return f"generate name={name}", http.post("/api/generate", json=body)

    return op


def pull(name: str) -> Op:
    return lambda http, _: (f"pull name={name}", http.post("/api/pull", json={"model": name, "stream": False}))


def create_then_delete(name: str) -> Op:
    def op(http: httpx.Client, rng: random.Random) -> tuple[str, httpx.Response]:
        label, response = create(name, "tiny")(http, rng)
        if response.status_code != 200:
            return label, response
        return delete(name)(http, rng)

    return op


def first_race(race: Race) -> list[tuple[list[Op], int]]:
    """The issue's first reproducer: one client creates ``src`` FROM tiny then deletes it; three copy it."""
    return [([create_then_delete("src")], 0)] + [([copy("src", f"dst{k}")], k) for k in (1, 2, 3)]


def second_race(race: Race) -> list[tuple[list[Op], int]]:
    """The second: 20 clients doing create, copy, delete, show, generate and pull (the third: a pull
    racing a delete of its name) on the same two names."""
    ops: list[Op] = []
    for a, b in (("a", "b"), ("b", "a")):
        ops += [create(a, "tiny"), create(a, b), copy(a, b), delete(a), show(a), generate(a), pull(a)]
    return [(ops, seed) for seed in range(20)]


@contextmanager
def serve_with_registry(models: Path | None = None) -> Iterator[LiveServer]:
    """``cllm serve`` whose registry is a loopback stand-in that has ``a`` and ``b``."""
    with (
        fake_registry() as registry,
        cllm_serve(models=models, extra_env={"OLLAMA_REGISTRY_URL": registry.url}) as server,
    ):
        publish(registry, server.models, ("a", "b"))
        yield server


def assert_whole(server: LiveServer, race: Race) -> None:
    assert race.wrong == []
    assert missing_blobs(server.models) == []
    assert server.tracebacks() == []
    assert server.alive()


def test_copies_racing_create_and_delete_of_their_source(tmp_path: Path) -> None:
    with cllm_serve() as server:
        race = Race(server.url, RACE_S)
        race.run(first_race(race))
        assert_whole(server, race)
        assert race.statuses[("copy", 200)] > 0 and race.statuses[("delete", 200)] > 0


@pytest.mark.model
def test_twenty_clients_on_two_names_get_only_successes_and_ollamas_404s(tmp_path: Path) -> None:
    with serve_with_registry() as server:
        race = Race(server.url, RACE_S)
        race.run(second_race(race))
        assert_whole(server, race)
        assert {op for op, status in race.statuses if status == 200} >= {"create", "copy", "delete", "show", "pull"}


@pytest.mark.model
def test_a_server_killed_mid_race_restarts_on_a_whole_store(tmp_path: Path) -> None:
    models = tmp_path / "models"
    write_store(models)
    with serve_with_registry(models) as server:
        race = Race(server.url, RACE_S)
        race.run(first_race(race) + second_race(race)[:6], kill=server.process.kill)
        server.process.wait(30)
        assert race.wrong == []
    assert missing_blobs(models) == []  # what SIGKILL left on disk
    with serve_with_registry(models) as server:
        tags = httpx.get(server.url + "/api/tags").json()["models"]
        assert [m for m in tags if "broken" in m] == []
        race = Race(server.url, RACE_S / 2)
        race.run(second_race(race)[:6])
        assert_whole(server, race)


@pytest.mark.model
def test_a_model_deleted_while_it_streams_finishes_the_stream_then_unloads(tmp_path: Path) -> None:
    """Its weights are shared with ``endless`` (created FROM it), so no file goes: its name must."""
    with cllm_serve() as server, httpx.Client(base_url=server.url, timeout=60) as http:
        created = http.post("/api/create", json={"model": "mine", "from": "endless", "stream": False})
        assert created.status_code == 200
        body = {"model": "mine", "prompt": "hi", "options": {"num_predict": 64}}
        with http.stream("POST", "/api/generate", json=body) as response:
            lines = response.iter_lines()
            next(lines)  # streaming: the model is loaded and in use
            assert [m["name"] for m in http.get("/api/ps").json()["models"]] == ["mine:latest"]
            assert http.request("DELETE", "/api/delete", json={"model": "mine"}).status_code == 200
            rest = [json.loads(line) for line in lines if line]
        assert rest[-1]["done"] is True and rest[-1]["eval_count"] == 64  # the stream finished whole
        until(lambda: http.get("/api/ps").json()["models"] == [], timeout=30)
        assert server.tracebacks() == []
