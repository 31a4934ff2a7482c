"""Prompts: a conversation rendered with the model's chat template (or a Go template), fitted to
the context by dropping old turns, under a time and size budget; renders that ran past it are
remembered. ``render_queue`` runs renders in turn across models, on threads of their own."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..errors import CllmError, RequestCanceled
from ..store.gguf_info import GGUFInfo
from . import jinja_workers
from .builtin_templates import builtin_template
from .gotemplate import TemplateError, render_ollama
from .render_budget import PromptTooLong, RenderBudget, RenderTimeout

log = logging.getLogger("cllm.api")
_warned: set[str] = set()  # model templates already reported as unrenderable


class Tokenizer(Protocol):
    """What rendering needs of a loaded model (the engine's ``LoadedModel`` is one): its text and
    special tokens. The chat format never holds the model itself: the caller leases it."""

    @property
    def bos_text(self) -> str: ...

    @property
    def eos_text(self) -> str: ...

    def tokenize(self, text: str, *, add_special: bool = True) -> list[int]: ...


class _Record(Protocol):
    template: str


class PromptModel(Protocol):
    """What rendering needs of a resolved model (the API's ``ResolvedModel`` is one)."""

    record: _Record
    info: GGUFInfo

    @property
    def full_name(self) -> str: ...

    def has(self, capability: str) -> bool: ...


@dataclass(frozen=True)
class Rendered:
    """A prompt as text (to see how it ends) and as the tokens to evaluate."""

    tokens: list[int]
    text: str = ""
    # Tokens of the whole conversation left out to fit the limit (its oldest turns); when the
    # whole was too long even to render, at least one (the count is then unknown).
    dropped: int = 0
    # Token offsets where the prefix the client marked to keep ends (``chat_prompt``'s
    # ``cache_ends``), ascending; none when turns were dropped.
    marks: tuple[int, ...] = ()


# Renders a prompt for a loaded model; given a token limit, it may drop old turns to fit it.
# A budget bounds its time and size (a default one if none is given).
Renderer = Callable[[Tokenizer, int | None, RenderBudget | None], Rendered]


class TimedOut:
    """Renders that ran to their timeout, remembered (as grammar verdicts are) so that the same
    render is refused at once instead of holding a worker for the whole timeout again.

    A render is the template and everything it is given: a template that loops on one
    conversation may render others in microseconds, and a client must not be able to make a
    model's template refused for everyone with one huge conversation. Remembered with the timeout
    it ran past: under a longer one it is tried again. Keyed by template first, so that the common
    case (a template that never timed out) costs one dictionary lookup.
    """

    MAX_TEMPLATES = 64
    MAX_RENDERS = 64  # per template

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._renders: OrderedDict[str, OrderedDict[str, float]] = OrderedDict()

    def has(self, template: str) -> bool:
        return template in self._renders

    def exceeded(self, template: str, render: str, timeout: float) -> bool:
        """Whether this render already ran past ``timeout`` (or a longer one)."""
        with self._lock:
            renders = self._renders.get(template)
            return renders is not None and renders.get(render, -1.0) >= timeout

    def add(self, template: str, render: str, timeout: float) -> None:
        with self._lock:
            renders = self._renders.setdefault(template, OrderedDict())
            self._renders.move_to_end(template)
            renders[render] = max(timeout, renders.get(render, 0.0))
            renders.move_to_end(render)
            while len(renders) > self.MAX_RENDERS:
                renders.popitem(last=False)
            while len(self._renders) > self.MAX_TEMPLATES:
                self._renders.popitem(last=False)


TIMED_OUT = TimedOut()


def _digest(*parts: Any) -> str:
    return hashlib.sha256(
        json.dumps(parts, default=str, ensure_ascii=False).encode("utf-8", "surrogatepass")
    ).hexdigest()


def chat_prompt(
    model: PromptModel,
    messages: list[dict[str, Any]],
    *,
    thinking: bool,
    tools: list[dict[str, Any]] | None = None,
    go_template: str | None = None,
    think_set: bool = False,
    think_level: str | None = None,
    cache_ends: Sequence[int] = (),
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

    ``cache_ends`` marks prefixes the client asks to keep (Anthropic's ``cache_control``), each as
    the number of messages after its end; the rendered prompt carries their token offsets
    (``Rendered.marks``): the conversation rendered without those messages shares exactly that
    much with the whole (one more render and tokenization per mark, only when asked).
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
        loaded: Tokenizer, budget: RenderBudget, use_go: bool
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
        with jinja_workers.POOL.session(
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

    def render(loaded: Tokenizer, limit: int | None, budget: RenderBudget | None = None) -> Rendered:
        budget = budget or RenderBudget()
        template = go_template if go_template is not None else jinja or builtin_template(model.info)
        key = ""
        if TIMED_OUT.has(template):  # only then is the render worth a digest
            key = render_key(loaded, limit)
            if TIMED_OUT.exceeded(template, key, budget.timeout):
                raise RenderTimeout(budget.timeout)
        try:
            return render_any(loaded, limit, budget)
        except RenderTimeout:
            TIMED_OUT.add(template, key or render_key(loaded, limit), budget.timeout)
            log.warning("%s: its template ran past the render timeout; the same render is now refused", model.full_name)
            raise

    def render_key(loaded: Tokenizer, limit: int | None) -> str:
        variables = (tools, thinking, think_set, think_level, model.has("thinking"), loaded.bos_text, loaded.eos_text)
        return _digest(go_template, jinja, messages, variables, limit)

    def render_any(loaded: Tokenizer, limit: int | None, budget: RenderBudget) -> Rendered:
        if go_template is None:
            return fitted(loaded, limit, budget, use_go=False)
        try:
            return fitted(loaded, limit, budget, use_go=True)
        except TemplateError as exc:
            if from_request:
                raise
            _warn_fallback(model, go_template, exc)
        return fitted(loaded, limit, budget, use_go=False)

    def fitted(loaded: Tokenizer, limit: int | None, budget: RenderBudget, use_go: bool) -> Rendered:
        # Go templates do not write BOS: the tokenizer adds it.
        add_bos = use_go
        with text_renderer(loaded, budget, use_go) as render_text:
            tried: dict[int, Rendered | None] = {}
            lengths: dict[int, int] = {}  # tokens of each rendering, fitting or not

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
                lengths[n] = len(tokens)
                fits = limit is None or len(tokens) < limit
                tried[n] = Rendered(tokens, text) if fits or last_resort else None
                return tried[n]

            if (whole := without_oldest(0)) is not None:
                if cache_ends:
                    return replace(whole, marks=marks(whole.tokens, render_text, loaded, add_bos))
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
            return replace(rendered, dropped=max(1, lengths.get(0, 0) - len(rendered.tokens)))

    def marks(
        tokens: list[int], render_text: Callable[[list[int] | None], str], loaded: Tokenizer, add_bos: bool
    ) -> tuple[int, ...]:
        """Where each of ``cache_ends``' prefixes ends in ``tokens`` (the whole prompt). A mark the
        template cannot render alone (some refuse a conversation without a user turn) is left out."""
        found: set[int] = set()
        for after in cache_ends:
            kept = len(messages) - after
            if not 0 <= kept <= len(messages):
                continue
            if after == 0:  # the last message: its end is the prompt's (before the reply's header)
                found.add(len(tokens))
                continue
            try:
                text = render_text(list(range(kept)))
            except (RenderTimeout, RequestCanceled):
                raise
            except (TemplateError, CllmError) as exc:
                log.debug("cache breakpoint %d messages from the end not rendered: %s", after, exc)
                continue
            # commonprefix compares any sequences element by element (here token lists), in C.
            found.add(len(os.path.commonprefix([tokens, loaded.tokenize(text, add_special=add_bos)])))  # noqa: RUF071
        return tuple(sorted(n for n in found if n > 0))

    return render


def _warn_fallback(model: PromptModel, template: str, exc: TemplateError) -> None:
    """Say once per template that a model's Go template is not rendered, and what is instead."""
    key = hashlib.sha256(template.encode()).hexdigest()
    if key in _warned:
        return
    _warned.add(key)
    instead = "the GGUF's chat template" if model.info.chat_template else "ChatML"
    log.warning("%s: its Go template cannot be rendered (%s); using %s instead", model.full_name, exc.message, instead)
