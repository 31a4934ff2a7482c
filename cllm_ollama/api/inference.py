"""What /api/generate, /api/chat and /v1/* share: resolve the model, check capabilities,
hold a loaded model, run one engine request and turn its events into output chunks.

Each handler renders its own prompt and encodes its own JSON; this module never sees
the response shape.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ..engine.client import LoadedModel, fit_prompt
from ..engine.pool import Entry, LoadRequest, ModelPool
from ..engine.request import FinishReason, Stats, TokenLogprob
from ..engine.request import Request as EngineRequest
from ..errors import CllmError, EngineError, InvalidRequest, NotFound, RequestCanceled
from ..store.gguf_info import GGUFInfo, gguf_info
from ..store.names import parse_name
from ..store.store import ModelRecord, ModelStore
from . import template_workers
from .encoders import JSONResponse, NDJSONResponse
from .formats import JSON_GRAMMAR, grammar_for_format
from .gotemplate import render_go_template
from .options import RequestOptions, parse_keep_alive_field, parse_think
from .parsers import Delta, OutputParser, prompt_opens_thinking, tool_format_for_template
from .render_budget import PromptTooLong, RenderBudget
from .template import CHATML_TEMPLATE
from .wire import bool_field, int_field

T = TypeVar("T")
log = logging.getLogger("cllm.api")


@dataclass(frozen=True)
class ResolvedModel:
    record: ModelRecord
    info: GGUFInfo
    capabilities: tuple[str, ...]

    @property
    def full_name(self) -> str:
        return str(self.record.name)

    def has(self, capability: str) -> bool:
        return capability in self.capabilities


async def resolve_model(store: ModelStore, name: str, *, empty_message: str, empty_status: int) -> ResolvedModel:
    """Find a model as Ollama's handlers do: empty name, bad syntax, then not found."""
    if not name:
        raise CllmError(empty_message, empty_status)
    parse_name(name)  # raises "invalid model name"
    try:
        record = await run_in_threadpool(store.get, name)
    except NotFound:
        raise NotFound(f"model '{name}' not found") from None
    if record.model_path is None:
        raise InvalidRequest(f"model '{name}' has no GGUF weights")
    info = await run_in_threadpool(gguf_info, record.model_path)
    if info.problems:
        raise EngineError(f"model '{name}' cannot be loaded: {'; '.join(info.problems)}")
    return ResolvedModel(record, info, tuple(record.capabilities))


def load_request(model: ResolvedModel, options: RequestOptions) -> LoadRequest:
    assert model.record.model_path is not None
    return LoadRequest(
        path=model.record.model_path,
        name=model.record.short_name,
        digest=model.record.digest,
        num_ctx=options.num_ctx,
        num_batch=options.num_batch,
        num_gpu=options.num_gpu,
        num_thread=options.num_thread,
        embedding_only=model.info.is_embedding,
    )


@contextmanager
def naming_the_model(model: ResolvedModel) -> Iterator[None]:
    """Errors from loading name the model, not its file: the server's paths go to the log only."""
    try:
        yield
    except CllmError as exc:
        path = model.record.model_path
        file = next((f for f in (str(path), getattr(path, "name", None)) if f and f in exc.message), None)
        if file is None:
            raise
        log.error("loading %s (%s) failed: %s", model.full_name, path, exc.message)
        raise CllmError(exc.message.replace(file, model.record.short_name), exc.status_code) from exc


def keep_alive_of(body: dict[str, Any]) -> float | None:
    return parse_keep_alive_field(body.get("keep_alive"))


@dataclass(frozen=True)
class SharedFields:
    """What /api/generate and /api/chat requests have in common beyond the model and options."""

    keep_alive: float | None
    truncate: bool
    format: object
    logprobs: int  # -1 off, else how many alternatives per token

    @classmethod
    def of(cls, body: dict[str, Any], struct: str) -> SharedFields:
        """Decoded first, in Ollama's order: keep_alive and the types fail in Go's JSON decode,
        then top_logprobs. ``struct`` names the request in Go's errors (``GenerateRequest``...).
        """
        keep_alive = keep_alive_of(body)
        truncate = bool_field(body, "truncate", struct) is not False
        bool_field(body, "shift", struct)  # no context shift here, but Go still decodes it
        return cls(keep_alive, truncate, body.get("format"), logprobs_of(body, struct))


def thinking_for(model: ResolvedModel, body: dict[str, Any], display_name: str) -> bool:
    """``think`` resolved: defaults to on for thinking models, 400 where the model cannot."""
    think = parse_think(body.get("think"))
    can_think = model.has("thinking")
    if think and not can_think:
        raise InvalidRequest(f'"{display_name}" does not support thinking')
    if think is None:
        # A grammar would constrain the thinking too: with `format`, answer directly.
        return can_think and not body.get("format")
    return think


def check_images(model: ResolvedModel, images: object) -> None:
    if images and not model.has("vision"):
        raise InvalidRequest(f"{model.full_name} does not support vision")


@dataclass(frozen=True)
class Rendered:
    """A prompt as text (to see how it ends) and as the tokens to evaluate."""

    tokens: list[int]
    text: str = ""


# Renders a prompt for a loaded model; given a token limit, it may drop old turns to fit it.
# A budget bounds its time and size (a default one if none is given).
Renderer = Callable[[LoadedModel, int | None, RenderBudget | None], Rendered]


@dataclass
class Chunk:
    """A piece of output, or (``done``) the end with why and how long."""

    delta: Delta = field(default_factory=Delta)
    done: bool = False
    done_reason: str = ""
    stats: Stats | None = None
    # Log probabilities of the tokens behind this chunk, in the wire shape Ollama and OpenAI share.
    logprobs: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Generation:
    """One prepared request: a held model, the token prompt, and how to read the output."""

    pool: ModelPool
    entry: Entry
    request: EngineRequest
    parser: OutputParser
    format: object = None
    t_start: int = 0
    load_ns: int = 0
    generated: list[int] = field(default_factory=list)
    released: bool = False

    def release(self) -> None:
        """Give the model back to the pool, once: when the output ends, or if it never starts."""
        if not self.released:
            self.released = True
            self.pool.release(self.entry)

    @property
    def model(self) -> LoadedModel:
        return self.entry.model

    async def chunks(self) -> AsyncGenerator[Chunk, None]:
        """Output chunks until the final one; releases the model when done or abandoned."""
        model = self.model
        try:
            grammar = await run_in_threadpool(grammar_for_format, self.format)
            sampling = self.request.sampling
            if grammar is not None:
                if grammar is not JSON_GRAMMAR:
                    await self.pool.grammars.check(grammar)
                sampling = replace(sampling, grammar=grammar)
                self.request = replace(self.request, sampling=sampling)
            logprobs: list[dict[str, Any]] = []  # held until a chunk goes out with them
            async for event in model.generate(self.request):
                if event.error is not None:
                    raise EngineError(event.error)
                self.generated.extend(event.tokens)
                if event.logprob is not None:
                    logprobs.append(self._logprob_json(event.logprob))
                delta = self.parser.feed(event.text) if event.text else Delta()
                if event.finish is None:
                    if delta:
                        yield Chunk(delta, logprobs=logprobs)
                        logprobs = []
                    continue
                rest = self.parser.finish()
                delta.content += rest.content
                delta.thinking += rest.thinking
                delta.tool_calls += rest.tool_calls
                if delta or logprobs:
                    yield Chunk(delta, logprobs=logprobs)
                if event.finish is FinishReason.CANCELED:
                    raise RequestCanceled()
                yield Chunk(done=True, done_reason=str(event.finish), stats=event.stats)
                return
        finally:
            self.release()

    def _logprob_json(self, lp: TokenLogprob) -> dict[str, Any]:
        def entry(token: int, logprob: float) -> dict[str, Any]:
            piece = self.model.token_piece(token)
            return {"token": piece.decode("utf-8", "replace"), "logprob": logprob, "bytes": list(piece)}

        out = entry(lp.token, lp.logprob)
        if self.request.logprobs > 0:
            out["top_logprobs"] = [entry(t, p) for t, p in lp.top]
        return out


async def prepare(
    pool: ModelPool,
    model: ResolvedModel,
    options: RequestOptions,
    shared: SharedFields,
    render: Renderer,
    *,
    thinking: bool,
    tools: bool,
    t_start: int,
    http_request: Request,
) -> Generation:
    """Load (or reuse) the model, tokenize and fit the prompt, and hold the model for the run."""
    truncate = shared.truncate
    t0 = time.perf_counter_ns()
    with naming_the_model(model):
        entry = await pool.acquire(load_request(model, options), shared.keep_alive)
    load_ns = time.perf_counter_ns() - t0
    try:
        loaded = entry.model
        # Ollama's minimum num_ctx is 4; above the loaded context, the loaded one is the limit.
        limit = max(4, min(options.num_ctx or loaded.n_ctx_slot, loaded.n_ctx_slot))
        rendered = await render_prompt(http_request, render, loaded, limit if truncate else None)
        tokens = fit_prompt(
            rendered.tokens, limit, num_keep=options.num_keep, num_predict=options.num_predict, truncate=truncate
        )
        if len(tokens) < len(rendered.tokens):
            # Ollama's runner warning, with its fields: the only trace of a silent cut.
            log.warning(
                "truncating input prompt limit=%d prompt=%d keep=%d new=%d",
                limit,
                len(rendered.tokens),
                options.num_keep,
                len(tokens),
            )
        request = EngineRequest(
            prompt=tuple(tokens),
            sampling=options.sampling_within(limit),
            num_predict=options.num_predict,
            stop=options.stop,
            num_ctx=limit,
            arrival_ns=t_start,
            logprobs=shared.logprobs,
        )
    except BaseException:
        pool.release(entry)
        raise
    start_in_thinking = thinking and prompt_opens_thinking(rendered.text)
    parser = OutputParser(
        thinking=thinking,
        tools=tools,
        start_in_thinking=start_in_thinking,
        tool_format=tool_format_for_template(model.info.chat_template),
    )
    return Generation(pool, entry, request, parser, shared.format, t_start, load_ns)


# One limiter per event loop (tests run several): anyio's are bound to the loop that uses them.
_render_limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anyio.CapacityLimiter] = (
    weakref.WeakKeyDictionary()
)


async def render_prompt(request: Request, render: Renderer, loaded: LoadedModel, limit: int | None) -> Rendered:
    """Run ``render`` under the render timeout; if the client leaves, stop it and wait until it has.

    Renders take turns on threads of their own, as many as there are render workers: a flood of
    templates that run to their timeout waits here instead of taking the threads every other
    endpoint needs.
    """
    loop = asyncio.get_running_loop()
    limiter = _render_limiters.get(loop)
    if limiter is None:
        limiter = _render_limiters[loop] = anyio.CapacityLimiter(template_workers.WORKERS)
    cancel = threading.Event()
    budget_s = request.app.state.settings.render_timeout

    def work() -> Rendered:
        return render(loaded, limit, RenderBudget(budget_s, cancel=cancel))

    return await until_disconnect(request, anyio.to_thread.run_sync(work, limiter=limiter), on_cancel=cancel.set)


async def sentinel(pool: ModelPool, model: ResolvedModel, keep_alive: float | None, options: RequestOptions) -> str:
    """Ollama's empty-prompt calls: ``keep_alive`` 0 unloads, anything else loads."""
    if keep_alive == 0:
        assert model.record.model_path is not None
        await pool.unload(model.record.model_path)
        return "unload"
    with naming_the_model(model):
        entry = await pool.acquire(load_request(model, options), keep_alive)
    pool.release(entry)
    return "load"


def logprobs_of(body: dict[str, Any], struct: str) -> int:
    """``logprobs``/``top_logprobs`` as the engine takes them: -1 off, else how many alternatives."""
    logprobs = bool_field(body, "logprobs", struct)
    top_logprobs = int_field(body, "top_logprobs", struct) or 0
    if not 0 <= top_logprobs <= 20:
        raise InvalidRequest("top_logprobs must be between 0 and 20")
    return top_logprobs if logprobs else -1


def chat_prompt(
    model: ResolvedModel,
    messages: list[dict[str, Any]],
    *,
    thinking: bool,
    tools: list[dict[str, Any]] | None = None,
    go_template: str | None = None,
) -> Renderer:
    """Render the prompt with the GGUF's own Jinja chat template, as Ollama's llama-server mode does.

    A Go template (a request's ``template``, or a model's template layer when its GGUF has no
    chat template) is rendered by our subset of Go's text/template instead. Over the limit, the
    oldest turns go first, keeping system messages and the last message, as Ollama's chatPrompt
    does; what still does not fit is cut at the token level later.
    """
    jinja = model.info.chat_template
    if go_template is None and not jinja and model.record.template:
        go_template = model.record.template

    # The order turns are dropped in: oldest first, never a system message or the last message.
    droppable = [i for i, m in enumerate(messages[:-1]) if m.get("role") != "system"]

    @contextmanager
    def text_renderer(loaded: LoadedModel, budget: RenderBudget) -> Iterator[Callable[[list[int] | None], str]]:
        """Renders the messages at the given indexes (all if None) under ``budget``."""
        if go_template is not None:
            template = go_template

            def render_go(keep: list[int] | None) -> str:
                kept = messages if keep is None else [messages[i] for i in keep]
                return render_go_template(template, _go_data(kept, tools, thinking), budget)

            yield render_go
            return
        with template_workers.POOL.session(
            jinja or CHATML_TEMPLATE,
            messages,
            budget,
            tools=tools,
            enable_thinking=thinking if model.has("thinking") else None,
            bos_token=loaded.bos_text,
            eos_token=loaded.eos_text,
        ) as session:
            yield session.render

    def render(loaded: LoadedModel, limit: int | None, budget: RenderBudget | None = None) -> Rendered:
        budget = budget or RenderBudget()
        # Go templates do not write BOS: the tokenizer adds it.
        add_bos = go_template is not None
        with text_renderer(loaded, budget) as render_text:
            tried: dict[int, Rendered | None] = {}

            def without_oldest(n: int) -> Rendered | None:
                """The prompt without the ``n`` oldest droppable turns; None if it does not fit
                ``limit`` and dropping more could still help."""
                gone = set(droppable[:n])
                last_resort = limit is None or n == len(droppable)
                try:
                    text = render_text([i for i in range(len(messages)) if i not in gone] if n else None)
                except PromptTooLong:
                    if last_resort:
                        raise
                    tried[n] = None
                    return None
                tokens = loaded.tokenize(text, add_special=add_bos)
                fits = limit is None or len(tokens) < limit
                tried[n] = Rendered(tokens, text) if fits or last_resort else None
                return tried[n]

            if (whole := without_oldest(0)) is not None:
                return whole
            # A turn less never makes the prompt longer, so the fewest turns to drop are found by
            # bisection: O(log n) renders of the conversation, where dropping one at a time was O(n).
            low, high = 1, len(droppable)
            while low < high:
                mid = (low + high) // 2
                if without_oldest(mid) is None:
                    low = mid + 1
                else:
                    high = mid
            rendered = tried.get(low) or without_oldest(low)
            assert rendered is not None  # with every droppable turn gone, there is nothing left to try
            return rendered

    return render


def _go_data(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, thinking: bool) -> dict[str, Any]:
    """What Ollama's templates see: .System, .Prompt, .Response, .Messages (.Role, .Content), .Tools."""
    system = "\n\n".join(m.get("content", "") for m in messages if m.get("role") == "system")
    last_user = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
    go_messages = [
        {"Role": m.get("role", ""), "Content": m.get("content", ""), "Thinking": m.get("thinking", "")}
        for m in messages
    ]
    return {
        "System": system,
        "Prompt": last_user,
        "Response": "",
        "Messages": go_messages,
        "Tools": tools,
        "Think": thinking,
    }


async def respond(
    request: Request, gen: Generation, encode: Callable[[Chunk], dict[str, Any]], *, stream: bool
) -> Response:
    """NDJSON chunks (``stream``), or one object with the whole output and the final metrics."""

    async def response() -> Response:
        if not stream:
            return JSONResponse(encode(await until_disconnect(request, collect(gen.chunks()))))
        return NDJSONResponse(await started(request, encode_each(gen.chunks(), encode)))

    return await releasing_on_error(gen, response())


async def releasing_on_error(gen: Generation, response: Awaitable[Response]) -> Response:
    """Build a response; if that fails before the output starts, give the model back now."""
    try:
        return await response
    except BaseException:
        gen.release()
        raise


def metrics(gen: Generation, stats: Stats | None) -> dict[str, int]:
    """Ollama's nanosecond metrics; zero values are left out as Go's omitempty does."""
    out = {
        "total_duration": time.perf_counter_ns() - gen.t_start,
        "load_duration": gen.load_ns,
    }
    if stats is not None:
        out |= {
            "prompt_eval_count": stats.prompt_tokens,
            "prompt_eval_duration": stats.prompt_eval_ns,
            "eval_count": stats.eval_tokens,
            "eval_duration": stats.eval_ns,
        }
    return {k: v for k, v in out.items() if v}


async def collect(chunks: AsyncGenerator[Chunk, None]) -> Chunk:
    """stream:false: the final chunk carrying the whole output (text joined, calls gathered)."""
    whole = Delta()
    logprobs: list[dict[str, Any]] = []
    try:
        async for chunk in chunks:
            whole.content += chunk.delta.content
            whole.thinking += chunk.delta.thinking
            whole.tool_calls += chunk.delta.tool_calls
            logprobs += chunk.logprobs
            if chunk.done:
                chunk.delta, chunk.logprobs = whole, logprobs
                return chunk
    finally:
        await chunks.aclose()
    raise CllmError("generation ended without a result")


async def encode_each(
    chunks: AsyncGenerator[Chunk, None], encode: Callable[[Chunk], dict[str, Any]]
) -> AsyncGenerator[dict[str, Any], None]:
    try:
        async for chunk in chunks:
            yield encode(chunk)
    finally:
        await chunks.aclose()


async def started(request: Request, stream: AsyncGenerator[T, None]) -> AsyncGenerator[T, None]:
    """The stream, once its first item is there: errors before it still get a proper HTTP status.

    Until then no response exists to notice a client leaving, so watch for that here: a
    queued request whose client is gone must leave the queue, not wait for a slot.
    """
    try:
        first = await until_disconnect(request, stream.__anext__())
    except BaseException:
        await stream.aclose()
        raise

    async def rest() -> AsyncGenerator[T, None]:
        try:
            yield first
            async for item in stream:
                yield item
        finally:
            await stream.aclose()

    return rest()


async def until_disconnect(request: Request, work: Awaitable[T], on_cancel: Callable[[], None] | None = None) -> T:
    """Run ``work`` but cancel it if the client goes away (non-streaming responses).

    ``on_cancel`` is how to stop work that cancelling the task cannot reach (a thread).
    """
    task = asyncio.ensure_future(work)

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(watch())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            if on_cancel is not None:
                on_cancel()
            task.cancel()
            # Let the work unwind (abort its engine request) before answering.
            await asyncio.gather(task, return_exceptions=True)
    if task.cancelled():
        raise RequestCanceled()
    return task.result()
