"""Malformed requests get a 400 with Go's decode error in Ollama's (or OpenAI's) error shape, never a 500.

Each case here used to crash a handler (500 and a logged traceback), reach the native options as a
500, or be accepted with the wrong meaning (``truncate: "no"`` acted as true).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from anthropic_ids import without_request_id
from conftest import MODEL
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings

HI = [{"role": "user", "content": "hi"}]
CHAT = {"model": MODEL, "messages": HI}
ASSISTANT = {"role": "assistant", "content": ""}
V1_CHAT = {"model": MODEL, "messages": HI, "max_tokens": 1}
V1_COMPLETION = {"model": MODEL, "prompt": "hi", "max_tokens": 1}
RESPONSES = {"model": MODEL, "input": "hi", "max_output_tokens": 1}
GENERATE = {"model": MODEL, "prompt": "hi"}


def unmarshal(got: str, field: str, target: str) -> str:
    return f"json: cannot unmarshal {got} into Go struct field {field} of type {target}"


NATIVE_CASES = [
    # Crashes found by probing every field with wrong types.
    (
        "/api/chat",
        CHAT | {"messages": [{"role": "user", "content": "hi", "tool_calls": [5]}]},
        unmarshal("number", "ChatRequest.messages.tool_calls", "api.ToolCall"),
    ),
    (
        "/api/chat",
        CHAT | {"messages": [*HI, ASSISTANT | {"tool_calls": [{"function": "f"}]}]},
        unmarshal("string", "ChatRequest.messages.tool_calls.function", "api.ToolCallFunction"),
    ),
    (
        "/api/chat",
        CHAT | {"messages": [*HI, ASSISTANT | {"tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}]},
        unmarshal("string", "ChatRequest.messages.tool_calls.function.arguments", "api.ToolCallFunctionArguments"),
    ),
    (
        "/api/chat",
        CHAT | {"messages": [*HI, ASSISTANT | {"tool_calls": [{"function": {"name": 5}}]}]},
        unmarshal("number", "ChatRequest.messages.tool_calls.function.name", "string"),
    ),
    ("/api/chat", CHAT | {"messages": ["hi"]}, unmarshal("string", "ChatRequest.messages", "api.Message")),
    ("/api/chat", CHAT | {"messages": "hi"}, unmarshal("string", "ChatRequest.messages", "[]api.Message")),
    (
        "/api/chat",
        CHAT | {"messages": [{"role": "user", "content": ["hi"]}]},
        unmarshal("array", "ChatRequest.messages.content", "string"),
    ),
    (
        "/api/chat",
        CHAT | {"messages": [{"role": "user", "content": "hi", "images": [5]}]},
        unmarshal("number", "ChatRequest.messages.images", "api.ImageData"),
    ),
    ("/api/chat", CHAT | {"tools": {"a": 1}}, unmarshal("object", "ChatRequest.tools", "api.Tools")),
    ("/api/chat", CHAT | {"tools": [5]}, unmarshal("number", "ChatRequest.tools", "api.Tool")),
    (
        "/api/chat",
        CHAT | {"tools": [{"type": "function", "function": "f"}]},
        unmarshal("string", "ChatRequest.tools.function", "api.ToolFunction"),
    ),
    ("/api/generate", GENERATE | {"context": "1,2"}, unmarshal("string", "GenerateRequest.context", "[]int")),
    ("/api/generate", GENERATE | {"context": [1, True]}, unmarshal("bool", "GenerateRequest.context", "int")),
    ("/api/generate", GENERATE | {"images": "abc"}, unmarshal("string", "GenerateRequest.images", "[]api.ImageData")),
    ("/api/generate", GENERATE | {"top_logprobs": 1.5}, unmarshal("number 1.5", "GenerateRequest.top_logprobs", "int")),
    (
        "/api/embed",
        {"model": MODEL, "input": "x", "dimensions": "8"},
        unmarshal("string", "EmbedRequest.dimensions", "int"),
    ),
    # Wrong-typed booleans were truth values: "no" meant true.
    ("/api/generate", GENERATE | {"truncate": "no"}, unmarshal("string", "GenerateRequest.truncate", "bool")),
    ("/api/generate", GENERATE | {"stream": "no"}, unmarshal("string", "GenerateRequest.stream", "bool")),
    ("/api/generate", GENERATE | {"raw": 1}, unmarshal("number", "GenerateRequest.raw", "bool")),
    ("/api/generate", GENERATE | {"logprobs": "yes"}, unmarshal("string", "GenerateRequest.logprobs", "bool")),
    ("/api/generate", GENERATE | {"shift": []}, unmarshal("array", "GenerateRequest.shift", "bool")),
    (
        "/api/generate",
        GENERATE | {"think": 1},
        'think must be a boolean or string ("high", "medium", "low", "max", true, or false)',
    ),
    ("/api/chat", CHAT | {"truncate": 0}, unmarshal("number", "ChatRequest.truncate", "bool")),
    ("/api/chat", CHAT | {"stream": "false"}, unmarshal("string", "ChatRequest.stream", "bool")),
    (
        "/api/embed",
        {"model": MODEL, "input": "x", "truncate": "no"},
        unmarshal("string", "EmbedRequest.truncate", "bool"),
    ),
    ("/api/show", {"model": MODEL, "verbose": "yes"}, unmarshal("string", "ShowRequest.verbose", "bool")),
    ("/api/pull", {"model": MODEL, "insecure": "no"}, unmarshal("string", "PullRequest.insecure", "bool")),
    ("/api/pull", {"model": MODEL, "stream": 0}, unmarshal("number", "PullRequest.stream", "bool")),
    ("/api/create", {"model": "x", "from": MODEL, "stream": "no"}, unmarshal("string", "CreateRequest.stream", "bool")),
    # Go's type names, not Python's ("int", "list").
    ("/api/show", {"model": 5}, unmarshal("number", "ShowRequest.model", "string")),
    ("/api/show", {"model": MODEL, "name": [1]}, unmarshal("array", "ShowRequest.name", "string")),
    ("/api/copy", {"source": MODEL, "destination": 1.5}, unmarshal("number", "CopyRequest.destination", "string")),
    ("/api/pull", {"model": {}}, unmarshal("object", "PullRequest.model", "string")),
    # A body that is no object: Go names the struct it decodes into.
    ("/api/generate", [1], "json: cannot unmarshal array into Go value of type api.GenerateRequest"),
    ("/api/chat", "hi", "json: cannot unmarshal string into Go value of type api.ChatRequest"),
    ("/api/embed", 5, "json: cannot unmarshal number into Go value of type api.EmbedRequest"),
    ("/api/show", True, "json: cannot unmarshal bool into Go value of type api.ShowRequest"),
]


@pytest.mark.parametrize(("path", "body", "error"), NATIVE_CASES)
def test_native_bad_input_is_gos_decode_error(client: TestClient, path: str, body: object, error: str) -> None:
    r = client.post(path, json=body)
    assert (r.status_code, r.json()) == (400, {"error": error})


def test_delete_bad_name_type(client: TestClient) -> None:
    r = client.request("DELETE", "/api/delete", json={"model": True})
    assert (r.status_code, r.json()) == (400, {"error": unmarshal("bool", "DeleteRequest.model", "string")})


OPENAI_CASES = [
    # Crashes.
    (
        "/v1/chat/completions",
        V1_CHAT | {"reasoning_effort": ["high"]},
        unmarshal("array", "ChatCompletionRequest.reasoning_effort", "string"),
    ),
    (
        "/v1/chat/completions",
        V1_CHAT | {"reasoning": {"effort": {}}},
        unmarshal("object", "Reasoning.reasoning.effort", "string"),
    ),
    (
        "/v1/chat/completions",
        V1_CHAT | {"messages": [{"role": "user", "content": "hi", "tool_calls": 5}]},
        unmarshal("number", "Message.messages.tool_calls", "[]openai.ToolCall"),
    ),
    (
        "/v1/chat/completions",
        V1_CHAT | {"messages": [{"role": "user", "content": "hi", "tool_calls": [5]}]},
        unmarshal("number", "Message.messages.tool_calls", "openai.ToolCall"),
    ),
    (
        "/v1/chat/completions",
        V1_CHAT | {"messages": [*HI, ASSISTANT | {"tool_calls": [{"function": [5]}]}]},
        unmarshal(
            "array",
            "ToolCall.messages.tool_calls.function",
            'struct { Name string "json:\\"name\\""; Arguments string "json:\\"arguments\\"" }',
        ),
    ),
    (
        "/v1/chat/completions",
        V1_CHAT | {"messages": [*HI, ASSISTANT | {"tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}]},
        "invalid tool call arguments",
    ),
    # Go's json.Unmarshal of the arguments string (openai.FromCompletionToolCall): no JSON, "" or
    # none at all is the same bare message.
    (
        "/v1/chat/completions",
        V1_CHAT | {"messages": [*HI, ASSISTANT | {"tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]}]},
        "invalid tool call arguments",
    ),
    (
        "/v1/chat/completions",
        V1_CHAT | {"messages": [*HI, ASSISTANT | {"tool_calls": [{"function": {"name": "f", "arguments": ""}}]}]},
        "invalid tool call arguments",
    ),
    (
        "/v1/chat/completions",
        V1_CHAT | {"messages": [*HI, ASSISTANT | {"tool_calls": [{"id": "c1"}]}]},
        "invalid tool call arguments",
    ),
    (
        "/v1/chat/completions",
        V1_CHAT | {"response_format": {"type": "json_schema", "json_schema": "x"}},
        unmarshal("string", "ResponseFormat.response_format.json_schema", "openai.JsonSchema"),
    ),
    (
        "/v1/chat/completions",
        V1_CHAT | {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
        "invalid message format",
    ),
    (
        "/v1/chat/completions",
        V1_CHAT | {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
        "invalid message format",
    ),
    (
        "/v1/chat/completions",
        V1_CHAT | {"messages": "hi"},
        unmarshal("string", "ChatCompletionRequest.messages", "[]openai.Message"),
    ),
    (
        "/v1/chat/completions",
        V1_CHAT | {"tools": [{"type": "function", "function": {"name": 5}}]},
        unmarshal("number", "ChatCompletionRequest.tools.function.name", "string"),
    ),
    ("/v1/responses", RESPONSES | {"text": "x"}, unmarshal("string", "ResponsesRequest.text", "openai.ResponsesText")),
    (
        "/v1/responses",
        RESPONSES | {"text": {"format": 5}},
        unmarshal("number", "ResponsesText.text.format", "openai.ResponsesTextFormat"),
    ),
    (
        "/v1/responses",
        RESPONSES | {"tools": 5},
        unmarshal("number", "ResponsesRequest.tools", "[]openai.ResponsesTool"),
    ),
    ("/v1/responses", RESPONSES | {"instructions": 5}, unmarshal("number", "ResponsesRequest.instructions", "string")),
    # Sampling fields reached the native options, whose type errors are 500s.
    (
        "/v1/chat/completions",
        V1_CHAT | {"temperature": "hot"},
        unmarshal("string", "ChatCompletionRequest.temperature", "float64"),
    ),
    ("/v1/chat/completions", V1_CHAT | {"top_p": []}, unmarshal("array", "ChatCompletionRequest.top_p", "float64")),
    (
        "/v1/chat/completions",
        V1_CHAT | {"max_tokens": "x"},
        unmarshal("string", "ChatCompletionRequest.max_tokens", "int"),
    ),
    ("/v1/chat/completions", V1_CHAT | {"seed": 1.5}, unmarshal("number 1.5", "ChatCompletionRequest.seed", "int")),
    (
        "/v1/chat/completions",
        V1_CHAT | {"frequency_penalty": {}},
        unmarshal("object", "ChatCompletionRequest.frequency_penalty", "float64"),
    ),
    (
        "/v1/chat/completions",
        V1_CHAT | {"presence_penalty": True},
        unmarshal("bool", "ChatCompletionRequest.presence_penalty", "float64"),
    ),
    (
        "/v1/completions",
        V1_COMPLETION | {"temperature": "hot"},
        unmarshal("string", "CompletionRequest.temperature", "float32"),
    ),
    ("/v1/completions", V1_COMPLETION | {"stop": [{}]}, "invalid type for 'stop' field: map[string]interface {}"),
    ("/v1/completions", V1_COMPLETION | {"stop": ["a", None]}, "invalid type for 'stop' field: <nil>"),
    (
        "/v1/responses",
        RESPONSES | {"max_output_tokens": "x"},
        unmarshal("string", "ResponsesRequest.max_output_tokens", "int"),
    ),
    ("/v1/responses", RESPONSES | {"top_p": "x"}, unmarshal("string", "ResponsesRequest.top_p", "float64")),
    # Booleans.
    ("/v1/chat/completions", V1_CHAT | {"stream": "yes"}, unmarshal("string", "ChatCompletionRequest.stream", "bool")),
    ("/v1/chat/completions", V1_CHAT | {"logprobs": 1}, unmarshal("number", "ChatCompletionRequest.logprobs", "bool")),
    (
        "/v1/chat/completions",
        V1_CHAT | {"stream": True, "stream_options": {"include_usage": "yes"}},
        unmarshal("string", "StreamOptions.stream_options.include_usage", "bool"),
    ),
    ("/v1/completions", V1_COMPLETION | {"stream": "yes"}, unmarshal("string", "CompletionRequest.stream", "bool")),
    ("/v1/responses", RESPONSES | {"stream": "no"}, unmarshal("string", "ResponsesRequest.stream", "bool")),
    (
        "/v1/embeddings",
        {"model": MODEL, "input": "x", "dimensions": "8"},
        unmarshal("string", "EmbedRequest.dimensions", "int"),
    ),
    # Ollama's CompletionRequest.Prompt is a string: an array is Go's decode error.
    ("/v1/completions", V1_COMPLETION | {"prompt": ["a"]}, unmarshal("array", "CompletionRequest.prompt", "string")),
    # A body that is no object: Go names the struct it decodes into.
    ("/v1/chat/completions", [1], "json: cannot unmarshal array into Go value of type openai.ChatCompletionRequest"),
    ("/v1/completions", "x", "json: cannot unmarshal string into Go value of type openai.CompletionRequest"),
    ("/v1/embeddings", 1, "json: cannot unmarshal number into Go value of type openai.EmbedRequest"),
    ("/v1/responses", [], "json: cannot unmarshal array into Go value of type openai.ResponsesRequest"),
]


@pytest.mark.parametrize(("path", "body", "message"), OPENAI_CASES)
def test_openai_bad_input_is_a_400_in_openais_shape(
    client: TestClient, path: str, body: dict[str, Any], message: str
) -> None:
    r = client.post(path, json=body)
    expected = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    assert (r.status_code, r.json()) == (400, {"error": expected})


@pytest.mark.model
def test_well_typed_values_still_work(client: TestClient) -> None:
    """The checks refuse types, not values: integers where floats go, a bare stop string, nulls."""
    body = V1_CHAT | {"temperature": 0, "top_p": 1, "seed": 3, "stop": "x", "stream": False, "logprobs": None}
    assert client.post("/v1/chat/completions", json=body).status_code == 200
    body = GENERATE | {"stream": False, "raw": None, "truncate": True, "options": {"num_predict": 1}}
    assert client.post("/api/generate", json=body).json()["done"] is True


@pytest.mark.model
def test_field_names_in_any_case_are_read_as_gos_decoder_reads_them(client: TestClient) -> None:
    """Go matches a JSON key to a struct field in any case: a .NET client's PascalCase body works."""
    r = client.post(
        "/api/generate", json={"Model": MODEL, "Prompt": "hi", "Stream": False, "Options": {"num_predict": 2}}
    )
    assert r.status_code == 200 and r.json()["done"] is True and r.json()["eval_count"] <= 2
    body = {"MODEL": MODEL, "Messages": [{"Role": "user", "Content": "hi"}], "stream": False}
    r = client.post("/api/chat", json=body | {"Options": {"num_predict": 1}})
    assert (r.status_code, r.json()["message"]["role"]) == (200, "assistant")
    r = client.post("/api/embed", json={"Model": MODEL, "Input": ["a", "b"]})
    assert r.status_code == 200 and len(r.json()["embeddings"]) == 2


def test_a_body_nested_past_pythons_stack_is_no_server_error(client: TestClient) -> None:
    """Responses tools hold tools: folding keys (``go_field_names``) that deep must not be a 500."""
    tools: list[Any] = []
    for _ in range(420):
        tools = [{"type": "namespace", "tools": tools}]
    r = client.post("/v1/responses", json={"model": "nope", "input": "hi", "tools": tools})
    assert r.status_code < 500, r.text


@pytest.mark.parametrize("name", ["TINY", "Tiny:Latest", "tiny:latest", "registry.ollama.ai/library/TINY"])
def test_v1_model_lookup_ignores_case_like_every_other_endpoint(client: TestClient, name: str) -> None:
    r = client.get(f"/v1/models/{name}")
    assert r.status_code == 200 and r.json()["id"] == name
    assert client.get("/v1/models/tiny:other").status_code == 404


@pytest.mark.model
def test_a_huge_repeat_last_n_costs_no_more_than_the_context(client: TestClient) -> None:
    """2^31-1 with a penalty made llama.cpp allocate an 8 GB window (18 s) for every request."""
    options = {"repeat_last_n": 2**31 - 1, "repeat_penalty": 1.2, "num_predict": 4, "temperature": 0}
    t0 = time.monotonic()
    r = client.post("/api/generate", json=GENERATE | {"stream": False, "options": options})
    assert r.status_code == 200 and r.json()["eval_count"] == 4
    assert time.monotonic() - t0 < 10
    r = client.post("/api/generate", json=GENERATE | {"options": {"repeat_last_n": -2}})
    assert (r.status_code, r.json()) == (400, {"error": "repeat_last_n must be >= -1"})


@pytest.mark.model
def test_a_huge_num_batch_does_not_break_embeddings_for_everyone(client: TestClient) -> None:
    """num_batch 3205120 loaded the model with an embedding context of 1.2 TB: every embed got a 500 until unload."""
    r = client.post(
        "/api/generate", json=GENERATE | {"stream": False, "options": {"num_batch": 3205120, "num_predict": 1}}
    )
    assert r.status_code == 200
    r = client.post("/api/embed", json={"model": MODEL, "input": "hi"})
    assert r.status_code == 200 and len(r.json()["embeddings"]) == 1


@pytest.mark.model
def test_a_long_context_and_batch_still_embed(client: TestClient) -> None:
    """The embedder probed the model's pooling with a context holding a whole batch in one ubatch:
    with num_ctx and num_batch at the trained context times the slots it could not be allocated (500)."""
    options = {"num_ctx": 10**6, "num_batch": 10**6}
    r = client.post("/api/embed", json={"model": MODEL, "input": "hi", "options": options})
    assert r.status_code == 200 and len(r.json()["embeddings"]) == 1


@pytest.mark.parametrize("path", ["/api/generate", "/v1/chat/completions"])
def test_a_client_gone_before_its_body_arrived_is_a_canceled_request(settings: Settings, path: str) -> None:
    """The soak found it: ClientDisconnect escaped from reading the body, an unhandled error
    (uvicorn logged "Exception in ASGI application" with a traceback) instead of a canceled request."""
    app = create_app(settings)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"host", b"localhost"), (b"content-type", b"application/json"), (b"content-length", b"100")]
    scope = {"type": "http", "method": "POST", "path": path, "headers": headers, "query_string": b""}
    scope |= {"http_version": "1.1", "scheme": "http", "root_path": "", "server": ("localhost", 80)}
    asyncio.run(app(scope, receive, send))  # raised ClientDisconnect
    assert sent[0]["status"] == 499


def test_a_missing_v1_model_is_named_with_its_tag(client: TestClient) -> None:
    r = client.get("/v1/models/nope")
    assert (r.status_code, r.json()["error"]["message"]) == (404, "model 'nope:latest' not found")


@pytest.mark.parametrize(
    ("path", "error"),
    [
        # Ollama's /v1 middlewares pass on gin's bind error; its native handlers say what is missing.
        (
            "/v1/chat/completions",
            {"error": {"message": "EOF", "type": "invalid_request_error", "param": None, "code": None}},
        ),
        ("/v1/embeddings", {"error": {"message": "EOF", "type": "invalid_request_error", "param": None, "code": None}}),
        ("/v1/messages", {"type": "error", "error": {"type": "invalid_request_error", "message": "EOF"}}),
        ("/api/chat", {"error": "missing request body"}),
    ],
)
def test_an_empty_body_is_refused_in_each_dialects_words(client: TestClient, path: str, error: object) -> None:
    r = client.post(path, content=b" ")
    body = without_request_id(r.json()) if path == "/v1/messages" else r.json()
    assert (r.status_code, body) == (400, error)


def test_a_model_name_with_a_newline_is_a_json_404_on_v1(client: TestClient) -> None:
    """The schema fuzz found it: /v1/models/%0Ac matched no route (Starlette's path parameter
    stops at a newline), so the answer was the plain-text unknown-path 404."""
    r = client.get("/v1/models/%0Ac")
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
