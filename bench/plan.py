"""What one comparison run holds equal across targets, and what each target produced."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from targets import Server


@dataclass(frozen=True)
class Plan:
    cache: Path
    out: Path
    report: Path
    shape: str
    threads: int
    levels: tuple[int, ...]
    requests: int | None  # per level; None: cllm bench's default, max(2 x level, 8)
    prompt_tokens: int
    max_tokens: int
    ctx: int  # per slot
    targets: tuple[str, ...]
    batched_bench: bool
    quick: bool

    @property
    def slots(self) -> int:
        return max(self.levels)


@dataclass
class Outcome:
    """One server target: how it ran and what ``cllm bench`` measured (or why it failed)."""

    name: str
    server: Server
    bench: list[str]  # cllm bench arguments
    result: dict[str, Any] | None = None
    peak_rss_kib: int | None = None
    loadavg_before: str = ""
    error: str | None = None
