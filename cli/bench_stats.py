"""Pure parts of ``cllm bench``: the prompts it sends and the statistics it reports.

No I/O here, so the figures can be checked on hand-made timings.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# One token each after a space, both in Qwen's vocabulary and in the synthetic one of
# cllm_ollama.testing.ggufs (which merges few whole words), so N words are about N tokens.
_WORDS = (
    "the", "and", "answer", "answers", "are", "as", "capital", "in", "is", "it", "on", "one",
    "question", "return", "sea", "step", "then", "to", "with", "you", "an",
)  # fmt: skip


def make_prompt(n_tokens: int, index: int, seed: int = 0) -> str:
    """About ``n_tokens`` tokens of words, the same for the same arguments.

    The request number leads, so no two prompts share more than a token or two of prefix
    and a server's prompt cache cannot skip their prefill.
    """
    rng = random.Random(f"cllm-bench:{seed}:{index}")
    head = f"{index}:"  # one token per digit, one for the colon
    words = [rng.choice(_WORDS) for _ in range(max(n_tokens - len(head), 1))]
    return head + " " + " ".join(words)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation (numpy's default); None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class RequestTiming:
    """One request as the client saw it; times are ``time.perf_counter()`` seconds."""

    start: float
    end: float = 0.0
    chunk_times: list[float] = field(default_factory=list)  # arrivals of non-empty text chunks
    tokens: int | None = None  # generated tokens reported by the server, if it reports them
    prompt_tokens: int | None = None
    error: str | None = None

    @property
    def generated(self) -> int:
        """The server's count where given, else one token per text chunk."""
        return self.tokens if self.tokens is not None else len(self.chunk_times)


@dataclass(frozen=True)
class LevelStats:
    concurrency: int
    requests: int
    ok: int
    errors: int
    wall_s: float
    generated_tokens: int
    tokens_per_s: float
    requests_per_s: float
    ttft_ms: dict[str, float | None]
    itl_ms: dict[str, float | None]
    prompt_tokens_mean: float | None
    error_samples: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ms(values: Sequence[float]) -> dict[str, float | None]:
    p50, p95 = percentile(values, 50), percentile(values, 95)
    return {
        "p50": None if p50 is None else p50 * 1000,
        "p95": None if p95 is None else p95 * 1000,
        "mean": sum(values) / len(values) * 1000 if values else None,
    }


def summarize(concurrency: int, timings: Sequence[RequestTiming]) -> LevelStats:
    """Aggregate one concurrency level.

    Tokens/s is the generated tokens of the successful requests over the level's wall time
    (first request sent to last response finished); ITL pools the gaps between successive
    text chunks of every successful request.
    """
    good = [t for t in timings if t.error is None]
    wall = max(t.end for t in timings) - min(t.start for t in timings) if timings else 0.0
    tokens = sum(t.generated for t in good)
    ttft = [t.chunk_times[0] - t.start for t in good if t.chunk_times]
    itl = [b - a for t in good for a, b in zip(t.chunk_times, t.chunk_times[1:], strict=False)]
    prompts = [t.prompt_tokens for t in good if t.prompt_tokens is not None]
    errors = [t.error for t in timings if t.error is not None]
    return LevelStats(
        concurrency=concurrency,
        requests=len(timings),
        ok=len(good),
        errors=len(errors),
        wall_s=wall,
        generated_tokens=tokens,
        tokens_per_s=tokens / wall if wall > 0 else 0.0,
        requests_per_s=len(good) / wall if wall > 0 else 0.0,
        ttft_ms=_ms(ttft),
        itl_ms=_ms(itl),
        prompt_tokens_mean=sum(prompts) / len(prompts) if prompts else None,
        error_samples=sorted(set(errors))[:3],
    )
