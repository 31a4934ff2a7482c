"""The request body limit: 413 past max_body_size, by Content-Length or while a chunked body streams in."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import replace

import httpx
import orjson
import pytest
from serving import serve_in_thread
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.config import DEFAULT_MAX_BODY_SIZE, ConfigError, Settings

LIMIT = 4096
MESSAGE = f"request body too large: the limit is {LIMIT} bytes (CLLM_MAX_BODY_SIZE)"


def chat_body(size: int) -> bytes:
    """A /api/chat request of exactly ``size`` bytes."""
    frame = orjson.dumps({"model": "tiny", "messages": [{"role": "user", "content": ""}]})
    return frame.replace(b'"content":""', b'"content":"' + b"x" * (size - len(frame)) + b'"')


def in_chunks(data: bytes, size: int = 512) -> Iterator[bytes]:
    """No Content-Length: httpx sends it chunked."""
    for i in range(0, len(data), size):
        yield data[i : i + size]


@pytest.fixture
def limited(store_settings: Settings) -> Settings:
    return replace(store_settings, max_body_size=LIMIT)


def test_oversized_body_by_content_length(limited: Settings) -> None:
    with TestClient(create_app(limited), base_url="http://localhost") as c:
        r = c.post("/api/chat", content=chat_body(LIMIT + 1))
        assert (r.status_code, r.json()) == (413, {"error": MESSAGE})
        assert r.headers["connection"] == "close"
        r = c.post("/v1/chat/completions", content=chat_body(LIMIT + 1))
        assert r.status_code == 413
        assert r.json() == {"error": {"message": MESSAGE, "type": "invalid_request_error", "param": None, "code": None}}
        # At the limit the handler runs (and finds no such model).
        r = c.post("/api/chat", content=chat_body(LIMIT))
        assert (r.status_code, r.json()) == (404, {"error": "model 'tiny' not found"})


def test_oversized_chunked_body_is_cut_off_while_streaming(limited: Settings) -> None:
    with serve_in_thread(create_app(limited)) as url, httpx.Client(base_url=url, timeout=30) as http:
        r = http.post("/api/chat", content=in_chunks(chat_body(3 * LIMIT)))
        assert "content-length" not in r.request.headers
        assert (r.status_code, r.json()) == (413, {"error": MESSAGE})
        r = http.post("/v1/embeddings", content=in_chunks(chat_body(3 * LIMIT)))
        assert (r.status_code, r.json()["error"]["type"]) == (413, "invalid_request_error")
        r = http.post("/api/chat", content=in_chunks(chat_body(LIMIT)))
        assert (r.status_code, r.json()) == (404, {"error": "model 'tiny' not found"})


def test_blob_uploads_are_not_limited(limited: Settings) -> None:
    data = bytes(range(256)) * (4 * LIMIT // 256)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    with TestClient(create_app(limited), base_url="http://localhost") as c:
        assert c.post(f"/api/blobs/{digest}", content=data).status_code == 201
        assert c.head(f"/api/blobs/{digest}").status_code == 200
    other = data[::-1]
    digest = "sha256:" + hashlib.sha256(other).hexdigest()
    with serve_in_thread(create_app(limited)) as url, httpx.Client(base_url=url, timeout=30) as http:
        assert http.post(f"/api/blobs/{digest}", content=in_chunks(other)).status_code == 201
        assert http.head(f"/api/blobs/{digest}").status_code == 200


def test_no_limit_when_zero(store_settings: Settings) -> None:
    with TestClient(create_app(replace(store_settings, max_body_size=0)), base_url="http://localhost") as c:
        assert c.post("/api/chat", content=chat_body(DEFAULT_MAX_BODY_SIZE + 1)).status_code == 404


def test_max_body_size_from_the_environment() -> None:
    assert Settings.from_env({}).max_body_size == DEFAULT_MAX_BODY_SIZE == 32 << 20
    assert Settings.from_env({"OLLAMA_MAX_BODY_SIZE": "1000"}).max_body_size == 1000
    assert Settings.from_env({"OLLAMA_MAX_BODY_SIZE": "1000", "CLLM_MAX_BODY_SIZE": "2000"}).max_body_size == 2000
    assert Settings.from_env({"CLLM_MAX_BODY_SIZE": "0"}).max_body_size == 0
    with pytest.raises(ConfigError, match="MAX_BODY_SIZE"):
        Settings.from_env({"CLLM_MAX_BODY_SIZE": "32MB"})
