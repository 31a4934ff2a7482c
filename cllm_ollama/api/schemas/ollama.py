"""Ollama's request bodies (``api/types.go``) as typed structs, named as Go names them in errors.

Fields Go decodes with code of its own stay raw for the handler, which keeps Ollama's messages
and order: ``keep_alive`` (a duration or seconds), ``think`` (a bool or a level), ``format``
(``"json"`` or a schema), ``options`` (a free map validated by ``options.resolve_options``),
``input`` (a string or strings), a model file's ``files``/``adapters``/``parameters``...
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from .go import Bool, GoStruct, Int, String, go


class ToolCallFunction(GoStruct):
    go_type: ClassVar[str] = "api.ToolCallFunction"
    name: String = None
    index: Int = None
    arguments: Annotated[dict[str, Any], go("api.ToolCallFunctionArguments")] | None = None


class ToolCall(GoStruct):
    go_type: ClassVar[str] = "api.ToolCall"
    id: String = None
    function: ToolCallFunction | None = None


class Message(GoStruct):
    """api.Message decodes itself (to lower-case the role): Go names its fields from the request."""

    go_type: ClassVar[str] = "api.Message"
    role: String = None
    content: String = None
    thinking: String = None
    images: Annotated[list[Annotated[str, go("api.ImageData")]], go("[]api.ImageData")] | None = None
    tool_calls: Annotated[list[ToolCall], go("[]api.ToolCall")] | None = None
    tool_name: String = None
    tool_call_id: String = None


class ToolFunction(GoStruct):
    go_type: ClassVar[str] = "api.ToolFunction"
    name: String = None
    description: String = None
    parameters: Annotated[dict[str, Any], go("api.ToolFunctionParameters")] | None = None


class Tool(GoStruct):
    go_type: ClassVar[str] = "api.Tool"
    type: String = None
    function: ToolFunction | None = None


class GenerationRequest(GoStruct):
    """What /api/generate and /api/chat share (``fields.SharedFields`` reads it)."""

    model: String = None
    format: Any = None
    options: Any = None
    stream: Bool = None
    keep_alive: Any = None
    think: Any = None
    truncate: Bool = None
    shift: Bool = None
    logprobs: Bool = None
    top_logprobs: Int = None


class GenerateRequest(GenerationRequest):
    go_name: ClassVar[str | None] = "GenerateRequest"
    prompt: String = None
    suffix: String = None
    system: String = None
    template: String = None
    context: Annotated[list[Annotated[int, go("int")]], go("[]int")] | None = None
    raw: Bool = None
    images: Annotated[list[Annotated[str, go("api.ImageData")]], go("[]api.ImageData")] | None = None


class ChatRequest(GenerationRequest):
    go_name: ClassVar[str | None] = "ChatRequest"
    messages: Annotated[list[Message], go("[]api.Message")] | None = None
    tools: Annotated[list[Tool], go("api.Tools")] | None = None


class EmbedRequest(GoStruct):
    go_name: ClassVar[str | None] = "EmbedRequest"
    model: String = None
    input: Any = None
    truncate: Bool = None
    dimensions: Int = None
    keep_alive: Any = None
    options: Any = None


class EmbeddingRequest(GoStruct):
    go_name: ClassVar[str | None] = "EmbeddingRequest"
    model: String = None
    prompt: String = None
    keep_alive: Any = None
    options: Any = None


class _Named(GoStruct):
    """A request naming one model: ``model``, or the deprecated ``name`` when it is empty."""

    model: String = None
    name: String = None

    @property
    def model_name(self) -> str:
        return self.model or self.name or ""


class ShowRequest(_Named):
    go_name: ClassVar[str | None] = "ShowRequest"
    system: String = None
    verbose: Bool = None


class DeleteRequest(_Named):
    go_name: ClassVar[str | None] = "DeleteRequest"


class CopyRequest(GoStruct):
    go_name: ClassVar[str | None] = "CopyRequest"
    source: String = None
    destination: String = None


class PullRequest(_Named):
    go_name: ClassVar[str | None] = "PullRequest"
    insecure: Bool = None
    stream: Bool = None


class PushRequest(_Named):
    go_name: ClassVar[str | None] = "PushRequest"
    insecure: Bool = None
    stream: Bool = None


class CreateRequest(GoStruct):
    """The stream flag only: the rest is ``store.create.CreateRequest.from_json``'s, with its messages."""

    go_name: ClassVar[str | None] = "CreateRequest"
    stream: Bool = None
