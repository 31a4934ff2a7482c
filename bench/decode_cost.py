"""What decoding a short request costs, per endpoint: bytes to checked, typed values (no server, no model).

Times the decode step each handler runs before it looks for the model: the JSON parse, then the
typed decode (``api/schemas`` through each dialect's seam) and the checks that read its result.
Run it on two trees to compare, e.g. main's checked out elsewhere:

    .venv/bin/python bench/decode_cost.py                       # this tree
    PYTHONPATH=/tmp/main .venv/bin/python bench/decode_cost.py  # another tree, same interpreter

A tree without ``api/schemas`` (before issue 19) is timed through its hand-written field checks.
Prints microseconds per request, the median of ``--runs`` runs of ``--n`` decodes each.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

HI = [{"role": "user", "content": "Why is the sky blue?"}]
TOOL = {"type": "function", "function": {"name": "weather", "description": "d", "parameters": {"type": "object"}}}
BODIES: dict[str, dict[str, Any]] = {
    "/api/generate": {"model": "m", "prompt": "Why is the sky blue?", "stream": False, "options": {"num_predict": 8}},
    "/api/chat": {"model": "m", "messages": [{"role": "system", "content": "Be brief."}, *HI], "tools": [TOOL]},
    "/api/embed": {"model": "m", "input": ["a", "b"], "truncate": True},
    "/api/embeddings": {"model": "m", "prompt": "a"},
    "/api/show": {"model": "m", "verbose": False},
    "/api/copy": {"source": "m", "destination": "n"},
    "/api/delete": {"model": "m"},
    "/api/pull": {"model": "m", "insecure": False, "stream": False},
    "/api/push": {"model": "m", "stream": False},
    "/api/create": {"model": "m", "from": "n", "stream": False},
    "/v1/chat/completions": {"model": "m", "messages": HI, "max_tokens": 8, "temperature": 0.2, "stream": True},
    "/v1/completions": {"model": "m", "prompt": "Why", "max_tokens": 8, "stop": ["\n"]},
    "/v1/embeddings": {"model": "m", "input": "a", "encoding_format": "float"},
    "/v1/responses": {
        "model": "m",
        "input": "Why is the sky blue?",
        "max_output_tokens": 8,
        "tools": [TOOL["function"] | {"type": "function"}],
    },
    "/v1/messages": {"model": "m", "max_tokens": 8, "messages": HI, "system": "Be brief.", "temperature": 0.5},
    # The union parts (content blocks, parts, input items), a short agent turn of each.
    "/v1/chat/completions parts": {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Why?"}, {"type": "text", "text": "Go."}]}],
    },
    "/v1/responses items": {
        "model": "m",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List files."}]},
            {"type": "function_call", "name": "ls", "arguments": "{}", "call_id": "c1"},
            {"type": "function_call_output", "call_id": "c1", "output": "a b"},
        ],
    },
    "/v1/messages blocks": {
        "model": "m",
        "max_tokens": 8,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "List files."}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a b"}]},
        ],
    },
}


def _typed() -> dict[str, Callable[[dict[str, Any]], object]]:
    """A tree with typed requests (issue 19): each dialect's seam, and what reads the typed result.

    A generation endpoint is timed through its ``_decode`` and, where that hands a dict on (a tree
    before one decode per request), the decode ``start_chat``/``start_generate`` then ran on it.
    """
    from cllm_ollama.api.anthropic import messages
    from cllm_ollama.api.ollama import chat, errors, generate
    from cllm_ollama.api.openai import endpoints, responses
    from cllm_ollama.api.request_fields import SharedFields, decoded_media
    from cllm_ollama.api.schemas import ollama as o
    from cllm_ollama.api.schemas import openai as oa

    def native(translate: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], object]:
        def run(body: dict[str, Any]) -> object:
            decoded = translate(body)
            if not isinstance(decoded.native, dict):  # typed already: start_* decodes nothing
                return decoded
            if "messages" in decoded.native:  # what start_chat did first
                req = errors.decode(decoded.native, o.ChatRequest)
                return SharedFields.of(req), chat._messages(decoded.native, req)
            req = errors.decode(decoded.native, o.GenerateRequest)  # what start_generate did first
            return SharedFields.of(req), decoded_media(req.images)

        return run

    def plain(cls: type) -> Callable[[dict[str, Any]], object]:
        return lambda body: errors.decode(body, cls)

    return {
        "/api/generate": native(generate._decode),
        "/api/chat": native(chat._decode),
        "/api/embed": plain(o.EmbedRequest),
        "/api/embeddings": plain(o.EmbeddingRequest),
        "/api/show": plain(o.ShowRequest),
        "/api/copy": plain(o.CopyRequest),
        "/api/delete": plain(o.DeleteRequest),
        "/api/pull": plain(o.PullRequest),
        "/api/push": plain(o.PushRequest),
        "/api/create": plain(o.CreateRequest),
        "/v1/chat/completions": native(endpoints._decode_chat),
        "/v1/completions": native(endpoints._decode_completion),
        "/v1/embeddings": lambda body: endpoints.decode(body, oa.EmbedRequest),
        "/v1/responses": native(responses._decode),
        "/v1/messages": native(messages._decode),
    }


def _by_hand() -> dict[str, Callable[[dict[str, Any]], object]]:
    """A tree before issue 19: the same steps, through its field-by-field checks."""
    from cllm_ollama.api.fields import SharedFields
    from cllm_ollama.api.wire import bool_field, images_field, int_field, string_field  # type: ignore[attr-defined]

    from cllm_ollama.api.anthropic import messages  # type: ignore[attr-defined]
    from cllm_ollama.api.ollama import chat, generate, models
    from cllm_ollama.api.openai import endpoints, responses

    def generate_(body: dict[str, Any]) -> object:
        bool_field(body, "stream", "GenerateRequest")
        shared = SharedFields.of(body, "GenerateRequest")  # type: ignore[call-arg, arg-type]
        for key in ("model", "prompt", "suffix", "system", "template"):
            string_field(body, key, "GenerateRequest")
        bool_field(body, "raw", "GenerateRequest")
        return shared, generate._context(body), images_field(body, "GenerateRequest")  # type: ignore[attr-defined]

    def chat_(body: dict[str, Any]) -> object:
        bool_field(body, "stream", "ChatRequest")
        shared = SharedFields.of(body, "ChatRequest")  # type: ignore[call-arg, arg-type]
        string_field(body, "model", "ChatRequest")
        return shared, chat._messages(body), chat.decode_tools(body, "ChatRequest")  # type: ignore[attr-defined, call-arg]

    def embed(body: dict[str, Any]) -> object:
        return (
            string_field(body, "model", "EmbedRequest"),
            bool_field(body, "truncate", "EmbedRequest"),
            int_field(body, "dimensions", "EmbedRequest"),
        )

    def text(struct: str, *keys: str, flags: tuple[str, ...] = ()) -> Callable[[dict[str, Any]], object]:
        def decode(body: dict[str, Any]) -> object:
            return models._text(body, struct, *keys), [bool_field(body, f, struct) for f in flags]  # type: ignore[attr-defined]

        return decode

    def v1_embed(body: dict[str, Any]) -> object:
        return [string_field(body, k, "EmbedRequest") for k in ("model", "encoding_format")], int_field(
            body, "dimensions", "EmbedRequest"
        )

    return {
        "/api/generate": generate_,
        "/api/chat": chat_,
        "/api/embed": embed,
        "/api/embeddings": text("EmbeddingRequest", "model", "prompt"),
        "/api/show": text("ShowRequest", "model", "name", flags=("verbose",)),
        "/api/copy": text("CopyRequest", "source", "destination"),
        "/api/delete": text("DeleteRequest", "model", "name"),
        "/api/pull": text("PullRequest", "model", "name", flags=("insecure", "stream")),
        "/api/push": text("PushRequest", "model", "name", flags=("insecure", "stream")),
        "/api/create": text("CreateRequest", flags=("stream",)),
        "/v1/chat/completions": endpoints._decode_chat,
        "/v1/completions": endpoints._decode_completion,
        "/v1/embeddings": v1_embed,
        "/v1/responses": responses._decode,
        "/v1/messages": messages._decode,
    }


def measure(n: int, runs: int) -> dict[str, float]:
    """Median microseconds per decode (bytes in), per endpoint."""
    typed = importlib.util.find_spec("cllm_ollama.api.schemas") is not None
    decoders = _typed() if typed else _by_hand()
    out = {}
    for path, body in BODIES.items():
        raw, decode = orjson.dumps(body), decoders[path.split()[0]]
        decode(orjson.loads(raw))  # warm, and fail loudly on a body the decoder refuses
        samples = []
        for _ in range(runs):
            t0 = time.perf_counter()
            for _ in range(n):
                decode(orjson.loads(raw))
            samples.append((time.perf_counter() - t0) / n * 1e6)
        out[path] = statistics.median(samples)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="decodes per run")
    parser.add_argument("--runs", type=int, default=7, help="runs per endpoint (the median is printed)")
    args = parser.parse_args()
    import cllm_ollama

    print(f"# {cllm_ollama.__file__}: µs per decode, median of {args.runs} runs of {args.n}")
    for path, us in measure(args.n, args.runs).items():
        print(f"{path:24} {us:8.2f}")


if __name__ == "__main__":
    main()
