"""Output shapes more than one endpoint writes: Ollama's timestamps and metrics, the truncation
note, token counts as usage, and log probabilities (one entry shape for Ollama and OpenAI)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..engine.request import Stats, TokenLogprob


def created_at() -> str:
    """RFC 3339 with fractional seconds in UTC, as Go's time.Time marshals."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def metrics(t_start: int, load_ns: int, stats: Stats | None) -> dict[str, int]:
    """Ollama's nanosecond metrics; zero values are left out as Go's omitempty does."""
    out = {"total_duration": time.perf_counter_ns() - t_start, "load_duration": load_ns}
    if stats is not None:
        out |= {
            "prompt_eval_count": stats.prompt_tokens,
            "prompt_eval_duration": stats.prompt_eval_ns,
            "eval_count": stats.eval_tokens,
            "eval_duration": stats.eval_ns,
        }
    return {k: v for k, v in out.items() if v}


# The response field that says a prompt was cut to fit the context, and by how many tokens:
# in the native done chunk and in /v1's and /v1/messages' usage, only when it was cut.
TRUNCATED = "truncated_prompt_tokens"


def truncation(dropped: int) -> dict[str, int]:
    """``{TRUNCATED: n}`` when ``n`` prompt tokens were cut (old turns dropped, or the middle),
    else nothing: an uncut response stays exactly Ollama's, or OpenAI's, or Anthropic's."""
    return {TRUNCATED: dropped} if dropped > 0 else {}


@dataclass(frozen=True)
class Usage:
    """Token counts of a finished generation (zero when it has none); ``cached`` counts prompt
    tokens whose KV was reused, not computed."""

    prompt: int = 0
    completion: int = 0
    cached: int = 0

    @classmethod
    def of(cls, stats: Stats | None) -> Usage:
        return cls() if stats is None else cls(stats.prompt_tokens, stats.eval_tokens, stats.prompt_cached)

    @property
    def total(self) -> int:
        return self.prompt + self.completion


def logprob_json(piece: Callable[[int], bytes], lp: TokenLogprob, top: bool) -> dict[str, Any]:
    """A sampled token's log probability, with its ``top`` alternatives when asked for."""

    def entry(token: int, logprob: float) -> dict[str, Any]:
        text = piece(token)
        return {"token": text.decode("utf-8", "replace"), "logprob": logprob, "bytes": list(text)}

    out = entry(lp.token, lp.logprob)
    if top:
        out["top_logprobs"] = [entry(t, p) for t, p in lp.top]
    return out
