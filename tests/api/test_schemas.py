"""The typed request decode (api/schemas): Go's error strings from msgspec's errors, Go's leniency,
and the OpenAPI components generated from the same structs."""

from __future__ import annotations

from typing import Any

import pytest

from cllm_ollama.api.ollama.errors import decode
from cllm_ollama.api.openapi import document
from cllm_ollama.api.request_fields import parse_keep_alive_field
from cllm_ollama.api.schemas import anthropic, ollama, openai
from cllm_ollama.api.schemas.go import GoStruct, go_field_names
from cllm_ollama.api.schemas.go import decode as go_decode
from cllm_ollama.errors import InvalidRequest


def unmarshal(got: str, field: str, target: str) -> str:
    return f"json: cannot unmarshal {got} into Go struct field {field} of type {target}"


def error_of(body: Any, cls: type[GoStruct], seam: Any = decode) -> str:
    with pytest.raises(InvalidRequest) as caught:
        seam(body, cls)
    return caught.value.message


@pytest.mark.parametrize(
    ("body", "cls", "error"),
    [
        # The path through nested structs and arrays, named as Go names it (indices dropped).
        (
            {"messages": [{"role": "user"}, {"tool_calls": [{"function": {"index": "1"}}]}]},
            ollama.ChatRequest,
            unmarshal("string", "ChatRequest.messages.tool_calls.function.index", "int"),
        ),
        # An int field: Go quotes the number that does not fit (a float, or past int64).
        (
            {"top_logprobs": 2**63},
            ollama.GenerateRequest,
            unmarshal("number 9223372036854775808", "GenerateRequest.top_logprobs", "int"),
        ),
        ({"context": [1, 2.5]}, ollama.GenerateRequest, unmarshal("number 2.5", "GenerateRequest.context", "int")),
        # A struct that names itself (OpenAI's Message), and one whose dialect names the whole prefix.
        (
            {"messages": [{"name": 1}]},
            openai.ChatCompletionRequest,
            unmarshal("number", "Message.messages.name", "string"),
        ),
        (
            {"tools": [{"name": True}]},
            anthropic.MessagesRequest,
            unmarshal("bool", "Tool.MessagesRequest.tools.name", "string"),
        ),
        # A recursive struct: a namespace's member is named as a top-level tool is.
        (
            {"tools": [{"type": "namespace", "tools": [{"description": []}]}]},
            openai.ResponsesRequest,
            unmarshal("array", "ResponsesTool.ResponsesRequest.tools.description", "string"),
        ),
        # Go's type names for each JSON kind.
        ({"model": {}}, ollama.ShowRequest, unmarshal("object", "ShowRequest.model", "string")),
        ({"verbose": None, "stream": []}, ollama.PullRequest, unmarshal("array", "PullRequest.stream", "bool")),
        (
            {"temperature": "hot"},
            openai.CompletionRequest,
            unmarshal("string", "CompletionRequest.temperature", "float32"),
        ),
    ],
)
def test_msgspec_errors_read_as_gos(body: dict[str, Any], cls: type[GoStruct], error: str) -> None:
    assert error_of(body, cls, go_decode) == error


def test_the_first_wrong_field_in_the_body_is_the_one_named_as_in_go() -> None:
    assert error_of({"stream": "x", "raw": 1}, ollama.GenerateRequest) == unmarshal(
        "string", "GenerateRequest.stream", "bool"
    )
    assert error_of({"raw": 1, "stream": "x"}, ollama.GenerateRequest) == unmarshal(
        "number", "GenerateRequest.raw", "bool"
    )


def test_a_keep_alive_go_cannot_parse_wins_over_a_type_error_before_it() -> None:
    with pytest.raises(InvalidRequest) as expected:
        parse_keep_alive_field("soon")
    assert error_of({"model": 5, "keep_alive": "soon"}, ollama.ChatRequest) == expected.value.message
    # Only the Ollama seam: the other dialects have no keep_alive of Go's.
    assert "keep_alive" not in openai.ChatCompletionRequest.__struct_fields__


def test_go_leniency_null_is_absent_unknown_fields_ignored_ints_into_floats() -> None:
    req = decode({"model": None, "messages": None, "surprise": {"x": 1}, "top_logprobs": None}, ollama.ChatRequest)
    assert (req.model, req.messages, req.top_logprobs) == (None, None, None)
    v1 = go_decode(
        {"temperature": 1, "messages": [{"content": [{"type": "text", "text": "hi"}]}]}, openai.ChatCompletionRequest
    )
    assert v1.temperature == 1.0 and isinstance(v1.temperature, float)
    assert v1.messages is not None and v1.messages[0].content == [openai.ContentPart(type="text", text="hi")]


def test_keys_in_another_case_name_the_fields_inside_too_and_the_last_key_wins() -> None:
    body = {
        "Model": "a",
        "MESSAGES": [{"Role": "user", "Tool_Calls": [{"Function": {"Name": "f", "Arguments": {"City": 1}}}]}],
        "Options": {"Num_Ctx": 8},
        "model": "b",
        "surprise": 1,
    }
    assert go_field_names(body, ollama.ChatRequest) == {
        "messages": [{"role": "user", "tool_calls": [{"function": {"name": "f", "arguments": {"City": 1}}}]}],
        "options": {"Num_Ctx": 8},  # a map's keys are the client's own
        "model": "b",
        "surprise": 1,
    }
    same = {"model": "a", "messages": [{"role": "user"}]}
    assert go_field_names(same, ollama.ChatRequest) is same


def test_the_documents_request_bodies_come_from_the_structs() -> None:
    schemas = document()["components"]["schemas"]
    chat = schemas["ChatRequest"]
    assert chat["required"] == ["model"]
    assert chat["properties"]["model"] == {"type": "string"}
    assert chat["properties"]["stream"] == {"type": ["boolean", "null"]}
    assert chat["properties"]["messages"] == {
        "type": ["array", "null"],
        "items": {"$ref": "#/components/schemas/Message"},
    }
    assert chat["properties"]["top_logprobs"] == {"type": ["integer", "null"], "minimum": 0, "maximum": 20}
    # Every field of a struct is in its schema, under its JSON name (``from``, not ``from_``).
    for name, cls in (("CreateRequest", ollama.CreateRequest), ("AnthropicMessagesRequest", anthropic.MessagesRequest)):
        assert set(schemas[name]["properties"]) == set(cls.__struct_encode_fields__)
    assert "from" in schemas["CreateRequest"]["properties"]
