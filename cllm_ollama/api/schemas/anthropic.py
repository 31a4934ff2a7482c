"""Anthropic's Messages request as Ollama's Anthropic layer (``anthropic/anthropic.go``) declares it.

A content block is one struct for every kind, as Go declares it: ``type`` says which fields
count, and a kind nothing here reads is skipped (Ollama counts and skips it). ``system`` (a string
or blocks), a tool result's ``content`` and a tool's ``input_schema`` are ``any`` in Go too:
``anthropic.messages`` reads them with its own messages.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from .go import Bool, Float64, GoStruct, Int, String, doc, go
from .ollama import STRING

_OBJECT = {"type": "object"}


class ImageSource(GoStruct):
    go_type: ClassVar[str] = "anthropic.ImageSource"
    type: Annotated[String, doc(enum=["base64"], description="only base64 images are supported")] = None
    media_type: String = None
    data: String = None
    url: String = None


class ContentBlock(GoStruct):
    """A block of a message's content. api.MessageParam decodes its content itself (a string is
    one text block): Go names the block's fields from ``ContentBlock.messages.content``."""

    go_where: ClassVar[str | None] = "ContentBlock.messages.content"
    go_type: ClassVar[str] = "anthropic.ContentBlock"
    required: ClassVar[tuple[str, ...]] = ("type",)
    type: Annotated[String, doc(description="text, image, tool_use, tool_result, thinking; others skipped")] = None
    text: String = None
    source: ImageSource | None = None
    id: String = None
    name: String = None
    input: Annotated[dict[str, Any], go("api.ToolCallFunctionArguments")] | None = None
    tool_use_id: String = None
    content: Annotated[Any, doc(anyOf=[STRING, {"type": "array", "items": _OBJECT}])] = None
    is_error: Bool = None
    thinking: String = None
    signature: String = None
    cache_control: Annotated[Any, doc(type="object", description="a prompt-cache breakpoint")] = None


Content = Annotated[str | list[ContentBlock], go("[]anthropic.ContentBlock")]
_SYSTEM = doc(anyOf=[STRING, {"type": "array", "items": {"$ref": "#/components/schemas/AnthropicContentBlock"}}])


class MessageParam(GoStruct):
    go_type: ClassVar[str] = "anthropic.MessageParam"
    required: ClassVar[tuple[str, ...]] = ("role", "content")
    role: Annotated[String, doc(enum=["user", "assistant"])] = None
    content: Content | None = None


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
    type: Annotated[
        String,
        doc(enum=["auto", "any", "tool", "none"], description="enforced: any and tool by a grammar; none: no call"),
    ] = None
    name: String = None
    disable_parallel_tool_use: Bool = None


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
    go_package: ClassVar[str] = "anthropic"
    required: ClassVar[tuple[str, ...]] = ("model", "max_tokens", "messages")
    model: String = None
    max_tokens: Annotated[Int, doc(minimum=1)] = None
    messages: Annotated[Annotated[list[MessageParam], go("[]anthropic.MessageParam")] | None, doc(minItems=1)] = None
    system: Annotated[Any, _SYSTEM] = None
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
