"""``cllm bench``: load any Ollama- or OpenAI-compatible server and report throughput and latency.

``cllm bench plot a.json b.json -o plot.png`` draws saved results side by side.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from pathlib import Path
from typing import Any

import click

from ..config import Settings
from .bench_client import Api, BenchError, Target, run_bench
from .bench_stats import LevelStats

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


def table_header() -> str:
    return " ".join(f"{name:>{width}}" for name, width in _COLUMNS)


def table_row(s: LevelStats) -> str:
    """One level; latencies in milliseconds."""
    w = [width for _, width in _COLUMNS]
    return " ".join([
        f"{s.concurrency:>{w[0]}}", f"{s.requests:>{w[1]}}", f"{s.ok:>{w[2]}}", f"{s.errors:>{w[3]}}",
        _cell(s.tokens_per_s, w[4]), _cell(s.requests_per_s, w[5], 2),
        _cell(s.ttft_ms["p50"], w[6]), _cell(s.ttft_ms["p95"], w[7]),
        _cell(s.itl_ms["p50"], w[8]), _cell(s.itl_ms["p95"], w[9]),
        _cell(s.prompt_tokens_mean, w[10], 0),
    ])  # fmt: skip


def result_document(target: Target, label: str, stats: list[LevelStats], warmup: int) -> dict[str, Any]:
    """The ``--json`` file: enough to plot, compare and rerun."""
    return {
        "label": label,
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "target": {"url": target.url, "api": target.api.value, "model": target.model},
        "settings": {
            "prompt_tokens": target.prompt_tokens,
            "max_tokens": target.max_tokens,
            "seed": target.seed,
            "raw": target.raw,
            "ignore_eos": target.ignore_eos,
            "warmup": warmup,
        },
        "levels": [s.to_dict() for s in stats],
    }


def plot_results(results: list[dict[str, Any]], out: Path) -> None:
    """Tokens/s and TTFT p50 against concurrency, one line per result (matplotlib, imported lazily)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise click.ClickException("the PNG plot needs matplotlib: pip install 'cllm[bench]'") from None
    fig, (tps, ttft) = plt.subplots(1, 2, figsize=(11, 4.2))
    levels: set[int] = set()
    for result in results:
        rows = result["levels"]
        x = [row["concurrency"] for row in rows]
        levels.update(x)
        tps.plot(x, [row["tokens_per_s"] for row in rows], marker="o", label=result["label"])
        points = [(row["concurrency"], row["ttft_ms"]["p50"]) for row in rows if row["ttft_ms"]["p50"]]
        if points:
            ttft.plot(*zip(*points, strict=True), marker="o", label=result["label"])
    for ax, title in ((tps, "generated tokens/s (aggregate)"), (ttft, "time to first token p50 (ms)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(levels), [str(c) for c in sorted(levels)])
        ax.set_xlabel("concurrent requests")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    ttft.set_yscale("log")
    tps.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


@click.group("bench", invoke_without_command=True)
@click.option("--url", help="Server base URL [default: from OLLAMA_HOST, http://127.0.0.1:11434].")
@click.option("--api", type=click.Choice([a.value for a in Api]), default=Api.GENERATE.value, show_default=True)
@click.option("--model", "-m", help="Model name sent with every request.")
@click.option("--concurrency", "-c", default="1,4,8,16,32", show_default=True, help="Comma-separated levels.")
@click.option(
    "--requests",
    "-n",
    type=click.IntRange(min=1),
    help="Per level, at least the level [default: max(2 x level, 8)].",
)
@click.option("--prompt-tokens", type=click.IntRange(min=1), default=64, show_default=True)
@click.option("--max-tokens", type=click.IntRange(min=1), default=64, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--warmup", type=click.IntRange(min=0), default=1, show_default=True, help="Uncounted requests first.")
@click.option("--timeout", type=click.FloatRange(min=1), default=600.0, show_default=True, help="Per request, s.")
@click.option("--raw/--templated", default=True, show_default=True, help="/api/generate: skip the template.")
@click.option("--ignore-eos/--stop-at-eos", default=True, show_default=True, help="OpenAI APIs only.")
@click.option("--label", help="Name of this target in tables and plots [default: api and url].")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="Write results.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), help="Write a PNG.")
@click.pass_context
def bench_command(
    ctx: click.Context,
    url: str | None,
    api: str,
    model: str | None,
    concurrency: str,
    requests: int | None,
    prompt_tokens: int,
    max_tokens: int,
    seed: int,
    warmup: int,
    timeout: float,
    raw: bool,
    ignore_eos: bool,
    label: str | None,
    json_path: Path | None,
    plot_path: Path | None,
) -> None:
    """Measure generated tokens/s, TTFT and inter-token latency at each concurrency level.

    Every request streams a distinct prompt of about --prompt-tokens tokens and asks for
    exactly --max-tokens tokens greedily, so runs against different servers compare.
    """
    if ctx.invoked_subcommand is not None:
        return
    if not model:
        raise click.UsageError("--model is required")
    url = url or Settings.from_env().host.url
    target = Target(
        url=url,
        api=Api(api),
        model=model,
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        seed=seed,
        raw=raw,
        ignore_eos=ignore_eos,
        timeout_s=timeout,
    )
    levels = [(c, max(requests, c) if requests else max(2 * c, 8)) for c in parse_levels(concurrency)]
    label = label or f"{api} {url}"
    click.echo(f"{label}: model {model}, prompt ~{prompt_tokens} tokens, {max_tokens} generated")
    click.echo(table_header())

    def show(stats: LevelStats) -> None:
        click.echo(table_row(stats))
        for sample in stats.error_samples:
            click.echo(f"  error: {sample}", err=True)

    try:
        stats = asyncio.run(run_bench(target, levels, warmup=warmup, on_level=show))
    except BenchError as exc:
        raise click.ClickException(str(exc)) from None
    document = result_document(target, label, stats, warmup)
    if json_path:
        json_path.write_text(json.dumps(document, indent=2) + "\n")
    if plot_path:
        plot_results([document], plot_path)


@bench_command.command("plot")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False, path_type=Path))
def plot_command(results: tuple[Path, ...], output: Path) -> None:
    """Draw several ``--json`` results in one PNG, one line per result."""
    plot_results([json.loads(path.read_text()) for path in results], output)


if __name__ == "__main__":
    bench_command()
