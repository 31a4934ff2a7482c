"""OpenAI's request bodies as Ollama's OpenAI layer (``openai/openai.go``) declares them.

Fields that layer checks with messages of its own stay raw: ``content`` (a string or parts),
``stop`` (a string or strings), ``prompt``, ``input``, ``options`` (Ollama's, via ``extra_body``).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from .go import Bool, Float64, GoStruct, Int, String, doc, go
from .ollama import STRING, STRINGS, TOP_LOGPROBS, Tool

Float32 = Annotated[float, go("float32")] | None
_TOOL_CALL_FUNCTION = 'struct { Name string "json:\\"name\\""; Arguments string "json:\\"arguments\\"" }'
_OBJECT = {"type": "object"}
_OPTIONS = doc(
    **{"$ref": "#/components/schemas/Options"},
    description="Ollama's options (the SDKs' extra_body); OpenAI's own fields win over them",
)
_EFFORT = doc(enum=["none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra"])
_FORMAT_TYPE = doc(enum=["text", "json_object", "json_schema"])
_CONTENT_PART = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": ["text", "image_url"]},
        "text": STRING,
        "image_url": {"anyOf": [STRING, {"type": "object", "properties": {"url": STRING}}]},
    },
    "required": ["type"],
}


class _OpenAI(GoStruct):
    go_package: ClassVar[str] = "openai"


class ToolCallFunction(_OpenAI):
    go_type: ClassVar[str] = _TOOL_CALL_FUNCTION
    name: String = None
    arguments: Annotated[Any, doc(type="string", description="a JSON object")] = None  # or an object


class ToolCall(_OpenAI):
    go_name: ClassVar[str | None] = "ToolCall"
    id: String = None
    type: String = None
    function: ToolCallFunction | None = None


class Message(_OpenAI):
    go_name: ClassVar[str | None] = "Message"
    role: String = None
    content: Annotated[Any, doc(anyOf=[STRING, {"type": "array", "items": _CONTENT_PART}])] = None
    reasoning: String = None
    name: String = None
    tool_call_id: String = None
    tool_calls: Annotated[list[ToolCall], go("[]openai.ToolCall")] | None = None


class JsonSchema(_OpenAI):
    go_type: ClassVar[str] = "openai.JsonSchema"
    name: String = None
    schema: Annotated[Any, doc(type="object")] = None
    strict: Annotated[Any, doc(type="boolean")] = None


class ResponseFormat(_OpenAI):
    go_name: ClassVar[str | None] = "ResponseFormat"
    type: Annotated[String, _FORMAT_TYPE] = None
    json_schema: JsonSchema | None = None


class Reasoning(_OpenAI):
    go_name: ClassVar[str | None] = "Reasoning"
    effort: Annotated[String, _EFFORT] = None


class StreamOptions(_OpenAI):
    go_name: ClassVar[str | None] = "StreamOptions"
    include_usage: Bool = None


class Sampling(_OpenAI):
    """What chat, text completions and responses share (``endpoints.sampling_options`` reads it)."""

    required: ClassVar[tuple[str, ...]] = ("model",)
    options: Annotated[Any, _OPTIONS] = None
    model: String = None
    stream: Bool = None
    temperature: Float64 = None
    top_p: Float64 = None
    seed: Int = None
    stop: Annotated[Any, doc(anyOf=[STRING, STRINGS])] = None
    frequency_penalty: Float64 = None
    presence_penalty: Float64 = None


class _Completions(Sampling):
    stream_options: StreamOptions | None = None
    max_tokens: Int = None


class ChatCompletionRequest(_Completions):
    go_name: ClassVar[str | None] = "ChatCompletionRequest"
    required: ClassVar[tuple[str, ...]] = ("model", "messages")
    messages: Annotated[Annotated[list[Message], go("[]openai.Message")] | None, doc(minItems=1)] = None
    max_completion_tokens: Int = None
    response_format: ResponseFormat | None = None
    tools: Annotated[list[Tool], go("api.Tools")] | None = None
    reasoning_effort: Annotated[String, _EFFORT] = None
    reasoning: Reasoning | None = None
    logprobs: Bool = None
    top_logprobs: Annotated[Int, TOP_LOGPROBS] = None


class CompletionRequest(_Completions):
    go_name: ClassVar[str | None] = "CompletionRequest"
    required: ClassVar[tuple[str, ...]] = ("model", "prompt")
    prompt: Annotated[Any, doc(type="string", minLength=1)] = None
    suffix: String = None
    temperature: Float32 = None  # float32 in Ollama's CompletionRequest
    top_p: Float32 = None
    frequency_penalty: Float32 = None
    presence_penalty: Float32 = None
    logprobs: Annotated[Int, doc(description="accepted, not supported")] = None
    max_completion_tokens: Annotated[Int, doc(description="as max_tokens")] = None


class EmbedRequest(_OpenAI):
    go_name: ClassVar[str | None] = "EmbedRequest"
    required: ClassVar[tuple[str, ...]] = ("model", "input")
    options: Annotated[Any, _OPTIONS] = None
    model: String = None
    input: Annotated[Any, doc(anyOf=[STRING, {"type": "array", "items": STRING, "minItems": 1}])] = None
    dimensions: Annotated[Int, doc(minimum=1)] = None
    encoding_format: Annotated[String, doc(enum=["float", "base64"])] = None


class ResponsesReasoning(Reasoning):
    go_name: ClassVar[str | None] = "ResponsesReasoning"
    summary: String = None


class ResponsesTextFormat(JsonSchema):
    """Responses flatten chat's ``response_format``: its type beside the schema."""

    go_name: ClassVar[str | None] = "ResponsesTextFormat"
    type: Annotated[String, _FORMAT_TYPE] = None


class ResponsesText(_OpenAI):
    go_name: ClassVar[str | None] = "ResponsesText"
    format: ResponsesTextFormat | None = None


class ResponsesTool(_OpenAI):
    """A flat function (``{"type": "function", "name", ...}``); a namespace of more tools, offered
    to the model as ``name.function``; or a tool that runs on OpenAI's side (web_search, ...),
    echoed, not offered to the model."""

    go_where: ClassVar[str | None] = "ResponsesTool.ResponsesRequest.tools"
    go_type: ClassVar[str] = "openai.ResponsesTool"
    required: ClassVar[tuple[str, ...]] = ("type",)
    type: Annotated[String, doc(description="function, namespace, or a tool that runs on OpenAI's side")] = None
    name: String = None
    description: String = None
    parameters: Annotated[dict[str, Any], go("map[string]interface {}")] | None = None
    tools: Annotated[list[ResponsesTool], go("[]openai.ResponsesTool")] | None = None


_TEXT_PART = {
    "type": "object",
    "properties": {"type": {"type": "string", "enum": ["input_text", "output_text"]}, "text": STRING},
    "required": ["type"],
}
_TEXT_PARTS = {"anyOf": [STRING, {"type": "array", "items": _TEXT_PART}]}
_INPUT_ITEM_FIELDS = {
    "type": {
        "type": "string",
        "enum": ["message", "function_call", "function_call_output", "reasoning", "web_search_call"],
        "description": "web_search_call items are history only (the message after one holds what it found)",
    },
    "role": {"type": "string", "enum": ["system", "developer", "user", "assistant"]},
    "content": _TEXT_PARTS,
    "name": STRING,
    "namespace": {"type": "string", "description": "a namespaced call's namespace: the model sees ns.name"},
    "call_id": STRING,
    "arguments": {"type": "string", "description": "a JSON object"},
    "output": _TEXT_PARTS,
    "encrypted_content": {"type": "string", "description": "a reasoning item's text, as cllm returns it"},
    "summary": {
        "type": "array",
        "items": {"type": "object", "properties": {"type": {"const": "summary_text"}, "text": STRING}},
    },
}
# Every field of an input item may be null, as Go's zero values.
_INPUT_ITEM = {
    "type": "object",
    "properties": {
        k: v | {"type": [v["type"], "null"]} if isinstance(v.get("type"), str) else {"anyOf": [v, {"type": "null"}]}
        for k, v in _INPUT_ITEM_FIELDS.items()
    },
}


class ResponsesRequest(Sampling):
    """``input`` (a string or items of several shapes) stays raw: ``responses._messages`` reads it."""

    go_name: ClassVar[str | None] = "ResponsesRequest"
    required: ClassVar[tuple[str, ...]] = ("model", "input")
    input: Annotated[Any, doc(anyOf=[STRING, {"type": "array", "items": _INPUT_ITEM, "minItems": 1}])] = None
    instructions: String = None
    max_output_tokens: Int = None
    tools: Annotated[list[ResponsesTool], go("[]openai.ResponsesTool")] | None = None
    include: Annotated[
        Annotated[list[Annotated[str, go("string")]], go("[]string")] | None,
        doc(description="reasoning.encrypted_content is answered; other values are ignored"),
    ] = None
    prompt_cache_key: Annotated[String, doc(description="echoed; prompts are cached by their tokens")] = None
    previous_response_id: Annotated[String, doc(description="accepted, not looked up (stateless)")] = None
    store: Bool = None
    parallel_tool_calls: Bool = None
    background: Bool = None
    text: ResponsesText | None = None
    reasoning: ResponsesReasoning | None = None
    reasoning_effort: Annotated[String, _EFFORT] = None
    truncation: String = None
    metadata: Annotated[Any, doc(type="object")] = None
    max_tokens: Int = None
    max_completion_tokens: Int = None
