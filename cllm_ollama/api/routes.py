"""The route table: every path cllm serves, in one place (like Ollama's GenerateRoutes)."""

from __future__ import annotations

from starlette.convertors import PathConvertor, register_url_convertor
from starlette.routing import Route

from . import openapi, rerank, tokens
from .anthropic import count_tokens
from .anthropic import messages as anthropic
from .ollama import chat, cloud, embed, generate, models, running, system
from .openai import endpoints as openai
from .openai import responses, transcriptions


class _AnyPath(PathConvertor):
    """Starlette's ``path`` across newlines too: gin's parameters take any byte, so a model name
    with a newline gets /v1's JSON 404, not the unknown-path text."""

    regex = "(?s:.*)"


register_url_convertor("anypath", _AnyPath())

ROUTES = [
    Route("/", system.root, methods=["GET", "HEAD"]),
    Route("/openapi.json", openapi.openapi_json, methods=["GET", "HEAD"]),
    Route("/api/version", system.version, methods=["GET", "HEAD"]),
    Route("/api/status", cloud.status, methods=["GET"]),
    Route("/metrics", system.metrics, methods=["GET", "HEAD"]),
    Route("/api/tags", models.tags, methods=["GET", "HEAD"]),
    Route("/api/show", models.show, methods=["POST"]),
    Route("/api/copy", models.copy, methods=["POST"]),
    Route("/api/delete", models.delete, methods=["DELETE"]),
    Route("/api/create", models.create, methods=["POST"]),
    Route("/api/blobs/{digest}", models.blob_exists, methods=["HEAD"]),
    Route("/api/blobs/{digest}", models.blob_upload, methods=["POST"]),
    Route("/api/pull", models.pull, methods=["POST"]),
    Route("/api/push", models.push, methods=["POST"]),
    Route("/api/experimental/web_search", cloud.web_search, methods=["POST"]),
    Route("/api/experimental/web_fetch", cloud.web_fetch, methods=["POST"]),
    Route("/api/experimental/model-recommendations", cloud.model_recommendations, methods=["GET"]),
    Route("/api/ps", running.ps, methods=["GET"]),
    Route("/api/generate", generate.generate, methods=["POST"]),
    Route("/api/chat", chat.chat, methods=["POST"]),
    Route("/api/embed", embed.embed, methods=["POST"]),
    Route("/api/embeddings", embed.embeddings, methods=["POST"]),
    Route("/api/tokenize", tokens.api_tokenize, methods=["POST"]),
    Route("/api/detokenize", tokens.api_detokenize, methods=["POST"]),
    Route("/api/rerank", rerank.api_rerank, methods=["POST"]),
    Route("/rerank", rerank.rerank, methods=["POST"]),
    Route("/v1/rerank", rerank.v1_rerank, methods=["POST"]),
    Route("/v2/rerank", rerank.rerank, methods=["POST"]),
    Route("/tokenize", tokens.tokenize, methods=["POST"]),
    Route("/detokenize", tokens.detokenize, methods=["POST"]),
    Route("/v1/chat/completions", openai.chat_completions, methods=["POST"]),
    Route("/v1/completions", openai.completions, methods=["POST"]),
    Route("/v1/embeddings", openai.embeddings, methods=["POST"]),
    Route("/v1/responses", responses.responses, methods=["POST"]),
    Route("/v1/audio/transcriptions", transcriptions.transcriptions, methods=["POST"]),
    Route("/v1/messages", anthropic.messages, methods=["POST"]),
    Route("/v1/messages/count_tokens", count_tokens.count_tokens, methods=["POST"]),
    Route("/v1/models", openai.models, methods=["GET"]),
    Route("/v1/models/{model:anypath}", openai.model, methods=["GET"]),
]
