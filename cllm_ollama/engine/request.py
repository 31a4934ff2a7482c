"""What crosses the engine boundary: an immutable request in, plain events out.

The API layer builds a ``Request`` once, at the edge; the engine never sees JSON. Everything
that changes while a request runs lives on its ``Slot``, not here.
"""

from __future__ import annotations

import enum
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from .blocks import block_keys
from .media import Media, Part, position_after, whole_prefix

_ids = itertools.count(1)


def next_request_id() -> int:
    return next(_ids)


@dataclass(frozen=True)
class SamplingParams:
    """Per-request sampling, with Ollama's defaults (api/types.go DefaultOptions)."""

    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.9
    min_p: float = 0.0
    typical_p: float = 1.0
    repeat_last_n: int = 64
    repeat_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int = -1
    # GBNF grammar text (from `format`, `grammar` or a forced tool call); None = unconstrained.
    grammar: str | None = None
    # The output text the grammar holds after (a thinking block's close): the model thinks freely
    # until it writes it, as Ollama applies a format once thinking ends. Empty: from the first token.
    grammar_after: str = ""
    # DRY ("don't repeat yourself"), llama-server's names and defaults: off while the multiplier is 0.
    dry_multiplier: float = 0.0
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_penalty_last_n: int = -1  # -1: the whole context
    dry_sequence_breakers: tuple[str, ...] = ("\n", ":", '"', "*")
    # XTC ("exclude top choices"): off while the probability is 0 (or the threshold above 0.5).
    xtc_probability: float = 0.0
    xtc_threshold: float = 0.1

    @property
    def dry(self) -> bool:
        return self.dry_multiplier > 0.0 and self.dry_penalty_last_n != 0

    @property
    def slow_to_build(self) -> bool:
        """Whether llama.cpp's chain for these takes long to build: a grammar is parsed, and DRY
        detokenizes the whole vocabulary once per sequence breaker (tens of ms for the default four)."""
        return self.grammar is not None or self.dry

    @property
    def greedy(self) -> bool:
        """Plain argmax gives the token: no grammar, no temperature, no DRY (which acts on logits)."""
        return self.temperature <= 0.0 and self.grammar is None and not self.dry

    @property
    def reproducible(self) -> bool:
        """Sent again, the request should answer as it did: greedy, or sampled from a fixed seed.
        An unseeded draw differs every time anyway, so nothing is spent keeping it the same."""
        return self.temperature <= 0.0 or self.seed >= 0

    @property
    def prime_window(self) -> int:
        """Prompt tokens the chain's penalties look back on (the larger of the two windows)."""
        return max(self.repeat_last_n, self.dry_penalty_last_n if self.dry else 0)


class MediaInput(Protocol):
    """A prompt's text runs and images as tokenized with them (``binding.MediaPrompt`` is one).

    Owned by its request: handed to ``generate`` it belongs to the engine, which closes it once the
    request ends (never while its image is being encoded), always before the projector.
    """

    @property
    def parts(self) -> Sequence[Part]: ...

    def encode(self, item: Any) -> Any: ...

    def decode(self, ctx: Any, item: Any, embd: Any, pos: int, seq_id: int, rows: range | None = None) -> int: ...

    def piece(self, item: Any, embd: Any, pos: int, rows: range) -> tuple[Any, Any]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Request:
    """One generation: prompt token ids, how to sample, and when to stop."""

    prompt: tuple[int, ...]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    # -1 = until end-of-generation or the context is full; -2 = fill the context.
    num_predict: int = -1
    stop: tuple[str, ...] = ()
    # This request's context window; None = the slot's. Smaller never forces a reload.
    num_ctx: int | None = None
    # -1: no log probabilities; 0: the sampled token's; N: and the N most likely alternatives.
    logprobs: int = -1
    id: int = field(default_factory=next_request_id)
    arrival_ns: int = field(default_factory=time.perf_counter_ns)
    # Prompt lengths whose KV the client asked to keep (Anthropic's ``cache_control``
    # breakpoints), ascending: a prefill chunk ends at each, and the state there is saved.
    keep: tuple[int, ...] = ()
    # With images: ``prompt`` is then ``media.cell_keys(media.parts)``, one key per KV cell.
    media: MediaInput | None = field(default=None, compare=False, repr=False)

    @cached_property
    def prefix_keys(self) -> list[int]:
        """The prompt's block-hash chain (``blocks``), computed once: prefix matching's index key."""
        return block_keys(self.prompt)

    @cached_property
    def media_items(self) -> dict[int, Media]:
        """The prompt's media items (images, tiles, audio windows) by their first cell (empty for text)."""
        out: dict[int, Media] = {}
        cell = 0
        for part in self.media.parts if self.media is not None else ():
            if isinstance(part, Sequence):
                cell += len(part)
            else:
                out[cell] = part
                cell += part.n_tokens
        return out

    def whole(self, n_cells: int) -> int:
        """``n_cells`` cut back to the start of a media item it ends inside: KV holds items whole."""
        return whole_prefix(self.media.parts, n_cells) if self.media_items else n_cells  # type: ignore[union-attr]

    def position_after(self, n_cells: int) -> int:
        """The position that follows the first ``n_cells`` cells (a whole prefix)."""
        return position_after(self.media.parts, n_cells) if self.media_items else n_cells  # type: ignore[union-attr]

    def next_keep(self, cell: int) -> int:
        """The first length to keep after ``cell`` (the prompt's length if none)."""
        return next((n for n in self.keep if n > cell), len(self.prompt))

    def next_media(self, cell: int) -> int:
        """The first cell of the first media item at or after ``cell`` (the prompt's length if none)."""
        return min((start for start in self.media_items if start >= cell), default=len(self.prompt))


class FinishReason(enum.StrEnum):
    STOP = "stop"
    LENGTH = "length"
    CANCELED = "canceled"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Event:
    """Output of one step for one request: new text, and on the last one, why and how long.

    ``text`` is already valid UTF-8 with stop strings removed; ``tokens`` are the ids sampled
    in this step (for ``context`` and counting).
    """

    request_id: int
    text: str
    tokens: tuple[int, ...] = ()
    finish: FinishReason | None = None
    stats: Stats | None = None
    error: str | None = None
    logprob: TokenLogprob | None = None


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """A sampled token's log probability under the model (raw logits, before any sampler)."""

    token: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True, slots=True)
class Stats:
    """Counters of a finished request, durations in integer nanoseconds (Ollama's unit)."""

    prompt_tokens: int
    prompt_cached: int
    prompt_eval_ns: int
    eval_tokens: int
    eval_ns: int
    # Waiting for a slot: from reaching the engine to admission (vLLM's request_queue_time).
    queue_ns: int = 0
