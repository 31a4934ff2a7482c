"""``cllm bench``: load any Ollama- or OpenAI-compatible server and report throughput and latency.

``cllm bench plot a.json b.json -o plot.png`` draws saved results side by side.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from cllm_ollama.config import Settings

from .bench_client import CHAT_APIS, EMBEDDING_APIS, Api, BenchError, Target, run_bench, run_workload
from .bench_stats import LevelStats
from .bench_workloads import DEFAULTS, VISION_IMAGE_PX, Kind, Workload

_COLUMNS = (
    ("conc", 5), ("reqs", 5), ("ok", 5), ("err", 4), ("tok/s", 8), ("req/s", 7),
    ("TTFT p50", 9), ("TTFT p95", 9), ("ITL p50", 8), ("ITL p95", 8), ("prompt", 7),
)  # fmt: skip


def parse_levels(text: str) -> list[int]:
    """``"1,4,8"`` -> ``[1, 4, 8]``; every level a positive integer."""
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"not a comma-separated list of integers: {text!r}") from None
    if not levels or min(levels) < 1:
        raise click.BadParameter("levels must be positive integers")
    return levels


def _cell(value: float | None, width: int, digits: int = 1) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.{digits}f}"


_PHASE_WIDTH = 14  # the prefix workloads' first column, wide enough for "short prompt:" under the level


def table_header(first: str = "conc", cached: bool = False, rate: str = "tok/s") -> str:
    """The column names; ``cached`` (the prefix workloads) widens the first column and adds cached tokens;
    ``rate`` names the throughput column (``in/s``: inputs embedded per second)."""
    rest = [(rate if name == "tok/s" else name, width) for name, width in _COLUMNS[1:]]
    columns = [(first, _PHASE_WIDTH if cached else 5), *rest, *([("cached", 7)] if cached else [])]
    return " ".join(f"{name:>{width}}" for name, width in columns)


def table_row(s: LevelStats, cached: bool = False) -> str:
    """One level; latencies in milliseconds."""
    w = [_PHASE_WIDTH if cached else 5] + [width for _, width in _COLUMNS[1:]]
    return " ".join([
        f"{s.concurrency:>{w[0]}}", f"{s.requests:>{w[1]}}", f"{s.ok:>{w[2]}}", f"{s.errors:>{w[3]}}",
        _cell(s.tokens_per_s, w[4]), _cell(s.requests_per_s, w[5], 2),
        _cell(s.ttft_ms["p50"], w[6]), _cell(s.ttft_ms["p95"], w[7]),
        _cell(s.itl_ms["p50"], w[8]), _cell(s.itl_ms["p95"], w[9]),
        _cell(s.prompt_tokens_mean, w[10], 0), *([_cell(s.cached_tokens_mean, 7, 0)] if cached else []),
    ])  # fmt: skip


def phase_row(name: str, p: dict[str, Any]) -> str:
    """One report group of a level (turn 1, later chats, ...), under the level's row; no rates of its own."""
    w = [_PHASE_WIDTH] + [width for _, width in _COLUMNS[1:]]
    return " ".join([
        f"{name + ':':>{w[0]}}", f"{p['requests']:>{w[1]}}", f"{p['ok']:>{w[2]}}", f"{p['errors']:>{w[3]}}",
        f"{'':>{w[4]}}", f"{'':>{w[5]}}",
        _cell(p["ttft_ms"]["p50"], w[6]), _cell(p["ttft_ms"]["p95"], w[7]),
        _cell(p["itl_ms"]["p50"], w[8]), _cell(p["itl_ms"]["p95"], w[9]),
        _cell(p["prompt_tokens_mean"], w[10], 0), _cell(p["cached_tokens_mean"], 7, 0),
    ])  # fmt: skip


def result_document(
    target: Target, label: str, stats: list[LevelStats], warmup: int, workload: Workload | None = None
) -> dict[str, Any]:
    """The ``--json`` file: enough to plot, compare and rerun."""
    return {
        "label": label,
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "target": {"url": target.url, "api": target.api.value, "model": target.model},
        "workload": workload.to_dict() if workload else {"name": Kind.DISTINCT.value},
        "settings": {
            "prompt_tokens": target.prompt_tokens,
            "max_tokens": target.max_tokens,
            "seed": target.seed,
            "raw": target.raw,
            "ignore_eos": target.ignore_eos,
            "warmup": warmup,
            "inputs": target.inputs,
        },
        "levels": [s.to_dict() for s in stats],
    }


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise click.ClickException("the PNG plot needs matplotlib: pip install 'cllm[bench]'") from None
    return plt


def _workload_name(result: dict[str, Any]) -> str:
    return str(result.get("workload", {}).get("name", Kind.DISTINCT.value))


def plot_results(results: list[dict[str, Any]], out: Path) -> None:
    """Tokens/s and TTFT p50 against concurrency, one line per result (matplotlib, imported lazily).

    Results of a prefix workload (chat, ...) are drawn as bars instead: tokens/s per level, and
    TTFT p50 of the whole level and of each report group (turn 1, turns 2+, ...).
    """
    names = {_workload_name(r) for r in results}
    if len(names) > 1:
        raise click.ClickException(f"one plot per workload, not {', '.join(sorted(names))}")
    if names and names != {Kind.DISTINCT.value}:
        _plot_groups(results, out)
        return
    plt = _pyplot()
    fig, (tps, ttft, itl) = plt.subplots(1, 3, figsize=(15, 4.2))
    levels: set[int] = set()
    for result in results:
        rows = result["levels"]
        x = [row["concurrency"] for row in rows]
        levels.update(x)
        tps.plot(x, [row["tokens_per_s"] for row in rows], marker="o", label=result["label"])
        for ax, key, q in ((ttft, "ttft_ms", "p50"), (itl, "itl_ms", "p95")):
            points = [(row["concurrency"], row[key][q]) for row in rows if row.get(key, {}).get(q)]
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", label=result["label"])
    titles = ("generated tokens/s (aggregate)", "time to first token p50 (ms)", "inter-token latency p95 (ms)")
    for ax, title in zip((tps, ttft, itl), titles, strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(levels), [str(c) for c in sorted(levels)])
        ax.set_xlabel("concurrent requests")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    ttft.set_yscale("log")
    itl.set_yscale("log")
    tps.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def _plot_groups(results: list[dict[str, Any]], out: Path) -> None:
    plt = _pyplot()
    workload = _workload_name(results[0])
    # Categories in first-seen order: "12 users" for tokens/s; "12: all", "12: turn 1", ... for TTFT.
    levels: list[int] = []
    rows: list[tuple[int, str]] = []
    for result in results:
        for level in result["levels"]:
            c = level["concurrency"]
            levels += [c] if c not in levels else []
            for name in ["all", *level.get("phases", {})]:
                rows += [(c, name)] if (c, name) not in rows else []

    def ttft(level: dict[str, Any], name: str) -> float:
        source = level if name == "all" else level.get("phases", {}).get(name, {})
        return (source.get("ttft_ms") or {}).get("p50") or 0.0

    fig, (tps, lat) = plt.subplots(1, 2, figsize=(12, 4.4), gridspec_kw={"width_ratios": [1, max(len(rows), 2)]})
    width = 0.8 / max(len(results), 1)
    for i, result in enumerate(results):
        by_level = {level["concurrency"]: level for level in result["levels"]}
        xs = [j + i * width for j in range(len(levels))]
        tps.bar(xs, [by_level.get(c, {}).get("tokens_per_s") or 0.0 for c in levels], width, label=result["label"])
        xs = [j + i * width for j in range(len(rows))]
        lat.bar(xs, [ttft(by_level[c], n) if c in by_level else 0.0 for c, n in rows], width, label=result["label"])
    center = width * (len(results) - 1) / 2
    tps.set_xticks([j + center for j in range(len(levels))], [f"{c} users" for c in levels])
    many = len(levels) > 1
    lat.set_xticks([j + center for j in range(len(rows))], [f"{c}: {n}" if many else n for c, n in rows])
    tps.set_title(f"{workload}: generated tokens/s")
    lat.set_title(f"{workload}: time to first token p50 (ms)")
    for ax in (tps, lat):
        ax.grid(True, axis="y", alpha=0.3)
    lat.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


@click.group("bench", invoke_without_command=True)
@click.option("--url", help="Server base URL [default: from OLLAMA_HOST, http://127.0.0.1:11434].")
@click.option(
    "--workload",
    "-w",
    type=click.Choice([k.value for k in Kind]),
    default=Kind.DISTINCT.value,
    show_default=True,
    help="distinct: one unrelated prompt per request. chat: users in groups sharing a system prompt, "
    "several turns each, every turn re-sending the history. shared-prefix-burst: requests sharing a "
    "prefix, sent at once. preamble: chats sharing a long preamble, then short questions without it. "
    "agent: a coding agent's session (long preamble, turns adding tool results), its first turn again "
    "warm and after an unload (--resume: after a server restart). vision: users each chatting about "
    "their own picture, every turn re-sending it (a model that sees).",
)
@click.option(
    "--api",
    type=click.Choice([a.value for a in Api]),
    help="[default: generate; chat for the others]. embed, openai-embeddings: embedding requests "
    "(distinct workload; the rate column is inputs/s).",
)
@click.option(
    "--inputs", type=click.IntRange(min=1), default=1, show_default=True, help="Embedding APIs: texts per request."
)
@click.option("--model", "-m", help="Model name sent with every request.")
@click.option(
    "--concurrency",
    "-c",
    help="distinct: comma-separated levels [1,4,8,16,32]. preamble: chats in flight at once [1: one after another].",
)
@click.option(
    "--requests",
    "-n",
    type=click.IntRange(min=1),
    help="distinct: per level, at least the level [default: max(2 x level, 8)].",
)
@click.option("--prompt-tokens", type=click.IntRange(min=1), default=64, show_default=True, help="distinct only.")
@click.option(
    "--users",
    "-u",
    help="Levels of the other workloads (comma-separated): chat: users, all active at once [12]; "
    "shared-prefix-burst: requests sent at once [16]; preamble: chats [8].",
)
@click.option("--turns", type=click.IntRange(min=1), help="chat: turns per user [3]; agent: turns [10].")
@click.option(
    "--resume",
    is_flag=True,
    help="agent: only the first turn of the session a full run sent (run it on a restarted server).",
)
@click.option(
    "--evict",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="agent, on a server that cannot unload (llama-server): distinct prompts sent at once instead "
    "(its slot count), so the turn after measures its RAM cache.",
)
@click.option(
    "--system-tokens",
    type=click.IntRange(min=0),
    help="The shared part: chat: system prompt [450]; shared-prefix-burst: prefix [1000]; preamble: preamble [6600].",
)
@click.option(
    "--users-per-system",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="chat: users sharing one system prompt (0: all).",
)
@click.option(
    "--user-tokens",
    type=click.IntRange(min=1),
    help="Per user message (the distinct part) [chat: 32; others: 16].",
)
@click.option(
    "--stagger",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Seconds between the starts of consecutive users (0: a burst).",
)
@click.option("--max-tokens", type=click.IntRange(min=1), help="[distinct: 64; chat: 128; others: 32]")
@click.option("--seed", type=int, default=0, show_default=True, help="Also picks the texts: change it to start cold.")
@click.option("--warmup", type=click.IntRange(min=0), default=1, show_default=True, help="Uncounted requests first.")
@click.option(
    "--warmup-tokens",
    type=click.IntRange(min=1),
    help="distinct: the warm-up prompts' size [default: --prompt-tokens]; small where prompts are long.",
)
@click.option("--timeout", type=click.FloatRange(min=1), default=600.0, show_default=True, help="Per request, s.")
@click.option("--raw/--templated", default=True, show_default=True, help="/api/generate: skip the template.")
@click.option(
    "--ignore-eos/--stop-at-eos",
    default=None,
    help="OpenAI APIs only [distinct: ignore; others: stop, as the native API always does].",
)
@click.option("--label", help="Name of this target in tables and plots [default: api and url].")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="Write results.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), help="Write a PNG.")
@click.pass_context
def bench_command(
    ctx: click.Context,
    url: str | None,
    workload: str,
    api: str | None,
    model: str | None,
    inputs: int,
    concurrency: str | None,
    requests: int | None,
    prompt_tokens: int,
    users: str | None,
    turns: int | None,
    resume: bool,
    evict: int,
    system_tokens: int | None,
    users_per_system: int,
    user_tokens: int | None,
    stagger: float,
    max_tokens: int | None,
    seed: int,
    warmup: int,
    warmup_tokens: int | None,
    timeout: float,
    raw: bool,
    ignore_eos: bool | None,
    label: str | None,
    json_path: Path | None,
    plot_path: Path | None,
) -> None:
    """Measure generated tokens/s, TTFT and inter-token latency at each level of a workload.

    distinct (the default): every request streams a distinct prompt of about --prompt-tokens
    tokens and asks for exactly --max-tokens tokens greedily, so runs against different servers
    compare. The other workloads share prefixes between requests, as chat front ends do, and
    report TTFT per part of the workload (turn 1 apart from later turns; the first chat apart
    from later ones). Texts depend only on --seed; answers are greedy.
    """
    if ctx.invoked_subcommand is not None:
        return
    if not model:
        raise click.UsageError("--model is required")
    kind = Kind(workload)
    eos = (kind is Kind.DISTINCT) if ignore_eos is None else ignore_eos
    target = replace(_target(kind, url, api, model, prompt_tokens, max_tokens, inputs), seed=seed, raw=raw)
    target = replace(target, timeout_s=timeout, ignore_eos=eos)
    label = label or f"{target.api.value} {target.url}"
    show = _printer(cached=kind is not Kind.DISTINCT)
    shape: Workload | None = None
    try:
        if kind is Kind.DISTINCT:
            stats = _run_distinct(target, label, concurrency, requests, users, warmup, warmup_tokens, show)
        else:
            shape = _workload(kind, concurrency, turns, system_tokens, users_per_system, user_tokens, stagger)
            shape = _resumed(shape, resume, evict)
            stats = _run_shaped(target, label, shape, users, warmup, show)
    except BenchError as exc:
        raise click.ClickException(str(exc)) from None
    _save(result_document(target, label, stats, warmup, shape), json_path, plot_path)


def _save(document: dict[str, Any], json_path: Path | None, plot_path: Path | None) -> None:
    """The results as ``--json`` and ``--plot`` ask."""
    if json_path:
        json_path.write_text(json.dumps(document, indent=2) + "\n")
    if plot_path:
        plot_results([document], plot_path)


def _target(
    kind: Kind, url: str | None, api: str | None, model: str, prompt_tokens: int, max_tokens: int | None, inputs: int
) -> Target:
    """Where to send and what each request asks for: the workload's API and token defaults filled
    in (conversations need an API that takes them), the URL and key from the environment."""
    chosen = Api(api) if api is not None else (Api.GENERATE if kind is Kind.DISTINCT else Api.CHAT)
    if kind is not Kind.DISTINCT and chosen not in CHAT_APIS:
        raise click.UsageError(
            f"--workload {kind.value} sends conversations: use --api chat or openai-chat (or anthropic-messages)"
        )
    settings = Settings.from_env()
    return Target(
        url=url or settings.host.url,
        api=chosen,
        model=model,
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens or int(str(DEFAULTS[kind]["max_tokens"])),
        api_key=settings.client_api_key,
        inputs=inputs,
    )


def _printer(cached: bool) -> Callable[[LevelStats], None]:
    """Prints each level's row, its phases and its error samples as the level finishes."""

    def show(stats: LevelStats) -> None:
        click.echo(table_row(stats, cached=cached))
        for name, figures in stats.phases.items():
            click.echo(phase_row(name, figures))
        for sample in stats.error_samples:
            click.echo(f"  error: {sample}", err=True)

    return show


def _run_distinct(
    target: Target,
    label: str,
    concurrency: str | None,
    requests: int | None,
    users: str | None,
    warmup: int,
    warmup_tokens: int | None,
    show: Callable[[LevelStats], None],
) -> list[LevelStats]:
    """The distinct workload: each concurrency level sends its own distinct prompts."""
    if users is not None:
        raise click.UsageError("--users is for the other workloads; distinct uses --concurrency")
    c_levels = parse_levels(concurrency or str(DEFAULTS[Kind.DISTINCT]["levels"]))
    levels = [(c, max(requests, c) if requests else max(2 * c, 8)) for c in c_levels]
    embedding = target.api in EMBEDDING_APIS
    per_request = (
        f"{target.inputs} input(s) of ~{target.prompt_tokens} tokens per request"
        if embedding
        else f"prompt ~{target.prompt_tokens} tokens, {target.max_tokens} generated"
    )
    click.echo(f"{label}: model {target.model}, {per_request}")
    click.echo(table_header(rate="in/s" if embedding else "tok/s"))
    return asyncio.run(run_bench(target, levels, warmup, show, warmup_tokens))


def _run_shaped(
    target: Target, label: str, shape: Workload, users: str | None, warmup: int, show: Callable[[LevelStats], None]
) -> list[LevelStats]:
    """A workload that shares prefixes, at each level of users."""
    u_levels = parse_levels(users or str(DEFAULTS[shape.kind]["levels"]))
    click.echo(f"{label}: model {target.model}, {describe(shape, target.max_tokens)}")
    click.echo(table_header("users", cached=True))
    return asyncio.run(run_workload(target, shape, u_levels, warmup=warmup, on_level=show))


def _workload(
    kind: Kind,
    concurrency: str | None,
    turns: int | None,
    system_tokens: int | None,
    users_per_system: int,
    user_tokens: int | None,
    stagger: float,
) -> Workload:
    """The prefix workload the options describe, with the kind's defaults filled in."""
    defaults = DEFAULTS[kind]
    in_flight = 0
    if concurrency is not None:
        if kind is not Kind.PREAMBLE:
            raise click.UsageError(f"--workload {kind.value} takes its levels from --users, not --concurrency")
        found = parse_levels(concurrency)
        if len(found) != 1:
            raise click.UsageError("preamble: --concurrency is one number, the chats in flight at once")
        in_flight = found[0]
    elif kind is Kind.PREAMBLE:
        in_flight = 1
    return Workload(
        kind=kind,
        turns=(turns or int(str(defaults.get("turns", 3)))) if kind in (Kind.CHAT, Kind.AGENT, Kind.VISION) else 1,
        system_tokens=int(str(defaults["system_tokens"])) if system_tokens is None else system_tokens,
        users_per_system=users_per_system,
        user_tokens=user_tokens or int(str(defaults["user_tokens"])),
        stagger_s=stagger,
        in_flight=in_flight,
    )


def _resumed(shape: Workload, resume: bool, evict: int) -> Workload:
    """``--resume`` and ``--evict``, which only the agent workload takes (``--evict``: ignored by others)."""
    if resume and shape.kind is not Kind.AGENT:
        raise click.UsageError("--resume is for --workload agent")
    return replace(shape, resume=resume, evict=evict if shape.kind is Kind.AGENT else 1)


def describe(w: Workload, max_tokens: int) -> str:
    """One line saying what a prefix workload sends."""
    answer = f"up to {max_tokens} tokens per answer"
    if w.kind is Kind.CHAT:
        share = f"{w.users_per_system} users" if w.users_per_system else "all users"
        system = f"system prompt ~{w.system_tokens} tokens per {share}" if w.system_tokens else "no system prompt"
        start = f"users start {w.stagger_s:g} s apart" if w.stagger_s else "users start at once"
        return f"chat: {w.turns} turns, {system}, user messages ~{w.user_tokens} tokens, {answer}, {start}"
    if w.kind is Kind.AGENT:
        if w.resume:
            return f"agent, after a restart: the ~{w.system_tokens}-token preamble's first turn, {answer}"
        return (
            f"agent: ~{w.system_tokens}-token preamble, {w.turns} turns adding ~{w.user_tokens}-token tool "
            f"results, {answer}; then its first turn warm and after an unload"
        )
    if w.kind is Kind.VISION:
        px = VISION_IMAGE_PX
        return (
            f"vision: {w.turns} turns, a {px}x{px} picture per user in the first message, re-sent every turn, "
            f"user messages ~{w.user_tokens} tokens, {answer}"
        )
    if w.kind is Kind.BURST:
        return f"burst: ~{w.system_tokens}-token shared prefix, ~{w.user_tokens}-token distinct suffixes, {answer}"
    return (
        f"preamble: ~{w.system_tokens}-token shared preamble, ~{w.user_tokens}-token questions, "
        f"{w.in_flight or 'all'} chat(s) at once, {answer}; then short questions alone"
    )


@bench_command.command("plot")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False, path_type=Path))
def plot_command(results: tuple[Path, ...], output: Path) -> None:
    """Draw several ``--json`` results in one PNG, one line per result."""
    plot_results([json.loads(path.read_text()) for path in results], output)


if __name__ == "__main__":
    bench_command()
