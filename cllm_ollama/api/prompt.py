"""Prompts: a conversation rendered with the model's chat template (or a Go template), fitted to
the context by dropping old turns, under a time and size budget, in a thread of its own."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.requests import Request

from ..engine.frontdoor import EngineClient
from ..errors import RequestCanceled
from . import template_workers
from .builtin_templates import builtin_template
from .gotemplate import TemplateError, render_ollama
from .render_budget import PromptTooLong, RenderBudget
from .resolve import ResolvedModel

log = logging.getLogger("cllm.api")
_warned: set[str] = set()  # model templates already reported as unrenderable


@dataclass(frozen=True)
class Rendered:
    """A prompt as text (to see how it ends) and as the tokens to evaluate."""

    tokens: list[int]
    text: str = ""


# Renders a prompt for a loaded model; given a token limit, it may drop old turns to fit it.
# A budget bounds its time and size (a default one if none is given).
Renderer = Callable[[EngineClient, int | None, RenderBudget | None], Rendered]


# One limiter per event loop (tests run several): anyio's are bound to the loop that uses them.
_render_limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anyio.CapacityLimiter] = (
    weakref.WeakKeyDictionary()
)


async def render_prompt(request: Request, render: Renderer, loaded: EngineClient, limit: int | None) -> Rendered:
    """Run ``render`` under the render timeout. If cancelled (the client left), stop it, and
    wait until it has stopped if it had begun: it uses ``loaded``, which its caller holds only
    until this returns.

    Renders take turns on threads of their own, as many as there are render workers: a flood of
    templates that run to their timeout waits here instead of taking the threads every other
    endpoint needs.
    """
    loop = asyncio.get_running_loop()
    limiter = _render_limiters.get(loop)
    if limiter is None:
        limiter = _render_limiters[loop] = anyio.CapacityLimiter(template_workers.WORKERS)
    budget_s = request.app.state.settings.render_timeout
    cancel, began = threading.Event(), threading.Event()
    ended = asyncio.Event()

    def work() -> Rendered:
        began.set()
        try:
            if cancel.is_set():  # cancelled before it began: never touch the model
                raise RequestCanceled()
            return render(loaded, limit, RenderBudget(budget_s, cancel=cancel))
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
                loop.call_soon_threadsafe(ended.set)

    try:
        return await anyio.to_thread.run_sync(work, limiter=limiter)
    except asyncio.CancelledError:
        # NOTE: set before looking at ``began``, which ``work`` sets before looking at ``cancel``:
        # either it sees the cancel, or it is waited for.
        cancel.set()
        if began.is_set():
            await ended.wait()
        raise


def chat_prompt(
    model: ResolvedModel,
    messages: list[dict[str, Any]],
    *,
    thinking: bool,
    tools: list[dict[str, Any]] | None = None,
    go_template: str | None = None,
    think_set: bool = False,
    think_level: str | None = None,
) -> Renderer:
    """Render the prompt as Ollama does: with the model's Go template (its template layer, as
    library models have) when it has one, else with the GGUF's own Jinja chat template (as
    Ollama's llama-server mode does), else ChatML.

    A request's ``template`` replaces the model's; one that cannot be rendered is a 500, as in
    Ollama. A model's Go template (its template layer, which takes precedence over the GGUF's, as
    in Ollama) that cannot be rendered (beyond what gotemplate.py knows) falls back to the GGUF's
    chat template, with a warning in the log; a GGUF with neither gets its family's built-in
    template (``builtin_templates``). Over the limit, the oldest turns go first, keeping system
    messages and the last message, as Ollama's chatPrompt does; what still does not fit is cut at
    the token level later. A ``think`` level (low, medium, high) reaches Jinja templates as
    ``reasoning_effort`` (gpt-oss's) and Go ones as ``.ThinkLevel``.
    """
    levels = {"reasoning_effort": think_level} if think_level else {}
    jinja = model.info.chat_template
    from_request = go_template is not None
    if go_template is None:
        go_template = model.record.template or None

    # The order turns are dropped in: oldest first, never a system message or the last message.
    droppable = [i for i, m in enumerate(messages[:-1]) if m.get("role") != "system"]

    @contextmanager
    def text_renderer(
        loaded: EngineClient, budget: RenderBudget, use_go: bool
    ) -> Iterator[Callable[[list[int] | None], str]]:
        """Renders the messages at the given indexes (all if None) under ``budget``."""
        if use_go:
            assert go_template is not None
            template = go_template

            def render_go(keep: list[int] | None) -> str:
                kept = messages if keep is None else [messages[i] for i in keep]
                return render_ollama(
                    template,
                    kept,
                    tools=tools,
                    think=thinking,
                    think_level=think_level or "",
                    think_set=think_set,
                    budget=budget,
                )

            yield render_go
            return
        with template_workers.POOL.session(
            jinja or builtin_template(model.info),
            messages,
            budget,
            tools=tools,
            enable_thinking=thinking if model.has("thinking") else None,
            bos_token=loaded.bos_text,
            eos_token=loaded.eos_text,
            **levels,
        ) as session:
            yield session.render

    def render(loaded: EngineClient, limit: int | None, budget: RenderBudget | None = None) -> Rendered:
        budget = budget or RenderBudget()
        if go_template is None:
            return fitted(loaded, limit, budget, use_go=False)
        try:
            return fitted(loaded, limit, budget, use_go=True)
        except TemplateError as exc:
            if from_request:
                raise
            _warn_fallback(model, go_template, exc)
        return fitted(loaded, limit, budget, use_go=False)

    def fitted(loaded: EngineClient, limit: int | None, budget: RenderBudget, use_go: bool) -> Rendered:
        # Go templates do not write BOS: the tokenizer adds it.
        add_bos = use_go
        with text_renderer(loaded, budget, use_go) as render_text:
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


def _warn_fallback(model: ResolvedModel, template: str, exc: TemplateError) -> None:
    """Say once per template that a model's Go template is not rendered, and what is instead."""
    key = hashlib.sha256(template.encode()).hexdigest()
    if key in _warned:
        return
    _warned.add(key)
    instead = "the GGUF's chat template" if model.info.chat_template else "ChatML"
    log.warning("%s: its Go template cannot be rendered (%s); using %s instead", model.full_name, exc.message, instead)
