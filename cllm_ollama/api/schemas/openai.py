"""OpenAI's request bodies as Ollama's OpenAI layer (``openai/openai.go``) declares them.

Fields that layer checks with messages of its own stay raw: ``content`` (a string or parts),
``stop`` (a string or strings), ``prompt``, ``input``, ``options`` (Ollama's, via ``extra_body``).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from .go import Bool, Float64, GoStruct, Int, String, go
from .ollama import Tool

Float32 = Annotated[float, go("float32")] | None
_TOOL_CALL_FUNCTION = 'struct { Name string "json:\\"name\\""; Arguments string "json:\\"arguments\\"" }'


class ToolCallFunction(GoStruct):
    go_type: ClassVar[str] = _TOOL_CALL_FUNCTION
    name: String = None
    arguments: Any = None  # a JSON string (OpenAI's form) or an object


class ToolCall(GoStruct):
    go_name: ClassVar[str | None] = "ToolCall"
    go_type: ClassVar[str] = "openai.ToolCall"
    id: String = None
    type: String = None
    function: ToolCallFunction | None = None


class Message(GoStruct):
    go_name: ClassVar[str | None] = "Message"
    go_type: ClassVar[str] = "openai.Message"
    role: String = None
    content: Any = None
    reasoning: String = None
    name: String = None
    tool_call_id: String = None
    tool_calls: Annotated[list[ToolCall], go("[]openai.ToolCall")] | None = None


class JsonSchema(GoStruct):
    go_type: ClassVar[str] = "openai.JsonSchema"
    name: String = None
    schema: Any = None


class ResponseFormat(GoStruct):
    go_name: ClassVar[str | None] = "ResponseFormat"
    go_type: ClassVar[str] = "openai.ResponseFormat"
    type: String = None
    json_schema: JsonSchema | None = None


class Reasoning(GoStruct):
    go_name: ClassVar[str | None] = "Reasoning"
    go_type: ClassVar[str] = "openai.Reasoning"
    effort: String = None


class StreamOptions(GoStruct):
    go_name: ClassVar[str | None] = "StreamOptions"
    go_type: ClassVar[str] = "openai.StreamOptions"
    include_usage: Bool = None


class Sampling(GoStruct):
    """What chat, text completions and responses share (``endpoints.sampling_options`` reads it)."""

    model: String = None
    stream: Bool = None
    stream_options: StreamOptions | None = None
    max_tokens: Int = None
    max_completion_tokens: Int = None
    seed: Int = None
    stop: Any = None
    options: Any = None
    temperature: Float64 = None
    top_p: Float64 = None
    frequency_penalty: Float64 = None
    presence_penalty: Float64 = None


class ChatCompletionRequest(Sampling):
    go_name: ClassVar[str | None] = "ChatCompletionRequest"
    messages: Annotated[list[Message], go("[]openai.Message")] | None = None
    response_format: ResponseFormat | None = None
    tools: Annotated[list[Tool], go("api.Tools")] | None = None
    reasoning_effort: String = None
    reasoning: Reasoning | None = None
    logprobs: Bool = None
    top_logprobs: Int = None


class CompletionRequest(Sampling):
    go_name: ClassVar[str | None] = "CompletionRequest"
    prompt: Any = None
    suffix: String = None
    temperature: Float32 = None  # float32 in Ollama's CompletionRequest
    top_p: Float32 = None
    frequency_penalty: Float32 = None
    presence_penalty: Float32 = None
    logprobs: Int = None


class EmbedRequest(GoStruct):
    go_name: ClassVar[str | None] = "EmbedRequest"
    model: String = None
    input: Any = None
    dimensions: Int = None
    encoding_format: String = None
    options: Any = None


class ResponsesReasoning(GoStruct):
    go_name: ClassVar[str | None] = "ResponsesReasoning"
    go_type: ClassVar[str] = "openai.ResponsesReasoning"
    effort: String = None
    summary: String = None


class ResponsesTextFormat(GoStruct):
    go_name: ClassVar[str | None] = "ResponsesTextFormat"
    go_type: ClassVar[str] = "openai.ResponsesTextFormat"
    type: String = None
    name: String = None
    schema: Any = None


class ResponsesText(GoStruct):
    go_name: ClassVar[str | None] = "ResponsesText"
    go_type: ClassVar[str] = "openai.ResponsesText"
    format: ResponsesTextFormat | None = None


class ResponsesTool(GoStruct):
    """A flat function (``{"type": "function", "name", ...}``), or a namespace of more tools."""

    go_where: ClassVar[str | None] = "ResponsesTool.ResponsesRequest.tools"
    go_type: ClassVar[str] = "openai.ResponsesTool"
    type: String = None
    name: String = None
    description: String = None
    parameters: Annotated[dict[str, Any], go("map[string]interface {}")] | None = None
    tools: Annotated[list[ResponsesTool], go("[]openai.ResponsesTool")] | None = None


class ResponsesRequest(Sampling):
    """``input`` (a string or items of several shapes) stays raw: ``responses._messages`` reads it."""

    go_name: ClassVar[str | None] = "ResponsesRequest"
    input: Any = None
    instructions: String = None
    max_output_tokens: Int = None
    text: ResponsesText | None = None
    tools: Annotated[list[ResponsesTool], go("[]openai.ResponsesTool")] | None = None
    reasoning: ResponsesReasoning | None = None
    reasoning_effort: String = None
    truncation: String = None
    previous_response_id: String = None
    prompt_cache_key: String = None
    store: Bool = None
    parallel_tool_calls: Bool = None
    background: Bool = None
    include: Annotated[list[Annotated[str, go("string")]], go("[]string")] | None = None
