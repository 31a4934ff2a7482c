"""OpenAI-compatible /v1/* over HTTP on a real tiny GGUF: shapes, streaming, errors."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import pytest
from conftest import ENDLESS
from starlette.testclient import TestClient

pytestmark = pytest.mark.model
MODEL = "tiny"  # installed by conftest.settings


def sse(text: str) -> list[Any]:
    events = [block for block in text.split("\n\n") if block]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    return [json.loads(e[6:]) for e in events[:-1]]


def test_chat_completion_and_its_stream_agree(client: TestClient) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0}
    out = client.post("/v1/chat/completions", json=body).json()
    assert out["object"] == "chat.completion" and out["id"].startswith("chatcmpl-")
    assert out["system_fingerprint"] == "fp_ollama"
    (choice,) = out["choices"]
    assert choice["message"]["role"] == "assistant" and choice["finish_reason"] == "length"
    assert out["usage"]["completion_tokens"] == 8
    assert out["usage"]["total_tokens"] == out["usage"]["prompt_tokens"] + 8
    r = client.post("/v1/chat/completions", json=body | {"stream": True, "stream_options": {"include_usage": True}})
    assert r.headers["content-type"].startswith("text/event-stream")
    chunks = sse(r.text)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert len({c["created"] for c in chunks}) == 1
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == choice["message"]["content"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    # As Ollama's chunks: finish_reason null until the last, no logprobs key when none were asked for.
    assert all(c["choices"][0]["finish_reason"] is None and "logprobs" not in c["choices"][0] for c in chunks[:-2])
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 8


def test_completions(client: TestClient) -> None:
    # The endless model: a sample of the tiny one may end before the limit, on some CPU's kernels.
    out = client.post("/v1/completions", json={"model": ENDLESS, "prompt": "Once", "max_tokens": 5}).json()
    assert out["object"] == "text_completion" and out["choices"][0]["finish_reason"] == "length"
    assert out["usage"]["completion_tokens"] == 5


def test_an_empty_completion_prompt_loads_the_model(client: TestClient) -> None:
    """As Ollama's completions: the generate handler's load call, its reason as the finish reason."""
    out = client.post("/v1/completions", json={"model": MODEL, "prompt": ""}).json()
    assert out["object"] == "text_completion" and out["model"] == MODEL
    assert out["choices"] == [{"text": "", "index": 0, "logprobs": None, "finish_reason": "load"}]
    assert out["usage"]["total_tokens"] == 0
    r = client.post("/v1/completions", json={"model": MODEL, "prompt": "", "stream": True})
    events = [line.removeprefix("data: ") for line in r.text.splitlines() if line]
    assert r.headers["content-type"].startswith("text/event-stream") and events[-1] == "[DONE]"
    assert [json.loads(e)["choices"][0]["finish_reason"] for e in events[:-1]] == ["load"]
    assert client.post("/v1/completions", json={"model": "nope", "prompt": ""}).status_code == 404
    # A missing prompt is Go's "" (CompletionRequest.Prompt is a string): the same load call.
    out = client.post("/v1/completions", json={"model": MODEL}).json()
    assert out["choices"][0]["finish_reason"] == "load"


def test_completions_render_the_prompt_and_give_logprobs(client: TestClient) -> None:
    body = {"model": MODEL, "prompt": "Once", "max_tokens": 4, "temperature": 0}
    out = client.post("/v1/completions", json=body | {"logprobs": 2}).json()
    native = client.post(
        "/api/generate", json={"model": MODEL, "prompt": "Once", "stream": False, "options": {"num_predict": 4}}
    ).json()
    # The template's markers around the prompt: as many prompt tokens as /api/generate (not raw) counts.
    assert out["usage"]["prompt_tokens"] == native["prompt_eval_count"] > 1
    logprobs = out["choices"][0]["logprobs"]
    assert len(logprobs["tokens"]) == len(logprobs["token_logprobs"]) == 4
    assert all(len(top) <= 2 for top in logprobs["top_logprobs"]) and logprobs["text_offset"][0] == 0
    assert all(isinstance(token, str) for token in logprobs["tokens"])
    assert client.post("/v1/completions", json=body).json()["choices"][0]["logprobs"] is None


def test_embeddings_float_and_base64(client: TestClient) -> None:
    out = client.post("/v1/embeddings", json={"model": MODEL, "input": ["a b", "c"]}).json()
    assert out["object"] == "list" and [d["index"] for d in out["data"]] == [0, 1]
    for encoding in ("base64", "BASE64"):  # Ollama takes the format in any case
        body = {"model": MODEL, "input": "a b", "encoding_format": encoding}
        b64 = client.post("/v1/embeddings", json=body).json()
        decoded = np.frombuffer(base64.b64decode(b64["data"][0]["embedding"]), dtype="<f4")
        assert np.allclose(decoded, out["data"][0]["embedding"], atol=1e-6)


def test_models(client: TestClient) -> None:
    listed = client.get("/v1/models").json()
    assert listed["object"] == "list" and sorted(m["id"] for m in listed["data"]) == ["endless:latest", "tiny:latest"]
    # A retrieve names the model as it was asked for, as Ollama's ToModel does.
    assert client.get("/v1/models/tiny").json() | {"created": 0} == {
        "id": "tiny",
        "object": "model",
        "created": 0,
        "owned_by": "library",
    }
    r = client.get("/v1/models/nope")
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("/v1/chat/completions", {"model": MODEL, "messages": []}, 400, "[] is too short - 'messages'"),
        ("/v1/chat/completions", {"model": "nope", "messages": [{"role": "user", "content": "x"}]}, 404, None),
        (
            "/v1/chat/completions",
            {
                "model": MODEL,
                "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}],
            },
            400,
            "image URLs are not currently supported, please use base64 encoded data instead",
        ),
        (
            "/v1/embeddings",
            {"model": MODEL, "input": "x", "encoding_format": "hex"},
            400,
            "Invalid value for 'encoding_format' = hex. Supported values: ['float', 'base64'].",
        ),
        ("/v1/embeddings", {"model": MODEL}, 400, "invalid input"),
        ("/v1/embeddings", {"model": MODEL, "input": []}, 400, "invalid input"),
        ("/v1/embeddings", {"model": MODEL, "input": [1, 2]}, 400, "invalid input type"),
    ],
)
def test_errors_are_openai_shaped(
    client: TestClient, path: str, body: dict[str, Any], status: int, message: str | None
) -> None:
    r = client.post(path, json=body)
    assert r.status_code == status
    error = r.json()["error"]
    assert error["type"] == {400: "invalid_request_error", 404: "not_found_error"}[status]
    assert error["param"] is None and error["code"] is None
    if message is not None:
        assert error["message"] == message


def test_chat_completion_logprobs(client: TestClient) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6, "temperature": 0}
    out = client.post("/v1/chat/completions", json=body | {"logprobs": True, "top_logprobs": 2}).json()
    content = out["choices"][0]["logprobs"]["content"]
    assert len(content) == 6 and all(len(c["top_logprobs"]) == 2 for c in content)
    assert client.post("/v1/chat/completions", json=body).json()["choices"][0]["logprobs"] is None


def test_usage_counts_the_prompt_tokens_whose_kv_was_reused(client: TestClient) -> None:
    system = "You are a terse assistant who answers about the sea, the sky and the weather. " * 4
    body = {"model": MODEL, "max_tokens": 2, "temperature": 0}
    first = client.post(
        "/v1/chat/completions",
        json=body | {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "Hi"}]},
    ).json()["usage"]
    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    second = client.post(
        "/v1/chat/completions",
        json=body | {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "Bye"}]},
    ).json()["usage"]
    # The system prompt's KV was there already: only the new turn was computed.
    assert 40 < second["prompt_tokens_details"]["cached_tokens"] < second["prompt_tokens"]
