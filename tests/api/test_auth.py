"""The optional API key: with CLLM_API_KEY set, only ``GET|HEAD /`` and CORS preflights pass without one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from anthropic_ids import without_request_id
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings

KEYS = ("k-one", "k-two")
# Claude Code and the Anthropic SDK send x-api-key; everything else sends a Bearer token.
HEADER_FORMS = [
    {"Authorization": "Bearer k-one"},
    {"Authorization": "bearer k-two"},
    {"Authorization": "BEARER   k-one  "},
    {"x-api-key": "k-two"},
]
NO_KEY: list[dict[str, str]] = [
    {},
    {"Authorization": "Bearer"},
    {"Authorization": "Bearer   "},
    {"Authorization": "Basic k-one"},
    {"Authorization": "k-one"},
    {"x-api-key": ""},
]
WRONG_KEY = [
    {"Authorization": "Bearer k-three"},
    {"Authorization": "Bearer k-one,k-two"},
    {"Authorization": "Bearer k-on"},
    {"x-api-key": "K-ONE"},
    {"x-api-key": "Bearer k-one"},
]


@pytest.fixture
def client(store_settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(replace(store_settings, api_keys=KEYS)), base_url="http://localhost:11434") as c:
        yield c


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_the_health_check_needs_no_key(client: TestClient, method: str) -> None:
    r = client.request(method, "/")
    assert r.status_code == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/"),
        ("GET", "/api/tags"),
        ("HEAD", "/api/tags"),
        ("GET", "/api/version"),
        ("GET", "/openapi.json"),
        ("GET", "/v1/models"),
        ("GET", "/metrics"),
        ("GET", "/no/such/path"),
        ("POST", "/api/chat"),
        ("DELETE", "/api/delete"),
    ],
)
def test_everything_else_needs_one(client: TestClient, method: str, path: str) -> None:
    r = client.request(method, path)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("headers", HEADER_FORMS)
def test_either_header_with_any_key_is_accepted(client: TestClient, headers: dict[str, str]) -> None:
    r = client.get("/api/tags", headers=headers)
    assert (r.status_code, r.json()) == (200, {"models": []})


def test_a_right_key_in_either_header_is_enough(client: TestClient) -> None:
    r = client.get("/api/tags", headers={"Authorization": "Bearer nope", "x-api-key": "k-two"})
    assert r.status_code == 200


@pytest.mark.parametrize("headers", NO_KEY)
def test_no_usable_key(client: TestClient, headers: dict[str, str]) -> None:
    assert client.get("/api/tags", headers=headers).json() == {"error": "unauthorized"}
    assert client.get("/v1/models", headers=headers).json() == {
        "error": {
            "message": "You didn't provide an API key. You need to provide your API key in an Authorization "
            "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }
    assert without_request_id(client.post("/v1/messages", headers=headers).json()) == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "x-api-key header is required"},
    }


@pytest.mark.parametrize("headers", WRONG_KEY)
def test_a_wrong_key(client: TestClient, headers: dict[str, str]) -> None:
    r = client.get("/api/tags", headers=headers)
    assert (r.status_code, r.json()) == (401, {"error": "unauthorized"})
    r = client.post("/v1/chat/completions", headers=headers, json={"model": "m", "messages": []})
    assert (r.status_code, r.json()) == (
        401,
        {
            "error": {
                "message": "Incorrect API key provided.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        },
    )
    # A small body is read and dropped: the connection stays usable.
    assert "connection" not in r.headers
    r = client.post("/v1/messages/count_tokens", headers=headers)
    assert (r.status_code, without_request_id(r.json())) == (
        401,
        {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
    )


def test_a_large_refused_body_is_not_read_and_the_connection_closes(client: TestClient) -> None:
    big = b"x" * ((1 << 20) + 1)
    r = client.post("/api/blobs/sha256:" + "0" * 64, content=big)
    assert (r.status_code, r.headers["connection"]) == (401, "close")

    def chunks() -> Iterator[bytes]:
        yield big[: 1 << 19]
        yield big[1 << 19 :]

    r = client.post("/api/chat", content=chunks())
    assert (r.status_code, r.headers["connection"]) == (401, "close")
    r = client.post("/api/chat", content=iter([b"{}", b""]))
    assert r.status_code == 401 and "connection" not in r.headers


def test_the_refusal_never_echoes_the_key(client: TestClient) -> None:
    for path in ("/api/tags", "/v1/models", "/v1/messages"):
        r = client.post(path, headers={"Authorization": "Bearer secret-guess"})
        assert b"secret-guess" not in r.content and "secret-guess" not in str(r.headers)


def test_a_cors_preflight_needs_no_key_and_a_401_keeps_its_cors_headers(client: TestClient) -> None:
    origin = "http://localhost:5173"
    r = client.options(
        "/api/chat",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == origin
    assert "authorization" in r.headers["access-control-allow-headers"].lower()
    r = client.post("/api/chat", headers={"Origin": origin}, json={})
    assert (r.status_code, r.headers["access-control-allow-origin"]) == (401, origin)
    # A foreign origin is still refused first, as without a key.
    r = client.get("/api/tags", headers={"Origin": "http://evil.example", "Authorization": "Bearer k-one"})
    assert (r.status_code, r.content) == (403, b"")


def test_a_plain_options_request_is_not_a_preflight(client: TestClient) -> None:
    assert client.options("/api/tags").status_code == 401


def test_off_by_default(store_settings: Settings) -> None:
    with TestClient(create_app(store_settings), base_url="http://localhost:11434") as c:
        assert c.get("/api/tags").status_code == 200


@pytest.mark.parametrize(
    ("env", "keys"),
    [
        ({}, ()),
        ({"CLLM_API_KEY": ""}, ()),
        ({"CLLM_API_KEY": "  "}, ()),
        ({"CLLM_API_KEY": "abc"}, ("abc",)),
        ({"OLLAMA_API_KEY": "abc"}, ()),  # an ollama.com key in a user's shell does not turn the check on
        ({"CLLM_API_KEY": "new", "OLLAMA_API_KEY": "old"}, ("new",)),
        ({"CLLM_API_KEY": " a , b,,a, c "}, ("a", "b", "c")),
        ({"CLLM_API_KEY": ","}, ()),
    ],
)
def test_keys_from_the_environment(env: dict[str, str], keys: tuple[str, ...]) -> None:
    assert Settings.from_env(env).api_keys == keys


@pytest.mark.parametrize(
    ("env", "key"),
    [
        ({}, None),
        ({"OLLAMA_API_KEY": "cloud"}, "cloud"),  # sent, as ollama-python sends it
        ({"CLLM_API_KEY": " a, b", "OLLAMA_API_KEY": "cloud"}, "a"),
    ],
)
def test_the_key_the_cli_sends(env: dict[str, str], key: str | None) -> None:
    assert Settings.from_env(env).client_api_key == key


def test_the_settings_repr_shows_no_key() -> None:
    assert "sekrit" not in repr(Settings.from_env({"CLLM_API_KEY": "sekrit"}))
    assert "acct-k3y" not in repr(Settings.from_env({"OLLAMA_API_KEY": "acct-k3y"}))


def test_metrics_can_be_left_open_for_scrapers_that_send_no_key(store_settings: Settings) -> None:
    settings = replace(store_settings, api_keys=KEYS, metrics_public=True)
    with TestClient(create_app(settings), base_url="http://localhost:11434") as c:
        assert c.get("/metrics").status_code == 200
        assert c.head("/metrics").status_code == 200
        assert c.get("/api/tags").status_code == 401  # only /metrics
        assert c.post("/metrics").status_code == 401
    assert Settings.from_env({"CLLM_METRICS_PUBLIC": "1"}).metrics_public
    assert not Settings.from_env({}).metrics_public
