"""Pure parts of ``cllm bench``: the prompts it sends and the statistics it reports.

No I/O here, so the figures can be checked on hand-made timings.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
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


def make_text(n_tokens: int, key: str, seed: int = 0) -> str:
    """About ``n_tokens`` tokens of words led by ``key``, the same for the same arguments.

    The prefix workloads build system prompts and user messages with it: texts with different
    keys differ from their first token on, texts with the same key are identical.
    """
    rng = random.Random(f"cllm-bench-text:{seed}:{key}")
    head = f"{key}:"
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
    cached_tokens: int | None = None  # prompt tokens the server says it did not compute again
    error: str | None = None
    phase: str = ""  # prefix workloads: which part of the workload (turn 1, later chats, ...)
    answer_parts: list[str] = field(default_factory=list)  # the answer's text (no thinking), as streamed

    @property
    def generated(self) -> int:
        """The server's count where given, else one token per text chunk."""
        return self.tokens if self.tokens is not None else len(self.chunk_times)

    @property
    def answer(self) -> str:
        return "".join(self.answer_parts)


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
    cached_tokens_mean: float | None = None
    phases: dict[str, dict[str, Any]] = field(default_factory=dict)  # report row name -> its figures
    decode_tokens_per_s: float | None = None  # after each request's first token: the decode speed alone

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ms(values: Sequence[float]) -> dict[str, float | None]:
    p50, p95, p99 = percentile(values, 50), percentile(values, 95), percentile(values, 99)
    return {
        "p50": None if p50 is None else p50 * 1000,
        "p95": None if p95 is None else p95 * 1000,
        "p99": None if p99 is None else p99 * 1000,
        "mean": sum(values) / len(values) * 1000 if values else None,
    }


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _latencies(good: Sequence[RequestTiming]) -> tuple[list[float], list[float]]:
    """TTFTs, and the gaps between successive text chunks pooled over the requests, in seconds."""
    ttft = [t.chunk_times[0] - t.start for t in good if t.chunk_times]
    itl = [b - a for t in good for a, b in zip(t.chunk_times, t.chunk_times[1:], strict=False)]
    return ttft, itl


def decode_rate(good: Sequence[RequestTiming]) -> float | None:
    """Generated tokens per second after the first one, pooled: the decode speed alone, which a
    level's tokens/s (prefill included in its wall time) hides when prompts are long."""
    spans = [(t.generated - 1, t.chunk_times[-1] - t.chunk_times[0]) for t in good if len(t.chunk_times) > 1]
    seconds = sum(s for _, s in spans)
    return sum(n for n, _ in spans) / seconds if seconds > 0 else None


def phase_stats(timings: Sequence[RequestTiming]) -> dict[str, Any]:
    """The latency figures of a subset of a level's requests (its tokens/s belongs to the whole level)."""
    good = [t for t in timings if t.error is None]
    ttft, itl = _latencies(good)
    return {
        "requests": len(timings),
        "ok": len(good),
        "errors": len(timings) - len(good),
        "ttft_ms": _ms(ttft),
        "itl_ms": _ms(itl),
        "prompt_tokens_mean": _mean([t.prompt_tokens for t in good if t.prompt_tokens is not None]),
        "cached_tokens_mean": _mean([t.cached_tokens for t in good if t.cached_tokens is not None]),
        "generated_tokens": sum(t.generated for t in good),
        "decode_tokens_per_s": decode_rate(good),
    }


def summarize(
    concurrency: int, timings: Sequence[RequestTiming], groups: Mapping[str, Sequence[str]] | None = None
) -> LevelStats:
    """Aggregate one concurrency level.

    Tokens/s is the generated tokens of the successful requests over the level's wall time
    (first request sent to last response finished); ITL pools the gaps between successive
    text chunks of every successful request. ``groups`` (report row -> the phases it pools)
    adds per-phase figures, such as the first turn of a chat apart from the later ones.
    """
    good = [t for t in timings if t.error is None]
    wall = max(t.end for t in timings) - min(t.start for t in timings) if timings else 0.0
    tokens = sum(t.generated for t in good)
    ttft, itl = _latencies(good)
    prompts = [t.prompt_tokens for t in good if t.prompt_tokens is not None]
    errors = [t.error for t in timings if t.error is not None]
    phases = {name: phase_stats([t for t in timings if t.phase in members]) for name, members in (groups or {}).items()}
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
        cached_tokens_mean=_mean([t.cached_tokens for t in good if t.cached_tokens is not None]),
        phases=phases,
        decode_tokens_per_s=decode_rate(good),
    )
