"""The union parts of requests, typed (Anthropic's content blocks, OpenAI's content parts, Responses
input items): Ollama's own messages for their wrong shapes, Go's for their wrong field types, kinds
nothing reads skipped; and every body decoded once, translated ones included."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from conftest import MODEL
from scripted import scripted_pool
from starlette.testclient import TestClient
from test_bad_input import HI, RESPONSES, V1_CHAT, V1_COMPLETION, unmarshal

from cllm_ollama.api.anthropic.messages import _decode as anthropic_decode
from cllm_ollama.api.openai.endpoints import _decode_chat as chat_completions_decode
from cllm_ollama.api.openai.endpoints import _decode_completion as completions_decode
from cllm_ollama.api.openai.responses import _decode as responses_decode
from cllm_ollama.api.schemas import anthropic, ollama, openai
from cllm_ollama.api.schemas.go import GoStruct
from cllm_ollama.api.services import services
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.errors import InvalidRequest

MESSAGES = {"model": MODEL, "max_tokens": 1, "messages": HI}
FORMAT, CONTENT_TYPE = "invalid message format", "invalid message content type"
INPUT = "input must be a string or a non-empty list of items"


def v1_content(content: object) -> dict[str, Any]:
    return V1_CHAT | {"messages": [{"role": "user", "content": content}]}


def item(**fields: object) -> dict[str, Any]:
    return RESPONSES | {"input": [fields]}


def blocks(*content: object) -> dict[str, Any]:
    return MESSAGES | {"messages": [{"role": "user", "content": list(content)}]}


# Each message is Ollama's (openai.FromChatRequest's hand checks, for chat completions).
CASES = [
    # Go's %T of what came where Ollama's content is ``any`` (openai.FromChatRequest).
    ("/v1/chat/completions", v1_content(5), f"{CONTENT_TYPE}: float64"),
    ("/v1/chat/completions", v1_content(True), f"{CONTENT_TYPE}: bool"),
    ("/v1/chat/completions", v1_content({"type": "text"}), f"{CONTENT_TYPE}: map[string]interface {{}}"),
    ("/v1/chat/completions", v1_content(None), f"{CONTENT_TYPE}: <nil>"),  # optional beside tool calls only
    ("/v1/chat/completions", V1_CHAT | {"messages": [{"role": "user"}]}, f"{CONTENT_TYPE}: <nil>"),
    ("/v1/chat/completions", v1_content([5]), FORMAT),
    ("/v1/chat/completions", v1_content([{"type": "text"}]), FORMAT),
    ("/v1/chat/completions", v1_content([{"type": "image_url", "image_url": 5}]), FORMAT),
    ("/v1/chat/completions", v1_content([{"type": "image_url", "image_url": {"url": 5}}]), FORMAT),
    ("/v1/chat/completions", v1_content([{"type": "image_url", "image_url": {}}]), FORMAT),
    # A part of no kind Ollama reads: its switch's default.
    ("/v1/chat/completions", v1_content([{"type": "audio"}]), FORMAT),
    ("/v1/chat/completions", v1_content([{"text": "x"}]), FORMAT),
    (
        "/v1/chat/completions",
        V1_CHAT
        | {"messages": [*HI, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 5}}]}]},
        "invalid tool call arguments",
    ),
    ("/v1/responses", RESPONSES | {"input": 5}, INPUT),
    ("/v1/responses", RESPONSES | {"input": []}, INPUT),
    ("/v1/responses", RESPONSES | {"input": [5]}, "invalid input item"),
    ("/v1/responses", item(type=5), unmarshal("number", "ResponsesRequest.input.type", "string")),
    ("/v1/responses", item(role=[]), unmarshal("array", "ResponsesRequest.input.role", "string")),
    (
        "/v1/responses",
        item(type="function_call", namespace=5),
        unmarshal("number", "ResponsesRequest.input.namespace", "string"),
    ),
    ("/v1/responses", item(type="function_call", name="f", arguments=[1]), "invalid tool call arguments"),
    ("/v1/responses", item(type="function_call", name="f", arguments=7), "invalid tool call arguments"),
    (
        "/v1/responses",
        item(type="reasoning", encrypted_content=5),
        unmarshal("number", "ResponsesRequest.input.encrypted_content", "string"),
    ),
    ("/v1/responses", item(role="user", content=5), f"{CONTENT_TYPE}: float64"),
    ("/v1/responses", item(role="user", content=[{"type": "input_text", "text": 5}]), FORMAT),
    ("/v1/responses", item(role="user", content=[{"type": "input_file"}]), "invalid message content type: input_file"),
    ("/v1/responses", item(type="custom_tool_call"), "unsupported input item type: custom_tool_call"),
    (
        "/v1/responses",
        item(type="function_call_output", call_id="c", output=[{"type": "input_text", "text": 5}]),
        FORMAT,
    ),
    (
        "/v1/messages",
        MESSAGES | {"messages": [{"role": "user", "content": 5}]},
        unmarshal("number", "MessagesRequest.messages.content", "[]anthropic.ContentBlock"),
    ),
    ("/v1/messages", blocks(5), unmarshal("number", "MessagesRequest.messages.content", "anthropic.ContentBlock")),
    ("/v1/messages", blocks({"type": 5}), unmarshal("number", "ContentBlock.messages.content.type", "string")),
    (
        "/v1/messages",
        blocks({"type": "text", "text": 5}),
        unmarshal("number", "ContentBlock.messages.content.text", "string"),
    ),
    (
        "/v1/messages",
        blocks({"type": "thinking", "thinking": []}),
        unmarshal("array", "ContentBlock.messages.content.thinking", "string"),
    ),
    (
        "/v1/messages",
        blocks({"type": "tool_use", "id": "t", "name": "f", "input": [1]}),
        unmarshal("array", "ContentBlock.messages.content.input", "api.ToolCallFunctionArguments"),
    ),
    ("/v1/messages", blocks({"type": "tool_use", "id": "t"}), "tool_use block missing required 'name' field"),
    ("/v1/messages", blocks({"type": "image"}), "invalid image source"),
    (
        "/v1/messages",
        blocks({"type": "image", "source": {"type": "url", "url": "http://x/y.png"}}),
        "invalid image source type: url. Only base64 images are supported.",
    ),
    ("/v1/messages", blocks({"type": "image", "source": {"type": "base64"}}), "invalid base64 image data"),
    (
        "/v1/messages",
        blocks({"type": "tool_result", "content": [{"type": "image", "source": {"type": "base64", "data": "!"}}]}),
        "invalid base64 image data: illegal base64 data at input byte 0",
    ),
    (
        "/v1/messages",
        MESSAGES | {"messages": [{"role": 5, "content": "hi"}]},
        unmarshal("number", "MessagesRequest.messages.role", "string"),
    ),
]


# Where typing made the decode stricter, Go's way: these were skipped, or failed later by other words.
GO_STRICTER = [
    (
        "/v1/messages",
        blocks({"type": "image", "source": 5}),
        unmarshal("number", "ContentBlock.messages.content.source", "anthropic.ImageSource"),
    ),
    (
        "/v1/messages",
        blocks({"type": "tool_use", "id": 5, "name": "f"}),
        unmarshal("number", "ContentBlock.messages.content.id", "string"),
    ),
    ("/v1/responses", item(role="user", content=["x"]), FORMAT),
    (
        "/v1/responses",
        item(type="reasoning", summary=[5]),
        unmarshal("number", "ResponsesRequest.input.summary", "openai.ResponsesReasoningSummary"),
    ),
]


@pytest.mark.parametrize(("path", "body", "message"), CASES + GO_STRICTER)
def test_a_wrong_shape_is_a_400_with_its_message(
    client: TestClient, path: str, body: dict[str, Any], message: str
) -> None:
    r = client.post(path, json=body)
    assert (r.status_code, r.json()["error"]["message"]) == (400, message)


def test_content_may_be_null_beside_tool_calls_even_none(client: TestClient) -> None:
    """Ollama checks ``msg.ToolCalls == nil``: an empty list is tool calls enough, as one with calls is."""
    for calls in ([], [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]):
        assistant = {"role": "assistant", "content": None, "tool_calls": calls}
        body = V1_CHAT | {"messages": [*HI, assistant, {"role": "user", "content": "and?"}]}
        assert client.post("/v1/chat/completions", json=body).status_code == 200


def test_block_kinds_nothing_reads_are_skipped_as_ollama_skips_them() -> None:
    body = blocks(
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "document", "source": {"type": "text", "data": "x"}},
        {"type": "text", "text": "hi", "citations": None, "cache_control": {"type": "ephemeral"}},
        {"type": "web_fetch_tool_result", "tool_use_id": "f1", "content": {"type": "web_fetch_result"}},
    )
    assert anthropic_decode(body).native.messages == [{"role": "user", "content": "hi"}]


def test_input_items_and_parts_read_as_before() -> None:
    history = [
        {"role": "developer", "content": "Be brief."},
        {"type": "message", "role": "user", "content": [{"type": "input_text"}, {"type": "text", "text": "Go."}]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}], "content": None},
        {"type": "function_call", "namespace": "ns", "name": "f", "arguments": '{"a": 1}', "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": [{"type": "output_text", "text": "ok"}, 5]},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
        {"type": "function_call_output", "call_id": "c2", "output": {"rows": 1}},
    ]
    assert responses_decode(RESPONSES | {"input": history}).native.messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Go."},  # parts run on, as Ollama joins them
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "function": {"name": "ns.f", "arguments": {"a": 1}}}],
            "thinking": "plan",
        },
        {"role": "tool", "content": "ok", "tool_call_id": "c1", "tool_name": "ns.f"},
        {"role": "tool", "content": '{"rows":1}', "tool_call_id": "c2"},
    ]


def test_responses_and_messages_name_a_tool_result_by_its_call_id() -> None:
    """Codex and Claude Code send a result with only its call's id: it takes the called function's
    name (what gpt-oss's template writes as ``functions.NAME``), as chat completions' results do."""
    items = [
        {"type": "message", "role": "user", "content": "List."},
        {"type": "function_call", "name": "shell", "arguments": '{"cmd": "ls"}', "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
    ]
    tool = responses_decode(RESPONSES | {"input": items}).native.messages[-1]
    assert tool == {"role": "tool", "content": "a.txt", "tool_call_id": "c1", "tool_name": "shell"}
    use = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}
    body = MESSAGES | {
        "messages": [
            {"role": "user", "content": "List."},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
        ]
    }
    tool = anthropic_decode(body).native.messages[-1]
    assert tool == {"role": "tool", "content": "a.txt", "tool_call_id": "t1", "tool_name": "Bash"}


def test_a_trailing_reasoning_item_is_an_assistant_turn_of_its_own() -> None:
    """A reasoning item no message follows (the last reply was only reasoning) is kept, as Ollama
    keeps it, not dropped."""
    items = [{"role": "user", "content": "Hi"}, {"type": "reasoning", "encrypted_content": "mulling", "summary": []}]
    assert responses_decode(RESPONSES | {"input": items}).native.messages == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "", "thinking": "mulling"},
    ]


def test_a_chat_completions_tool_result_is_named_by_its_call_id() -> None:
    """OpenAI's clients send a tool's result with only the call's id: the call keeps its id and the
    result takes the called function's name (the last call with that id), as Ollama's translation does."""
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    history = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
        {"role": "tool", "content": "?", "tool_call_id": "call_9"},
        {"role": "tool", "content": "named", "tool_call_id": "call_1", "name": "other"},
    ]
    messages = chat_completions_decode(V1_CHAT | {"messages": history}).native.messages
    assert messages[1]["tool_calls"] == [
        {"id": "call_1", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    ]
    assert messages[2:] == [
        {"role": "tool", "content": "sunny", "tool_name": "get_weather", "tool_call_id": "call_1"},
        {"role": "tool", "content": "?", "tool_call_id": "call_9"},
        {"role": "tool", "content": "named", "tool_name": "other", "tool_call_id": "call_1"},
    ]


def test_reasoning_effort_is_read_in_ollamas_order() -> None:
    """A ``reasoning`` object decides before ``reasoning_effort``, even with no effort in it; OpenAI's
    tiers past Ollama's are clamped, anything else refused in Ollama's words."""

    def think(extra: dict[str, Any]) -> object:
        return chat_completions_decode(V1_CHAT | extra).native.req.think

    assert think({"reasoning_effort": "high"}) == "high"
    assert think({"reasoning": {"effort": "low"}, "reasoning_effort": "high"}) == "low"
    assert think({"reasoning": {}, "reasoning_effort": "high"}) is None
    assert (think({"reasoning_effort": "minimal"}), think({"reasoning_effort": "xhigh"})) == ("low", "max")
    with pytest.raises(InvalidRequest) as refused:
        think({"reasoning_effort": "extreme"})
    assert refused.value.message == (
        'invalid reasoning value: "extreme" '
        '(must be "minimal", "low", "medium", "high", "xhigh", "ultra", "max", or "none")'
    )


@pytest.mark.parametrize(
    ("stop", "stops"), [("x", ["x"]), (["a", None, 3, "b"], ["a", "b"]), (5, None), ({"a": 1}, None), (None, None)]
)
def test_a_chat_completions_stop_keeps_its_strings(stop: object, stops: list[str] | None) -> None:
    """Ollama's chat translation keeps a stop list's strings and ignores everything else (only
    /v1/completions refuses a list's other items)."""
    options = chat_completions_decode(V1_CHAT | {"stop": stop}).native.req.options or {}
    assert options.get("stop") == stops


def test_each_openai_translation_sets_ollamas_sampling_defaults() -> None:
    """Chat completions: temperature and top_p 1.0. Responses: temperature 1.0, top_p left to the
    model (its Modelfile's). Completions: both penalties always (0), and a top_p of 0 read as 1."""
    chat = chat_completions_decode(V1_CHAT).native.req.options or {}
    assert (chat["temperature"], chat["top_p"]) == (1.0, 1.0)
    responses = responses_decode(RESPONSES).native.req.options or {}
    assert responses["temperature"] == 1.0 and "top_p" not in responses
    completion = completions_decode(V1_COMPLETION | {"top_p": 0}).native.options or {}
    assert (completion["top_p"], completion["frequency_penalty"], completion["presence_penalty"]) == (1.0, 0.0, 0.0)
    given = completions_decode(V1_COMPLETION | {"top_p": 0.5, "presence_penalty": 1}).native.options or {}
    assert (given["top_p"], given["presence_penalty"]) == (0.5, 1.0)


def test_a_tool_output_with_a_picture_carries_it_to_the_model() -> None:
    """Codex's view_image (or an MCP tool) returns an image among its output's parts: the tool
    message holds it, as Ollama's translation keeps it."""
    import base64

    from cllm_ollama.testing.images import png

    url = "data:image/png;base64," + base64.b64encode(png(8, 8)).decode()
    output = [{"type": "input_text", "text": "here:"}, {"type": "input_image", "image_url": url}]
    history = [
        {"type": "function_call", "name": "view_image", "arguments": "{}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": output},
    ]
    (_, tool) = responses_decode(RESPONSES | {"input": history}).native.messages
    assert tool["role"] == "tool" and tool["content"] == "here:" and len(tool["images"]) == 1


@pytest.fixture
def decoded(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, list[type]]]:
    """A client over the scripted engine, and the request structs decoded while it serves."""
    seen: list[type] = []
    convert = msgspec.convert

    def counting(obj: Any, target: Any, **kwargs: Any) -> Any:
        if isinstance(target, type) and issubclass(target, GoStruct):
            seen.append(target)
        return convert(obj, target, **kwargs)

    monkeypatch.setattr(msgspec, "convert", counting)
    app = create_app(settings)
    with TestClient(app, base_url="http://localhost") as client:
        services(app).pool = scripted_pool(["Hello."])
        yield client, seen


@pytest.mark.parametrize(
    ("path", "body", "struct"),
    [
        ("/api/chat", {"model": MODEL, "messages": HI, "stream": False}, ollama.ChatRequest),
        ("/api/generate", {"model": MODEL, "prompt": "hi", "stream": False}, ollama.GenerateRequest),
        ("/v1/chat/completions", V1_CHAT, openai.ChatCompletionRequest),
        ("/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 1}, openai.CompletionRequest),
        ("/v1/responses", RESPONSES, openai.ResponsesRequest),
        ("/v1/messages", MESSAGES, anthropic.MessagesRequest),
    ],
)
def test_each_body_is_decoded_once(
    decoded: tuple[TestClient, list[type]], path: str, body: dict[str, Any], struct: type
) -> None:
    client, seen = decoded
    assert client.post(path, json=body).status_code == 200
    assert seen == [struct]
