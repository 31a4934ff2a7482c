"""BENCHMARKS.md's agent section (issue 18): a coding agent's session, cold, turn by turn, warm,
after an unload and after a restart, with the issue's targets checked."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cllm_ollama.cli.bench_workloads import AFTER_RESTART, AFTER_UNLOAD, COLD, WARM
from plan import Outcome, Plan
from report import _errors, _fig, _level, _num, _ratio, _rss, _table, real_model_head, section_tail

TARGET_RATIO = 0.05  # after an unload or a restart, the known preamble's TTFT over its cold prefill


def _phase(level: dict[str, Any], name: str) -> dict[str, Any]:
    return level.get("phases", {}).get(name, {})


def new_tokens(phase: dict[str, Any]) -> float | None:
    """Prompt tokens the server computed: its prompt less what it says it reused."""
    prompt, cached = phase.get("prompt_tokens_mean"), phase.get("cached_tokens_mean")
    return None if prompt is None else prompt - (cached or 0)


def _later_turns(level: dict[str, Any]) -> list[str]:
    names = [name for name in level.get("phases", {}) if name.startswith("turn ")]
    return sorted(names, key=lambda name: int(name.split()[1]))


def _per_token(ttft: float | None, tokens: float | None) -> float | None:
    return None if ttft is None or not tokens else ttft / tokens


def _pairs(outcomes: list[Outcome]) -> list[tuple[Outcome, dict[str, Any]]]:
    """Each target's session run, with the level of its run after a restart (``-restart``)."""
    restarts = {o.name.removesuffix("-restart"): _level(o) for o in outcomes if o.name.endswith("-restart")}
    return [(o, restarts.get(o.name, {})) for o in outcomes if not o.name.endswith("-restart")]


def agent_table(outcomes: list[Outcome]) -> list[str]:
    """One row per target: the known preamble's TTFT at each point of the model's life, and speed."""
    header = ["target", "prompt tokens", "TTFT cold", "TTFT warm", "TTFT after unload", "TTFT after restart",
              "unload / cold", "restart / cold", "cached after restart", "decode tok/s", "generated tok/s",
              "errors", "peak RSS MiB"]  # fmt: skip
    rows = []
    for o, again in _pairs(outcomes):
        lv = _level(o)
        cold, unload, restart = _fig(lv, COLD), _fig(lv, AFTER_UNLOAD), _fig(again, AFTER_RESTART)
        rows.append([
            o.label, _num(_phase(lv, COLD).get("prompt_tokens_mean"), 0), _num(cold, 0), _num(_fig(lv, WARM), 0),
            _num(unload, 0), _num(restart, 0), _ratio(unload, cold), _ratio(restart, cold),
            _num(_phase(again, AFTER_RESTART).get("cached_tokens_mean"), 0), _num(lv.get("decode_tokens_per_s")),
            _num(lv.get("tokens_per_s")), _errors(lv), _rss(o),
        ])  # fmt: skip
    return _table(header, rows)


def turns_table(outcomes: list[Outcome]) -> list[str]:
    """Each later turn per target: the tokens it had to compute, its TTFT, and the TTFT per such token."""
    pairs = [(o, _level(o)) for o, _ in _pairs(outcomes)]
    turns: list[str] = []
    for _, lv in pairs:
        turns += [t for t in _later_turns(lv) if t not in turns]
    header = ["turn"] + [f"{o.label}: {what}" for o, _ in pairs for what in ("new tokens", "TTFT", "ms / new token")]
    rows = []
    for turn in [COLD, *turns]:
        row = [turn]
        for _, lv in pairs:
            phase, ttft = _phase(lv, turn), _fig(lv, turn)
            row += [_num(new_tokens(phase), 0), _num(ttft, 0), _num(_per_token(ttft, new_tokens(phase)), 2)]
        rows.append(row)
    return _table(header, rows)


def verdicts(outcomes: list[Outcome]) -> list[str]:
    """The issue's targets, for cllm, from the tables' figures."""
    pairs = dict((o.name, (o, again)) for o, again in _pairs(outcomes))
    if "cllm" not in pairs:
        return []
    cllm, again = pairs["cllm"]
    lv = _level(cllm)
    cold = _fig(lv, COLD)
    lines = []
    for what, figure in (("an unload", _fig(lv, AFTER_UNLOAD)), ("a restart", _fig(again, AFTER_RESTART))):
        ratio = None if figure is None or not cold else figure / cold
        met = "–" if ratio is None else ("met" if ratio <= TARGET_RATIO else "NOT met")
        lines.append(f"- After {what}: TTFT / cold prefill {_num(ratio, 3)} (target ≤ {TARGET_RATIO}): {met}.")
    per_token = [_per_token(_fig(lv, t), new_tokens(_phase(lv, t))) for t in _later_turns(lv)]
    found = [v for v in per_token if v is not None]
    cold_rate = _per_token(cold, new_tokens(_phase(lv, COLD)))
    if found:
        lines.append(
            f"- Later turns: {_num(min(found), 2)}–{_num(max(found), 2)} ms per new token (cold prefill: "
            f"{_num(cold_rate, 2)} ms per token); last turn / first later turn {_ratio(found[-1], found[0])} "
            "(near 1: TTFT follows the new tokens, not the history's length)."
        )
    for o, _ in _pairs(outcomes):
        if o.name != "cllm":
            ratio = _ratio(lv.get("decode_tokens_per_s"), _level(o).get("decode_tokens_per_s"))
            lines.append(f"- Decode tok/s, cllm / {o.label}: {ratio} (target ≥ 1.00).")
    return lines


def describe(plan: Plan) -> str:
    pp = plan.prefix
    assert pp is not None
    return (
        f"One agent: a ~{pp.agent_tokens}-token preamble (standing for tool definitions and instructions: "
        f"Claude Code sends ~18,800) and a task, then {pp.agent_turns - 1} turns, each re-sending the history "
        "with the answer the server gave, a `read_file` tool call made in it and the call's ~200-token result "
        "(Anthropic's `tool_use` and `tool_result` blocks; OpenAI's `tool_calls` and a `tool` message), at "
        f"most {pp.burst_max_tokens} tokens per answer; then the first turn again with the model loaded "
        "(warm), after an unload, and on the target restarted (cllm on the same store and prompt cache "
        "directory; llama-server has no disk tier)."
    )


def agent_report(
    plan: Plan, model: Path, outcomes: list[Outcome], versions: list[str], chart: Path | None
) -> list[str]:
    """The agent's section: setup, the phases, the turns, the targets, the commands."""
    pp = plan.prefix
    assert pp is not None
    title = "A coding agent's session: cold, warm, after an unload, after a restart (`agent`)"
    lines = real_model_head(title, "agent", plan, outcomes, versions, model)
    lines += [
        f"- Targets: cllm with {pp.slots} slots through `/v1/messages` (system prompt and last message marked "
        f"with `cache_control`, as Claude Code sends them); `llama-server -np {pp.slots}` and `-np 1` through "
        "`/v1/chat/completions` with the same messages (rendered by the same chat template), `--cache-prompt "
        f"--cache-ram 8192`. Every target: {plan.threads} llama.cpp threads, {pp.agent_ctx} tokens of context "
        "per slot, flash attention and KV type on their defaults (auto, f16) on both.",
        "- After an unload: cllm's model unloaded by `keep_alive: 0` (its next request loads it again, inside "
        "the TTFT). llama-server cannot unload: in its stead it serves as many distinct short prompts at once as "
        "it has slots, which push the session out of them, so its row measures its host-RAM cache.",
        "- After a restart: each target stopped and started again; one warm-up request sharing no prefix "
        "loads the model, then the session's first turn. New tokens: the prompt less the tokens the server "
        "reports as reused (cllm: `cache_read_input_tokens`; llama-server: `cached_tokens`). Decode tok/s: "
        "tokens after each answer's first, over the time after it.",
        "",
        describe(plan),
        "",
        *agent_table(outcomes),
        "",
        "Each later turn (and the cold first turn): the tokens it had to compute and its TTFT.",
        "",
        *turns_table(outcomes),
        "",
        *verdicts(outcomes),
    ]
    if chart is not None:
        lines += ["", f"![agent: tokens/s and TTFT]({os.path.relpath(chart, plan.report.parent)})"]
    return lines + section_tail(outcomes, "agent")
