"""Anthropic's Messages request as Ollama's Anthropic layer (``anthropic/anthropic.go``) declares it.

``system`` (a string or blocks), a message's ``content`` (a string or blocks of several kinds)
and a tool's ``input_schema`` stay raw: ``anthropic.messages`` checks them with its own messages.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from .go import Bool, Float64, GoStruct, Int, String, doc, go
from .ollama import STRING

_OBJECT = {"type": "object"}
_BLOCK = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": ["text", "image", "tool_use", "tool_result", "thinking"]},
        "text": STRING,
        "id": STRING,
        "name": STRING,
        "input": _OBJECT,
        "tool_use_id": STRING,
        "content": {"anyOf": [STRING, {"type": "array", "items": _OBJECT}]},
        "thinking": STRING,
        "source": _OBJECT,
    },
    "required": ["type"],
}
_CONTENT = doc(anyOf=[STRING, {"type": "array", "items": _BLOCK}])


class MessageParam(GoStruct):
    go_type: ClassVar[str] = "anthropic.MessageParam"
    required: ClassVar[tuple[str, ...]] = ("role", "content")
    role: Annotated[String, doc(enum=["user", "assistant"])] = None
    content: Annotated[Any, _CONTENT] = None


class Tool(GoStruct):
    go_where: ClassVar[str | None] = "Tool.MessagesRequest.tools"
    go_type: ClassVar[str] = "anthropic.Tool"
    required: ClassVar[tuple[str, ...]] = ("name",)
    type: String = None
    name: String = None
    description: String = None
    input_schema: Annotated[Any, doc(type="object")] = None


class ToolChoice(GoStruct):
    go_where: ClassVar[str | None] = "ToolChoice.MessagesRequest.tool_choice"
    go_type: ClassVar[str] = "anthropic.ToolChoice"
    type: Annotated[String, doc(enum=["auto", "any", "tool", "none"])] = None
    name: String = None


class ThinkingConfig(GoStruct):
    go_where: ClassVar[str | None] = "ThinkingConfig.MessagesRequest.thinking"
    go_type: ClassVar[str] = "anthropic.ThinkingConfig"
    type: String = None
    budget_tokens: Int = None


class OutputConfig(GoStruct):
    go_where: ClassVar[str | None] = "OutputConfig.MessagesRequest.output_config"
    go_type: ClassVar[str] = "anthropic.OutputConfig"
    effort: String = None


class MessagesRequest(GoStruct):
    go_name: ClassVar[str | None] = "MessagesRequest"
    required: ClassVar[tuple[str, ...]] = ("model", "max_tokens", "messages")
    model: String = None
    max_tokens: Annotated[Int, doc(minimum=1)] = None
    messages: Annotated[Annotated[list[MessageParam], go("[]anthropic.MessageParam")] | None, doc(minItems=1)] = None
    system: Annotated[Any, _CONTENT] = None
    stream: Bool = None
    temperature: Float64 = None
    top_p: Float64 = None
    top_k: Int = None
    stop_sequences: Annotated[list[Annotated[str, go("string")]], go("[]string")] | None = None
    tools: Annotated[list[Tool], go("[]anthropic.Tool")] | None = None
    tool_choice: ToolChoice | None = None
    thinking: ThinkingConfig | None = None
    output_config: OutputConfig | None = None
    metadata: Annotated[dict[str, Any], go("anthropic.Metadata")] | None = None
