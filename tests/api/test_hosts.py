"""The DNS-rebinding guard: foreign Host headers get 403 when cllm listens on loopback."""

from __future__ import annotations

from dataclasses import replace

import pytest
from starlette.testclient import TestClient

from cllm_ollama.api.middleware.hosts import allowed_host
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings, parse_host


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("localhost", True),
        ("localhost:11434", True),
        ("127.0.0.1:11434", True),
        ("[::1]:11434", True),
        ("10.0.0.5", True),
        ("192.168.1.2:80", True),
        ("0.0.0.0", True),
        ("box.local", True),
        ("api.internal:8080", True),
        ("app.localhost", True),
        ("evil.example.com", False),
        ("8.8.8.8", False),
        ("attacker.com:11434", False),
    ],
)
def test_allowed_hosts(host: str, allowed: bool) -> None:
    assert allowed_host(host) is allowed


def test_guard_only_on_loopback(store_settings: Settings) -> None:
    with TestClient(create_app(store_settings), base_url="http://evil.example.com") as c:
        r = c.get("/api/version")
        assert (r.status_code, r.content) == (403, b"")
    with TestClient(create_app(store_settings), base_url="http://localhost:11434") as c:
        assert c.get("/api/version").status_code == 200
    everywhere = replace(store_settings, host=parse_host("0.0.0.0:11434"))
    with TestClient(create_app(everywhere), base_url="http://evil.example.com") as c:
        assert c.get("/api/version").status_code == 200
