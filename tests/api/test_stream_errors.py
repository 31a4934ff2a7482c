"""Every dialect maps a failure the same way before and after the first byte, over an engine
that plays a script (no llama.cpp): a status and the dialect's error body before it, the
stream's last words and a clean end after it, whatever the exception."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from anthropic_ids import without_request_id
from scripted import ScriptedModel, scripted_pool
from starlette.testclient import TestClient

from cllm_ollama.api.services import services
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings

MODEL = "tiny"  # installed by conftest.settings


class Boom(Exception):
    """Not a CllmError: a bug, as the boundary sees it."""


@pytest.fixture
def scripted(settings: Settings) -> Iterator[tuple[TestClient, list[str | BaseException], list[ScriptedModel]]]:
    script: list[str | BaseException] = []
    models: list[ScriptedModel] = []
    app = create_app(settings)
    with TestClient(app, base_url="http://localhost", raise_server_exceptions=False) as client:
        services(app).pool = scripted_pool(script, models)
        yield client, script, models


CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "think": False}
OPENAI_CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "none"}
ENDPOINTS = {
    "/api/generate": {"model": MODEL, "prompt": "Hi", "raw": True},
    "/api/chat": CHAT,
    "/v1/chat/completions": OPENAI_CHAT | {"stream": True},
    "/v1/completions": {"model": MODEL, "prompt": "Hi", "stream": True},
    "/v1/responses": {"model": MODEL, "input": "Hi", "reasoning": {"effort": "none"}, "stream": True},
    "/v1/messages": {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "Hi"}], "stream": True}
    | {"thinking": {"type": "disabled"}},
}
OLLAMA_ERROR = {"error": "internal error: kaboom"}
OPENAI_ERROR = {"error": {"message": "internal error: kaboom", "type": "api_error", "param": None, "code": None}}
ANTHROPIC_ERROR = {"type": "error", "error": {"type": "api_error", "message": "internal error: kaboom"}}


def sent_error(path: str, body: Any) -> Any:
    """An error as sent, less the request id that each Anthropic error gets afresh."""
    return without_request_id(body) if path == "/v1/messages" else body


def error_body(path: str) -> dict[str, Any]:
    if path.startswith("/api/"):
        return OLLAMA_ERROR
    return ANTHROPIC_ERROR if path == "/v1/messages" else OPENAI_ERROR


def frames(path: str, text: str) -> list[Any]:
    """The objects of a stream in its framing; ``"[DONE]"`` where SSE says so."""
    if path.startswith("/api/"):
        return [json.loads(line) for line in text.splitlines()]
    out: list[Any] = []
    for block in filter(None, text.split("\n\n")):
        data = block.split("data: ", 1)[1]
        out.append("[DONE]" if data == "[DONE]" else json.loads(data))
    return out


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_a_non_cllm_exception_mid_stream_ends_it_with_the_dialects_error(
    scripted: tuple[TestClient, list[str | BaseException], list[ScriptedModel]], path: str
) -> None:
    client, script, models = scripted
    script += ["Hello", " there", Boom("kaboom")]
    r = client.post(path, json=ENDPOINTS[path])
    assert r.status_code == 200
    out = frames(path, r.text)
    if path.startswith("/api/"):
        assert out[-1] == OLLAMA_ERROR and len(out) >= 2 and all("error" not in o for o in out[:-1])
    elif path == "/v1/responses":
        assert out[-1] == {"type": "error", "sequence_number": len(out) - 1, "message": "internal error: kaboom"} | {
            "code": None,
            "param": None,
        }
        assert out[0]["type"] == "response.created" and all(o["type"] != "error" for o in out[:-1])
    elif path == "/v1/messages":
        assert without_request_id(out[-1]) == ANTHROPIC_ERROR and r.text.endswith(
            "event: error\ndata: " + json.dumps(out[-1], separators=(",", ":")) + "\n\n"
        )
        assert out[0]["type"] == "message_start" and all(o["type"] != "error" for o in out[:-1])
    else:
        assert out[-2:] == [OPENAI_ERROR, "[DONE]"] and len(out) >= 3
    # Given back: no reference held, nothing left running.
    assert [e.refs for e in services(client.app).pool.running()] == [0]
    assert not models[0].running


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_the_same_exception_before_the_first_byte_is_a_500_in_the_dialects_shape(
    scripted: tuple[TestClient, list[str | BaseException], list[ScriptedModel]], path: str
) -> None:
    client, script, _ = scripted
    script.append(Boom("kaboom"))
    r = client.post(path, json=ENDPOINTS[path])
    assert r.status_code == 500
    assert sent_error(path, r.json()) == error_body(path)
    assert [e.refs for e in services(client.app).pool.running()] == [0]


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_a_whole_answer_is_the_same_500(
    scripted: tuple[TestClient, list[str | BaseException], list[ScriptedModel]], path: str
) -> None:
    client, script, _ = scripted
    script += ["Hello", Boom("kaboom")]
    r = client.post(path, json=ENDPOINTS[path] | {"stream": False})
    assert r.status_code == 500
    assert sent_error(path, r.json()) == error_body(path)


def test_the_scripted_engine_answers_every_dialect(
    scripted: tuple[TestClient, list[str | BaseException], list[ScriptedModel]],
) -> None:
    client, script, _ = scripted
    script += ["Hello", " there"]
    for path, body in ENDPOINTS.items():
        r = client.post(path, json=body | {"stream": False})
        assert r.status_code == 200, (path, r.text)
        assert "Hello there" in r.text
