"""The gateway's gauges under real load: more requests than slots, on a real server and model.

Two requests hold the two slots (the endless model runs until its client leaves) and three more
wait without a byte of answer. The gauges, /api/ps and a real Prometheus scraping the server
must all say 2 running and 3 waiting, and 0 and 0 once the clients are gone.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from polling import until
from prometheus_client.parser import text_string_to_metric_families
from serving import serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings

pytestmark = pytest.mark.model
ENDLESS = "endless"  # installed by conftest.settings: never stops by itself
LABEL = "endless:latest"
LONG = {"model": ENDLESS, "prompt": "Hi", "raw": True, "options": {"temperature": 0, "num_predict": -1}}


def gauges(url: str, model: str = LABEL) -> dict[str, float]:
    """The gateway's gauges for ``model``, read with prometheus_client's parser."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=10).text):
        for s in family.samples:
            if s.name.startswith("vllm:") and s.labels.get("model_name") == model:
                out[s.name] = s.value
    return out


def queued_request(url: str) -> socket.socket:
    """A streaming /api/generate sent on a raw socket: it stays in the queue until the socket closes."""
    payload = json.dumps(LONG).encode()
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(
        b"POST /api/generate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(payload)}\r\n\r\n".encode()
        + payload
    )
    return sock


def answered(sock: socket.socket) -> bool:
    """Whether a token came back (a queued request gets none until it has a slot; its headers and
    keep-alives, an empty ``response``, come at admission)."""
    sock.setblocking(False)
    try:
        body = sock.recv(1 << 16, socket.MSG_PEEK).partition(b"\r\n\r\n")[2]
    except BlockingIOError:
        return False
    finally:
        sock.setblocking(True)
    return re.search(rb'"response":"[^"]', body) is not None


@pytest.fixture
def loaded(settings: Settings) -> Iterator[str]:
    """A server with 2 slots and a 32k context, the endless model loaded (and kept)."""
    app = create_app(replace(settings, num_parallel=2, context_length=32768))
    with serve_in_thread(app) as url:
        httpx.post(f"{url}/api/generate", json={"model": ENDLESS, "keep_alive": -1}, timeout=60).raise_for_status()
        yield url


@contextmanager
def load_of_five(url: str) -> Iterator[tuple[list[socket.socket], list[socket.socket]]]:
    """Two requests generating in the two slots, three queued behind them; all closed on exit."""
    with ExitStack() as stack:
        http = stack.enter_context(httpx.Client(base_url=url, timeout=60))
        running, readers = [], []
        for _ in range(2):
            stream = stack.enter_context(http.stream("POST", "/api/generate", json=LONG))
            readers.append(stream.iter_lines())  # kept: a collected reader closes its stream
            next(readers[-1])  # it has a slot: its first token came back
            running.append(stream)
        queued = [queued_request(url) for _ in range(3)]
        stack.callback(lambda: [s.close() for s in queued])
        yield running, queued  # type: ignore[misc]


def test_running_and_waiting_are_exactly_the_requests_in_slots_and_in_the_queue(loaded: str) -> None:
    url = loaded
    with load_of_five(url) as (running, queued):
        now = until(lambda: (g := gauges(url))["vllm:num_requests_waiting"] == 3 and g)
        assert now["vllm:num_requests_running"] == 2
        assert 0 < now["vllm:kv_cache_usage_perc"] <= 1
        assert not any(answered(s) for s in queued)
        (ps,) = httpx.get(f"{url}/api/ps").json()["models"]
        assert (ps["num_parallel"], ps["requests_running"], ps["requests_queued"]) == (2, 2, 3)
        # Both slots are freed: two queued requests take them, one still waits.
        for stream in running:
            stream.close()
        now = until(lambda: (g := gauges(url))["vllm:num_requests_waiting"] == 1 and g)
        assert now["vllm:num_requests_running"] == 2
        # Their first bytes follow their admission (prefill, first token); the third gets none.
        until(lambda: sum(answered(s) for s in queued) == 2)
        assert gauges(url)["vllm:num_requests_waiting"] == 1
    after = until(lambda: (g := gauges(url))["vllm:num_requests_running"] == 0 and g)
    assert after["vllm:num_requests_waiting"] == 0
    assert after["vllm:kv_cache_usage_perc"] == 0
    (ps,) = httpx.get(f"{url}/api/ps").json()["models"]
    assert (ps["requests_running"], ps["requests_queued"]) == (0, 0)


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="Debian's prometheus package is not installed")
def test_a_real_prometheus_scrapes_the_same_counts(loaded: str, tmp_path: Path) -> None:
    url = loaded
    host_port = url.removeprefix("http://")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
        f"scrape_configs: [{{job_name: cllm, static_configs: [{{targets: ['{host_port}']}}]}}]\n"
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    prometheus = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    api = f"http://127.0.0.1:{port}/api/v1"

    def query(expr: str) -> float | None:
        try:
            result = httpx.get(f"{api}/query", params={"query": expr}, timeout=5).json()["data"]["result"]
        except (httpx.TransportError, KeyError, ValueError):
            return None  # not up yet
        return float(result[0]["value"][1]) if result else None

    try:
        with load_of_five(url):
            selector = f'{{model_name="{LABEL}"}}'
            until(lambda: query(f"vllm:num_requests_waiting{selector}") == 3, timeout=60)
            assert query(f"vllm:num_requests_running{selector}") == 2
            usage = query(f"vllm:kv_cache_usage_perc{selector}")
            assert usage is not None and 0 < usage <= 1
            assert query(f'vllm:cache_config_info{{model_name="{LABEL}",block_size="32"}}') == 1
        until(lambda: query(f"vllm:num_requests_running{selector}") == 0, timeout=60)
        assert query(f"vllm:num_requests_waiting{selector}") == 0
        targets = httpx.get(f"{api}/targets", timeout=5).json()["data"]["activeTargets"]
        assert [t["health"] for t in targets] == ["up"]
    finally:
        prometheus.terminate()
        prometheus.wait(30)
