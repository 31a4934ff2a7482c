"""Output control through every dialect on the tiny random-weight model (issue 34): forced tool calls,
``tool_choice: none``, GBNF grammars, DRY and XTC. The weights are random, so only the structure is
asserted: a forced call parses as a call of an allowed tool, valid by its schema; a grammar's output
matches it; refusals come before anything loads."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest
from starlette.testclient import TestClient

pytestmark = pytest.mark.model

# Bounded arguments (enums, booleans): a random model's call always ends within the token limit.
PICK = {
    "type": "object",
    "properties": {"color": {"enum": ["red", "blue"]}, "bright": {"type": "boolean"}},
    "required": ["color", "bright"],
    "additionalProperties": False,
}
FLAG = {"type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"], "additionalProperties": False}
SCHEMAS = {"pick": PICK, "flag": FLAG}
TOOLS = [{"type": "function", "function": {"name": n, "parameters": s}} for n, s in SCHEMAS.items()]
HI = [{"role": "user", "content": "hi"}]
CHAT = {"model": "tiny", "messages": HI, "tools": TOOLS, "temperature": 0, "max_tokens": 120}


def _check(name: str, arguments: object, allowed: set[str]) -> None:
    assert name in allowed
    jsonschema.validate(json.loads(arguments) if isinstance(arguments, str) else arguments, SCHEMAS[name])


def _nothing_loaded(client: TestClient) -> None:
    assert client.get("/api/ps").json()["models"] == []


def test_required_and_named_calls_on_chat_completions(client: TestClient) -> None:
    for choice, allowed in (
        ("required", {"pick", "flag"}),
        ({"type": "function", "function": {"name": "flag"}}, {"flag"}),
    ):
        r = client.post("/v1/chat/completions", json=CHAT | {"tool_choice": choice})
        assert r.status_code == 200, r.text
        choice_out = r.json()["choices"][0]
        assert choice_out["finish_reason"] == "tool_calls" and choice_out["message"]["content"] == ""
        calls = choice_out["message"]["tool_calls"]
        assert len(calls) == 1  # one call unless parallel calls are asked for
        _check(calls[0]["function"]["name"], calls[0]["function"]["arguments"], allowed)


def test_allowed_tools_force_a_call_of_the_subset(client: TestClient) -> None:
    """OpenAI's ``allowed_tools`` (Ollama ignores ``tool_choice``; cllm had refused this shape)."""
    only_flag = {"mode": "required", "tools": [{"type": "function", "function": {"name": "flag"}}]}
    r = client.post(
        "/v1/chat/completions", json=CHAT | {"tool_choice": {"type": "allowed_tools", "allowed_tools": only_flag}}
    )
    assert r.status_code == 200, r.text
    [call] = r.json()["choices"][0]["message"]["tool_calls"]
    _check(call["function"]["name"], call["function"]["arguments"], {"flag"})
    tools = [{"type": "function", "name": n, "parameters": s} for n, s in SCHEMAS.items()]
    body = {"model": "tiny", "input": "hi", "tools": tools, "temperature": 0, "max_output_tokens": 120}
    flat = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "pick"}]}
    r = client.post("/v1/responses", json=body | {"tool_choice": flat})
    assert r.status_code == 200, r.text
    [item] = r.json()["output"]
    _check(item["name"], item["arguments"], {"pick"})


def test_parallel_forced_calls(client: TestClient) -> None:
    """Asked for, calls may follow one another (a random model may go on until the limit cuts one)."""
    r = client.post("/v1/chat/completions", json=CHAT | {"tool_choice": "required", "parallel_tool_calls": True})
    assert r.status_code == 200, r.text
    message = r.json()["choices"][0]["message"]
    assert message["tool_calls"]
    for call in message["tool_calls"]:
        _check(call["function"]["name"], call["function"]["arguments"], set(SCHEMAS))
    assert message["content"] == "" or message["content"].startswith("<tool_call>")  # only a cut last call


def test_a_forced_call_streams_as_a_call(client: TestClient) -> None:
    body = CHAT | {"tool_choice": "required", "stream": True}
    with client.stream("POST", "/v1/chat/completions", json=body) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    calls = [c for e in events for c in e["choices"][0]["delta"].get("tool_calls") or []]
    assert calls and events[-1]["choices"][0]["finish_reason"] == "tool_calls"
    for call in calls:
        _check(call["function"]["name"], call["function"]["arguments"], set(SCHEMAS))


def test_forced_calls_on_responses_and_messages(client: TestClient) -> None:
    tools = [{"type": "function", "name": n, "parameters": s} for n, s in SCHEMAS.items()]
    body = {"model": "tiny", "input": "hi", "tools": tools, "temperature": 0, "max_output_tokens": 120}
    r = client.post("/v1/responses", json=body | {"tool_choice": {"type": "function", "name": "pick"}})
    assert r.status_code == 200, r.text
    [item] = r.json()["output"]
    assert item["type"] == "function_call"
    _check(item["name"], item["arguments"], {"pick"})
    tools = [{"name": n, "input_schema": s} for n, s in SCHEMAS.items()]
    body = {"model": "tiny", "messages": HI, "tools": tools, "temperature": 0, "max_tokens": 120}
    for choice, allowed in (
        ({"type": "any", "disable_parallel_tool_use": True}, set(SCHEMAS)),
        ({"type": "tool", "name": "pick"}, {"pick"}),
    ):
        r = client.post("/v1/messages", json=body | {"tool_choice": choice})
        assert r.status_code == 200, r.text
        message = r.json()
        assert message["stop_reason"] == "tool_use"
        [use] = message["content"]
        assert use["type"] == "tool_use"
        _check(use["name"], use["input"], allowed)


def test_none_never_gives_a_call(client: TestClient) -> None:
    r = client.post("/v1/chat/completions", json=CHAT | {"tool_choice": "none", "max_tokens": 40})
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert "tool_calls" not in choice["message"] and choice["finish_reason"] != "tool_calls"
    tools = [{"name": n, "input_schema": s} for n, s in SCHEMAS.items()]
    body = {"model": "tiny", "messages": HI, "tools": tools, "max_tokens": 40, "tool_choice": {"type": "none"}}
    r = client.post("/v1/messages", json=body)
    assert r.status_code == 200, r.text
    assert all(b["type"] == "text" for b in r.json()["content"])


def test_refused_choices_are_400s_in_each_dialect_before_anything_loads(client: TestClient) -> None:
    r = client.post(
        "/v1/chat/completions", json=CHAT | {"tool_choice": {"type": "function", "function": {"name": "x"}}}
    )
    assert r.status_code == 400 and "not in tools: 'x'" in r.json()["error"]["message"]
    r = client.post("/v1/chat/completions", json=CHAT | {"tool_choice": "always"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    unknown = {"mode": "auto", "tools": [{"type": "function", "function": {"name": "x"}}]}
    r = client.post(
        "/v1/chat/completions", json=CHAT | {"tool_choice": {"type": "allowed_tools", "allowed_tools": unknown}}
    )
    assert r.status_code == 400 and "not in tools: 'x'" in r.json()["error"]["message"]
    r = client.post("/v1/responses", json={"model": "tiny", "input": "hi", "tool_choice": "required"})
    assert r.status_code == 400 and "requires tools" in r.json()["error"]["message"]
    body = {"model": "tiny", "messages": HI, "max_tokens": 9, "tools": [{"name": "pick", "input_schema": PICK}]}
    r = client.post("/v1/messages", json=body | {"tool_choice": {"type": "tool", "name": "x"}})
    assert r.status_code == 400 and r.json()["type"] == "error"
    assert "not in tools" in r.json()["error"]["message"]
    _nothing_loaded(client)


WORDS_GRAMMAR = 'root ::= word (" " word){0,3}\nword ::= [a-d]{1,4}'
WORDS = re.compile(r"[a-d]{1,4}( [a-d]{1,4}){0,3}")


def test_a_grammar_holds_on_every_dialect(client: TestClient) -> None:
    options: dict[str, Any] = {"grammar": WORDS_GRAMMAR, "num_predict": 40, "temperature": 0.9, "seed": 3}
    r = client.post("/api/generate", json={"model": "tiny", "prompt": "hi", "stream": False, "options": options})
    assert r.status_code == 200, r.text
    assert WORDS.fullmatch(r.json()["response"]) and r.json()["done_reason"] == "stop"
    r = client.post("/api/chat", json={"model": "tiny", "messages": HI, "stream": False, "options": options})
    assert WORDS.fullmatch(r.json()["message"]["content"]), r.text
    extra = {"grammar": WORDS_GRAMMAR, "max_tokens": 40, "temperature": 0.9, "seed": 3}
    r = client.post("/v1/completions", json={"model": "tiny", "prompt": "hi"} | extra)
    assert WORDS.fullmatch(r.json()["choices"][0]["text"]), r.text
    r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": HI} | extra)
    assert WORDS.fullmatch(r.json()["choices"][0]["message"]["content"]), r.text


@pytest.mark.parametrize("grammar", ['root ::= "a" (', "root ::= undefined-rule", "no rules at all"])
def test_a_bad_grammar_is_a_400_before_anything_loads(client: TestClient, grammar: str) -> None:
    r = client.post("/api/generate", json={"model": "tiny", "prompt": "hi", "options": {"grammar": grammar}})
    assert r.status_code == 400 and r.json() == {"error": "invalid grammar: llama.cpp could not parse it"}
    r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": HI, "grammar": grammar})
    assert r.status_code == 400 and r.json()["error"]["message"] == "invalid grammar: llama.cpp could not parse it"
    deep = "root ::= " + "(" * 6000 + '"a"' + ")" * 6000
    r = client.post("/v1/completions", json={"model": "tiny", "prompt": "hi", "grammar": deep})
    assert r.status_code == 400 and "too deeply nested" in r.json()["error"]["message"]
    r = client.post(
        "/api/chat", json={"model": "tiny", "messages": HI, "format": "json", "options": {"grammar": 'root ::= "a"'}}
    )
    assert r.status_code == 400 and "not both" in r.json()["error"]
    _nothing_loaded(client)


def test_dry_and_xtc(client: TestClient) -> None:
    options = {
        "dry_multiplier": 0.8,
        "dry_base": 1.75,
        "dry_allowed_length": 1,
        "dry_penalty_last_n": -1,
        "dry_sequence_breakers": ["\n", "."],
        "xtc_probability": 0.5,
        "xtc_threshold": 0.1,
        "num_predict": 16,
        "seed": 1,
    }
    for temperature in (0, 0.8):  # greedy with DRY takes the chain too
        body = {"model": "tiny", "prompt": "hi", "stream": False, "options": options | {"temperature": temperature}}
        r = client.post("/api/generate", json=body)
        assert r.status_code == 200 and r.json()["eval_count"] > 0, r.text
    r = client.post(
        "/v1/chat/completions",
        json={"model": "tiny", "messages": HI, "max_tokens": 8, "dry_multiplier": 0.5, "xtc_probability": 0.2},
    )
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("dry_multiplier", -1, "dry_multiplier must be >= 0"),
        ("dry_base", 0.5, "dry_base must be >= 1"),
        ("dry_allowed_length", -2, "dry_allowed_length must be >= 0"),
        ("dry_penalty_last_n", -2, "dry_penalty_last_n must be >= -1"),
        ("dry_sequence_breakers", [], "dry_sequence_breakers must be a non-empty array of strings"),
        ("xtc_probability", 1.5, "xtc_probability must be between 0 and 1"),
        ("xtc_threshold", -0.1, "xtc_threshold must be between 0 and 1"),
    ],
)
def test_bad_sampler_values_are_400s_before_anything_loads(
    client: TestClient, option: str, value: object, message: str
) -> None:
    r = client.post("/api/generate", json={"model": "tiny", "prompt": "hi", "options": {option: value}})
    assert r.status_code == 400 and r.json() == {"error": message}
    r = client.post("/v1/completions", json={"model": "tiny", "prompt": "hi", option: value})
    assert r.status_code == 400 and r.json()["error"]["message"] == message
    _nothing_loaded(client)


def test_a_forced_call_streams_on_messages(client: TestClient) -> None:
    tools = [{"name": n, "input_schema": s} for n, s in SCHEMAS.items()]
    body = {"model": "tiny", "messages": HI, "tools": tools, "max_tokens": 120, "temperature": 0, "stream": True}
    with client.stream("POST", "/v1/messages", json=body | {"tool_choice": {"type": "tool", "name": "flag"}}) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert [b["type"] for b in starts] == ["tool_use"] and starts[0]["name"] == "flag"
    partial = "".join(e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta")
    _check("flag", partial, {"flag"})
    assert [e["delta"]["stop_reason"] for e in events if e["type"] == "message_delta"] == ["tool_use"]
