"""OpenAI's request bodies as Ollama's OpenAI layer (``openai/openai.go``) declares them.

A message's ``content`` (a string or parts) and a Responses request's ``input`` (a string or
items, with their contents) are typed here where Go has ``any`` and checks by hand: a wrong shape
is Ollama's own message (``refuse``), not Go's decode error. A part or item is one struct for
every ``type``, as Ollama reads them (a kind it does not take is the handler's refusal, with the
kind named). Fields that layer checks with messages of its own stay raw: ``stop`` (a string or
strings), ``prompt``, embeddings' ``input``, ``options`` (Ollama's, via ``extra_body``).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import msgspec

from .go import Bool, Float64, GoStruct, Int, String, doc, go, refuse
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
_MESSAGE_FORMAT = "invalid message format"
# Ollama's one word for a tool call's arguments that are no JSON object (or its text), shape or value.
BAD_ARGUMENTS = "invalid tool call arguments"
# A call's arguments: OpenAI's JSON text, or the object itself; anything else is Ollama's refusal.
Arguments = Annotated[str | dict[str, Any], refuse(BAD_ARGUMENTS, description="a JSON object or its text")]


class _OpenAI(GoStruct):
    go_package: ClassVar[str] = "openai"


class ToolCallFunction(_OpenAI):
    go_type: ClassVar[str] = _TOOL_CALL_FUNCTION
    name: String = None
    arguments: Arguments | None = None


class ToolCall(_OpenAI):
    go_name: ClassVar[str | None] = "ToolCall"
    id: String = None
    type: String = None
    function: ToolCallFunction | None = None


class ImageURL(_OpenAI):
    url: Annotated[String, doc(description="a base64 data URL (image/jpeg, png or webp)")] = None


_PART_TYPES = ["text", "image_url", "input_audio", "input_text", "output_text", "input_image"]
_INPUT_AUDIO = doc(
    type="object",
    properties={"data": {"type": "string", "description": "the audio (WAV, MP3 or FLAC), base64"}, "format": STRING},
)


class ContentPart(_OpenAI):
    """A part of a message's content: ``text``, ``image_url`` (its URL, or an object holding it) or
    ``input_audio`` (``{data, format}``). A Responses message's parts (``input_text``,
    ``output_text``, ``input_image``) are read as these."""

    required: ClassVar[tuple[str, ...]] = ("type",)
    # Any: Ollama names an unknown kind in its refusal, whatever its JSON type.
    type: Annotated[Any, doc(type="string", enum=_PART_TYPES)] = None
    text: String = None
    image_url: str | ImageURL | None = None
    # Any: Ollama's checks word what is wrong with it (``endpoints.input_audio_data``).
    input_audio: Annotated[Any, _INPUT_AUDIO] = None


# A string, or parts; anything else is "invalid message content type: float64" (Go's %T of what
# came), a part that is no part (or holds a field of the wrong type) "invalid message format", as
# Ollama's checks say.
CONTENT_TYPE = "invalid message content type: %T"
Content = Annotated[str | list[Annotated[ContentPart, refuse(_MESSAGE_FORMAT, within=True)]], refuse(CONTENT_TYPE)]


class Message(_OpenAI):
    go_name: ClassVar[str | None] = "Message"
    role: String = None
    content: Content | None = None
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


_EXTRA = "llama-server's extra field, as options.{} on /api"
_BREAKERS = Annotated[list[Annotated[str, go("string")]], go("[]string")]


class Sampling(_OpenAI):
    """What chat, text completions and responses share (``endpoints.sampling_options`` reads it).

    ``grammar`` and the DRY and XTC fields are llama-server's extra body fields (``extra_body``
    in the SDKs), passed on as the native options of the same names."""

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
    grammar: Annotated[
        String, doc(description="a GBNF grammar the output must match (" + _EXTRA.format("grammar") + ")")
    ] = None
    dry_multiplier: Annotated[Float64, doc(minimum=0, description=_EXTRA.format("dry_multiplier"))] = None
    dry_base: Annotated[Float64, doc(minimum=1, description=_EXTRA.format("dry_base"))] = None
    dry_allowed_length: Annotated[Int, doc(minimum=0, description=_EXTRA.format("dry_allowed_length"))] = None
    dry_penalty_last_n: Annotated[Int, doc(minimum=-1, description=_EXTRA.format("dry_penalty_last_n"))] = None
    dry_sequence_breakers: Annotated[_BREAKERS | None, doc(minItems=1)] = None
    xtc_probability: Annotated[Float64, doc(minimum=0, maximum=1, description=_EXTRA.format("xtc_probability"))] = None
    xtc_threshold: Annotated[Float64, doc(minimum=0, maximum=1, description=_EXTRA.format("xtc_threshold"))] = None


# OpenAI's tool_choice: a mode, or the one function the call must be of.
_TOOL_CHOICE = doc(
    anyOf=[
        {"type": "string", "enum": ["none", "auto", "required"]},
        {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": ["function"]},
                "function": {"type": "object", "properties": {"name": STRING}, "required": ["name"]},
            },
            "required": ["type", "function"],
        },
        {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": ["allowed_tools"]},
                "allowed_tools": {
                    "type": "object",
                    "properties": {
                        "mode": {"type": "string", "enum": ["auto", "required"]},
                        "tools": {"type": "array", "items": {"type": "object"}},
                    },
                    "required": ["mode", "tools"],
                },
            },
            "required": ["type", "allowed_tools"],
        },
    ],
    description="enforced: required and a named function by a grammar in the model's call syntax; none: no call; "
    "allowed_tools: only those tools are shown",
)
_RESPONSES_TOOL_CHOICE = doc(
    anyOf=[
        {"type": "string", "enum": ["none", "auto", "required"]},
        {
            "type": "object",
            "properties": {"type": {"type": "string", "enum": ["function"]}, "name": STRING},
            "required": ["type", "name"],
        },
        {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": ["allowed_tools"]},
                "mode": {"type": "string", "enum": ["auto", "required"]},
                "tools": {"type": "array", "items": {"type": "object"}},
            },
            "required": ["type", "mode", "tools"],
        },
    ],
    description="enforced: required and a named function by a grammar in the model's call syntax; none: no call",
)


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
    tool_choice: Annotated[Any, _TOOL_CHOICE] = None
    parallel_tool_calls: Annotated[Bool, doc(description="false: a forced call is one call")] = None
    reasoning_effort: Annotated[String, _EFFORT] = None
    reasoning: Reasoning | None = None
    logprobs: Bool = None
    top_logprobs: Annotated[Int, TOP_LOGPROBS] = None


class CompletionRequest(_Completions):
    go_name: ClassVar[str | None] = "CompletionRequest"
    required: ClassVar[tuple[str, ...]] = ("model",)
    # Go's string: a missing prompt is "", a load call; an array is Go's decode error.
    prompt: Annotated[String, doc(description="empty or missing: the model is loaded, nothing generated")] = None
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
    dimensions: Int = None
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


class ResponsesReasoningSummary(_OpenAI):
    go_name: ClassVar[str | None] = "ResponsesReasoningSummary"
    type: Annotated[String, doc(enum=["summary_text"])] = None
    text: String = None


class ResponsesInputItem(_OpenAI):
    """An input item, one struct for every kind as Ollama reads them (``type`` says which fields
    count): a message, a function call, its output, a reasoning item; a ``web_search_call`` is
    history only (the message after one holds what it found). Every field may be null (Go's zero)."""

    go_where: ClassVar[str | None] = "ResponsesRequest.input"
    go_type: ClassVar[str] = "openai.ResponsesInputItem"
    type: Annotated[
        String,
        doc(
            enum=["message", "function_call", "function_call_output", "reasoning", "web_search_call"],
            description="message when absent; web_search_call items are history only",
        ),
    ] = None
    role: Annotated[String, doc(enum=["system", "developer", "user", "assistant"])] = None
    content: Content | None = None
    name: String = None
    namespace: Annotated[String, doc(description="a namespaced call's namespace: the model sees ns.name")] = None
    call_id: String = None
    arguments: Arguments | None = None
    # Go's json.RawMessage: a string, parts (their text is the output) or any JSON, written out as is.
    output: Annotated[Any, doc(anyOf=[STRING, {"type": "array", "items": {"type": "object"}}, {}])] = None
    encrypted_content: Annotated[String, doc(description="a reasoning item's text, as cllm returns it")] = None
    summary: Annotated[list[ResponsesReasoningSummary], go("[]openai.ResponsesReasoningSummary")] | None = None


# A string, or a non-empty list of items; anything else (an item that is no object) is refused
# with Ollama's message for it.
Input = Annotated[
    str | Annotated[list[Annotated[ResponsesInputItem, refuse("invalid input item")]], msgspec.Meta(min_length=1)],
    refuse("input must be a string or a non-empty list of items"),
]


class ResponsesRequest(Sampling):
    go_name: ClassVar[str | None] = "ResponsesRequest"
    required: ClassVar[tuple[str, ...]] = ("model", "input")
    input: Input | None = None
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
    tool_choice: Annotated[Any, _RESPONSES_TOOL_CHOICE] = None
    background: Bool = None
    text: ResponsesText | None = None
    reasoning: ResponsesReasoning | None = None
    reasoning_effort: Annotated[String, _EFFORT] = None
    truncation: String = None
    metadata: Annotated[Any, doc(type="object")] = None
    max_tokens: Int = None
    max_completion_tokens: Int = None
