"""/v1/messages on the wire, over the scripted engine (no llama.cpp): Anthropic's error shape for
bad requests, its event names and order, and the native request a Messages request becomes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from anthropic_ids import without_request_id
from scripted import scripted_pool
from starlette.testclient import TestClient

from cllm_ollama.api.anthropic.messages import _decode
from cllm_ollama.api.services import services
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings

MODEL = "tiny"  # installed by conftest.settings
BODY = {"model": MODEL, "max_tokens": 32, "messages": [{"role": "user", "content": "Hi"}]}
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TOOLS = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]


@pytest.fixture
def scripted(settings: Settings) -> Iterator[tuple[TestClient, list[str | BaseException]]]:
    script: list[str | BaseException] = []
    app = create_app(settings)
    with TestClient(app, base_url="http://localhost") as client:
        services(app).pool = scripted_pool(script)
        yield client, script


def events(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in filter(None, text.split("\n\n")):
        name, data = block.split("\n", 1)
        out.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


@pytest.mark.parametrize(
    ("body", "status", "kind", "message"),
    [
        (BODY | {"model": ""}, 400, "invalid_request_error", "model is required"),
        (BODY | {"max_tokens": 0}, 400, "invalid_request_error", "max_tokens is required and must be positive"),
        (BODY | {"messages": []}, 400, "invalid_request_error", "messages is required"),
        (BODY | {"model": "nope"}, 404, "not_found_error", "model 'nope' not found"),
        (
            BODY | {"tool_choice": {"type": "sometimes"}},
            400,
            "invalid_request_error",
            "invalid tool_choice type: sometimes",
        ),
        (
            BODY | {"messages": [{"role": "assistant", "content": [{"type": "tool_use", "name": "f"}]}]},
            400,
            "invalid_request_error",
            "tool_use block missing required 'id' field",
        ),
    ],
)
def test_bad_requests_get_anthropics_error_shape(
    scripted: tuple[TestClient, list[str | BaseException]], body: dict[str, Any], status: int, kind: str, message: str
) -> None:
    client, _ = scripted
    r = client.post("/v1/messages", json=body, headers={"x-api-key": "k", "anthropic-version": "2023-06-01"})
    assert r.status_code == status
    assert without_request_id(r.json()) == {"type": "error", "error": {"type": kind, "message": message}}


def test_a_body_that_is_not_json_is_an_anthropic_error(scripted: tuple[TestClient, list[str | BaseException]]) -> None:
    client, _ = scripted
    r = client.post("/v1/messages", content=b"{", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["type"] == "error"
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_a_body_that_is_no_object_names_the_request_struct(
    scripted: tuple[TestClient, list[str | BaseException]],
) -> None:
    """As gin's bind error in Ollama's Anthropic middleware, with the request id its errors carry."""
    client, _ = scripted
    r = client.post("/v1/messages", json=[1])
    message = "json: cannot unmarshal array into Go value of type anthropic.MessagesRequest"
    assert without_request_id(r.json()) == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": message},
    }
    assert r.json()["request_id"] != client.post("/v1/messages", json=[1]).json()["request_id"]


def test_whole_message_with_thinking_text_and_tool_use(scripted: tuple[TestClient, list[str | BaseException]]) -> None:
    client, script = scripted
    script += ["<think>", "Hmm.", "</think>", "Looking.", CALL]
    r = client.post("/v1/messages", json=BODY | {"tools": TOOLS, "thinking": {"type": "enabled", "budget_tokens": 9}})
    out = r.json()
    assert out["type"] == "message" and out["role"] == "assistant" and out["stop_reason"] == "tool_use"
    thinking, text, use = out["content"]
    assert thinking == {"type": "thinking", "thinking": "Hmm.", "signature": ""}
    assert text == {"type": "text", "text": "Looking."}
    assert use["type"] == "tool_use" and use["name"] == "get_weather" and use["input"] == {"city": "Paris"}
    assert out["usage"]["output_tokens"] == len(script) and out["usage"]["input_tokens"] > 0


def test_stream_events_and_their_order(scripted: tuple[TestClient, list[str | BaseException]]) -> None:
    client, script = scripted
    script += ["<think>", "Hmm.", "</think>", "Look", "ing.", CALL]
    body = BODY | {"tools": TOOLS, "stream": True, "thinking": {"type": "enabled"}}
    r = client.post("/v1/messages", json=body)
    assert r.headers["content-type"].startswith("text/event-stream")
    got = events(r.text)
    assert all(name == data["type"] for name, data in got)
    assert [
        (d["type"], d.get("index"), (d.get("delta") or d.get("content_block") or {}).get("type")) for _, d in got
    ] == [
        ("message_start", None, None),
        ("content_block_start", 0, "thinking"),
        ("content_block_delta", 0, "thinking_delta"),
        ("content_block_stop", 0, None),
        ("content_block_start", 1, "text"),
        ("content_block_delta", 1, "text_delta"),
        ("content_block_delta", 1, "text_delta"),
        ("content_block_stop", 1, None),
        ("content_block_start", 2, "tool_use"),
        ("content_block_delta", 2, "input_json_delta"),
        ("content_block_stop", 2, None),
        ("message_delta", None, None),
        ("message_stop", None, None),
    ]
    start = got[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None and start["usage"]["input_tokens"] > 0
    assert json.loads(got[9][1]["delta"]["partial_json"]) == {"city": "Paris"}
    assert got[11][1]["delta"]["stop_reason"] == "tool_use"
    assert got[11][1]["usage"] == {"input_tokens": start["usage"]["input_tokens"], "output_tokens": len(script)}


def test_request_translation() -> None:
    body = BODY | {
        "system": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}],
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 7,
        "stop_sequences": ["END"],
        "metadata": {"user_id": "u"},
        "tools": TOOLS,
        "tool_choice": {"type": "none"},
        "output_config": {"effort": "xhigh"},
    }
    native = _decode(body).native
    assert native.messages[0] == {"role": "system", "content": "AB"}
    assert native.req.options == {"temperature": 0.5, "top_p": 0.9, "top_k": 7, "num_predict": 32, "stop": ["END"]}
    assert native.tools is None  # tool_choice none
    assert native.req.think == "high"
    assert (
        _decode(BODY | {"thinking": {"type": "disabled"}, "output_config": {"effort": "low"}}).native.req.think is False
    )


def test_cache_control_breakpoints_become_prefixes_to_keep() -> None:
    """Each breakpoint as the count of native messages after it: a tool result becomes its own
    native message, so message ends are counted in native messages; tools and system end the
    system message."""
    marked = {"cache_control": {"type": "ephemeral"}}
    body = BODY | {
        "system": [{"type": "text", "text": "S"} | marked],
        "tools": [TOOLS[0] | marked],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "q"} | marked]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "r"},
                    {"type": "text", "text": "and?"} | marked,
                ],
            },
        ],
    }
    native = _decode(body).native
    assert [m["role"] for m in native.messages] == ["system", "user", "assistant", "tool", "user"]
    assert native.cache_ends == (0, 3, 4)
    assert _decode(BODY).native.cache_ends == ()  # no breakpoint, no hint


def test_a_request_with_no_message_left_is_refused_before_the_model_loads(client: TestClient) -> None:
    """Empty content lists leave no message: a 400, and no model loaded (evicting another) for it."""
    r = client.post("/v1/messages", json=BODY | {"messages": [{"role": "user", "content": []}]})
    assert r.status_code == 400 and r.json()["error"]["message"] == "messages is required"
    assert client.get("/api/ps").json()["models"] == []


@pytest.mark.parametrize(
    ("system", "rendered"),
    [
        (
            [
                {
                    "type": "text",
                    "text": "x-anthropic-billing-header: cc_version=2.1.101.e51; cc_entrypoint=cli; cch=a5145;",
                },
                {"type": "text", "text": "You are Claude Code."},
            ],
            "You are Claude Code.",
        ),
        ("x-anthropic-billing-header: cc_version=2.1.1.abc; cch=00000;\nBe brief.", "Be brief."),
        ("x-anthropic-billing-header: cc_version=2.1.1.abc; cch=00000;Be brief.", "Be brief."),
        ("Quote: x-anthropic-billing-header: cch=1;", "Quote: x-anthropic-billing-header: cch=1;"),
    ],
)
def test_claude_codes_billing_header_is_dropped_from_the_system_prompt(system: object, rendered: str) -> None:
    native = _decode(BODY | {"system": system}).native
    assert native.messages[0] == {"role": "system", "content": rendered}


def _tool(body: dict[str, Any], name: str) -> dict[str, Any]:
    (tool,) = [t["function"] for t in _decode(body).native.tools or [] if t["function"]["name"] == name]
    return tool


def test_anthropic_s_client_tools_are_functions_with_their_documented_input() -> None:
    """The client runs them, so the model is handed them, as Ollama hands every tool but web search;
    they come without a schema, so the model is shown the one Anthropic documents."""
    body = BODY | {
        "tools": [
            {"type": "bash_20250124", "name": "bash"},
            {"type": "text_editor_20250124", "name": "str_replace_editor"},
            {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool", "max_characters": 100},
            {"type": "memory_20250818", "name": "memory"},
            {"type": "computer_20250124", "name": "computer", "display_width_px": 1024, "display_height_px": 768},
        ]
    }
    bash = _tool(body, "bash")
    assert bash["description"] and set(bash["parameters"]["properties"]) == {"command", "restart"}
    older, editor = _tool(body, "str_replace_editor")["parameters"], _tool(body, "str_replace_based_edit_tool")
    assert older["properties"]["command"]["enum"] == ["view", "create", "str_replace", "insert", "undo_edit"]
    assert editor["parameters"]["properties"]["command"]["enum"] == ["view", "create", "str_replace", "insert"]
    assert editor["parameters"]["required"] == ["command", "path"]
    assert set(editor["parameters"]["properties"]) == set(older["properties"]) == {
        "command", "path", "file_text", "old_str", "new_str", "insert_line", "view_range"
    }  # fmt: skip
    memory = _tool(body, "memory")["parameters"]
    assert memory["properties"]["command"]["enum"] == ["view", "create", "str_replace", "insert", "delete", "rename"]
    assert {"insert_text", "old_path", "new_path", "view_range"} <= set(memory["properties"])
    assert _tool(body, "computer")["parameters"] == {"type": "object"}
    # A description or schema the request gives is kept.
    given = {"type": "bash_20250124", "name": "bash", "description": "Mine", "input_schema": {"type": "object"}}
    assert _tool(BODY | {"tools": [given]}, "bash") == {
        "name": "bash",
        "description": "Mine",
        "parameters": {"type": "object"},
    }


@pytest.mark.parametrize(
    ("content", "told"),
    [
        (
            [
                {"type": "web_search_result", "title": "T", "url": "https://t", "encrypted_content": "e"},
                {"type": "web_search_result", "url": "https://u", "page_age": "1 day"},
                {"type": "other"},
            ],
            "- T: https://t\n- : https://u\n",
        ),
        (
            [{"type": "web_search_result", "title": "T", "url": "https://t"}, {"type": "web_search_tool_result_error"}],
            "web_search_tool_result_error",
        ),
        (
            {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
            "web_search_tool_result_error: max_uses_exceeded",
        ),
        ("as text", "as text"),
        ({"b": 1, "a": "<x>"}, '{"a":"\\u003cx\\u003e","b":1}'),  # Go's JSON of it
        (None, "null"),
    ],
)
def test_a_web_search_in_the_history_is_a_call_and_its_result(content: object, told: str) -> None:
    """Ollama's convertMessage: ``server_tool_use`` a call on the assistant's message, its
    ``web_search_tool_result`` a ``tool`` message after it (formatWebSearchToolResultContent)."""
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}}
    result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": content}
    assistant = {"role": "assistant", "content": [search, result, {"type": "text", "text": "Found."}]}
    native = _decode(BODY | {"messages": [BODY["messages"][0], assistant]}).native
    assert native.messages[1:] == [
        {
            "role": "assistant",
            "content": "Found.",
            "tool_calls": [{"id": "srvtoolu_1", "function": {"name": "web_search", "arguments": {"query": "q"}}}],
        },
        {"role": "tool", "content": told, "tool_call_id": "srvtoolu_1", "tool_name": "web_search"},
    ]


@pytest.mark.parametrize(
    "content",
    ["", [{"type": "text", "text": ""}], [{"type": "text", "text": None}, {"type": "text", "text": ""}], None],
)
def test_a_message_with_no_text_is_dropped(content: object) -> None:
    """As Ollama drops it (no text, image, call or thinking); a null content is Go's empty string."""
    messages = [{"role": "user", "content": content}, *BODY["messages"], {"role": "assistant", "content": content}]
    assert _decode(BODY | {"messages": messages}).native.messages == [{"role": "user", "content": "Hi"}]


def test_a_missing_content_is_still_refused(scripted: tuple[TestClient, list[str | BaseException]]) -> None:
    """Go decodes null into the content's string, but no content at all is its decode error."""
    client, script = scripted
    script += ["ok"]
    null = client.post("/v1/messages", json=BODY | {"messages": [{"role": "user", "content": None}, *BODY["messages"]]})
    assert null.status_code == 200 and null.json()["content"] == [{"type": "text", "text": "ok"}]
    missing = client.post("/v1/messages", json=BODY | {"messages": [{"role": "user"}]})
    assert missing.status_code == 400 and missing.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("system", [{"type": "text", "text": "S"}, 5, True])
def test_a_system_of_another_type_is_ignored(system: object) -> None:
    """Neither a string nor blocks: Ollama's type switch ignores it."""
    assert _decode(BODY | {"system": system}).native.messages == [{"role": "user", "content": "Hi"}]
