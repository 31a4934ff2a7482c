"""The schemas of the OpenAPI document (``openapi``): every request and response body cllm serves,
in each dialect, as its components. The bodies the handlers decode into structs are generated
from them (``schemas.openapi.components``); the responses are written here."""

from __future__ import annotations

from typing import Any

from .schemas import anthropic, ollama, openai
from .schemas.go import GoStruct
from .schemas.openapi import Schema, components, nullable


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def object_schema(properties: dict[str, Schema], required: tuple[str, ...] = (), **extra: Any) -> Schema:
    out: Schema = {"type": "object", "properties": properties}
    if required:
        out["required"] = list(required)
    return out | extra


def _optional(properties: dict[str, Schema], required: tuple[str, ...] = ()) -> dict[str, Schema]:
    """Every property but the required ones also takes null."""
    return {k: (v if k in required else nullable(v)) for k, v in properties.items()}


STRING: Schema = {"type": "string"}
BOOL: Schema = {"type": "boolean"}
INT: Schema = {"type": "integer"}
NUMBER: Schema = {"type": "number"}
ANY_OBJECT: Schema = {"type": "object"}
STRINGS: Schema = {"type": "array", "items": STRING}
NANOSECONDS: Schema = {"type": "integer", "minimum": 0, "description": "nanoseconds"}

# ---------------------------------------------------------------- options: a free map, no struct

_OPTIONS = object_schema(
    _optional(
        {
            "num_keep": INT,
            "seed": INT,
            "num_predict": INT,
            "top_k": INT,
            "top_p": NUMBER,
            "min_p": NUMBER,
            "typical_p": NUMBER,
            "repeat_last_n": {"type": "integer", "minimum": -1},
            "temperature": NUMBER,
            "repeat_penalty": NUMBER,
            "presence_penalty": NUMBER,
            "frequency_penalty": NUMBER,
            "stop": {"anyOf": [STRINGS, STRING]},
            "num_ctx": INT,
            "num_batch": INT,
            "num_gpu": INT,
            "main_gpu": INT,
            "use_mmap": BOOL,
            "deterministic": BOOL,
            "num_thread": INT,
            "draft_num_predict": {"type": "integer", "description": "a DRAFT model's tokens a step (not used by cllm)"},
            "grammar": {"type": "string", "description": "a GBNF grammar the output must match (not with format)"},
            "dry_multiplier": {"type": "number", "minimum": 0, "description": "DRY's strength; 0 (default) is off"},
            "dry_base": {"type": "number", "minimum": 1, "description": "DRY's base (1.75)"},
            "dry_allowed_length": {"type": "integer", "minimum": 0, "description": "repeats DRY lets pass (2)"},
            "dry_penalty_last_n": {"type": "integer", "minimum": -1, "description": "DRY's window; -1 (default): all"},
            "dry_sequence_breakers": {"type": "array", "items": STRING, "minItems": 1},
            "xtc_probability": {"type": "number", "minimum": 0, "maximum": 1, "description": "XTC; 0 (default) is off"},
            "xtc_threshold": {"type": "number", "minimum": 0, "maximum": 1, "description": "XTC's threshold (0.1)"},
        }
    ),
    description=(
        "Sampling and load options (Ollama's api.Options, and llama-server's grammar, DRY and XTC). Unknown "
        'keys are ignored; a value of the wrong type is a 500 `option "KEY" must be of type ...`, as in Ollama; '
        "a sampler value out of range is a 400."
    ),
)

# ---------------------------------------------------------------- native responses

# shapes.TRUNCATED: present only when the prompt was cut to fit the context.
_TRUNCATED = {
    "truncated_prompt_tokens": {
        "type": "integer",
        "minimum": 1,
        "description": "Prompt tokens cut to fit the context (oldest turns, then the middle); absent when none",
    }
}
_METRICS = {
    **_TRUNCATED,
    "total_duration": NANOSECONDS,
    "load_duration": NANOSECONDS,
    "prompt_eval_count": INT,
    "prompt_eval_duration": NANOSECONDS,
    "eval_count": INT,
    "eval_duration": NANOSECONDS,
}
_LOGPROBS = {"type": "array", "items": ANY_OBJECT}
_DONE_REASON = {"type": "string", "description": "stop, length, load or unload"}
_GENERATE_RESPONSE = object_schema(
    {
        "model": STRING,
        "created_at": {"type": "string", "format": "date-time"},
        "response": STRING,
        "thinking": STRING,
        "done": BOOL,
        "done_reason": _DONE_REASON,
        "context": {"type": "array", "items": INT},
        "logprobs": _LOGPROBS,
        **_METRICS,
    },
    ("created_at", "response", "done"),
)
_CHAT_RESPONSE = object_schema(
    {
        "model": STRING,
        "created_at": {"type": "string", "format": "date-time"},
        "message": object_schema(
            {
                "role": {"const": "assistant"},
                "content": STRING,
                "thinking": STRING,
                "tool_calls": {"type": "array", "items": ref("ToolCall")},
            },
            ("role", "content"),
        ),
        "done": BOOL,
        "done_reason": _DONE_REASON,
        "logprobs": _LOGPROBS,
        **_METRICS,
    },
    ("created_at", "message", "done"),
)
VECTOR = {"type": "array", "items": NUMBER}
_EMBED_RESPONSE = object_schema(
    {
        "model": STRING,
        "embeddings": {"type": "array", "items": VECTOR},
        "total_duration": NANOSECONDS,
        "load_duration": NANOSECONDS,
        "prompt_eval_count": INT,
    },
    ("embeddings",),
)
_DETAILS = object_schema(
    {
        "parent_model": STRING,
        "format": STRING,
        "family": STRING,
        "families": nullable(STRINGS),
        "parameter_size": STRING,
        "quantization_level": STRING,
        "context_length": INT,
        "embedding_length": INT,
    }
)
TAG = object_schema(
    {
        "name": STRING,
        "model": STRING,
        "modified_at": STRING,
        "size": INT,
        "digest": STRING,
        "details": ref("ModelDetails"),
        "capabilities": STRINGS,
        "broken": STRING,
    },
    ("name", "model", "modified_at", "size", "digest", "details"),
)
RUNNING = object_schema(
    {
        "name": STRING,
        "model": STRING,
        "size": INT,
        "size_vram": INT,
        "digest": STRING,
        "details": ref("ModelDetails"),
        "expires_at": STRING,
        "context_length": INT,
        # cllm's: slots, and requests in them or queued for one (Ollama's clients ignore them).
        "num_parallel": INT,
        "requests_running": INT,
        "requests_queued": INT,
    },
    ("name", "model", "size", "size_vram", "digest", "expires_at"),
)
SHOW_RESPONSE = object_schema(
    {
        "license": STRING,
        "modelfile": STRING,
        "parameters": STRING,
        "template": STRING,
        "system": STRING,
        "renderer": STRING,
        "parser": STRING,
        "requires": STRING,
        "details": ref("ModelDetails"),
        "messages": {"type": "array", "items": ANY_OBJECT},
        "model_info": ANY_OBJECT,
        "capabilities": STRINGS,
        "modified_at": STRING,
        "tensors": {"type": "array", "items": ANY_OBJECT},
    },
    ("model_info",),
)
_PROGRESS = object_schema(
    {"status": STRING, "digest": STRING, "total": INT, "completed": INT},
    description="One status of a pull or create; a failure after the first line is a final {error} line.",
)

# ---------------------------------------------------------------- OpenAI responses

_USAGE = object_schema(
    {"prompt_tokens": INT, "completion_tokens": INT, "total_tokens": INT, **_TRUNCATED},
    ("prompt_tokens", "total_tokens"),
)
_CHAT_COMPLETION = object_schema(
    {
        "id": STRING,
        "object": {"const": "chat.completion"},
        "created": INT,
        "model": STRING,
        "system_fingerprint": STRING,
        "choices": {
            "type": "array",
            "items": object_schema(
                {
                    "index": INT,
                    "message": object_schema(
                        {
                            "role": STRING,
                            "content": STRING,
                            "reasoning": STRING,
                            "tool_calls": {"type": "array", "items": ANY_OBJECT},
                        },
                        ("role", "content"),
                    ),
                    "finish_reason": {"type": "string", "enum": ["stop", "length", "tool_calls"]},
                },
                ("index", "message", "finish_reason"),
            ),
        },
        "usage": ref("Usage"),
    },
    ("id", "object", "created", "model", "choices", "usage"),
)
_TEXT_COMPLETION = object_schema(
    {
        "id": STRING,
        "object": {"const": "text_completion"},
        "created": INT,
        "model": STRING,
        "choices": {
            "type": "array",
            "items": object_schema({"text": STRING, "index": INT, "finish_reason": STRING}, ("text", "index")),
        },
        "usage": ref("Usage"),
    },
    ("id", "object", "created", "model", "choices"),
)
_V1_EMBEDDINGS = object_schema(
    {
        "object": {"const": "list"},
        "data": {
            "type": "array",
            "items": object_schema(
                {"object": {"const": "embedding"}, "embedding": {"anyOf": [VECTOR, STRING]}, "index": INT},
                ("object", "embedding", "index"),
            ),
        },
        "model": STRING,
        "usage": object_schema({"prompt_tokens": INT, "total_tokens": INT}),
    },
    ("object", "data", "model"),
)
_RESPONSE_OBJECT = object_schema(
    {
        "id": STRING,
        "object": {"const": "response"},
        "created_at": INT,
        "model": STRING,
        "status": {"type": "string", "enum": ["completed", "incomplete", "in_progress"]},
        "output": {"type": "array", "items": ANY_OBJECT},
        "usage": nullable(ANY_OBJECT),
    },
    ("id", "object", "model", "status", "output"),
)
V1_MODEL = object_schema(
    {"id": STRING, "object": {"const": "model"}, "created": INT, "owned_by": STRING},
    ("id", "object", "created", "owned_by"),
)

# ---------------------------------------------------------------- errors

_OLLAMA_ERROR = object_schema(
    {"error": STRING},
    ("error",),
    description="Every /api error: Ollama's {\"error\": message}, with Ollama's exact strings.",
)
_OPENAI_ERROR = object_schema(
    {
        "error": object_schema(
            {
                "message": STRING,
                "type": {"type": "string", "enum": ["invalid_request_error", "not_found_error", "api_error"]},
                "param": {"type": "null"},
                "code": {"type": "null"},
            },
            ("message", "type"),
        )
    },
    ("error",),
    description="Every /v1 error, as OpenAI (and Ollama's middleware) shape it.",
)

_ANTHROPIC_MESSAGE = object_schema(
    {
        "id": STRING,
        "type": {"const": "message"},
        "role": {"const": "assistant"},
        "model": STRING,
        "content": {"type": "array", "items": object_schema({"type": STRING}, ("type",))},
        "stop_reason": nullable(STRING),
        "stop_sequence": nullable(STRING),
        "usage": object_schema({"input_tokens": INT, "output_tokens": INT, **_TRUNCATED}),
    },
    ("id", "type", "role", "content"),
)
_ANTHROPIC_ERROR = object_schema(
    {
        "type": {"const": "error"},
        "error": object_schema({"type": STRING, "message": STRING}, ("type", "message")),
        "request_id": {"type": "string", "pattern": "^req_[0-9a-f]{24}$"},
    },
    ("type", "error", "request_id"),
    description="Every /v1/messages error, as Anthropic's API (and its SDK) shape it; a fresh request id, as Ollama's.",
)

# ---------------------------------------------------------------- tokens (api/tokens.py)

_TOKEN_IDS = {"type": "array", "items": {"type": "integer", "minimum": 0}}
_NATIVE_DURATIONS = {"model": STRING, "total_duration": NANOSECONDS, "load_duration": NANOSECONDS}
_TOKENIZE_RESPONSE = object_schema({"tokens": _TOKEN_IDS, **_NATIVE_DURATIONS}, ("tokens",))
_DETOKENIZE_RESPONSE = object_schema({"content": STRING, **_NATIVE_DURATIONS}, ("content",))
_PIECE = object_schema({"id": INT, "piece": {"anyOf": [STRING, {"type": "array", "items": INT}]}}, ("id", "piece"))
_SERVER_TOKENIZE_RESPONSE = object_schema(
    {"tokens": {"type": "array", "items": {"anyOf": [INT, _PIECE]}}},
    ("tokens",),
    description="ids, or with_pieces: {id, piece} (piece as text, or its bytes when not UTF-8)",
)

# ---------------------------------------------------------------- rerank (api/rerank.py)

_RANK_RESULT = object_schema(
    {"index": INT, "relevance_score": NUMBER, "document": object_schema({"text": STRING})}, ("index", "relevance_score")
)
_RERANK_RESPONSE = object_schema(
    {
        "model": STRING,
        "object": {"const": "list"},
        "usage": object_schema({"prompt_tokens": INT, "total_tokens": INT}),
        "results": {"type": "array", "items": _RANK_RESULT},
    },
    ("results",),
    description="Best first, at most top_n",
)
_API_RERANK_RESPONSE = object_schema(
    {
        "results": {
            "type": "array",
            "items": object_schema(
                {"index": INT, "document": STRING, "relevance_score": NUMBER}, ("index", "relevance_score")
            ),
        },
        "prompt_eval_count": INT,
        **_NATIVE_DURATIONS,
    },
    ("results",),
)

# The request bodies the handlers decode, generated from their structs (api/schemas), by their names here.
_DECODED: dict[str, type[GoStruct]] = {
    "Message": ollama.Message,
    "ToolCall": ollama.ToolCall,
    "Tool": ollama.Tool,
    "GenerateRequest": ollama.GenerateRequest,
    "ChatRequest": ollama.ChatRequest,
    "EmbedRequest": ollama.EmbedRequest,
    "EmbeddingRequest": ollama.EmbeddingRequest,
    "ShowRequest": ollama.ShowRequest,
    "CopyRequest": ollama.CopyRequest,
    "DeleteRequest": ollama.DeleteRequest,
    "PullRequest": ollama.PullRequest,
    "PushRequest": ollama.PushRequest,
    "CreateRequest": ollama.CreateRequest,
    "OpenAIMessage": openai.Message,
    "ChatCompletionRequest": openai.ChatCompletionRequest,
    "CompletionRequest": openai.CompletionRequest,
    "OpenAIEmbeddingRequest": openai.EmbedRequest,
    "ResponsesRequest": openai.ResponsesRequest,
    "ResponsesTool": openai.ResponsesTool,  # recursive (a namespace holds tools): a component of its own
    "AnthropicMessagesRequest": anthropic.MessagesRequest,
    "AnthropicContentBlock": anthropic.ContentBlock,  # also what system's blocks are
    "TokenizeRequest": ollama.TokenizeRequest,
    "DetokenizeRequest": ollama.DetokenizeRequest,
    "ServerTokenizeRequest": ollama.ServerTokenizeRequest,
    "ServerDetokenizeRequest": ollama.ServerDetokenizeRequest,
    "RerankRequest": ollama.RerankRequest,
}

SCHEMAS: dict[str, Schema] = {
    "Options": _OPTIONS,
    "GenerateResponse": _GENERATE_RESPONSE,
    "ChatResponse": _CHAT_RESPONSE,
    "EmbedResponse": _EMBED_RESPONSE,
    "ModelDetails": _DETAILS,
    "ProgressResponse": _PROGRESS,
    "Usage": _USAGE,
    "ChatCompletion": _CHAT_COMPLETION,
    "TextCompletion": _TEXT_COMPLETION,
    "OpenAIEmbeddingList": _V1_EMBEDDINGS,
    "Response": _RESPONSE_OBJECT,
    "OpenAIModel": V1_MODEL,
    "Error": _OLLAMA_ERROR,
    "OpenAIError": _OPENAI_ERROR,
    "AnthropicMessage": _ANTHROPIC_MESSAGE,
    "AnthropicError": _ANTHROPIC_ERROR,
    "TokenizeResponse": _TOKENIZE_RESPONSE,
    "DetokenizeResponse": _DETOKENIZE_RESPONSE,
    "ServerTokenizeResponse": _SERVER_TOKENIZE_RESPONSE,
    "RerankResponse": _RERANK_RESPONSE,
    "ApiRerankResponse": _API_RERANK_RESPONSE,
    **components(_DECODED),
}
