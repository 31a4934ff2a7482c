"""Prompts: a conversation rendered with the model's chat template (or a Go template), fitted to
the context by dropping old turns, under a time and size budget; renders that ran past it are
remembered. ``render_queue`` runs renders in turn across models, on threads of their own."""

from __future__ import annotations

import functools
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
from .builtin_templates import builtin_name, builtin_template, go_template_in_use, jinja_template, template_in_use
from .family_parsers import harmony_in_use, harmony_tools
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

    def fim_tokens(self) -> tuple[int, int, int] | None:
        """The vocabulary's fill-in-the-middle (prefix, suffix, middle) tokens, if it has them."""
        ...


class _Record(Protocol):
    @property
    def template(self) -> str | None: ...

    @property
    def renderer_in_use(self) -> str: ...

    @property
    def parser(self) -> str | None: ...


class PromptModel(Protocol):
    """What rendering needs of a resolved model (the API's ``ResolvedModel`` is one)."""

    @property
    def record(self) -> _Record: ...

    @property
    def info(self) -> GGUFInfo: ...

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
    # Token offsets where the prefix the client marked to keep ends (``ChatPrompt``'s
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


# Renders the messages at the given indexes (all of them if None) into the prompt's text.
TextRenderer = Callable[[list[int] | None], str]


class TurnDropper:
    """One conversation rendered without its oldest turns, to find the fewest to drop for the
    prompt to fit ``limit`` tokens. Each rendering is remembered, so that the bisection never
    renders the same count twice.

    ``droppable``: the indexes of the turns that may go, oldest first; ``count``: how many messages
    there are; ``tokenize`` turns a rendering into the tokens counted against ``limit``.
    """

    def __init__(
        self,
        render_text: TextRenderer,
        tokenize: Callable[[str], list[int]],
        count: int,
        droppable: Sequence[int],
        limit: int | None,
    ) -> None:
        self._render_text = render_text
        self._tokenize = tokenize
        self._count = count
        self._droppable = droppable
        self._limit = limit
        self._tried: dict[int, Rendered | None] = {}
        self._lengths: dict[int, int] = {}  # tokens of each rendering, fitting or not

    def without_oldest(self, n: int) -> Rendered | None:
        """The prompt without the ``n`` oldest droppable turns; None if it does not fit ``limit``
        and dropping more could still help (with none left to drop, it is returned anyway)."""
        gone = set(self._droppable[:n])
        last_resort = self._limit is None or n == len(self._droppable)
        try:
            text = self._render_text([i for i in range(self._count) if i not in gone] if n else None)
        except PromptTooLong:
            if last_resort:
                raise
            self._tried[n] = None
            return None
        tokens = self._tokenize(text)
        self._lengths[n] = len(tokens)
        fits = self._limit is None or len(tokens) < self._limit
        self._tried[n] = Rendered(tokens, text) if fits or last_resort else None
        return self._tried[n]

    def fewest_dropped(self) -> Rendered:
        """The prompt with the fewest oldest turns dropped that fits, for a conversation whose whole
        did not. A turn less never makes the prompt longer, so they are found by bisection: O(log n)
        renders of the conversation, where dropping one at a time was O(n)."""
        low, high = 1, len(self._droppable)
        while low < high:
            mid = (low + high) // 2
            if self.without_oldest(mid) is None:
                low = mid + 1
            else:
                high = mid
        rendered = self._tried.get(low) or self.without_oldest(low)
        assert rendered is not None  # with every droppable turn gone, there is nothing left to try
        return replace(rendered, dropped=max(1, self._lengths.get(0, 0) - len(rendered.tokens)))


class ChatPrompt:
    """A conversation's prompt, rendered as Ollama does: with the model's Go template (its template
    layer, as library models have) when it has one, else with the GGUF's own Jinja chat template
    (as Ollama's llama-server mode does), else its family's built-in template (``builtin_templates``).
    Called with a loaded model's tokenizer, it is a ``Renderer``.

    A request's ``go_template`` replaces the model's; one that cannot be rendered is a 500, as in
    Ollama. A model's Go template that cannot be rendered (beyond what gotemplate knows) falls back
    to the GGUF's chat template, or the built-in one, with a warning in the log. Over the limit, the
    oldest turns go first, keeping system messages and the last message, as Ollama's chatPrompt
    does; what still does not fit is cut at the token level later. A ``think_level`` (low, medium,
    high) reaches Jinja templates as ``reasoning_effort`` (gpt-oss's) and Go ones as ``.ThinkLevel``.

    ``cache_ends`` marks prefixes the client asks to keep (Anthropic's ``cache_control``), each as
    the number of messages after its end; the rendered prompt carries their token offsets
    (``Rendered.marks``): the conversation rendered without those messages shares exactly that
    much with the whole (one more render and tokenization per mark, only when asked).
    """

    def __init__(
        self,
        model: PromptModel,
        messages: list[dict[str, Any]],
        *,
        thinking: bool,
        tools: list[dict[str, Any]] | None = None,
        go_template: str | None = None,
        think_set: bool = False,
        think_level: str | None = None,
        cache_ends: Sequence[int] = (),
    ) -> None:
        self.model = model
        self.messages = messages
        self.thinking = thinking
        self.tools = _shown_tools(model, tools)
        self.think_set = think_set
        self.think_level = think_level
        self.cache_ends = tuple(cache_ends)
        self.jinja = jinja_template(model.info, model.record.renderer_in_use)
        self.from_request = go_template is not None
        if go_template is None:
            go_template = go_template_in_use(model.record.template, model.record.renderer_in_use, model.info)
        self.go_template = go_template
        # The order turns are dropped in: oldest first, never a system message or the last message.
        self.droppable = [i for i, m in enumerate(messages[:-1]) if m.get("role") != "system"]

    @property
    def template(self) -> str:
        """The template tried first: renders that timed out are remembered under it."""
        if self.go_template is not None:
            return self.go_template
        return self.jinja or builtin_template(self.model.info)

    def __call__(self, loaded: Tokenizer, limit: int | None, budget: RenderBudget | None = None) -> Rendered:
        """The prompt for ``loaded``, fitted to ``limit`` tokens, refused at once if the same render
        already ran past this budget's timeout."""
        budget = budget or RenderBudget()
        template = self.template
        key = ""
        if TIMED_OUT.has(template):  # only then is the render worth a digest
            key = self.render_key(loaded, limit)
            if TIMED_OUT.exceeded(template, key, budget.timeout):
                raise RenderTimeout(budget.timeout)
        try:
            return self.render_any(loaded, limit, budget)
        except RenderTimeout:
            TIMED_OUT.add(template, key or self.render_key(loaded, limit), budget.timeout)
            name = self.model.full_name
            log.warning("%s: its template ran past the render timeout; the same render is now refused", name)
            raise

    def render_key(self, loaded: Tokenizer, limit: int | None) -> str:
        """A digest of everything the render depends on: two renders with one key are the same."""
        model = self.model
        variables = (self.tools, self.thinking, self.think_set, self.think_level, model.has("thinking"))
        tokens = (loaded.bos_text, loaded.eos_text)
        return _digest(self.go_template, self.jinja, self.messages, (*variables, *tokens), limit)

    def render_any(self, loaded: Tokenizer, limit: int | None, budget: RenderBudget) -> Rendered:
        """With the Go template if there is one, falling back to Jinja when the model's cannot be rendered."""
        if self.go_template is None:
            return self.fitted(loaded, limit, budget, use_go=False)
        try:
            return self.fitted(loaded, limit, budget, use_go=True)
        except TemplateError as exc:
            if self.from_request:
                raise
            _warn_fallback(self.model, self.go_template, exc)
        return self.fitted(loaded, limit, budget, use_go=False)

    def fitted(self, loaded: Tokenizer, limit: int | None, budget: RenderBudget, use_go: bool) -> Rendered:
        """The whole conversation if it fits ``limit``, else without its fewest oldest turns that do."""
        add_bos = use_go  # Go templates do not write BOS: the tokenizer adds it.

        def tokenize(text: str) -> list[int]:
            return loaded.tokenize(text, add_special=add_bos)

        with self.text_renderer(loaded, budget, use_go) as render_text:
            dropper = TurnDropper(render_text, tokenize, len(self.messages), self.droppable, limit)
            whole = dropper.without_oldest(0)
            if whole is None:
                return dropper.fewest_dropped()
            if self.cache_ends:
                return replace(whole, marks=self.marks(whole.tokens, render_text, tokenize))
            return whole

    @contextmanager
    def text_renderer(self, loaded: Tokenizer, budget: RenderBudget, use_go: bool) -> Iterator[TextRenderer]:
        """Renders of the messages under ``budget``: Go templates in this thread, Jinja ones on a
        render worker held for as long as the context is (``jinja_workers``)."""
        if use_go:
            yield functools.partial(self.render_go, budget)
            return
        thinking: dict[str, Any] = {"reasoning_effort": self.think_level} if self.think_level else {}
        # Defined where the request set think, or the model thinks (as for Go templates below):
        # a renderer's port tells "off" from "unset" (GLM-OCR's /nothink). DeepSeek V3.1's own
        # template reads ``thinking`` instead (and thinks only where it is true).
        if self.think_set or self.model.has("thinking"):
            thinking |= {"enable_thinking": self.thinking, "thinking": self.thinking}
        with jinja_workers.POOL.session(
            self.jinja or builtin_template(self.model.info),
            self.messages,
            budget,
            tools=self.tools,
            bos_token=loaded.bos_text,
            eos_token=loaded.eos_text,
            **thinking,
        ) as session:
            yield session.render

    def render_go(self, budget: RenderBudget, keep: list[int] | None) -> str:
        """The messages at ``keep`` (all if None) rendered with the Go template."""
        assert self.go_template is not None
        kept = self.messages if keep is None else [self.messages[i] for i in keep]
        return render_ollama(self.go_template, kept, tools=self.tools, budget=budget, **self.go_think())

    def go_think(self) -> dict[str, Any]:
        """What a Go template is told of thinking, as Ollama's handlers tell it: a thinking
        model's unset think is true, so set, and true is the level "medium" (ThinkValue.String)."""
        return {
            "think": self.thinking,
            "think_level": (self.think_level or "medium") if self.thinking else "",
            "think_set": self.think_set or self.model.has("thinking"),
        }

    def marks(
        self, tokens: list[int], render_text: TextRenderer, tokenize: Callable[[str], list[int]]
    ) -> tuple[int, ...]:
        """Where each of ``cache_ends``' prefixes ends in ``tokens`` (the whole prompt). A mark the
        template cannot render alone (some refuse a conversation without a user turn) is left out."""
        found: set[int] = set()
        count = len(self.messages)
        for after in self.cache_ends:
            kept = count - after
            if not 0 <= kept <= count:
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
            found.add(len(os.path.commonprefix([tokens, tokenize(text)])))  # noqa: RUF071
        return tuple(sorted(n for n in found if n > 0))


def _shown_tools(model: PromptModel, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The tools as the prompt shows them: renamed for gpt-oss's harmony format, whose parser
    reads the calls' names back (``family_parsers.harmony_tools``)."""
    if not tools:
        return tools
    record = model.record
    template = template_in_use(record.template, model.info, record.renderer_in_use)
    return harmony_tools(tools) if harmony_in_use(template, record.parser) else tools


def _warn_fallback(model: PromptModel, template: str, exc: TemplateError) -> None:
    """Say once per template that a model's Go template is not rendered, and what is instead."""
    key = hashlib.sha256(template.encode()).hexdigest()
    if key in _warned:
        return
    _warned.add(key)
    if model.info.chat_template:
        instead = "the GGUF's chat template"
    else:
        instead = f"the built-in {builtin_name(model.info)} template"
    log.warning("%s: its Go template cannot be rendered (%s); using %s instead", model.full_name, exc.message, instead)
