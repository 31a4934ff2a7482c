"""The schemas of the OpenAPI document (``openapi``): every request and response body cllm serves,
in each dialect, as its components."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: Schema) -> Schema:
    """``schema`` or null: a Go pointer, slice, map or zero value that JSON null leaves unset."""
    if "type" in schema and isinstance(schema["type"], str):
        return schema | {"type": [schema["type"], "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def object_schema(properties: dict[str, Schema], required: tuple[str, ...] = (), **extra: Any) -> Schema:
    out: Schema = {"type": "object", "properties": properties}
    if required:
        out["required"] = list(required)
    return out | extra


def _optional(properties: dict[str, Schema], required: tuple[str, ...] = ()) -> dict[str, Schema]:
    """Every property but the required ones also takes null."""
    return {k: (v if k in required else nullable(v)) for k, v in properties.items()}


def _request(properties: dict[str, Schema], required: tuple[str, ...] = ()) -> Schema:
    return object_schema(_optional(properties, required), required)


STRING: Schema = {"type": "string"}
BOOL: Schema = {"type": "boolean"}
INT: Schema = {"type": "integer"}
NUMBER: Schema = {"type": "number"}
ANY_OBJECT: Schema = {"type": "object"}
STRINGS: Schema = {"type": "array", "items": STRING}
NANOSECONDS: Schema = {"type": "integer", "minimum": 0, "description": "nanoseconds"}

# ---------------------------------------------------------------- shared request pieces

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

_TOOL_CALL = object_schema(
    _optional(
        {
            "id": STRING,
            "function": object_schema(
                _optional({"index": INT, "name": STRING, "arguments": ANY_OBJECT}),
            ),
        }
    )
)
_TOOL = object_schema(
    _optional(
        {
            "type": STRING,
            "function": object_schema(
                _optional({"name": STRING, "description": STRING, "parameters": ANY_OBJECT}),
            ),
        }
    )
)
_MESSAGE = object_schema(
    _optional(
        {
            "role": {"type": "string", "description": "system, user, assistant or tool (lower-cased)"},
            "content": STRING,
            "thinking": STRING,
            "images": _IMAGES,
            "tool_calls": {"type": "array", "items": ref("ToolCall")},
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
        "options": ref("Options"),
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
        "messages": {"type": "array", "items": ref("Message")},
        "stream": BOOL,
        "format": _FORMAT,
        "keep_alive": _KEEP_ALIVE,
        "tools": {"type": "array", "items": ref("Tool")},
        "options": ref("Options"),
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
        "options": ref("Options"),
    },
    ("model",),
)
_EMBEDDINGS_REQUEST = _request(
    {"model": STRING, "prompt": STRING, "keep_alive": _KEEP_ALIVE, "options": ref("Options")}, ("model",)
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
            "items": object_schema(
                {"role": {"type": "string", "enum": ["system", "user", "assistant"]}, "content": STRING}, ("role",)
            ),
        },
        "quantize": {"type": "string", "description": "not supported (400)"},
        "quantization": STRING,
        "stream": BOOL,
    }
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

# ---------------------------------------------------------------- OpenAI requests

_STOP = {"anyOf": [STRING, STRINGS]}
_STREAM_OPTIONS = object_schema(_optional({"include_usage": BOOL}))
_CONTENT_PART = object_schema(
    {
        "type": {"type": "string", "enum": ["text", "image_url"]},
        "text": STRING,
        "image_url": {"anyOf": [STRING, object_schema({"url": STRING})]},
    },
    ("type",),
)
_V1_MESSAGE = object_schema(
    _optional(
        {
            "role": STRING,
            "content": {"anyOf": [STRING, {"type": "array", "items": _CONTENT_PART}]},
            "reasoning": STRING,
            "name": STRING,
            "tool_call_id": STRING,
            "tool_calls": {
                "type": "array",
                "items": object_schema(
                    {
                        "id": STRING,
                        "type": STRING,
                        "function": object_schema(
                            {"name": STRING, "arguments": {"type": "string", "description": "a JSON object"}}
                        ),
                    }
                ),
            },
        }
    )
)
_V1_OPTIONS = ref("Options") | {
    "description": "Ollama's options (the SDKs' extra_body); OpenAI's own fields win over them"
}
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
        "options": _V1_OPTIONS,
        "model": STRING,
        "messages": {"type": "array", "items": ref("OpenAIMessage"), "minItems": 1},
        "stream": BOOL,
        "stream_options": _STREAM_OPTIONS,
        "max_tokens": INT,
        "max_completion_tokens": INT,
        **_SAMPLING,
        "response_format": object_schema(
            _optional(
                {
                    "type": {"type": "string", "enum": ["text", "json_object", "json_schema"]},
                    "json_schema": object_schema(_optional({"name": STRING, "schema": ANY_OBJECT, "strict": BOOL})),
                }
            )
        ),
        "tools": {"type": "array", "items": ref("Tool")},
        "reasoning_effort": _EFFORT,
        "reasoning": object_schema(_optional({"effort": _EFFORT})),
        "logprobs": BOOL,
        "top_logprobs": _TOP_LOGPROBS,
    },
    ("model", "messages"),
)
_COMPLETION_REQUEST = _request(
    {
        "options": _V1_OPTIONS,
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
        "options": _V1_OPTIONS,
        "model": STRING,
        "input": {"anyOf": [STRING, {"type": "array", "items": STRING, "minItems": 1}]},
        "dimensions": {"type": "integer", "minimum": 1},
        "encoding_format": {"type": "string", "enum": ["float", "base64"]},
    },
    ("model", "input"),
)
_RESPONSES_TEXT_PART = object_schema(
    {"type": {"type": "string", "enum": ["input_text", "output_text"]}, "text": STRING},
    ("type",),
)
_RESPONSES_FUNCTION = object_schema(
    _optional({"type": {"const": "function"}, "name": STRING, "description": STRING, "parameters": ANY_OBJECT}),
    ("type",),
)
_RESPONSES_TOOL = {
    "anyOf": [
        _RESPONSES_FUNCTION,
        object_schema(
            {
                "type": {"const": "namespace"},
                "name": STRING,
                "description": STRING,
                "tools": {"type": "array", "items": _RESPONSES_FUNCTION},
            },
            ("type", "name"),
            description="its functions, offered to the model as name.function",
        ),
        object_schema(
            {"type": STRING},
            ("type",),
            description="a tool that runs on OpenAI's side (web_search, ...): echoed, not offered to the model",
        ),
    ]
}
_RESPONSES_INPUT_ITEM = object_schema(
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
            "summary": {"type": "array", "items": object_schema({"type": {"const": "summary_text"}, "text": STRING})},
        }
    )
)
_RESPONSES_REQUEST = _request(
    {
        "options": _V1_OPTIONS,
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
        "text": object_schema(
            _optional(
                {
                    "format": object_schema(
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
        "reasoning": object_schema(_optional({"effort": _EFFORT, "summary": STRING})),
        "truncation": STRING,
        "metadata": ANY_OBJECT,
    },
    ("model", "input"),
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

_ANTHROPIC_BLOCK = object_schema(
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
            "items": object_schema(
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
            "items": object_schema(
                _optional({"name": STRING, "description": STRING, "input_schema": ANY_OBJECT}, ("name",)), ("name",)
            ),
        },
        "tool_choice": ANY_OBJECT,
        "thinking": object_schema(_optional({"type": STRING, "budget_tokens": INT})),
        "metadata": ANY_OBJECT,
    },
    ("model", "max_tokens", "messages"),
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
    {"type": {"const": "error"}, "error": object_schema({"type": STRING, "message": STRING}, ("type", "message"))},
    ("type", "error"),
    description="Every /v1/messages error, as Anthropic's API (and its SDK) shape it.",
)

# ---------------------------------------------------------------- tokens (api/tokens.py)

_TOKEN_IDS = {"type": "array", "items": {"type": "integer", "minimum": 0}}
_TOKENIZE_REQUEST = _request(
    {"model": STRING, "content": STRING, "keep_alive": _KEEP_ALIVE, "options": ref("Options")}, ("model",)
)
_DETOKENIZE_REQUEST = _request(
    {"model": STRING, "tokens": _TOKEN_IDS, "keep_alive": _KEEP_ALIVE, "options": ref("Options")}, ("model",)
)
_NATIVE_DURATIONS = {"model": STRING, "total_duration": NANOSECONDS, "load_duration": NANOSECONDS}
_TOKENIZE_RESPONSE = object_schema({"tokens": _TOKEN_IDS, **_NATIVE_DURATIONS}, ("tokens",))
_DETOKENIZE_RESPONSE = object_schema({"content": STRING, **_NATIVE_DURATIONS}, ("content",))
_SERVER_TOKENIZE_REQUEST = _request(
    {"model": STRING, "content": STRING, "add_special": BOOL, "parse_special": BOOL, "with_pieces": BOOL},
    ("model", "content"),
)
_PIECE = object_schema({"id": INT, "piece": {"anyOf": [STRING, {"type": "array", "items": INT}]}}, ("id", "piece"))
_SERVER_TOKENIZE_RESPONSE = object_schema(
    {"tokens": {"type": "array", "items": {"anyOf": [INT, _PIECE]}}},
    ("tokens",),
    description="ids, or with_pieces: {id, piece} (piece as text, or its bytes when not UTF-8)",
)
_SERVER_DETOKENIZE_REQUEST = _request({"model": STRING, "tokens": _TOKEN_IDS}, ("model",))

# ---------------------------------------------------------------- rerank (api/rerank.py)

_RERANK_DOCUMENTS = {
    "type": "array",
    "minItems": 1,
    "items": {"anyOf": [STRING, object_schema({"text": STRING}, ("text",))]},
}
_RERANK_REQUEST = _request(
    {
        "model": STRING,
        "query": {"type": "string", "minLength": 1},
        "documents": _RERANK_DOCUMENTS,
        "top_n": {"type": "integer", "minimum": 1},
        "return_documents": BOOL,
        "keep_alive": _KEEP_ALIVE,
        "options": ref("Options"),
    },
    ("model", "query", "documents"),
)
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
    "OpenAIModel": V1_MODEL,
    "Error": _OLLAMA_ERROR,
    "OpenAIError": _OPENAI_ERROR,
    "AnthropicMessagesRequest": _ANTHROPIC_REQUEST,
    "AnthropicMessage": _ANTHROPIC_MESSAGE,
    "AnthropicError": _ANTHROPIC_ERROR,
    "TokenizeRequest": _TOKENIZE_REQUEST,
    "TokenizeResponse": _TOKENIZE_RESPONSE,
    "DetokenizeRequest": _DETOKENIZE_REQUEST,
    "DetokenizeResponse": _DETOKENIZE_RESPONSE,
    "ServerTokenizeRequest": _SERVER_TOKENIZE_REQUEST,
    "ServerTokenizeResponse": _SERVER_TOKENIZE_RESPONSE,
    "ServerDetokenizeRequest": _SERVER_DETOKENIZE_REQUEST,
    "RerankRequest": _RERANK_REQUEST,
    "RerankResponse": _RERANK_RESPONSE,
    "ApiRerankResponse": _API_RERANK_RESPONSE,
}
