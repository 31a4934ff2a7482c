"""BENCHMARKS.md's long-context section (issue 18): prefill and decode speed at each depth, cllm
against llama-server on one slot with the same llama.cpp settings."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from plan import Outcome, Plan
from report import _any_port, _num, _ratio, _rss, _table, real_model_head, section_tail


def _row(result: dict[str, Any] | None) -> dict[str, Any]:
    levels = (result or {}).get("levels") or []
    return levels[0] if levels else {}


def prefill_rate(level: dict[str, Any]) -> float | None:
    """Prompt tokens per second until the first token: the prompt (the server's count) over TTFT p50."""
    prompt, ttft = level.get("prompt_tokens_mean"), (level.get("ttft_ms") or {}).get("p50")
    return None if not prompt or not ttft else prompt / (ttft / 1000)


def long_table(plan: Plan, outcomes: list[Outcome], results: dict[str, dict[int, dict[str, Any]]]) -> list[str]:
    """One row per depth and target, then cllm over llama-server at each depth."""
    lp = plan.long
    assert lp is not None
    header = ["context", "target", "prompt tokens", "TTFT p50", "prefill tok/s", "decode tok/s",
              "generated tokens", "errors"]  # fmt: skip
    rows = []
    for depth in lp.depths:
        for o in outcomes:
            lv = _row(results.get(o.name, {}).get(depth))
            rows.append([
                str(depth), o.label, _num(lv.get("prompt_tokens_mean"), 0),
                _num((lv.get("ttft_ms") or {}).get("p50"), 0),
                _num(prefill_rate(lv)), _num(lv.get("decode_tokens_per_s")), str(lv.get("generated_tokens", "–")),
                f"{lv['errors']} / {lv['requests']}" if lv else "–",
            ])  # fmt: skip
    lines = _table(header, rows)
    if {"cllm", "llama-server"} <= set(results):
        lines.append("")
        for depth in lp.depths:
            ours, theirs = _row(results["cllm"].get(depth)), _row(results["llama-server"].get(depth))
            lines.append(
                f"- {depth} tokens, cllm / llama-server: prefill {_ratio(prefill_rate(ours), prefill_rate(theirs))}, "
                f"decode {_ratio(ours.get('decode_tokens_per_s'), theirs.get('decode_tokens_per_s'))} (target ≥ 1.00)."
            )
    return lines


def long_report(
    plan: Plan,
    model: Path,
    outcomes: list[Outcome],
    results: dict[str, dict[int, dict[str, Any]]],
    versions: list[str],
) -> list[str]:
    """The long-context section: setup, the table, the commands."""
    lp = plan.long
    assert lp is not None
    fa = "on" if lp.flash_attention else "off"
    title = "Long contexts: prefill and decode speed at depth (`long`)"
    lines = real_model_head(title, "long", plan, outcomes, versions, model)
    lines += [
        f"- Targets: cllm and `llama-server -np 1`, each one slot of {lp.ctx} tokens, {plan.threads} llama.cpp "
        f"threads, flash attention {fa}, K and V cache {lp.kv_type}, batches of {lp.n_batch} tokens in "
        "micro-batches of 512; prompt caches on their defaults. cllm through `/api/generate` (raw), "
        "llama-server through `/v1/completions`: the same text, no template.",
        f"- At each depth: {lp.requests} distinct prompt(s) of the depth less {lp.max_tokens + lp.margin} tokens, "
        f"one at a time (nothing cached), {lp.max_tokens} tokens generated greedily (llama-server ignores "
        "end-of-generation, cllm has no such option: its count is in the table). Prefill tok/s: the prompt "
        "over TTFT p50; decode tok/s: the tokens after the first over the time after it.",
        "",
        *long_table(plan, outcomes, results),
    ]
    runs = [
        [_any_port(o, shlex.join(["cllm", "bench", *o.bench, "--prompt-tokens", str(lp.prompt_tokens(d))]))
         for d in lp.depths]
        for o in outcomes
    ]  # fmt: skip
    lines += ["", "Peak RSS (MiB): " + ", ".join(f"{o.label} {_rss(o)}" for o in outcomes) + "."]
    return lines + section_tail(outcomes, "long", runs)
