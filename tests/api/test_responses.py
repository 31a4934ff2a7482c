"""/v1/responses as agents send it (Codex CLI's requests, recorded), over the scripted engine (no
llama.cpp): namespace tools, hosted tools, ``include``, reasoning and call ids across turns."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from scripted import ScriptedModel, scripted_pool
from starlette.testclient import TestClient

from cllm_ollama.api.openai.responses import _decode
from cllm_ollama.api.services import services
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings

MODEL = "tiny"  # installed by conftest.settings
OBJECT = {"type": "object", "properties": {"target": {"type": "string"}}, "required": ["target"]}
# The tools of Codex CLI 0.169's first request, abridged: functions, a namespace, a hosted tool.
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": "exec_command", "description": "Runs a command.", "strict": False, "parameters": {}},
    {
        "type": "namespace",
        "name": "multi_agent_v1",
        "description": "Tools for spawning and managing sub-agents.",
        "tools": [
            {"type": "function", "name": "close_agent", "strict": False, "parameters": OBJECT},
            {"type": "function", "name": "wait_agent", "strict": False, "parameters": OBJECT},
        ],
    },
    {"type": "web_search", "external_web_access": False},
]
CODEX = {
    "model": MODEL,
    "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]}],
    "tools": TOOLS,
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "reasoning": {"summary": "auto"},
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "01a2134a-c210-7492-b1e7-7120867a849e",
    "client_metadata": {"session_id": "01a2134a-c210-7492-b1e7-7120867a849e"},
}
NAMESPACED_CALL = '<tool_call>\n{"name": "multi_agent_v1.close_agent", "arguments": {"target": "a1"}}\n</tool_call>'


@pytest.fixture
def scripted(settings: Settings) -> Iterator[tuple[TestClient, list[str | BaseException], list[ScriptedModel]]]:
    script: list[str | BaseException] = []
    loaded: list[ScriptedModel] = []
    app = create_app(settings)
    with TestClient(app, base_url="http://localhost") as client:
        services(app).pool = scripted_pool(script, loaded)
        yield client, script, loaded


def events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def test_codex_tools_become_chat_functions_namespaces_qualified_hosted_tools_left_out() -> None:
    native = _decode(CODEX).native
    assert native.tools is not None
    names = [tool["function"]["name"] for tool in native.tools]
    assert names == ["exec_command", "multi_agent_v1.close_agent", "multi_agent_v1.wait_agent"]
    assert native.tools[1]["function"]["parameters"] == OBJECT


def test_a_namespace_inside_a_namespace_and_a_member_already_qualified() -> None:
    inner = {"type": "namespace", "name": "b", "tools": [{"type": "function", "name": "f"}]}
    outer = {"type": "namespace", "name": "a", "tools": [inner, {"type": "function", "name": "a.g"}]}
    native = _decode(CODEX | {"tools": [outer]}).native
    assert [tool["function"]["name"] for tool in native.tools or []] == ["a.b.f", "a.g"]


def test_codex_request_is_answered_and_echoes_what_it_declared(scripted: Any) -> None:
    client, script, _ = scripted
    script += ["Hello."]
    r = client.post("/v1/responses", json=CODEX | {"stream": True})
    assert r.status_code == 200, r.text
    completed = events(r.text)[-1]
    assert completed["type"] == "response.completed"
    response = completed["response"]
    assert response["tools"] == TOOLS and response["store"] is False
    assert response["prompt_cache_key"] == CODEX["prompt_cache_key"]
    assert response["reasoning"] == {"effort": None, "summary": "auto"}
    assert [item["type"] for item in response["output"]] == ["message"]


def test_a_namespaced_call_goes_out_under_its_namespace(scripted: Any) -> None:
    client, script, _ = scripted
    script += [NAMESPACED_CALL]
    whole = client.post("/v1/responses", json=CODEX).json()
    (call,) = whole["output"]
    assert (call["type"], call["namespace"], call["name"]) == ("function_call", "multi_agent_v1", "close_agent")
    assert json.loads(call["arguments"]) == {"target": "a1"}
    streamed = events(client.post("/v1/responses", json=CODEX | {"stream": True}).text)
    added, done = (e["item"] for e in streamed if e["type"].startswith("response.output_item."))
    assert (added["namespace"], added["name"]) == (done["namespace"], done["name"]) == ("multi_agent_v1", "close_agent")
    assert streamed[-1]["response"]["output"] == [done]


def test_a_plain_function_call_has_no_namespace(scripted: Any) -> None:
    client, script, _ = scripted
    script += ['<tool_call>\n{"name": "exec_command", "arguments": {"cmd": "ls"}}\n</tool_call>']
    (call,) = client.post("/v1/responses", json=CODEX).json()["output"]
    assert call["name"] == "exec_command" and "namespace" not in call


@pytest.mark.parametrize("include", [["reasoning.encrypted_content"], []])
def test_reasoning_carries_its_text_as_encrypted_content_when_included(scripted: Any, include: list[str]) -> None:
    client, script, _ = scripted
    script += ["<think>", "Plan.", "</think>", "Hi."]
    body = CODEX | {"include": include, "reasoning": {"effort": "high", "summary": "auto"}}
    for output in (
        client.post("/v1/responses", json=body).json()["output"],
        events(client.post("/v1/responses", json=body | {"stream": True}).text)[-1]["response"]["output"],
    ):
        reasoning = output[0]
        assert reasoning["type"] == "reasoning" and reasoning["summary"] == [{"type": "summary_text", "text": "Plan."}]
        assert reasoning.get("encrypted_content") == ("Plan." if include else None)


def test_a_turn_replayed_by_codex_becomes_the_chat_history() -> None:
    """Reasoning, message, namespaced call and its output: one assistant turn, then the tool's answer."""
    history = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Close a1."}]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}], "encrypted_content": "Plan."},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Closing."}]},
        {
            "type": "function_call",
            "namespace": "multi_agent_v1",
            "name": "close_agent",
            "arguments": '{"target": "a1"}',
            "call_id": "call_7",
        },
        {"type": "function_call_output", "call_id": "call_7", "output": [{"type": "input_text", "text": "closed"}]},
        {"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "q"}},
    ]
    messages = _decode(CODEX | {"input": history}).native.messages
    assert messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Close a1."},
        {
            "role": "assistant",
            "content": "Closing.",
            "thinking": "Plan.",
            "tool_calls": [
                {"id": "call_7", "function": {"name": "multi_agent_v1.close_agent", "arguments": {"target": "a1"}}}
            ],
        },
        {"role": "tool", "content": "closed", "tool_call_id": "call_7", "tool_name": "multi_agent_v1.close_agent"},
    ]


def test_an_assistant_message_between_a_call_and_its_output_joins_the_call() -> None:
    history = [
        {"role": "user", "content": "Go."},
        {"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": "c1"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Running."}]},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]
    messages = _decode(CODEX | {"input": history}).native.messages
    assert [(m["role"], m["content"]) for m in messages] == [("user", "Go."), ("assistant", "Running."), ("tool", "ok")]


def test_only_reasoning_items_are_refused_before_any_model_loads(scripted: Any) -> None:
    client, _, loaded = scripted
    body = {"model": MODEL, "input": [{"type": "reasoning", "summary": [], "encrypted_content": "x"}]}
    r = client.post("/v1/responses", json=body)
    assert r.status_code == 400 and r.json()["error"]["message"] == "input is required"
    assert loaded == []


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (
            {"include": "x"},
            "json: cannot unmarshal string into Go struct field ResponsesRequest.include of type []string",
        ),
        (
            {"include": [1]},
            "json: cannot unmarshal number into Go struct field ResponsesRequest.include of type string",
        ),
        (
            {"input": [{"type": "reasoning", "summary": 5}, *CODEX["input"]]},
            "json: cannot unmarshal number into Go struct field ResponsesRequest.input.summary of type "
            "[]openai.ResponsesReasoningSummary",
        ),
        (
            {"tools": [5]},
            "json: cannot unmarshal number into Go struct field ResponsesRequest.tools of type openai.ResponsesTool",
        ),
        (
            {"prompt_cache_key": 5},
            "json: cannot unmarshal number into Go struct field ResponsesRequest.prompt_cache_key of type string",
        ),
    ],
)
def test_mistyped_agent_fields_are_400(scripted: Any, patch: dict[str, Any], message: str) -> None:
    client, _, loaded = scripted
    r = client.post("/v1/responses", json=CODEX | patch)
    assert r.status_code == 400 and r.json()["error"]["message"] == message
    assert loaded == []
