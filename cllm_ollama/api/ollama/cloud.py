"""Ollama's cloud paths as an Ollama with its cloud off answers them: cllm proxies nothing to
ollama.com, so ``/api/status`` says the cloud is disabled, the web tools refuse in Ollama's words
for that, and the model recommendations are Ollama's built-in defaults (what it serves when it
cannot refresh them from ollama.com; ``ollama launch`` drops the ``:cloud`` ones itself when the
status says disabled)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ...errors import CllmError
from ..encoders import JSONResponse
from ..errors import read_body
from ..services import services

# internal/cloud's DisabledMessagePrefix, and the operations' words after it (server/routes.go).
CLOUD_DISABLED = "ollama cloud is disabled"
WEB_SEARCH_UNAVAILABLE = "web search is unavailable"
WEB_FETCH_UNAVAILABLE = "web fetch is unavailable"

GB = 1000**3  # Ollama's format.GigaByte, in which its vram_bytes are written

# server/model_recommendations.go's defaultModelRecommendations.
DEFAULT_RECOMMENDATIONS: list[dict[str, object]] = [
    {
        "model": "kimi-k2.6:cloud",
        "description": "State-of-the-art coding, long-horizon execution, and multimodal agent swarm capability",
        "context_length": 262_144,
        "max_output_tokens": 262_144,
    },
    {
        "model": "glm-5.1:cloud",
        "description": "Reasoning and code generation",
        "context_length": 202_752,
        "max_output_tokens": 131_072,
    },
    {
        "model": "qwen3.5:cloud",
        "description": "Reasoning, coding, and agentic tool use with vision",
        "context_length": 262_144,
        "max_output_tokens": 32_768,
    },
    {
        "model": "minimax-m2.7:cloud",
        "description": "Fast, efficient coding and real-world productivity",
        "context_length": 204_800,
        "max_output_tokens": 128_000,
    },
    {"model": "gemma4", "description": "Reasoning and code generation locally", "vram_bytes": 12 * GB},
    {"model": "qwen3.5", "description": "Reasoning, coding, and visual understanding locally", "vram_bytes": 14 * GB},
]


async def status(request: Request) -> Response:
    """GET /api/status: Ollama's cloud switch, which ``ollama launch`` reads to decide whether to offer
    ``:cloud`` models. cllm's cloud is always off; ``source`` says whether ``OLLAMA_NO_CLOUD`` turns
    it off as well, as Ollama reports it ("none" otherwise)."""
    source = "env" if services(request).settings.no_cloud else "none"
    return JSONResponse({"cloud": {"disabled": True, "source": source}})


async def web_search(request: Request) -> Response:
    """POST /api/experimental/web_search: refused as an Ollama with its cloud off refuses it (403)."""
    return await _cloud_only(request, WEB_SEARCH_UNAVAILABLE)


async def web_fetch(request: Request) -> Response:
    """POST /api/experimental/web_fetch: refused as an Ollama with its cloud off refuses it (403)."""
    return await _cloud_only(request, WEB_FETCH_UNAVAILABLE)


async def model_recommendations(request: Request) -> Response:
    """GET /api/experimental/model-recommendations: Ollama's defaults, as it answers with no cloud."""
    return JSONResponse({"recommendations": DEFAULT_RECOMMENDATIONS})


async def _cloud_only(request: Request, operation: str) -> Response:
    """A path Ollama proxies to ollama.com: a body is read first (none: 400, as Ollama's
    ``readRequestBody`` check), then the cloud's refusal."""
    await read_body(request)
    raise CllmError(f"{CLOUD_DISABLED}: {operation}", 403)
