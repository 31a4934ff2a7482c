"""The embeddings workload (issue 20, Ollama #6214): many clients embedding at once.

cllm (its embedding thread batches the inputs of every queued request into shared decodes) against
``llama-server --embeddings -np N`` (N slots, continuous batching) and ``-np 1`` (one request at a
time, as a server without cross-request batching runs), on an embedding model: a random-weight
Qwen3-Embedding-0.6B shape (last-token pooling) with Qwen's real tokenizer. One and N concurrent
clients, each request a few distinct texts; the figure is inputs embedded per second.

Run only when named: ``python bench/compare.py --workload embed``. Its section of BENCHMARKS.md
sits between its own markers, kept when other workloads are rerun.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from plan import Outcome, Plan
from report import section_head

EMBED = "embed"
MODEL_NAME = "bench-qwen3-embed"
TARGETS = ("cllm", "llama-server", "llama-server-np1")
# gguf.PoolingType.LAST: Qwen3-Embedding pools the last token's state.
POOLING_LAST = 3
BEGIN = "<!-- embeddings: begin (written by bench/compare.py) -->"
END = "<!-- embeddings: end -->"


@dataclass(frozen=True)
class EmbedPlan:
    """What every target is sent: ``clients`` levels of concurrent clients, each request ``inputs``
    distinct texts of ~``prompt_tokens`` tokens, ``requests`` requests per level."""

    slots: int  # cllm's sequences per decode and llama-server -np N's slots
    levels: tuple[int, ...]
    requests: int
    inputs: int
    prompt_tokens: int
    ctx: int  # per slot, every target

    def bench_args(self, url: str, api: str, label: str, json_path: Path) -> list[str]:
        return [
            "--url", url, "--api", api, "--model", MODEL_NAME, "--label", label,
            "--concurrency", ",".join(map(str, self.levels)), "--requests", str(self.requests),
            "--inputs", str(self.inputs), "--prompt-tokens", str(self.prompt_tokens),
            "--json", str(json_path),
        ]  # fmt: skip


# What makes llama-server an embedding server (with the model's own pooling; its defaults otherwise).
LLAMA_SERVER_ARGS = ("--embeddings",)


def _rate(o: Outcome, clients: int) -> float | None:
    row = next((r for r in (o.result or {}).get("levels", []) if r["concurrency"] == clients), None)
    return row.get("tokens_per_s") if row else None


def _cell(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if a is None or not b else f"{a / b:.2f}"


def report(plan: Plan, ep: EmbedPlan, model: Path, outcomes: list[Outcome], versions: list[str]) -> list[str]:
    """The embeddings section of BENCHMARKS.md: inputs/s per target and level, the issue's ratios, commands."""
    loads = "; ".join(f"{o.label} {o.loadavg_before}" for o in outcomes)
    lines = section_head("Embeddings: many clients at once", EMBED, plan, loads, versions)
    lines += [
        f"- Model: random-weight qwen3 of the `{plan.shape}` shape (qwen3-0.6b is Qwen3-Embedding-0.6B's), "
        f"last-token pooling as Qwen3-Embedding, Qwen's tokenizer, Q4_K_M, {model.stat().st_size / 2**20:.1f} MiB.",
        f"- Targets: cllm with {ep.slots} slots (sequences per embedding decode); `llama-server --embeddings "
        f"-np {ep.slots}` and `-np 1` (one request at a time). Every target: {plan.threads} llama.cpp threads, "
        f"{ep.ctx} tokens of context per slot.",
        f"- Requests: cllm through `/api/embed`, llama-server through `/v1/embeddings`; {ep.requests} per level, "
        f"each {ep.inputs} distinct text(s) of ~{ep.prompt_tokens} tokens; one uncounted warm-up request first.",
        "",
    ]
    header = ["target", *[f"inputs/s, {c} client(s)" for c in ep.levels], "errors", "peak RSS MiB"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for o in outcomes:
        errors = sum(r.get("errors", 0) for r in (o.result or {}).get("levels", []))
        rss = _cell(o.peak_rss_kib / 1024 if o.peak_rss_kib else None, 0)
        cells = [_cell(_rate(o, c)) for c in ep.levels]
        lines.append("| " + " | ".join([o.label, *cells, str(errors) if o.result else "–", rss]) + " |")
    by_name = {o.name: o for o in outcomes}
    cllm, many = by_name.get("cllm"), max(ep.levels)
    ratios = []
    for name, target in (("llama-server", "≥ 1.00"), ("llama-server-np1", "several times")):
        other = by_name.get(name)
        if cllm is not None and other is not None:
            ratio = _ratio(_rate(cllm, many), _rate(other, many))
            ratios.append(f"- inputs/s at {many} clients, cllm / {other.label}: {ratio} (target {target})")
    lines += ["", *ratios] if ratios else []
    lines += ["", "### Commands", "", "```sh"]
    for o in outcomes:
        port = o.server.base_url.rsplit(":", 1)[1]
        for command in (o.server.command_line, shlex.join(["cllm", "bench", *o.bench])):
            lines.append(command.replace(f"--port {port}", "--port PORT").replace(f":{port}", ":PORT"))
    lines.append("```")
    failed = [o for o in outcomes if o.error]
    if failed:
        lines += ["", "### Failures", "", *[f"- {o.label}: {o.error}" for o in failed]]
    return lines


def section(report_path: Path) -> str | None:
    """The embeddings section BENCHMARKS.md holds now (markers included), if any."""
    text = report_path.read_text() if report_path.exists() else ""
    start, end = text.find(BEGIN), text.find(END)
    return text[start : end + len(END)] if 0 <= start < end else None


def write(report_path: Path, lines: list[str] | None, kept: str | None) -> None:
    """Put the embeddings section (new ``lines``, else the ``kept`` one) at the end of the report,
    replacing any there: other workloads' writes leave it in place or drop it."""
    text = report_path.read_text() if report_path.exists() else ""
    old = section(report_path)
    if old is not None:
        text = text.replace(old, "")
    home = str(Path.home())
    new = "\n".join([BEGIN, *lines, END]).replace(f"{report_path.parent}/", "").replace(home, "~") if lines else kept
    if new:
        text = (text.rstrip() + "\n\n" if text.strip() else "") + new + "\n"
    report_path.write_text(text)
