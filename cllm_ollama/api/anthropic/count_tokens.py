"""POST /v1/messages/count_tokens: Anthropic's count of a messages request's input tokens.

Counted as the generation would count them: the chat rendered with the model's template (system,
tools, thinking) and tokenized by the model, loaded on demand like any request. Ollama estimates a
quarter of the characters; cllm gives the prompt's real length (images count as their tags).
"""

from __future__ import annotations

import time

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ...errors import InvalidRequest
from ..encoders import JSONResponse
from ..errors import ANTHROPIC, read_json
from ..lifecycle import Generation, lease
from ..schemas.anthropic import MessagesRequest
from ..services import services
from .messages import count_call, start_messages


async def _count(request: Request) -> Response:
    body = await read_json(request, MessagesRequest, ANTHROPIC.empty_body)
    generation = await start_messages(request, count_call(body), time.perf_counter_ns())
    if not isinstance(generation, Generation):  # no message to count: refused before any load
        raise InvalidRequest("messages is required")
    async with lease(services(request).pool, generation.model, generation.options, None) as entry:
        rendered = await run_in_threadpool(generation.render, entry.model, None, None)
    return JSONResponse({"input_tokens": len(rendered.tokens)})


# Errors in Anthropic's shape, as /v1/messages answers them.
count_tokens = ANTHROPIC.boundary(_count)
