"""CORS as Ollama's gin-contrib/cors: a foreign Origin gets 403 with an empty body and nothing runs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.store.create import import_gguf
from cllm_ollama.store.store import ModelStore

FOREIGN = ["http://evil.example", "null", "https://localhost.evil.example", "chrome-extension://abcdef"]
LOCAL = ["http://localhost", "http://127.0.0.1:3000", "https://0.0.0.0:8443", "tauri://localhost", "app://obsidian.md"]
BLOB = "sha256:" + "0" * 64
# A "simple" request: no preflight, so the browser sends it and only hides the answer.
SIMPLE = {"Content-Type": "text/plain"}


@pytest.fixture
def settings(tmp_path: Path, tiny_gguf: Path) -> Settings:
    import_gguf(ModelStore(tmp_path / "models"), "tiny", tiny_gguf)
    return Settings(models_dir=tmp_path / "models")


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings), base_url="http://localhost:11434") as c:
        yield c


def names(client: TestClient) -> set[str]:
    return {m["name"] for m in client.get("/api/tags").json()["models"]}


@pytest.mark.parametrize("origin", FOREIGN)
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/copy", '{"source": "tiny", "destination": "stolen"}'),
        ("/api/create", '{"model": "stolen", "from": "tiny", "system": "pwned"}'),
        ("/api/generate", '{"model": "tiny", "prompt": "hi", "options": {"num_predict": 1}}'),
        (f"/api/blobs/{BLOB}", "not a blob"),
        ("/api/pull", '{"model": "qwen3:0.6b"}'),
        ("/v1/chat/completions", '{"model": "tiny", "messages": []}'),
    ],
)
def test_foreign_origin_is_refused_before_anything_runs(client: TestClient, origin: str, path: str, body: str) -> None:
    r = client.post(path, content=body, headers={**SIMPLE, "Origin": origin})
    assert (r.status_code, r.content) == (403, b"")
    assert "access-control-allow-origin" not in r.headers
    assert names(client) == {"tiny:latest"}
    assert client.head(f"/api/blobs/{BLOB}").status_code == 404


@pytest.mark.parametrize("method", ["GET", "DELETE", "OPTIONS"])
def test_foreign_origin_is_refused_on_every_method(client: TestClient, method: str) -> None:
    headers = {"Origin": "http://evil.example", "Access-Control-Request-Method": "DELETE"}
    r = client.request(
        method, "/api/delete" if method == "DELETE" else "/api/tags", headers=headers, json={"model": "tiny"}
    )
    assert (r.status_code, r.content) == (403, b"")
    assert names(client) == {"tiny:latest"}


@pytest.mark.parametrize("origin", LOCAL)
def test_local_origins_are_served_with_cors_headers(client: TestClient, origin: str) -> None:
    r = client.post("/api/copy", content='{"source": "tiny", "destination": "mine"}', headers={"Origin": origin})
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == origin
    assert names(client) == {"tiny:latest", "mine:latest"}


def test_no_origin_and_same_origin_are_not_cors_requests(client: TestClient) -> None:
    assert client.post("/api/copy", json={"source": "tiny", "destination": "cli"}).status_code == 200
    # gin-contrib/cors: an Origin naming this very server (fetch from a page it served) passes.
    with TestClient(client.app, base_url="http://192.168.1.20:11434") as lan:
        r = lan.post(
            "/api/copy", json={"source": "tiny", "destination": "lan"}, headers={"Origin": "http://192.168.1.20:11434"}
        )
        assert r.status_code == 200
        assert lan.get("/api/tags", headers={"Origin": "http://192.168.1.21:11434"}).status_code == 403
    assert names(client) == {"tiny:latest", "cli:latest", "lan:latest"}


def test_preflight_for_a_local_origin(client: TestClient) -> None:
    r = client.options(
        "/api/chat",
        headers={
            "Origin": "http://localhost:5173",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, x-stainless-os",
        },
    )
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "http://localhost:5173"
    assert "POST" in r.headers["access-control-allow-methods"]
    assert "content-type" in r.headers["access-control-allow-headers"].lower()


def test_ollama_origins_extend_the_list(settings: Settings) -> None:
    # An origin without a wildcard is lowercased, as gin-contrib/cors normalizes it (browsers send lower case).
    extended = replace(settings, origins=("https://*.example.org", "chrome-extension://*", "https://MyApp.example.com"))
    with TestClient(create_app(extended), base_url="http://localhost:11434") as c:
        for origin in (
            "https://app.example.org",
            "chrome-extension://abcdef",
            "http://localhost:8080",
            "https://myapp.example.com",
        ):
            r = c.get("/api/tags", headers={"Origin": origin})
            assert (r.status_code, r.headers["access-control-allow-origin"]) == (200, origin)
        assert c.get("/api/tags", headers={"Origin": "https://example.com"}).status_code == 403
    anything = replace(settings, origins=("*",))
    with TestClient(create_app(anything), base_url="http://localhost:11434") as c:
        assert c.get("/api/tags", headers={"Origin": "null"}).status_code == 200
