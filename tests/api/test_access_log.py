"""No credential reaches a log line: a key a client sent in a query string (refused, as keys go in
headers) is redacted in uvicorn's access log of the real ``cllm serve``."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
from harness.child_server import cllm_serve

from cllm_ollama.api.middleware.auth import AccessLogRedaction, redact_query

SECRET = "sk-query-9f3a"


def test_credential_parameters_are_redacted_and_others_kept() -> None:
    assert redact_query(f"/api/tags?key={SECRET}") == "/api/tags?key=***"
    assert redact_query(f"/v1/models?a=1&API_KEY={SECRET}&b=2") == "/v1/models?a=1&API_KEY=***&b=2"
    assert redact_query(f"/x?access_token={SECRET}#frag") == "/x?access_token=***#frag"
    assert redact_query("/api/tags?monkey=1&keys=2") == "/api/tags?monkey=1&keys=2"
    record = logging.LogRecord(
        "uvicorn.access", 20, "", 0, '%s - "%s %s HTTP/%s" %d', ("c", "GET", f"/?key={SECRET}", "1.1", 401), None
    )
    assert AccessLogRedaction().filter(record) and SECRET not in record.getMessage()


def test_the_served_access_log_never_holds_a_query_key(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with cllm_serve(tmp_path / "models", {"CLLM_API_KEY": "right"}, log) as (_, url):
        assert httpx.get(f"{url}/api/tags?key={SECRET}", timeout=10).status_code == 401
        assert httpx.get(f"{url}/api/tags", headers={"Authorization": "Bearer right"}, timeout=10).status_code == 200
    text = log.read_text()
    assert "/api/tags?key=*** HTTP/1.1" in text and SECRET not in text


def test_serve_says_where_it_listens_as_ollama_does(tmp_path: Path) -> None:
    """Ollama logs "Listening on HOST:PORT (version V)" once bound; scripts wait for that line."""
    from cllm_ollama import OLLAMA_COMPAT_VERSION

    log = tmp_path / "serve.log"
    with cllm_serve(tmp_path / "models", {}, log) as (_, url):
        host_port = url.removeprefix("http://")
    assert f"Listening on {host_port} (version {OLLAMA_COMPAT_VERSION})" in log.read_text()
