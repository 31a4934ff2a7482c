"""What one comparison run holds equal across targets, and what each target produced."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from targets import Server

if TYPE_CHECKING:
    from embed import EmbedPlan

DISTINCT = "distinct"
PREFIX_WORKLOADS = ("chat", "shared-prefix-burst", "preamble")
WORKLOADS = (DISTINCT, *PREFIX_WORKLOADS)  # what "all" runs
# Issue 18's coding-agent session, run only when named: a 16k-token cold prefill per target and
# phase takes long on a small machine. Each target then runs it again on a restarted server.
AGENT = "agent"
SESSION_WORKLOADS = (*PREFIX_WORKLOADS, AGENT)  # on the real-weight model
# Issue 18's long contexts: prefill and decode speed at 16k and 32k tokens, one slot; also named only.
LONG = "long"
# Issue 20's many clients embedding at once (bench/embed.py), run only when named.
EMBED = "embed"
# Issue 17's images (bench/vision_bench.py), run only when named: on a random-weight gemma3 and a
# bench-size projector, against cllm and llama-server --mmproj.
VISION = "vision"
SELECTABLE = (*WORKLOADS, AGENT, LONG, EMBED, VISION)
# A context every agent preamble fits in, for cllm and llama-server alike (Qwen2.5's trained length).
AGENT_CTX = 32768


@dataclass(frozen=True)
class PrefixPlan:
    """The prefix workloads (issue 7): on the real-weight model, against cllm and llama-server -np N and -np 1."""

    slots: int  # cllm's and llama-server -np N's; the -np 1 target has one
    ctx: int  # per slot, every target
    users: int  # chat
    turns: int
    system_tokens: int
    users_per_system: int  # 0: all users share one system prompt
    user_tokens: int
    stagger: float
    max_tokens: int
    burst: int  # shared-prefix-burst: requests sent at once
    burst_prefix: int
    burst_max_tokens: int
    preamble_tokens: int
    preamble_chats: int
    preamble_in_flight: int
    real_model: Path | None  # None: fetched with tests/harness/real_model.py
    agent_tokens: int = 16000
    agent_turns: int = 10
    vision_users: int = 6
    vision_turns: int = 3
    vision_max_tokens: int = 64

    @property
    def agent_ctx(self) -> int:
        """Context per slot for the agent: 32k as agents need, more if its preamble, turns of ~232
        tokens and room to spare do not fit."""
        need = self.agent_tokens + self.agent_turns * 232 + 1024
        return max(AGENT_CTX, -(-need // 1024) * 1024)

    def bench_args(self, workload: str) -> list[str]:
        """``cllm bench`` arguments that say what the workload sends (the same for every target)."""
        if workload == "chat":
            return [
                "--workload", "chat", "--users", str(self.users), "--turns", str(self.turns),
                "--system-tokens", str(self.system_tokens), "--users-per-system", str(self.users_per_system),
                "--user-tokens", str(self.user_tokens), "--stagger", f"{self.stagger:g}",
                "--max-tokens", str(self.max_tokens),
            ]  # fmt: skip
        if workload == "shared-prefix-burst":
            return [
                "--workload", workload, "--users", str(self.burst), "--system-tokens", str(self.burst_prefix),
                "--max-tokens", str(self.burst_max_tokens),
            ]  # fmt: skip
        if workload == "preamble":
            return [
                "--workload", workload, "--users", str(self.preamble_chats), "--concurrency",
                str(self.preamble_in_flight), "--system-tokens", str(self.preamble_tokens),
                "--max-tokens", str(self.burst_max_tokens),
            ]  # fmt: skip
        if workload == VISION:
            return [
                "--workload", VISION, "--users", str(self.vision_users), "--turns", str(self.vision_turns),
                "--user-tokens", str(self.user_tokens), "--max-tokens", str(self.vision_max_tokens),
            ]  # fmt: skip
        if workload == AGENT:
            return [
                "--workload", AGENT, "--system-tokens", str(self.agent_tokens), "--turns", str(self.agent_turns),
                "--max-tokens", str(self.burst_max_tokens),
            ]  # fmt: skip
        raise ValueError(f"not a prefix workload: {workload}")


@dataclass(frozen=True)
class LongPlan:
    """The long-context workload: one cold prompt after another at each depth, on one slot, with
    every setting that changes llama.cpp's speed the same for cllm and llama-server."""

    depths: tuple[int, ...]  # tokens of context: the prompt and the answer together
    ctx: int  # the slot's context, both targets
    requests: int  # per depth, each a distinct prompt (nothing cached)
    max_tokens: int  # generated per request
    flash_attention: bool
    kv_type: str = "f16"
    n_batch: int = 2048  # llama-server's default; micro-batches of 512 on both
    margin: int = 64  # tokens left free for the prompt's approximate length

    def prompt_tokens(self, depth: int) -> int:
        return depth - self.max_tokens - self.margin


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
    workloads: tuple[str, ...] = (DISTINCT,)
    prefix: PrefixPlan | None = None
    long: LongPlan | None = None  # when the long workload runs
    embed: EmbedPlan | None = None  # when the embed workload runs

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
    workload: str = DISTINCT
    label: str = ""  # how tables name it; "" for the distinct workload's fixed names
