"""The OpenAPI 3.1 description of every route cllm serves, and ``GET /openapi.json`` serving it.

Request fields are typed as Ollama's Go request structs decode them: absent and ``null`` mean
"not set", so every optional field also takes ``null``; unknown fields are ignored
(``additionalProperties`` stays open). ``required`` lists what the handler refuses to go without
(its error is a 400 or 404 in the endpoint's error shape, not a schema failure).

Kept in Python, next to the route table it describes: tests/api/test_openapi.py checks that it is
a valid OpenAPI document and that its paths and methods are exactly those of ``routes.ROUTES``;
the schema fuzz (tests/schema_fuzz.py) generates its requests from it.
"""

from __future__ import annotations

import functools
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .. import OLLAMA_COMPAT_VERSION, __version__
from .encoders import JSONResponse
from .openapi_schemas import (
    ANY_OBJECT,
    RUNNING,
    SCHEMAS,
    SHOW_RESPONSE,
    STRING,
    TAG,
    V1_MODEL,
    VECTOR,
    Schema,
    nullable,
    object_schema,
    ref,
)

# ---------------------------------------------------------------- operations

_WHY = {
    "400": "Malformed body or a field of the wrong type (Go's decode error), or an invalid value",
    "401": "CLLM_API_KEY is set and the request carries none of its keys (Bearer token or x-api-key)",
    "403": "Foreign Origin (CORS) or, on a loopback server, a non-local Host header (empty body)",
    "404": "Model (or blob) not found",
    "413": "Body larger than CLLM_MAX_BODY_SIZE",
    "499": "The client went away while the request waited",
    "500": (
        "As in Ollama: a wrong-typed `options` value, an invalid `format`, a template error, a failed pull, "
        "or a model that fails to load"
    ),
    "501": "Not implemented by cllm",
    "503": "Queue full (OLLAMA_MAX_QUEUE) or the server is shutting down",
}


def _json(schema: Schema) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _errors(codes: str, error: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for code in codes.split():
        if code == "403":
            out[code] = {"description": _WHY[code]}
        else:
            out[code] = {"description": _WHY[code], "content": _json(ref(error))}
    return out


def _op(
    op_id: str,
    summary: str,
    tag: str,
    ok: dict[str, Any],
    errors: str,
    *,
    body: str | None = None,
    error: str = "Error",
    parameters: list[Schema] | None = None,
) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": op_id, "summary": summary, "tags": [tag]}
    if parameters:
        op["parameters"] = parameters
    if body is not None:
        op["requestBody"] = {"required": True, "content": _json(ref(body))}
        errors = f"{errors} 413"
    op["responses"] = ok | _errors(f"{errors} 401 403", error)
    return op


def _ok(description: str, content: dict[str, Any] | None = None, code: str = "200") -> dict[str, Any]:
    out: dict[str, Any] = {"description": description}
    if content:
        out["content"] = content
    return {code: out}


def _streamed(schema: str, stream_type: str, stream_description: str) -> dict[str, Any]:
    return {
        "application/json": {"schema": ref(schema)},
        stream_type: {"schema": {"type": "string", "description": stream_description}},
    }


_NDJSON = "application/x-ndjson"
_SSE = "text/event-stream"
_EMPTY = _ok("Done (empty body)")
_GENERATION_ERRORS = "400 404 499 500 503"
_DIGEST = {
    "name": "digest",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^sha256[:-][0-9a-fA-F]{64}$"},
}
_MODEL_PARAM = {"name": "model", "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}


_TRANSCRIPTION = object_schema(
    {
        "model": STRING,
        "file": {"type": "string", "format": "binary", "description": "the audio: WAV, MP3 or FLAC"},
        "response_format": {"type": "string", "description": "text for a plain-text answer; else JSON"},
        "language": STRING,
        "prompt": STRING,
    },
    ("model", "file"),
)


_CLOUD = object_schema(
    {
        "disabled": {"type": "boolean", "const": True},
        "source": {"enum": ["none", "env"], "description": "env: OLLAMA_NO_CLOUD is set as well"},
    },
    ("disabled", "source"),
)


def _public(op: dict[str, Any]) -> dict[str, Any]:
    """An operation that needs no key even when CLLM_API_KEY is set (the health check)."""
    responses = {code: r for code, r in op["responses"].items() if code != "401"}
    return op | {"security": [], "responses": responses}


def _get_and_head(get: dict[str, Any]) -> dict[str, Any]:
    head = get | {"operationId": get["operationId"] + "Head", "summary": get["summary"] + " (headers only)"}
    head["responses"] = {code: {"description": r["description"]} for code, r in get["responses"].items()}
    return {"get": get, "head": head}


def _model_op(op_id: str, summary: str, tag: str, response: Schema, body: str, error: str = "Error") -> dict[str, Any]:
    """A POST on a model (loaded on demand) answering one JSON object: tokens, rerank."""
    return {"post": _op(op_id, summary, tag, _ok("Done", _json(response)), _GENERATION_ERRORS, body=body, error=error)}


def _system_paths() -> dict[str, Any]:
    text = {"text/plain": {"schema": {"const": "Ollama is running"}}}
    exposition = {"text/plain": {"schema": STRING}, "application/openmetrics-text": {"schema": STRING}}
    return {
        "/": _get_and_head(_public(_op("root", "Health check", "system", _ok("Ollama is running", text), ""))),
        "/openapi.json": _get_and_head(
            _op("openapi", "This document", "system", _ok("OpenAPI 3.1", _json(ANY_OBJECT)), "")
        ),
        "/metrics": _get_and_head(
            _op(
                "metrics",
                "Prometheus metrics (vLLM's names for the Model Server Protocol's gauges)",
                "system",
                _ok("The exposition: Prometheus text, or OpenMetrics when the Accept header asks for it", exposition),
                "",
            )
        ),
        "/api/version": _get_and_head(
            _op(
                "version",
                "Ollama API version spoken",
                "system",
                _ok("Version", _json(object_schema({"version": STRING}, ("version",)))),
                "",
            )
        ),
    }


_RECOMMENDATION = object_schema(
    {
        "model": STRING,
        "description": STRING,
        "context_length": {"type": "integer"},
        "max_output_tokens": {"type": "integer"},
        "vram_bytes": {"type": "integer"},
    },
    ("model", "description"),
)


def _cloud_paths() -> dict[str, Any]:
    """Ollama's paths to ollama.com, answered as an Ollama with its cloud off answers them."""

    def refused(op_id: str, summary: str) -> dict[str, Any]:
        op = _op(op_id, summary, "cloud", {}, "400")
        op["requestBody"] = {"required": True, "content": _json(ANY_OBJECT)}
        op["responses"]["403"] = {"description": "Always, for a body: `ollama cloud is disabled: ...`"}
        op["responses"]["403"]["content"] = _json(ref("Error"))
        return {"post": op}

    recommendations = object_schema({"recommendations": {"type": "array", "items": _RECOMMENDATION}})
    return {
        "/api/status": _get_and_head(
            _op(
                "status",
                "Ollama's cloud switch: always off in cllm, which proxies nothing to ollama.com",
                "cloud",
                _ok("Status", _json(object_schema({"cloud": _CLOUD}, ("cloud",)))),
                "",
            )
        ),
        "/api/experimental/web_search": refused("webSearch", "Ollama's web search (ollama.com): refused"),
        "/api/experimental/web_fetch": refused("webFetch", "Ollama's web fetch (ollama.com): refused"),
        "/api/experimental/model-recommendations": _get_and_head(
            _op(
                "modelRecommendations",
                "Ollama's built-in model recommendations (for `ollama launch`)",
                "cloud",
                _ok("Recommendations", _json(recommendations)),
                "",
            )
        ),
    }


def _listed(items: Schema) -> dict[str, Any]:
    """A JSON body ``{"models": [item...]}`` (/api/tags, /api/ps)."""
    return _json(object_schema({"models": {"type": "array", "items": items}}, ("models",)))


def _model_paths() -> dict[str, Any]:
    """The store's models: listed, shown, copied, deleted."""
    return {
        "/api/tags": _get_and_head(_op("tags", "Models in the store", "models", _ok("Models", _listed(TAG)), "")),
        "/api/ps": _get_and_head(_op("ps", "Models in memory", "models", _ok("Models", _listed(RUNNING)), "")),
        "/api/show": {
            "post": _op(
                "show",
                "A model's details",
                "models",
                _ok("Details", _json(SHOW_RESPONSE)),
                "400 404",
                body="ShowRequest",
            )
        },
        "/api/copy": {"post": _op("copy", "Copy a model", "models", _EMPTY, "400 404", body="CopyRequest")},
        "/api/delete": {"delete": _op("delete", "Delete a model", "models", _EMPTY, "400 404", body="DeleteRequest")},
    }


def _blob_paths() -> dict[str, Any]:
    """/api/blobs/{digest}: whether a blob is there, and its upload."""
    exists = _op("blobExists", "Whether a blob is in the store", "models", _ok("Present"), "404", parameters=[_DIGEST])
    exists["responses"] = {
        "200": {"description": "Present"},
        "401": {"description": _WHY["401"]},
        "403": {"description": _WHY["403"]},
        "404": {"description": "Absent"},
    }
    upload = _op(
        "blobUpload",
        "Upload a blob (no body size limit)",
        "models",
        _ok("Stored", code="201") | _ok("Already present"),
        "400",
        parameters=[_DIGEST],
    )
    upload["requestBody"] = {
        "required": True,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
    return {"/api/blobs/{digest}": {"head": exists, "post": upload}}


def _transfer_paths() -> dict[str, Any]:
    """Models made or moved: create (and its blobs), pull, push."""
    statuses = _ok("Statuses", _streamed("ProgressResponse", _NDJSON, "one ProgressResponse per line"))
    return {
        "/api/create": {
            "post": _op(
                "create",
                "Create a model from another, or from uploaded GGUF blobs",
                "models",
                statuses,
                "400 404 500",
                body="CreateRequest",
            )
        },
        **_blob_paths(),
        "/api/pull": {
            "post": _op(
                "pull", "Pull a model from the Hugging Face Hub", "models", statuses, "400 404 500", body="PullRequest"
            )
        },
        "/api/push": {
            "post": _op("push", "Not supported by cllm", "models", {}, "400 501", body="PushRequest"),
        },
    }


def _generation(
    op_id: str, summary: str, tag: str, ok: dict[str, Any], body: str, error: str = "Error"
) -> dict[str, Any]:
    """A POST that runs a model (loaded on demand): generation and embedding endpoints."""
    return {"post": _op(op_id, summary, tag, ok, _GENERATION_ERRORS, body=body, error=error)}


def _native_paths() -> dict[str, Any]:
    """Ollama's own generation and embedding endpoints."""
    embedding = _json(object_schema({"embedding": VECTOR}, ("embedding",)))
    return {
        "/api/generate": _generation(
            "generate",
            "Complete a prompt",
            "inference",
            _ok("Completion", _streamed("GenerateResponse", _NDJSON, "one GenerateResponse per line")),
            "GenerateRequest",
        ),
        "/api/chat": _generation(
            "chat",
            "Answer a conversation",
            "inference",
            _ok("Reply", _streamed("ChatResponse", _NDJSON, "one ChatResponse per line")),
            "ChatRequest",
        ),
        "/api/embed": _generation(
            "embed",
            "Normalised embeddings of one or more inputs",
            "inference",
            _ok("Vectors", _json(ref("EmbedResponse"))),
            "EmbedRequest",
        ),
        "/api/embeddings": _generation(
            "embeddings", "One raw embedding (legacy)", "inference", _ok("Vector", embedding), "EmbeddingRequest"
        ),
    }


# Tokens and rerank, one JSON object each way: path, operation id, summary, tag, response, body, error.
_MODEL_OPS: tuple[tuple[str, str, str, str, Schema, str, str], ...] = (
    (
        "/api/tokenize",
        "tokenize",
        "A text's token ids in a model's vocabulary (no BOS added; special tokens parsed)",
        "inference",
        ref("TokenizeResponse"),
        "TokenizeRequest",
        "Error",
    ),
    (
        "/api/detokenize",
        "detokenize",
        "The text of token ids (special tokens written out)",
        "inference",
        ref("DetokenizeResponse"),
        "DetokenizeRequest",
        "Error",
    ),
    (
        "/api/rerank",
        "rerank",
        "Scores of documents for a query, best first (a reranker model)",
        "inference",
        ref("ApiRerankResponse"),
        "RerankRequest",
        "Error",
    ),
    (
        "/rerank",
        "serverRerank",
        "Jina/Cohere rerank, as llama-server serves it",
        "llama-server",
        ref("RerankResponse"),
        "RerankRequest",
        "Error",
    ),
    (
        "/v1/rerank",
        "openaiRerank",
        "Jina/Cohere rerank (LangChain, LlamaIndex, LiteLLM rerankers)",
        "openai",
        ref("RerankResponse"),
        "RerankRequest",
        "OpenAIError",
    ),
    (
        "/v2/rerank",
        "cohereRerank",
        "Cohere's v2 rerank path (the cohere SDK's ClientV2, LangChain's CohereRerank)",
        "cohere",
        ref("RerankResponse"),
        "RerankRequest",
        "Error",
    ),
    (
        "/tokenize",
        "serverTokenize",
        "llama-server's /tokenize, on the named model",
        "llama-server",
        ref("ServerTokenizeResponse"),
        "ServerTokenizeRequest",
        "Error",
    ),
    (
        "/detokenize",
        "serverDetokenize",
        "llama-server's /detokenize, on the named model",
        "llama-server",
        object_schema({"content": STRING}, ("content",)),
        "ServerDetokenizeRequest",
        "Error",
    ),
)


def _model_op_paths() -> dict[str, Any]:
    return {
        path: _model_op(op, summary, tag, response, body, error)
        for path, op, summary, tag, response, body, error in _MODEL_OPS
    }


def _openai_generation_paths() -> dict[str, Any]:
    """/v1's chat, completions, embeddings and responses."""
    return {
        "/v1/chat/completions": _generation(
            "openaiChatCompletions",
            "OpenAI chat completions",
            "openai",
            _ok("Completion", _streamed("ChatCompletion", _SSE, "chat.completion.chunk events, then [DONE]")),
            "ChatCompletionRequest",
            "OpenAIError",
        ),
        "/v1/completions": _generation(
            "openaiCompletions",
            "OpenAI completions (raw prompt)",
            "openai",
            _ok("Completion", _streamed("TextCompletion", _SSE, "text_completion events, then [DONE]")),
            "CompletionRequest",
            "OpenAIError",
        ),
        "/v1/embeddings": _generation(
            "openaiEmbeddings",
            "OpenAI embeddings",
            "openai",
            _ok("Vectors", _json(ref("OpenAIEmbeddingList"))),
            "OpenAIEmbeddingRequest",
            "OpenAIError",
        ),
        "/v1/responses": _generation(
            "openaiResponses",
            "OpenAI Responses API (stateless)",
            "openai",
            _ok("Response", _streamed("Response", _SSE, "typed response.* events")),
            "ResponsesRequest",
            "OpenAIError",
        ),
    }


def _transcription_paths() -> dict[str, Any]:
    """/v1/audio/transcriptions: a multipart form in, a transcript (JSON or text) out."""
    transcript = _json(object_schema({"text": STRING}, ("text",)))
    transcript |= {"text/plain": {"schema": {"type": "string", "description": "response_format=text"}}}
    post = _op(
        "openaiTranscriptions",
        "OpenAI speech to text: the audio transcribed by a model that hears, as a chat (Ollama's)",
        "openai",
        _ok("The transcript", transcript),
        f"{_GENERATION_ERRORS} 413",
        error="OpenAIError",
    )
    post["requestBody"] = {"required": True, "content": {"multipart/form-data": {"schema": _TRANSCRIPTION}}}
    return {"/v1/audio/transcriptions": {"post": post}}


def _messages_and_models_paths() -> dict[str, Any]:
    """Anthropic's /v1/messages, then /v1's model list and one model."""
    listed = {"object": {"const": "list"}, "data": nullable({"type": "array", "items": V1_MODEL})}
    return {
        "/v1/messages": _generation(
            "anthropicMessages",
            "Anthropic Messages API",
            "anthropic",
            _ok("Message", _streamed("AnthropicMessage", _SSE, "message_start ... message_stop events")),
            "AnthropicMessagesRequest",
            "AnthropicError",
        ),
        "/v1/messages/count_tokens": _generation(
            "anthropicCountTokens",
            "Anthropic's count of a messages request's input tokens (max_tokens not needed)",
            "anthropic",
            _ok("Count", _json(object_schema({"input_tokens": {"type": "integer"}}, ("input_tokens",)))),
            "AnthropicMessagesRequest",
            "AnthropicError",
        ),
        "/v1/models": _get_and_head(
            _op(
                "openaiModels",
                "OpenAI model list",
                "openai",
                _ok("Models", _json(object_schema(listed, ("object", "data")))),
                "",
                error="OpenAIError",
            )
        ),
        "/v1/models/{model}": _get_and_head(
            _op(
                "openaiModel",
                "One OpenAI model",
                "openai",
                _ok("Model", _json(ref("OpenAIModel"))),
                "404",
                error="OpenAIError",
                parameters=[_MODEL_PARAM],
            )
        ),
    }


def _paths() -> dict[str, Any]:
    """Every path, in the document's order."""
    return (
        _system_paths()
        | _cloud_paths()
        | _model_paths()
        | _transfer_paths()
        | _native_paths()
        | _model_op_paths()
        | _openai_generation_paths()
        | _transcription_paths()
        | _messages_and_models_paths()
    )


_SECURITY_SCHEMES = {
    "bearer": {"type": "http", "scheme": "bearer", "description": "`Authorization: Bearer <key>`, a CLLM_API_KEY key"},
    "apiKey": {
        "type": "apiKey",
        "in": "header",
        "name": "x-api-key",
        "description": "A CLLM_API_KEY key, as the Anthropic SDK sends it",
    },
}


@functools.cache
def document() -> dict[str, Any]:
    """The whole OpenAPI 3.1 document (built once; callers must not mutate it)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "cllm",
            "version": __version__,
            "summary": f"Ollama's HTTP API (version {OLLAMA_COMPAT_VERSION}) and its OpenAI-compatible /v1 routes",
            "description": (
                'A drop-in Ollama server. Errors under /api are {"error": message}; under /v1 they are '
                'OpenAI\'s {"error": {"message", "type", "param", "code"}}. Unknown paths are 404 '
                "`404 page not found`, wrong methods 405 `405 method not allowed` (plain text). "
                "No key is needed unless CLLM_API_KEY is set; then every operation but GET|HEAD / needs one "
                "of its keys, as a Bearer token or in x-api-key, and answers 401 without it."
            ),
            "license": {"name": "MIT", "identifier": "MIT"},
        },
        "servers": [{"url": "http://127.0.0.1:11434"}],
        "paths": _paths(),
        "components": {"schemas": SCHEMAS, "securitySchemes": _SECURITY_SCHEMES},
        # Either header, or none at all while CLLM_API_KEY is unset (the default).
        "security": [{"bearer": []}, {"apiKey": []}, {}],
    }


async def openapi_json(request: Request) -> Response:
    return JSONResponse(document())
