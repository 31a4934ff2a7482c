"""Ollama's request bodies (``api/types.go``) as typed structs, named as Go names them in errors.

Fields Go decodes with code of its own stay raw for the handler, which keeps Ollama's messages
and order: ``keep_alive`` (a duration or seconds), ``think`` (a bool or a level), ``format``
(``"json"`` or a schema), ``options`` (a free map validated by ``options.resolve_options``),
``input`` (a string or strings), a model file's ``files``/``adapters``/``parameters``...
Their ``doc`` says what the OpenAPI document shows of them.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import msgspec

from .go import Bool, GoInt, GoStruct, Int, String, doc, go

STRING: dict[str, Any] = {"type": "string"}
STRINGS: dict[str, Any] = {"type": "array", "items": STRING}
OPTIONS = doc(**{"$ref": "#/components/schemas/Options"})
KEEP_ALIVE = doc(
    anyOf=[{"type": "number"}, STRING],
    description='Seconds, or a Go duration ("5m", "-1s"); negative keeps the model loaded forever.',
)
THINK = doc(anyOf=[{"type": "boolean"}, {"type": "string", "enum": ["low", "medium", "high", "max"]}])
FORMAT = doc(
    anyOf=[{"type": "string", "enum": ["json", ""]}, {"type": "object"}],
    description=(
        '"json" or a JSON Schema the output must follow. Any other value is a 500 `invalid format: ...`, '
        "as in Ollama; a schema beyond what a grammar can spell out is a 400."
    ),
)
TOP_LOGPROBS = doc(minimum=0, maximum=20)
Images = Annotated[
    Annotated[list[Annotated[str, go("api.ImageData")]], go("[]api.ImageData")] | None,
    doc(
        description=(
            "base64 images (for a model with the vision capability) and audio, WAV, MP3 or FLAC "
            "(the audio capability); a model without the capability answers 400"
        )
    ),
]


class ToolCallFunction(GoStruct):
    go_type: ClassVar[str] = "api.ToolCallFunction"
    index: Int = None
    name: String = None
    arguments: Annotated[dict[str, Any], go("api.ToolCallFunctionArguments")] | None = None


class ToolCall(GoStruct):
    go_type: ClassVar[str] = "api.ToolCall"
    id: String = None
    function: ToolCallFunction | None = None


class Message(GoStruct):
    """api.Message decodes itself (to lower-case the role): Go names its fields from the request."""

    go_type: ClassVar[str] = "api.Message"
    role: Annotated[String, doc(description="system, user, assistant or tool (lower-cased)")] = None
    content: String = None
    thinking: String = None
    images: Images = None
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
    """What /api/generate and /api/chat share (``request_fields.SharedFields`` reads it)."""

    required: ClassVar[tuple[str, ...]] = ("model",)
    model: String = None
    stream: Bool = None
    format: Annotated[Any, FORMAT] = None
    keep_alive: Annotated[Any, KEEP_ALIVE] = None
    options: Annotated[Any, OPTIONS] = None
    think: Annotated[Any, THINK] = None
    truncate: Bool = None
    shift: Bool = None
    logprobs: Bool = None
    top_logprobs: Annotated[Int, TOP_LOGPROBS] = None
    debug_render_only: Annotated[Bool, doc(description="return the rendered prompt, generate nothing")] = msgspec.field(
        name="_debug_render_only", default=None
    )


class GenerateRequest(GenerationRequest):
    go_name: ClassVar[str | None] = "GenerateRequest"
    prompt: String = None
    suffix: String = None
    system: String = None
    template: Annotated[String, doc(description="a Go template; parse and execution errors are 500s")] = None
    context: Annotated[Annotated[list[GoInt], go("[]int")] | None, doc(description="deprecated")] = None
    raw: Bool = None
    images: Images = None


class ChatRequest(GenerationRequest):
    go_name: ClassVar[str | None] = "ChatRequest"
    messages: Annotated[list[Message], go("[]api.Message")] | None = None
    tools: Annotated[list[Tool], go("api.Tools")] | None = None


class EmbedRequest(GoStruct):
    go_name: ClassVar[str | None] = "EmbedRequest"
    required: ClassVar[tuple[str, ...]] = ("model",)
    model: String = None
    input: Annotated[Any, doc(anyOf=[STRING, STRINGS])] = None
    truncate: Bool = None
    dimensions: Int = None
    keep_alive: Annotated[Any, KEEP_ALIVE] = None
    options: Annotated[Any, OPTIONS] = None


class EmbeddingRequest(GoStruct):
    go_name: ClassVar[str | None] = "EmbeddingRequest"
    required: ClassVar[tuple[str, ...]] = ("model",)
    model: String = None
    prompt: String = None
    keep_alive: Annotated[Any, KEEP_ALIVE] = None
    options: Annotated[Any, OPTIONS] = None


class _Named(GoStruct):
    """A request naming one model: ``model``, or the deprecated ``name`` when it is empty."""

    model: String = None
    name: Annotated[String, doc(description="deprecated spelling of model")] = None

    @property
    def model_name(self) -> str:
        return self.model or self.name or ""


class ShowRequest(_Named):
    go_name: ClassVar[str | None] = "ShowRequest"
    verbose: Bool = None
    system: String = None
    template: Annotated[Any, doc(type="string")] = None  # unused here; left as the handler found it
    options: Annotated[Any, doc(type="object")] = None


class DeleteRequest(_Named):
    go_name: ClassVar[str | None] = "DeleteRequest"


class CopyRequest(GoStruct):
    go_name: ClassVar[str | None] = "CopyRequest"
    required: ClassVar[tuple[str, ...]] = ("source", "destination")
    source: String = None
    destination: String = None


class PullRequest(_Named):
    go_name: ClassVar[str | None] = "PullRequest"
    insecure: Bool = None
    stream: Bool = None
    username: Annotated[Any, doc(type="string")] = None  # unused here
    password: Annotated[Any, doc(type="string")] = None


class PushRequest(_Named):
    go_name: ClassVar[str | None] = "PushRequest"
    insecure: Bool = None
    stream: Bool = None


_CREATE_MESSAGE = {
    "type": "object",
    "properties": {"role": {"type": "string", "enum": ["system", "user", "assistant"]}, "content": STRING},
    "required": ["role"],
}


class CreateRequest(GoStruct):
    """Typed here: ``stream``. The rest is ``store.create.CreateRequest.from_json``'s to check, with its
    own messages (raw here, as its fields are ``Any``)."""

    go_name: ClassVar[str | None] = "CreateRequest"
    model: Annotated[Any, doc(type="string")] = None
    name: Annotated[Any, doc(type="string")] = None
    from_: Annotated[Any, doc(type="string")] = msgspec.field(name="from", default=None)
    files: Annotated[Any, doc(type="object", additionalProperties=STRING, description="file name -> sha256:<hex>")] = (
        None
    )
    adapters: Annotated[Any, doc(type="object", additionalProperties=STRING)] = None
    template: Annotated[Any, doc(type="string")] = None
    system: Annotated[Any, doc(type="string")] = None
    license: Annotated[Any, doc(anyOf=[STRING, STRINGS])] = None
    parameters: Annotated[Any, doc(type="object")] = None
    messages: Annotated[Any, doc(type="array", items=_CREATE_MESSAGE)] = None
    renderer: Annotated[Any, doc(type="string")] = None
    parser: Annotated[Any, doc(type="string")] = None
    requires: Annotated[Any, doc(type="string")] = None
    quantize: Annotated[Any, doc(type="string", description="q8_0, q4_K_S, q4_K_M, f16, bf16, f32")] = None
    quantization: Annotated[Any, doc(type="string", description="the older name of quantize")] = None
    draft_files: Annotated[Any, doc(type="object", additionalProperties=STRING, description="a DRAFT model's GGUF")] = (
        None
    )
    draft_quantize: Annotated[Any, doc(type="string", description="the DRAFT model's quantize")] = None
    stream: Bool = None


# ---------------------------------------------------------------- cllm's own: tokens and rerank

_TOKEN_IDS = doc(items={"type": "integer", "minimum": 0})
TokenIds = Annotated[Annotated[list[GoInt], go("[]int")] | None, _TOKEN_IDS]


class ModelCall(GoStruct):
    """A request for one model (``tokens._with_model`` reads it)."""

    required: ClassVar[tuple[str, ...]] = ("model",)
    model: String = None
    keep_alive: Annotated[Any, KEEP_ALIVE] = None
    options: Annotated[Any, OPTIONS] = None


class TokenizeRequest(ModelCall):
    """/api/tokenize."""

    go_name: ClassVar[str | None] = "TokenizeRequest"
    content: String = None


class DetokenizeRequest(ModelCall):
    """/api/detokenize."""

    go_name: ClassVar[str | None] = "DetokenizeRequest"
    tokens: TokenIds = None


class ServerTokenizeRequest(ModelCall):
    """/tokenize, as llama-server takes it (``content`` must be a string: its message, not Go's)."""

    go_name: ClassVar[str | None] = "TokenizeRequest"
    required: ClassVar[tuple[str, ...]] = ("model", "content")
    content: Annotated[Any, doc(type="string")] = None
    add_special: Bool = None
    parse_special: Bool = None
    with_pieces: Bool = None


class ServerDetokenizeRequest(ModelCall):
    """/detokenize, as llama-server takes it."""

    go_name: ClassVar[str | None] = "DetokenizeRequest"
    tokens: TokenIds = None


_DOCUMENT = {"type": "object", "properties": {"text": STRING}, "required": ["text"]}


class RerankRequest(ModelCall):
    """/api/rerank and /v1/rerank (Jina's and Cohere's shape); ``query`` and ``documents`` are
    checked by ``rerank`` with messages of its own."""

    go_name: ClassVar[str | None] = "RerankRequest"
    required: ClassVar[tuple[str, ...]] = ("model", "query", "documents")
    query: Annotated[Any, doc(type="string", minLength=1)] = None
    documents: Annotated[Any, doc(type="array", minItems=1, items={"anyOf": [STRING, _DOCUMENT]})] = None
    top_n: Annotated[Int, doc(minimum=1)] = None
    return_documents: Bool = None
