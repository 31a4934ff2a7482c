"""A generation endpoint is a translation: decode the dialect's request into a native one, run
the shared lifecycle, encode its chunks in the dialect's shapes. What lies between (the model,
the prompt, the engine, giving everything back, disconnects, errors) is the same for every one.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from .encoders import Framing, JSONResponse
from .errors import Dialect, Handler, read_json
from .lifecycle import Chunk, Generation, collect
from .schemas.go import GoStruct
from .streaming import StreamResponse, until_disconnect


class Encoder(Protocol):
    """One response's output in a dialect's shapes."""

    def whole(self, final: Chunk) -> dict[str, Any]:
        """``stream: false``: the one response object, from the final chunk carrying everything."""
        ...

    def stream(self, chunks: AsyncIterator[Chunk]) -> AsyncGenerator[dict[str, Any], None]:
        """The streamed objects (or events), from the chunks as they come.

        Nothing may come before the first chunk: until then an error keeps its HTTP status.
        """
        ...


class EachChunk:
    """Ollama's encoding: every chunk becomes one object, and ``stream: false`` is the final one."""

    def __init__(self, encode: Callable[[Chunk], dict[str, Any]]) -> None:
        self.whole = encode

    def idle(self) -> dict[str, Any]:
        """An empty chunk: NDJSON's keep-alive, which Ollama's clients read as no output yet."""
        return self.whole(Chunk())

    async def stream(self, chunks: AsyncIterator[Chunk]) -> AsyncGenerator[dict[str, Any], None]:
        async for chunk in chunks:
            yield self.whole(chunk)


N = TypeVar("N")


@dataclass(frozen=True)
class Decoded(Generic[N]):
    """A dialect's request, decoded once: the native request (typed, as /api/generate or /api/chat
    run it: ``start`` never decodes it again), whether to stream, and how to encode the output
    once the generation exists."""

    native: N
    stream: bool
    encoder: Callable[[Generation], Encoder]
    # Ollama's ``_debug_render_only``: answer the prompt as rendered, generate nothing.
    render_only: bool = False


@dataclass(frozen=True)
class Endpoint(Generic[N]):
    dialect: Dialect  # its error boundary
    request: type[GoStruct]  # what the body decodes into, named where it is no JSON object
    decode: Callable[[dict[str, Any]], Decoded[N]]
    # Checks a native request against its model and prepares its generation, or answers a
    # load/unload call (its reason).
    start: Callable[[Request, N, int], Awaitable[Generation | str]]
    framing: Callable[[], Framing]
    loaded: Callable[[Decoded[N], str], Response]  # the answer to a load or unload call

    def handler(self) -> Handler:
        return self.dialect.boundary(self._serve)

    async def _serve(self, request: Request) -> Response:
        t_start = time.perf_counter_ns()
        decoded = self.decode(await read_json(request, self.request, self.dialect.empty_body))
        gen = await self.start(request, decoded.native, t_start)
        if isinstance(gen, str):
            return self.loaded(decoded, gen)
        encoder = decoded.encoder(gen)
        if decoded.render_only and isinstance(encoder, EachChunk):
            text, n_media = await gen.rendered_prompt()
            info = {"rendered_template": text} | ({"image_count": n_media} if n_media else {})
            return JSONResponse(encoder.idle() | {"_debug_info": info})
        chunks = gen.chunks()
        if not decoded.stream:
            return JSONResponse(encoder.whole(await until_disconnect(request, collect(chunks))))
        objects = encoder.stream(chunks)
        idle = encoder.idle if isinstance(encoder, EachChunk) else None
        return await StreamResponse(self.framing(), objects, chunks, idle=idle).start(request, gen.admitted)
