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

Schema = dict[str, Any]


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(schema: Schema) -> Schema:
    """``schema`` or null: a Go pointer, slice, map or zero value that JSON null leaves unset."""
    if "type" in schema and isinstance(schema["type"], str):
        return schema | {"type": [schema["type"], "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def _object(properties: dict[str, Schema], required: tuple[str, ...] = (), **extra: Any) -> Schema:
    out: Schema = {"type": "object", "properties": properties}
    if required:
        out["required"] = list(required)
    return out | extra


def _optional(properties: dict[str, Schema], required: tuple[str, ...] = ()) -> dict[str, Schema]:
    """Every property but the required ones also takes null."""
    return {k: (v if k in required else _nullable(v)) for k, v in properties.items()}


def _request(properties: dict[str, Schema], required: tuple[str, ...] = ()) -> Schema:
    return _object(_optional(properties, required), required)


STRING: Schema = {"type": "string"}
BOOL: Schema = {"type": "boolean"}
INT: Schema = {"type": "integer"}
NUMBER: Schema = {"type": "number"}
ANY_OBJECT: Schema = {"type": "object"}
STRINGS: Schema = {"type": "array", "items": STRING}
NANOSECONDS: Schema = {"type": "integer", "minimum": 0, "description": "nanoseconds"}

# ---------------------------------------------------------------- shared request pieces

_OPTIONS = _object(
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
            "num_thread": INT,
        }
    ),
    description=(
        "Sampling and load options (Ollama's api.Options). Unknown keys are ignored; a value of the wrong "
        'type is a 500 `option "KEY" must be of type ...`, as in Ollama.'
    ),
)
_KEEP_ALIVE = {
    "anyOf": [NUMBER, STRING],
    "description": 'Seconds, or a Go duration ("5m", "-1s"); negative keeps the model loaded forever.',
}
_THINK = {"anyOf": [BOOL, {"type": "string", "enum": ["low", "medium", "high", "max"]}]}
_FORMAT = {
    "anyOf": [{"type": "string", "enum": ["json", ""]}, ANY_OBJECT],
    "description": (
        '"json" or a JSON Schema the output must follow. Any other value is a 500 `invalid format: ...`, '
        "as in Ollama; a schema beyond what a grammar can spell out is a 400."
    ),
}
_IMAGES = {"type": "array", "items": STRING, "description": "base64; cllm has no vision models (400)"}
_TOP_LOGPROBS = {"type": "integer", "minimum": 0, "maximum": 20}

_TOOL_CALL = _object(
    _optional(
        {
            "id": STRING,
            "function": _object(
                _optional({"index": INT, "name": STRING, "arguments": ANY_OBJECT}),
            ),
        }
    )
)
_TOOL = _object(
    _optional(
        {
            "type": STRING,
            "function": _object(
                _optional({"name": STRING, "description": STRING, "parameters": ANY_OBJECT}),
            ),
        }
    )
)
_MESSAGE = _object(
    _optional(
        {
            "role": {"type": "string", "description": "system, user, assistant or tool (lower-cased)"},
            "content": STRING,
            "thinking": STRING,
            "images": _IMAGES,
            "tool_calls": {"type": "array", "items": _ref("ToolCall")},
            "tool_name": STRING,
            "tool_call_id": STRING,
        }
    )
)

# ---------------------------------------------------------------- native requests

_GENERATE_REQUEST = _request(
    {
        "model": STRING,
        "prompt": STRING,
        "suffix": STRING,
        "system": STRING,
        "template": {"type": "string", "description": "a Go template; parse and execution errors are 500s"},
        "context": {"type": "array", "items": INT, "description": "deprecated"},
        "stream": BOOL,
        "raw": BOOL,
        "format": _FORMAT,
        "keep_alive": _KEEP_ALIVE,
        "images": _IMAGES,
        "options": _ref("Options"),
        "think": _THINK,
        "truncate": BOOL,
        "shift": BOOL,
        "logprobs": BOOL,
        "top_logprobs": _TOP_LOGPROBS,
    },
    ("model",),
)
_CHAT_REQUEST = _request(
    {
        "model": STRING,
        "messages": {"type": "array", "items": _ref("Message")},
        "stream": BOOL,
        "format": _FORMAT,
        "keep_alive": _KEEP_ALIVE,
        "tools": {"type": "array", "items": _ref("Tool")},
        "options": _ref("Options"),
        "think": _THINK,
        "truncate": BOOL,
        "shift": BOOL,
        "logprobs": BOOL,
        "top_logprobs": _TOP_LOGPROBS,
    },
    ("model",),
)
_EMBED_REQUEST = _request(
    {
        "model": STRING,
        "input": {"anyOf": [STRING, STRINGS]},
        "truncate": BOOL,
        "dimensions": {"type": "integer", "minimum": 1},
        "keep_alive": _KEEP_ALIVE,
        "options": _ref("Options"),
    },
    ("model",),
)
_EMBEDDINGS_REQUEST = _request(
    {"model": STRING, "prompt": STRING, "keep_alive": _KEEP_ALIVE, "options": _ref("Options")}, ("model",)
)
_SHOW_REQUEST = _request(
    {
        "model": STRING,
        "name": {"type": "string", "description": "deprecated spelling of model"},
        "verbose": BOOL,
        "system": STRING,
        "template": STRING,
        "options": ANY_OBJECT,
    }
)
_COPY_REQUEST = _request({"source": STRING, "destination": STRING}, ("source", "destination"))
_DELETE_REQUEST = _request({"model": STRING, "name": STRING})
_PULL_REQUEST = _request(
    {"model": STRING, "name": STRING, "insecure": BOOL, "stream": BOOL, "username": STRING, "password": STRING}
)
_PUSH_REQUEST = _request({"model": STRING, "name": STRING, "insecure": BOOL, "stream": BOOL})
_CREATE_REQUEST = _request(
    {
        "model": STRING,
        "name": STRING,
        "from": STRING,
        "files": {"type": "object", "additionalProperties": STRING, "description": "file name -> sha256:<hex>"},
        "adapters": {"type": "object", "additionalProperties": STRING},
        "template": STRING,
        "system": STRING,
        "license": {"anyOf": [STRING, STRINGS]},
        "parameters": ANY_OBJECT,
        "messages": {
            "type": "array",
            "items": _object(
                {"role": {"type": "string", "enum": ["system", "user", "assistant"]}, "content": STRING}, ("role",)
            ),
        },
        "quantize": {"type": "string", "description": "not supported (400)"},
        "quantization": STRING,
        "stream": BOOL,
    }
)

# ---------------------------------------------------------------- native responses

_METRICS = {
    "total_duration": NANOSECONDS,
    "load_duration": NANOSECONDS,
    "prompt_eval_count": INT,
    "prompt_eval_duration": NANOSECONDS,
    "eval_count": INT,
    "eval_duration": NANOSECONDS,
}
_LOGPROBS = {"type": "array", "items": ANY_OBJECT}
_DONE_REASON = {"type": "string", "description": "stop, length, load or unload"}
_GENERATE_RESPONSE = _object(
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
_CHAT_RESPONSE = _object(
    {
        "model": STRING,
        "created_at": {"type": "string", "format": "date-time"},
        "message": _object(
            {
                "role": {"const": "assistant"},
                "content": STRING,
                "thinking": STRING,
                "tool_calls": {"type": "array", "items": _ref("ToolCall")},
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
_VECTOR = {"type": "array", "items": NUMBER}
_EMBED_RESPONSE = _object(
    {
        "model": STRING,
        "embeddings": {"type": "array", "items": _VECTOR},
        "total_duration": NANOSECONDS,
        "load_duration": NANOSECONDS,
        "prompt_eval_count": INT,
    },
    ("embeddings",),
)
_DETAILS = _object(
    {
        "parent_model": STRING,
        "format": STRING,
        "family": STRING,
        "families": _nullable(STRINGS),
        "parameter_size": STRING,
        "quantization_level": STRING,
    }
)
_TAG = _object(
    {
        "name": STRING,
        "model": STRING,
        "modified_at": STRING,
        "size": INT,
        "digest": STRING,
        "details": _ref("ModelDetails"),
    },
    ("name", "model", "modified_at", "size", "digest", "details"),
)
_RUNNING = _object(
    {
        "name": STRING,
        "model": STRING,
        "size": INT,
        "size_vram": INT,
        "digest": STRING,
        "details": _ref("ModelDetails"),
        "expires_at": STRING,
        "context_length": INT,
        # cllm's: slots, and requests in them or queued for one (Ollama's clients ignore them).
        "num_parallel": INT,
        "requests_running": INT,
        "requests_queued": INT,
    },
    ("name", "model", "size", "size_vram", "digest", "expires_at"),
)
_SHOW_RESPONSE = _object(
    {
        "license": STRING,
        "modelfile": STRING,
        "parameters": STRING,
        "template": STRING,
        "system": STRING,
        "details": _ref("ModelDetails"),
        "messages": {"type": "array", "items": ANY_OBJECT},
        "model_info": ANY_OBJECT,
        "capabilities": STRINGS,
        "modified_at": STRING,
        "tensors": {"type": "array", "items": ANY_OBJECT},
    },
    ("model_info",),
)
_PROGRESS = _object(
    {"status": STRING, "digest": STRING, "total": INT, "completed": INT},
    description="One status of a pull or create; a failure after the first line is a final {error} line.",
)

# ---------------------------------------------------------------- OpenAI requests

_STOP = {"anyOf": [STRING, STRINGS]}
_STREAM_OPTIONS = _object(_optional({"include_usage": BOOL}))
_CONTENT_PART = _object(
    {
        "type": {"type": "string", "enum": ["text", "image_url"]},
        "text": STRING,
        "image_url": {"anyOf": [STRING, _object({"url": STRING})]},
    },
    ("type",),
)
_V1_MESSAGE = _object(
    _optional(
        {
            "role": STRING,
            "content": {"anyOf": [STRING, {"type": "array", "items": _CONTENT_PART}]},
            "reasoning": STRING,
            "name": STRING,
            "tool_call_id": STRING,
            "tool_calls": {
                "type": "array",
                "items": _object(
                    {
                        "id": STRING,
                        "type": STRING,
                        "function": _object(
                            {"name": STRING, "arguments": {"type": "string", "description": "a JSON object"}}
                        ),
                    }
                ),
            },
        }
    )
)
_SAMPLING = {
    "temperature": NUMBER,
    "top_p": NUMBER,
    "seed": INT,
    "stop": _STOP,
    "frequency_penalty": NUMBER,
    "presence_penalty": NUMBER,
}
_EFFORT = {"type": "string", "enum": ["none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra"]}
_CHAT_COMPLETION_REQUEST = _request(
    {
        "model": STRING,
        "messages": {"type": "array", "items": _ref("OpenAIMessage"), "minItems": 1},
        "stream": BOOL,
        "stream_options": _STREAM_OPTIONS,
        "max_tokens": INT,
        "max_completion_tokens": INT,
        **_SAMPLING,
        "response_format": _object(
            _optional(
                {
                    "type": {"type": "string", "enum": ["text", "json_object", "json_schema"]},
                    "json_schema": _object(_optional({"name": STRING, "schema": ANY_OBJECT, "strict": BOOL})),
                }
            )
        ),
        "tools": {"type": "array", "items": _ref("Tool")},
        "reasoning_effort": _EFFORT,
        "reasoning": _object(_optional({"effort": _EFFORT})),
        "logprobs": BOOL,
        "top_logprobs": _TOP_LOGPROBS,
    },
    ("model", "messages"),
)
_COMPLETION_REQUEST = _request(
    {
        "model": STRING,
        "prompt": {"type": "string", "minLength": 1},
        "suffix": STRING,
        "max_tokens": INT,
        "stream": BOOL,
        "stream_options": _STREAM_OPTIONS,
        **_SAMPLING,
        "logprobs": {"type": "integer", "description": "accepted, not supported"},
    },
    ("model", "prompt"),
)
_V1_EMBEDDINGS_REQUEST = _request(
    {
        "model": STRING,
        "input": {"anyOf": [STRING, {"type": "array", "items": STRING, "minItems": 1}]},
        "dimensions": {"type": "integer", "minimum": 1},
        "encoding_format": {"type": "string", "enum": ["float", "base64"]},
    },
    ("model", "input"),
)
_RESPONSES_TEXT_PART = _object(
    {"type": {"type": "string", "enum": ["input_text", "output_text"]}, "text": STRING},
    ("type",),
)
_RESPONSES_FUNCTION = _object(
    _optional({"type": {"const": "function"}, "name": STRING, "description": STRING, "parameters": ANY_OBJECT}),
    ("type",),
)
_RESPONSES_TOOL = {
    "anyOf": [
        _RESPONSES_FUNCTION,
        _object(
            {
                "type": {"const": "namespace"},
                "name": STRING,
                "description": STRING,
                "tools": {"type": "array", "items": _RESPONSES_FUNCTION},
            },
            ("type", "name"),
            description="its functions, offered to the model as name.function",
        ),
        _object(
            {"type": STRING},
            ("type",),
            description="a tool that runs on OpenAI's side (web_search, ...): echoed, not offered to the model",
        ),
    ]
}
_RESPONSES_INPUT_ITEM = _object(
    _optional(
        {
            "type": {
                "type": "string",
                "enum": ["message", "function_call", "function_call_output", "reasoning", "web_search_call"],
                "description": "web_search_call items are history only (the message after one holds what it found)",
            },
            "role": {"type": "string", "enum": ["system", "developer", "user", "assistant"]},
            "content": {
                "anyOf": [
                    STRING,
                    {"type": "array", "items": _RESPONSES_TEXT_PART},
                ]
            },
            "name": STRING,
            "namespace": {"type": "string", "description": "a namespaced call's namespace: the model sees ns.name"},
            "call_id": STRING,
            "arguments": {"type": "string", "description": "a JSON object"},
            "output": {"anyOf": [STRING, {"type": "array", "items": _RESPONSES_TEXT_PART}]},
            "encrypted_content": {"type": "string", "description": "a reasoning item's text, as cllm returns it"},
            "summary": {"type": "array", "items": _object({"type": {"const": "summary_text"}, "text": STRING})},
        }
    )
)
_RESPONSES_REQUEST = _request(
    {
        "model": STRING,
        "input": {"anyOf": [STRING, {"type": "array", "items": _RESPONSES_INPUT_ITEM, "minItems": 1}]},
        "instructions": STRING,
        "stream": BOOL,
        "max_output_tokens": INT,
        **_SAMPLING,
        "tools": {"type": "array", "items": _RESPONSES_TOOL},
        "include": {
            "type": "array",
            "items": STRING,
            "description": "reasoning.encrypted_content is answered; other values are ignored",
        },
        "prompt_cache_key": {"type": "string", "description": "echoed; prompts are cached by their tokens"},
        "previous_response_id": {"type": "string", "description": "accepted, not looked up (stateless)"},
        "store": BOOL,
        "parallel_tool_calls": BOOL,
        "text": _object(
            _optional(
                {
                    "format": _object(
                        _optional(
                            {
                                "type": {"type": "string", "enum": ["text", "json_object", "json_schema"]},
                                "name": STRING,
                                "schema": ANY_OBJECT,
                                "strict": BOOL,
                            }
                        )
                    )
                }
            )
        ),
        "reasoning": _object(_optional({"effort": _EFFORT, "summary": STRING})),
        "truncation": STRING,
        "metadata": ANY_OBJECT,
    },
    ("model", "input"),
)

# ---------------------------------------------------------------- OpenAI responses

_USAGE = _object(
    {"prompt_tokens": INT, "completion_tokens": INT, "total_tokens": INT},
    ("prompt_tokens", "total_tokens"),
)
_CHAT_COMPLETION = _object(
    {
        "id": STRING,
        "object": {"const": "chat.completion"},
        "created": INT,
        "model": STRING,
        "system_fingerprint": STRING,
        "choices": {
            "type": "array",
            "items": _object(
                {
                    "index": INT,
                    "message": _object(
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
        "usage": _ref("Usage"),
    },
    ("id", "object", "created", "model", "choices", "usage"),
)
_TEXT_COMPLETION = _object(
    {
        "id": STRING,
        "object": {"const": "text_completion"},
        "created": INT,
        "model": STRING,
        "choices": {
            "type": "array",
            "items": _object({"text": STRING, "index": INT, "finish_reason": STRING}, ("text", "index")),
        },
        "usage": _ref("Usage"),
    },
    ("id", "object", "created", "model", "choices"),
)
_V1_EMBEDDINGS = _object(
    {
        "object": {"const": "list"},
        "data": {
            "type": "array",
            "items": _object(
                {"object": {"const": "embedding"}, "embedding": {"anyOf": [_VECTOR, STRING]}, "index": INT},
                ("object", "embedding", "index"),
            ),
        },
        "model": STRING,
        "usage": _object({"prompt_tokens": INT, "total_tokens": INT}),
    },
    ("object", "data", "model"),
)
_RESPONSE_OBJECT = _object(
    {
        "id": STRING,
        "object": {"const": "response"},
        "created_at": INT,
        "model": STRING,
        "status": {"type": "string", "enum": ["completed", "incomplete", "in_progress"]},
        "output": {"type": "array", "items": ANY_OBJECT},
        "usage": _nullable(ANY_OBJECT),
    },
    ("id", "object", "model", "status", "output"),
)
_V1_MODEL = _object(
    {"id": STRING, "object": {"const": "model"}, "created": INT, "owned_by": STRING},
    ("id", "object", "created", "owned_by"),
)

# ---------------------------------------------------------------- errors

_OLLAMA_ERROR = _object(
    {"error": STRING},
    ("error",),
    description="Every /api error: Ollama's {\"error\": message}, with Ollama's exact strings.",
)
_OPENAI_ERROR = _object(
    {
        "error": _object(
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

_ANTHROPIC_BLOCK = _object(
    {
        "type": {"type": "string", "enum": ["text", "image", "tool_use", "tool_result", "thinking"]},
        "text": STRING,
        "id": STRING,
        "name": STRING,
        "input": ANY_OBJECT,
        "tool_use_id": STRING,
        "content": {"anyOf": [STRING, {"type": "array", "items": ANY_OBJECT}]},
        "thinking": STRING,
        "source": ANY_OBJECT,
    },
    ("type",),
)
_ANTHROPIC_CONTENT = {"anyOf": [STRING, {"type": "array", "items": _ANTHROPIC_BLOCK}]}
_ANTHROPIC_REQUEST = _request(
    {
        "model": STRING,
        "max_tokens": {"type": "integer", "minimum": 1},
        "messages": {
            "type": "array",
            "minItems": 1,
            "items": _object(
                {"role": {"type": "string", "enum": ["user", "assistant"]}, "content": _ANTHROPIC_CONTENT},
                ("role", "content"),
            ),
        },
        "system": _ANTHROPIC_CONTENT,
        "stream": BOOL,
        "temperature": NUMBER,
        "top_p": NUMBER,
        "top_k": INT,
        "stop_sequences": STRINGS,
        "tools": {
            "type": "array",
            "items": _object(
                _optional({"name": STRING, "description": STRING, "input_schema": ANY_OBJECT}, ("name",)), ("name",)
            ),
        },
        "tool_choice": ANY_OBJECT,
        "thinking": _object(_optional({"type": STRING, "budget_tokens": INT})),
        "metadata": ANY_OBJECT,
    },
    ("model", "max_tokens", "messages"),
)
_ANTHROPIC_MESSAGE = _object(
    {
        "id": STRING,
        "type": {"const": "message"},
        "role": {"const": "assistant"},
        "model": STRING,
        "content": {"type": "array", "items": _object({"type": STRING}, ("type",))},
        "stop_reason": _nullable(STRING),
        "stop_sequence": _nullable(STRING),
        "usage": _object({"input_tokens": INT, "output_tokens": INT}),
    },
    ("id", "type", "role", "content"),
)
_ANTHROPIC_ERROR = _object(
    {"type": {"const": "error"}, "error": _object({"type": STRING, "message": STRING}, ("type", "message"))},
    ("type", "error"),
    description="Every /v1/messages error, as Anthropic's API (and its SDK) shape it.",
)

SCHEMAS: dict[str, Schema] = {
    "Options": _OPTIONS,
    "Message": _MESSAGE,
    "ToolCall": _TOOL_CALL,
    "Tool": _TOOL,
    "GenerateRequest": _GENERATE_REQUEST,
    "ChatRequest": _CHAT_REQUEST,
    "EmbedRequest": _EMBED_REQUEST,
    "EmbeddingRequest": _EMBEDDINGS_REQUEST,
    "ShowRequest": _SHOW_REQUEST,
    "CopyRequest": _COPY_REQUEST,
    "DeleteRequest": _DELETE_REQUEST,
    "PullRequest": _PULL_REQUEST,
    "PushRequest": _PUSH_REQUEST,
    "CreateRequest": _CREATE_REQUEST,
    "GenerateResponse": _GENERATE_RESPONSE,
    "ChatResponse": _CHAT_RESPONSE,
    "EmbedResponse": _EMBED_RESPONSE,
    "ModelDetails": _DETAILS,
    "ProgressResponse": _PROGRESS,
    "OpenAIMessage": _V1_MESSAGE,
    "ChatCompletionRequest": _CHAT_COMPLETION_REQUEST,
    "CompletionRequest": _COMPLETION_REQUEST,
    "OpenAIEmbeddingRequest": _V1_EMBEDDINGS_REQUEST,
    "ResponsesRequest": _RESPONSES_REQUEST,
    "Usage": _USAGE,
    "ChatCompletion": _CHAT_COMPLETION,
    "TextCompletion": _TEXT_COMPLETION,
    "OpenAIEmbeddingList": _V1_EMBEDDINGS,
    "Response": _RESPONSE_OBJECT,
    "OpenAIModel": _V1_MODEL,
    "Error": _OLLAMA_ERROR,
    "OpenAIError": _OPENAI_ERROR,
    "AnthropicMessagesRequest": _ANTHROPIC_REQUEST,
    "AnthropicMessage": _ANTHROPIC_MESSAGE,
    "AnthropicError": _ANTHROPIC_ERROR,
}

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
            out[code] = {"description": _WHY[code], "content": _json(_ref(error))}
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
        op["requestBody"] = {"required": True, "content": _json(_ref(body))}
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
        "application/json": {"schema": _ref(schema)},
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


def _public(op: dict[str, Any]) -> dict[str, Any]:
    """An operation that needs no key even when CLLM_API_KEY is set (the health check)."""
    responses = {code: r for code, r in op["responses"].items() if code != "401"}
    return op | {"security": [], "responses": responses}


def _get_and_head(get: dict[str, Any]) -> dict[str, Any]:
    head = get | {"operationId": get["operationId"] + "Head", "summary": get["summary"] + " (headers only)"}
    head["responses"] = {code: {"description": r["description"]} for code, r in get["responses"].items()}
    return {"get": get, "head": head}


def _paths() -> dict[str, Any]:
    text = {"text/plain": {"schema": {"const": "Ollama is running"}}}
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
                _ok(
                    "The exposition: Prometheus text, or OpenMetrics when the Accept header asks for it",
                    {
                        "text/plain": {"schema": STRING},
                        "application/openmetrics-text": {"schema": STRING},
                    },
                ),
                "",
            )
        ),
        "/api/version": _get_and_head(
            _op(
                "version",
                "Ollama API version spoken",
                "system",
                _ok("Version", _json(_object({"version": STRING}, ("version",)))),
                "",
            )
        ),
        "/api/tags": _get_and_head(
            _op(
                "tags",
                "Models in the store",
                "models",
                _ok("Models", _json(_object({"models": {"type": "array", "items": _TAG}}, ("models",)))),
                "",
            )
        ),
        "/api/ps": _get_and_head(
            _op(
                "ps",
                "Models in memory",
                "models",
                _ok("Models", _json(_object({"models": {"type": "array", "items": _RUNNING}}, ("models",)))),
                "",
            )
        ),
        "/api/show": {
            "post": _op(
                "show",
                "A model's details",
                "models",
                _ok("Details", _json(_SHOW_RESPONSE)),
                "400 404",
                body="ShowRequest",
            )
        },
        "/api/copy": {"post": _op("copy", "Copy a model", "models", _EMPTY, "400 404", body="CopyRequest")},
        "/api/delete": {"delete": _op("delete", "Delete a model", "models", _EMPTY, "400 404", body="DeleteRequest")},
        "/api/create": {
            "post": _op(
                "create",
                "Create a model from another, or from uploaded GGUF blobs",
                "models",
                _ok("Statuses", _streamed("ProgressResponse", _NDJSON, "one ProgressResponse per line")),
                "400 404 500",
                body="CreateRequest",
            )
        },
        "/api/blobs/{digest}": {
            "head": _op(
                "blobExists",
                "Whether a blob is in the store",
                "models",
                _ok("Present"),
                "404",
                parameters=[_DIGEST],
            )
            | {
                "responses": {
                    "200": {"description": "Present"},
                    "401": {"description": _WHY["401"]},
                    "403": {"description": _WHY["403"]},
                    "404": {"description": "Absent"},
                }
            },
            "post": _op(
                "blobUpload",
                "Upload a blob (no body size limit)",
                "models",
                _ok("Stored", code="201") | _ok("Already present"),
                "400",
                parameters=[_DIGEST],
            )
            | {
                "requestBody": {
                    "required": True,
                    "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
                }
            },
        },
        "/api/pull": {
            "post": _op(
                "pull",
                "Pull a model from the Hugging Face Hub",
                "models",
                _ok("Statuses", _streamed("ProgressResponse", _NDJSON, "one ProgressResponse per line")),
                "400 404 500",
                body="PullRequest",
            )
        },
        "/api/push": {
            "post": _op("push", "Not supported by cllm", "models", {}, "400 501", body="PushRequest"),
        },
        "/api/generate": {
            "post": _op(
                "generate",
                "Complete a prompt",
                "inference",
                _ok("Completion", _streamed("GenerateResponse", _NDJSON, "one GenerateResponse per line")),
                _GENERATION_ERRORS,
                body="GenerateRequest",
            )
        },
        "/api/chat": {
            "post": _op(
                "chat",
                "Answer a conversation",
                "inference",
                _ok("Reply", _streamed("ChatResponse", _NDJSON, "one ChatResponse per line")),
                _GENERATION_ERRORS,
                body="ChatRequest",
            )
        },
        "/api/embed": {
            "post": _op(
                "embed",
                "Normalised embeddings of one or more inputs",
                "inference",
                _ok("Vectors", _json(_ref("EmbedResponse"))),
                _GENERATION_ERRORS,
                body="EmbedRequest",
            )
        },
        "/api/embeddings": {
            "post": _op(
                "embeddings",
                "One raw embedding (legacy)",
                "inference",
                _ok("Vector", _json(_object({"embedding": _VECTOR}, ("embedding",)))),
                _GENERATION_ERRORS,
                body="EmbeddingRequest",
            )
        },
        "/v1/chat/completions": {
            "post": _op(
                "openaiChatCompletions",
                "OpenAI chat completions",
                "openai",
                _ok("Completion", _streamed("ChatCompletion", _SSE, "chat.completion.chunk events, then [DONE]")),
                _GENERATION_ERRORS,
                body="ChatCompletionRequest",
                error="OpenAIError",
            )
        },
        "/v1/completions": {
            "post": _op(
                "openaiCompletions",
                "OpenAI completions (raw prompt)",
                "openai",
                _ok("Completion", _streamed("TextCompletion", _SSE, "text_completion events, then [DONE]")),
                _GENERATION_ERRORS,
                body="CompletionRequest",
                error="OpenAIError",
            )
        },
        "/v1/embeddings": {
            "post": _op(
                "openaiEmbeddings",
                "OpenAI embeddings",
                "openai",
                _ok("Vectors", _json(_ref("OpenAIEmbeddingList"))),
                _GENERATION_ERRORS,
                body="OpenAIEmbeddingRequest",
                error="OpenAIError",
            )
        },
        "/v1/responses": {
            "post": _op(
                "openaiResponses",
                "OpenAI Responses API (stateless)",
                "openai",
                _ok("Response", _streamed("Response", _SSE, "typed response.* events")),
                _GENERATION_ERRORS,
                body="ResponsesRequest",
                error="OpenAIError",
            )
        },
        "/v1/messages": {
            "post": _op(
                "anthropicMessages",
                "Anthropic Messages API",
                "anthropic",
                _ok("Message", _streamed("AnthropicMessage", _SSE, "message_start ... message_stop events")),
                _GENERATION_ERRORS,
                body="AnthropicMessagesRequest",
                error="AnthropicError",
            )
        },
        "/v1/models": _get_and_head(
            _op(
                "openaiModels",
                "OpenAI model list",
                "openai",
                _ok(
                    "Models",
                    _json(
                        _object(
                            {"object": {"const": "list"}, "data": _nullable({"type": "array", "items": _V1_MODEL})},
                            ("object", "data"),
                        )
                    ),
                ),
                "",
                error="OpenAIError",
            )
        ),
        "/v1/models/{model}": _get_and_head(
            _op(
                "openaiModel",
                "One OpenAI model",
                "openai",
                _ok("Model", _json(_ref("OpenAIModel"))),
                "404",
                error="OpenAIError",
                parameters=[_MODEL_PARAM],
            )
        ),
    }


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
