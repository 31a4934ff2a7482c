"""One generation's life, from admission to the last byte: ``Generation.chunks()``.

It takes the model lease from the pool, renders and fits the prompt, compiles the format's
grammar off the event loop, builds the engine request once, turns the engine's events into
output chunks, and gives everything back in one place however it ends: done, an error, the
client gone, or cancelled. Dialects never see the engine: they decode a request into a
``Generation`` and encode its chunks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Sequence
from contextlib import aclosing, asynccontextmanager, contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ..chatformat.family_parsers import StreamParser, parser_for
from ..chatformat.parsers import Delta
from ..chatformat.prompt import Rendered, Renderer, Tokenizer
from ..chatformat.render_queue import render_prompt
from ..engine.frontdoor import EngineClient
from ..engine.media import cell_keys
from ..engine.pool import Entry, ModelPool
from ..engine.request import FinishReason, MediaInput, SamplingParams, Stats
from ..engine.request import Request as EngineRequest
from ..errors import (
    CllmError,
    ContextOverflow,
    EngineError,
    InsufficientMemory,
    InvalidRequest,
    QueueFull,
    RequestCanceled,
)
from .call_grammar import call_grammar
from .fitting import MediaCounter, fit_prompt, grown_context, media_counter
from .media import place_markers
from .options import RequestOptions
from .output_shapes import logprob_json
from .request_fields import JSON_GRAMMAR, SharedFields, output_grammar
from .resolve import ResolvedModel, load_request, naming_the_model
from .services import services

log = logging.getLogger("cllm.api")
T = TypeVar("T")


@dataclass
class Chunk:
    """A piece of output, or (``done``) the end with why and how long."""

    delta: Delta = field(default_factory=Delta)
    done: bool = False
    done_reason: str = ""
    stats: Stats | None = None
    # Log probabilities of the tokens behind this chunk, in the wire shape Ollama and OpenAI share.
    logprobs: list[dict[str, Any]] = field(default_factory=list)
    # On the final chunk: prompt tokens the model never saw, cut to fit the context (0: none).
    truncated: int = 0


@asynccontextmanager
async def lease(
    pool: ModelPool,
    model: ResolvedModel,
    options: RequestOptions,
    keep_alive: float | None,
    loading: tuple[asyncio.Event, float] | None = None,
) -> AsyncIterator[Entry]:
    """The model loaded as ``options`` ask, held until the block ends; ``loading``'s event is set
    if that takes over its seconds (a load, or a reload waiting for running requests).

    A load cannot be interrupted: if the waiting task is cancelled (its client left), the load
    goes on and the model is given back as soon as it is held.
    """
    with naming_the_model(model):
        acquiring = asyncio.ensure_future(pool.acquire(load_request(model, options), keep_alive))
        try:
            if loading is not None and not (await asyncio.wait({acquiring}, timeout=loading[1]))[0]:
                loading[0].set()
            entry = await asyncio.shield(acquiring)
        except asyncio.CancelledError:

            def give_back(task: asyncio.Task[Entry]) -> None:
                if not task.cancelled() and task.exception() is None:
                    pool.release(task.result())

            acquiring.add_done_callback(give_back)
            raise
    try:
        yield entry
    finally:
        pool.release(entry)


async def unload(pool: ModelPool, model: ResolvedModel) -> str:
    """Ollama's unload call (an empty prompt with ``keep_alive`` 0: ``expireRunner``), answered
    before anything else of the request is read: the pool keys a model by its files, never by
    the options that loaded it, so none are read (a bad one cannot refuse it)."""
    assert model.record.model_path is not None
    await pool.unload(model.record.model_path, load_request(model, RequestOptions(SamplingParams())).key)
    return "unload"


async def preload(pool: ModelPool, model: ResolvedModel, keep_alive: float | None, options: RequestOptions) -> str:
    """Ollama's load call (an empty prompt), once the request has passed what its handler checks
    before ``scheduleRunner`` loads the model."""
    async with lease(pool, model, options, keep_alive):
        return "load"


@dataclass
class Generation:
    """One decoded request, ready to run: ``chunks()`` runs it, once."""

    http: Request
    model: ResolvedModel
    options: RequestOptions
    fields: SharedFields
    render: Renderer
    thinking: bool
    tools: bool
    t_start: int
    # The requested tools' definitions (the parser checks and types calls against them).
    tool_specs: list[dict[str, Any]] | None = None
    # A forced tool choice: the tools the output must be a call of (several calls if ``many_calls``).
    call_tools: list[dict[str, Any]] | None = None
    many_calls: bool = True
    # Set once everything that can be refused with a status has been checked (the model loaded,
    # the prompt fitted, the grammar compiled), or once a load has kept the request waiting
    # ``Settings.load_headers``: a stream may answer from then on (its headers, then keep-alives; a refusal
    # after that ends it with an error object, as any error after the first byte does).
    admitted: asyncio.Event = field(default_factory=asyncio.Event)
    # The prompt's images and audio (decoded bytes), in ``[img-N]`` tag order (``media.tag_media``).
    media: list[bytes] = field(default_factory=list)
    # ``/api/generate``'s ``context`` where the prompt has media: written out as text before the
    # rendered prompt, as Ollama's GenerateHandler does (a text prompt's ``render`` adds the ids).
    media_context: tuple[int, ...] = ()
    # Filled in as it runs, for the encoder of the final chunk.
    load_ns: int = 0
    request: EngineRequest | None = None
    generated: list[int] = field(default_factory=list)
    truncated: int = 0  # prompt tokens cut to fit (old turns, then the middle)
    grammar: str | None = None  # the output's, checked (``_grammar``)
    grammar_after: str = ""  # the output text it holds after (a format's: the thinking's close)
    # A raw prompt (``/api/generate``'s ``raw``): the model's own parser does not read its output,
    # as Ollama's does not (only the template's thinking tags, where thinking was asked for).
    raw: bool = False

    async def chunks(self) -> AsyncGenerator[Chunk, None]:
        """Output chunks until the final one (``done``); the model is held exactly as long.

        A prompt too long for the loaded context, where nobody set ``num_ctx``, grows the context
        (``Settings.context_grow``): the model is given back, loaded again with the larger one
        (the pool's reload), and the request admitted there, once; nothing was sent before. Where
        not even one slot of it fits in memory, the prompt is cut to the context loaded as before.
        A prompt with images or audio grows alike, measured once the projector has tokenized it."""
        pool: ModelPool = services(self.http).pool
        t0 = time.perf_counter_ns()
        self.grammar = await self._grammar(pool)  # a bad one is a 400 before anything loads
        grow = services(self.http).settings.context_grow if self.options.num_ctx is None else 0
        try:
            async with aclosing(self._run(pool, t0, grow)) as run:
                async for chunk in run:
                    yield chunk
        except _Grow as more:
            log.info("growing the context of %s to %d tokens for a longer prompt", self.model.full_name, more.n_ctx)
            options, self.options = self.options, replace(self.options, num_ctx=more.n_ctx)
            sent = False
            try:
                async with aclosing(self._run(pool, t0, 0)) as run:
                    async for chunk in run:
                        sent = True
                        yield chunk
            except InsufficientMemory as exc:  # raised by the load, before anything was sent
                if sent:
                    raise
                log.warning("%s: no room for a %d-token context (%s)", self.model.full_name, more.n_ctx, exc.message)
                self.options = options
                async with aclosing(self._run(pool, t0, 0)) as run:
                    async for chunk in run:
                        yield chunk

    async def rendered_prompt(self) -> tuple[str, int]:
        """The prompt as the model's template renders it, and how many images and clips it holds
        (Ollama's ``_debug_render_only``): the model is loaded, as Ollama loads it for this, and
        turns that do not fit are left out as a generation would leave them; nothing is generated."""
        pool: ModelPool = services(self.http).pool
        async with lease(pool, self.model, self.options, self.fields.keep_alive) as entry:
            fits = self.fields.truncate and not self.media  # a media prompt is measured by its projector
            rendered = await self._render(entry.model, self._limit(entry.model) if fits else None)
        return rendered.text, len(self.media)

    async def _run(self, pool: ModelPool, t0: int, grow: int) -> AsyncGenerator[Chunk, None]:
        wait = services(self.http).settings.load_headers
        loading = (self.admitted, wait) if wait > 0 else None
        async with lease(pool, self.model, self.options, self.fields.keep_alive, loading) as entry:
            self.load_ns = time.perf_counter_ns() - t0
            loaded = entry.model
            request, parser = await self._admit(loaded, grow)
            self.request = request
            with freed_if_refused(request):
                if not loaded.has_room():  # still a 503, before a stream's headers
                    raise QueueFull()
                self.admitted.set()
                meter = services(self.http).metrics.generation(self.model.record.short_name, self.t_start)
            logprobs: list[dict[str, Any]] = []  # held until a chunk goes out with them
            # From its first step ``generate`` owns the media, and frees it even when it refuses.
            async with aclosing(loaded.generate(request)) as events:
                async for event in events:
                    if event.finish is not None:
                        meter.finish(str(event.finish), event.stats)
                    if event.error is not None:
                        raise EngineError(event.error)
                    if event.tokens:
                        meter.tokens()
                    self.generated.extend(event.tokens)
                    if event.logprob is not None:
                        logprobs.append(logprob_json(loaded.token_piece, event.logprob, request.logprobs > 0))
                    delta = parser.feed(event.text) if event.text else Delta()
                    if event.finish is None:
                        if delta:
                            yield Chunk(delta, logprobs=logprobs)
                            logprobs = []
                        continue
                    delta.add(parser.finish())
                    if delta or logprobs:
                        yield Chunk(delta, logprobs=logprobs)
                    if event.finish is FinishReason.CANCELED:
                        raise RequestCanceled()
                    yield Chunk(done=True, done_reason=str(event.finish), stats=event.stats, truncated=self.truncated)
                    return

    async def _admit(self, loaded: EngineClient, grow: int = 0) -> tuple[EngineRequest, StreamParser]:
        """Everything before the first token: the prompt, fitted; the grammar; the engine request."""
        options, truncate = self.options, self.fields.truncate
        limit = self._limit(loaded)
        if self.media:
            return await self._admit_media(loaded, limit, grow)
        rendered = await self._render(loaded, limit if truncate else None)
        if grow and (n_ctx := grown_context(len(rendered.tokens) + rendered.dropped, limit, loaded, grow)):
            raise _Grow(n_ctx)
        cut = self.fields.cuts_prompt(self.model)
        tokens = fit_prompt(
            rendered.tokens, limit, num_keep=options.num_keep, num_predict=options.num_predict, truncate=cut
        )
        self.truncated = rendered.dropped + len(rendered.tokens) - len(tokens)
        if rendered.dropped:
            log.warning("dropping the oldest turns: limit=%d dropped=%d", limit, rendered.dropped)
        if len(tokens) < len(rendered.tokens):
            # Ollama's runner warning, with its fields (the client reads the count in its response).
            log.warning(
                "truncating input prompt limit=%d prompt=%d keep=%d new=%d",
                limit,
                len(rendered.tokens),
                options.num_keep,
                len(tokens),
            )
        # Marked prefixes are kept only for a prompt whole (a cut one's offsets moved).
        keep = rendered.marks if not self.truncated else ()
        return self._request(tuple(tokens), limit, keep=keep), self._parser(rendered.text)

    def _limit(self, loaded: EngineClient) -> int:
        """The prompt's context: the request's ``num_ctx`` (Ollama's minimum is 4), at most the
        loaded one."""
        return max(4, min(self.options.num_ctx or loaded.n_ctx_slot, loaded.n_ctx_slot))

    def _request(
        self, prompt: tuple[int, ...], limit: int, media: Any = None, keep: tuple[int, ...] = ()
    ) -> EngineRequest:
        """The engine request for a fitted prompt, with the grammar ``_grammar`` compiled."""
        options = self.options
        return EngineRequest(
            prompt=prompt,
            sampling=replace(options.sampling_within(limit), grammar=self.grammar, grammar_after=self.grammar_after),
            num_predict=options.num_predict,
            stop=options.stop,
            num_ctx=limit,
            arrival_ns=self.t_start,
            logprobs=self.fields.logprobs,
            keep=keep,
            media=media,
        )

    async def _grammar(self, pool: ModelPool) -> str | None:
        """The output's grammar (``output_grammar``), built off the event loop and parsed by the
        pool's checker: one llama.cpp cannot parse never reaches the engine thread."""
        forced = None
        if self.call_tools is not None:
            # The family the output parser reads (``_parser``): its template and its config's parser name.
            forced = partial(
                call_grammar,
                self.model.template,
                self.call_tools,
                many=self.many_calls,
                parser=self.model.record.parser,
                shown=self.tool_specs if self.tools else None,
            )
        grammar = await run_in_threadpool(output_grammar, self.fields.format, self.options.grammar, forced)
        sent = self.options.grammar is not None and forced is None
        if grammar is not None and grammar is not JSON_GRAMMAR:
            await pool.grammars.check(grammar, "grammar" if sent else "format")
        if grammar is not None and forced is None and not sent and self.thinking and not self.raw:
            # A format holds the answer, not the thinking: after its close (Ollama's ChatHandler
            # applies it once the thinking ends); from the first token where there is no one tag.
            self.grammar_after = self.model.thinking_close or ""
        return grammar

    async def _render(self, tokenizer: Tokenizer, limit: int | None) -> Rendered:
        timeout = services(self.http).settings.render_timeout
        return await render_prompt(self.render, tokenizer, limit, timeout=timeout, key=self.model.full_name)

    async def _admit_media(self, loaded: EngineClient, limit: int, grow: int) -> tuple[EngineRequest, StreamParser]:
        """``_admit`` for a prompt with images or audio, whose length in KV cells is known once the
        projector has tokenized it: too long, it grows the context as a text prompt does, else
        loses its oldest turns and their media (``_fit_media``); never a cut through the middle."""
        whole = await self._render(loaded, None)
        if self.media_context:
            whole = replace(whole, text=loaded.detokenize(list(self.media_context)) + whole.text)
        prompt, order = await self._tokenized(loaded, whole.text)
        with _closed_if_raises(prompt):
            keys = cell_keys(prompt.parts)
            if len(keys) < limit:
                return self._request(keys, limit, prompt), self._parser(whole.text)
            if grow and (n_ctx := grown_context(len(keys), limit, loaded, grow)):
                raise _Grow(n_ctx)
            if not self.fields.truncate or self.media_context:  # a context has no turns to drop
                raise ContextOverflow()
            items = [self.media[i] for i in order]
            counter = await _to_the_end(lambda: media_counter(loaded, whole.text, prompt.parts, items, order))
        prompt.close()  # given up for one without the oldest turns
        return await self._fit_media(loaded, whole.text, counter, limit, len(keys))

    async def _fit_media(
        self, loaded: EngineClient, whole: str, counter: MediaCounter, limit: int, n_whole: int
    ) -> tuple[EngineRequest, StreamParser]:
        """The conversation without its fewest oldest turns, their media with them, that fits
        ``limit`` cells, as ``counter`` counts them; tokenized with its media to be sure, and the
        count tightened by what it was short where it still does not fit. ContextOverflow where
        no turn is left to drop."""
        budget, tried = limit, whole
        while True:
            fitted = await self._render(counter, budget)
            if fitted.text == tried:
                raise ContextOverflow()  # not even the last turn with its media fits
            tried = fitted.text
            gone = counter.dropped(whole, fitted.text)
            prompt, _ = await self._tokenized(loaded, fitted.text, gone)
            with _closed_if_raises(prompt):
                keys = cell_keys(prompt.parts)
                if len(keys) < limit:
                    self.truncated = max(1, n_whole - len(keys))
                    log.warning(
                        "dropping the oldest turns: limit=%d dropped=%d media=%d", limit, self.truncated, len(gone)
                    )
                    return self._request(keys, limit, prompt), self._parser(fitted.text)
            prompt.close()
            budget = max(1, len(fitted.tokens) - (len(keys) - limit) - 1)

    async def _tokenized(
        self, loaded: EngineClient, text: str, dropped: Sequence[int] = ()
    ) -> tuple[MediaInput, list[int]]:
        """The rendered prompt's ``[img-N]`` tags swapped for the projector's marker, tokenized with
        the media by the projector (off the event loop: it decodes images and audio), and the
        media's order; ``dropped`` items left out. The caller owns the prompt: it holds native memory."""
        marker = loaded.media_marker
        if marker is None:
            raise InvalidRequest(f"{self.model.full_name} was loaded without a projector: it cannot see images")
        text, order = place_markers(text, len(self.media), marker, dropped)
        items = [self.media[i] for i in order]
        # The template may write BOS itself (Jinja ones do); the tokenizer adds it otherwise.
        add_special = not (loaded.bos_text and text.startswith(loaded.bos_text))
        tokenizing = asyncio.ensure_future(
            run_in_threadpool(lambda: loaded.tokenize_media(text, items, add_special=add_special))
        )
        try:
            return await asyncio.shield(tokenizing), order
        except asyncio.CancelledError:  # the client left: the thread still ends with a prompt to free
            tokenizing.add_done_callback(_close_media)
            raise

    def _parser(self, text: str) -> StreamParser:
        return parser_for(
            self.model.template,
            thinking=self.thinking,
            tools=self.tool_specs if self.tools else None,
            prompt=text,
            parser=None if self.raw else self.model.record.parser,
        )


class _Grow(Exception):
    """The prompt does not fit the loaded context and would fit ``n_ctx`` (``Generation.chunks``)."""

    def __init__(self, n_ctx: int) -> None:
        super().__init__(n_ctx)
        self.n_ctx = n_ctx


@contextmanager
def freed_if_refused(request: EngineRequest) -> Iterator[None]:
    """The request's media (native memory) freed if the block raises: until ``generate`` takes the
    request, nobody else would free it."""
    with _closed_if_raises(request.media):
        yield


@contextmanager
def _closed_if_raises(media: MediaInput | None) -> Iterator[None]:
    """``media`` (a tokenized prompt: native memory) freed if the block raises, whoever was to own it."""
    try:
        yield
    except BaseException:
        if media is not None:
            media.close()
        raise


async def _to_the_end(work: Callable[[], T]) -> T:
    """``work`` on a thread; if cancelled (the client left), waited for all the same before the
    cancel goes on: it uses the loaded model, which its caller holds only until this returns."""
    task = asyncio.ensure_future(run_in_threadpool(work))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        raise


def _close_media(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is None:
        task.result().close()


async def collect(chunks: AsyncGenerator[Chunk, None]) -> Chunk:
    """stream:false: the final chunk carrying the whole output (text joined, calls gathered)."""
    whole = Delta()
    logprobs: list[dict[str, Any]] = []
    async with aclosing(chunks):
        async for chunk in chunks:
            whole.add(chunk.delta)
            logprobs += chunk.logprobs
            if chunk.done:
                chunk.delta, chunk.logprobs = whole, logprobs
                return chunk
    raise CllmError("generation ended without a result")
