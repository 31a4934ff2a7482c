"""GET /metrics without a model: the exposition's shape, its parsers, and the request counters."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from scripted import scripted_server
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings

GATEWAY_GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc")


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition, read by prometheus_client's own parser."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    return TestClient(create_app(Settings(models_dir=tmp_path / "models")), base_url="http://localhost")


def test_the_gateway_gauges_are_there_with_nothing_loaded(client: TestClient) -> None:
    with client:
        r = client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    got = samples(r.text)
    for name in GATEWAY_GAUGES:
        assert got[(name, (("model_name", ""),))] == 0


def test_a_scraper_asking_for_openmetrics_gets_the_text_format_with_vllms_names(client: TestClient) -> None:
    # Prometheus asks for OpenMetrics first; prometheus_client's writer would rename the samples.
    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    with client:
        r = client.get("/metrics", headers={"Accept": accept})
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'vllm:num_requests_waiting{model_name=""} 0.0' in r.text.splitlines()


def test_requests_are_counted_by_route_not_by_raw_path(client: TestClient) -> None:
    with client:
        client.get("/api/tags")
        client.get("/api/tags")
        client.post("/api/show", json={"model": "absent"})
        client.get("/no/such/path/1")
        client.get("/no/such/path/2")
        client.get("/v1/models/some-name")
        client.post("/api/tags")  # the route exists, not for POST
        for i in range(3):
            client.request(f"MADEUP{i}", "/api/tags")  # any token is a method to uvicorn's h11
        got = samples(client.get("/metrics").text)
    count = "cllm_http_requests_total"
    assert got[(count, (("endpoint", "/api/tags"), ("method", "GET"), ("status", "200")))] == 2
    assert got[(count, (("endpoint", "/api/show"), ("method", "POST"), ("status", "404")))] == 1
    assert got[(count, (("endpoint", "other"), ("method", "GET"), ("status", "404")))] == 2
    assert got[(count, (("endpoint", "/v1/models/{model:anypath}"), ("method", "GET"), ("status", "404")))] == 1
    assert got[(count, (("endpoint", "/api/tags"), ("method", "POST"), ("status", "405")))] == 1
    assert got[(count, (("endpoint", "/api/tags"), ("method", "other"), ("status", "405")))] == 3


def test_a_generation_is_counted_token_by_token(tmp_path: Path) -> None:
    with scripted_server(tmp_path) as (url, script):
        script.extend(["a", "b", "c"])
        r = httpx.post(f"{url}/api/generate", json={"model": "tiny", "prompt": "hi", "stream": False}, timeout=30)
        assert r.status_code == 200
        got = samples(httpx.get(f"{url}/metrics").text)
    model = (("model_name", "tiny:latest"),)
    assert got[("vllm:generation_tokens_total", model)] == 3
    assert got[("vllm:request_success_total", (("finished_reason", "stop"), ("model_name", "tiny:latest")))] == 1
    assert got[("vllm:time_to_first_token_seconds_count", model)] == 1
    assert got[("vllm:inter_token_latency_seconds_count", model)] == 2
    assert got[("vllm:e2e_request_latency_seconds_count", model)] == 1
    assert got[("cllm_model_loads_total", model)] == 1
    assert got[("cllm_slots", model)] == 2
    # Loaded and idle: the gateway's gauges are per model now, all zero.
    for name in GATEWAY_GAUGES:
        assert got[(name, model)] == 0


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian's prometheus package) is not installed")
def test_prometheus_own_linter_reads_it(tmp_path: Path) -> None:
    """promtool parses with Prometheus's Go parser; its only complaint may be vLLM's colons."""
    with scripted_server(tmp_path) as (url, script):
        script.append("a")
        httpx.post(f"{url}/api/generate", json={"model": "tiny", "prompt": "hi", "stream": False}, timeout=30)
        text = httpx.get(f"{url}/metrics").text
    done = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    problems = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode in (0, 3), problems  # 3: lint problems only, 1: unparseable
    assert problems, "the colon check stopped biting: is promtool really linting?"
    for line in problems:
        name, _, complaint = line.partition(" ")
        assert name.startswith("vllm:") and complaint == "metric names should not contain ':'", line
