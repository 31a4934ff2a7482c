"""cllm against llama.cpp's llama-server, llama-cpp-python's server and llama-batched-bench, in one run.

Usage: ``python bench/compare.py [--quick]``. Writes bench/results/*.json, bench/results/plot.png
and BENCHMARKS.md; models, sources and builds stay in the cache (~/.cache/cllm-bench).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import click
import llama_build
import make_model
import pyserver_env
import report
from cllm_ollama.cli.bench import plot_results
from plan import Outcome, Plan
from targets import Running, Server, free_port

REPO = Path(__file__).resolve().parent.parent
MODEL_NAME = "bench-qwen3"
TARGETS = ("cllm", "llama-server", "llama-cpp-python")


def parse_args(argv: list[str] | None = None) -> tuple[Plan, bool]:
    """The plan, and whether to stop after preparing the model and the build."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke run: levels 1,4, 4 requests, 32 tokens")
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "cllm-bench")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    p.add_argument("--report", type=Path, default=REPO / "BENCHMARKS.md")
    p.add_argument("--shape", choices=sorted(make_model.SHAPES), default="qwen3-0.6b")
    p.add_argument("--threads", type=int, default=2, help="llama.cpp threads for every target")
    p.add_argument("--concurrency", help="levels [default: 1,8,32; --quick: 1,4]; slots = the highest")
    p.add_argument("--requests", type=int, help="requests per level [default: max(2 x level, 8); --quick: 4]")
    p.add_argument("--prompt-tokens", type=int, default=64)
    p.add_argument("--max-tokens", type=int, help="generated per request [default: 64; --quick: 32]")
    p.add_argument("--ctx", type=int, default=512, help="context per slot, every target")
    p.add_argument("--targets", default=",".join(TARGETS), help="subset of " + ",".join(TARGETS))
    p.add_argument("--no-batched-bench", action="store_true")
    p.add_argument("--prepare-only", action="store_true", help="make the model, the build and the venv, then stop")
    a = p.parse_args(argv)
    levels = a.concurrency or ("1,4" if a.quick else "1,8,32")
    targets = tuple(t for t in a.targets.split(",") if t)
    unknown = set(targets) - set(TARGETS)
    if unknown:
        p.error(f"unknown targets: {', '.join(sorted(unknown))}")
    plan = Plan(
        cache=a.cache.expanduser().resolve(),
        out=a.out.resolve(),
        report=a.report.resolve(),
        shape=a.shape,
        threads=a.threads,
        levels=tuple(int(c) for c in levels.split(",")),
        requests=a.requests or (4 if a.quick else None),
        prompt_tokens=a.prompt_tokens,
        max_tokens=a.max_tokens or (32 if a.quick else 64),
        ctx=a.ctx,
        targets=targets,
        batched_bench=not a.no_batched_bench,
        quick=a.quick,
    )
    return plan, a.prepare_only


def bench_args(plan: Plan, name: str, url: str, api: str, label: str) -> list[str]:
    """Arguments of ``cllm bench``, the same for every target but the endpoint."""
    args = [
        "--url", url, "--api", api, "--model", MODEL_NAME, "--label", label,
        "--concurrency", ",".join(map(str, plan.levels)),
        "--prompt-tokens", str(plan.prompt_tokens), "--max-tokens", str(plan.max_tokens),
        "--json", str(plan.out / f"{name}.json"),
    ]  # fmt: skip
    if plan.requests:
        args += ["--requests", str(plan.requests)]
    return args


def run_target(plan: Plan, outcome: Outcome, setup: Callable[[], None] = lambda: None) -> Outcome:
    """Start the server, wait for it, bench it, read its peak RSS, stop it; errors are recorded."""
    json_path = plan.out / f"{outcome.name}.json"
    json_path.unlink(missing_ok=True)
    outcome.loadavg_before = " ".join(Path("/proc/loadavg").read_text().split()[:2])
    print(f"\n== {outcome.name}: {outcome.server.command_line}", flush=True)
    if float(outcome.loadavg_before.split()[0]) > 0.5:
        print(f"!! load average {outcome.loadavg_before}: other work is running, figures will be noisy")
    try:
        with Running(outcome.server) as running:
            running.wait_ready()
            setup()
            subprocess.run([sys.executable, "-m", "cllm_ollama.cli.bench", *outcome.bench], check=True)
            outcome.peak_rss_kib = running.peak_rss_kib()
        outcome.result = json.loads(json_path.read_text())
    except (RuntimeError, subprocess.CalledProcessError, OSError) as exc:
        outcome.error = str(exc)
        print(f"!! {outcome.name} failed: {exc}", flush=True)
    return outcome


def cllm_outcome(plan: Plan, model: Path, work: Path) -> tuple[Outcome, Callable[[], None]]:
    """``cllm serve`` on an empty store in ``work``, and the ``cllm create`` that imports the model."""
    port = free_port()
    settings = {
        "CLLM_NUM_PARALLEL": str(plan.slots),
        "CLLM_CONTEXT_LENGTH": str(plan.ctx),
        "CLLM_NUM_THREAD": str(plan.threads),
        "CLLM_KEEP_ALIVE": "-1",
        "OLLAMA_MODELS": str(work / "models"),
        "OLLAMA_HOST": f"127.0.0.1:{port}",
    }
    env = os.environ | settings
    cllm = shutil.which("cllm", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    argv = [cllm or "cllm", "serve"]
    log = plan.cache / "logs" / "cllm.log"
    server = Server("cllm", argv, f"http://127.0.0.1:{port}", "/api/version", log, env, settings)
    modelfile = work / "Modelfile"
    modelfile.write_text(f"FROM {model}\n")

    def create() -> None:
        subprocess.run([argv[0], "create", MODEL_NAME, "-f", str(modelfile)], check=True, env=env)

    bench = bench_args(plan, "cllm", server.base_url, "generate", "cllm")
    return Outcome("cllm", server, bench), create


def llama_server_outcome(plan: Plan, binary: Path, model: Path) -> Outcome:
    port = free_port()
    argv = [
        str(binary), "-m", str(model), "-np", str(plan.slots), "-c", str(plan.slots * plan.ctx),
        "-t", str(plan.threads), "--cont-batching", "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    log = plan.cache / "logs" / "llama-server.log"
    server = Server("llama-server", argv, f"http://127.0.0.1:{port}", "/health", log)
    bench = bench_args(plan, "llama-server", server.base_url, "openai-completions", "llama-server")
    return Outcome("llama-server", server, bench)


def python_server_outcome(plan: Plan, python: Path, model: Path) -> Outcome:
    port = free_port()
    argv = [
        str(python), "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL_NAME,
        "--n_threads", str(plan.threads), "--n_threads_batch", str(plan.threads), "--n_ctx", str(plan.ctx),
        # Default True cancels a streaming reply as soon as another request waits: off, so it queues.
        "--interrupt_requests", "false",
        "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    log = plan.cache / "logs" / "llama-cpp-python.log"
    server = Server("llama-cpp-python", argv, f"http://127.0.0.1:{port}", "/v1/models", log)
    label = "llama-cpp-python server"
    bench = bench_args(plan, "llama-cpp-python", server.base_url, "openai-completions", label)
    return Outcome("llama-cpp-python", server, bench)


def run_batched_bench(plan: Plan, binary: Path, model: Path) -> dict[str, Any]:
    """llama-batched-bench at the same batch sizes: decode with no HTTP, no scheduler, no Python."""
    argv = [
        str(binary), "-m", str(model), "-c", str(plan.slots * plan.ctx), "-t", str(plan.threads),
        "-npp", str(plan.prompt_tokens), "-ntg", str(plan.max_tokens),
        "-npl", ",".join(map(str, plan.levels)), "--output-format", "jsonl",
    ]  # fmt: skip
    print(f"\n== llama-batched-bench: {' '.join(argv)}", flush=True)
    log = plan.cache / "logs" / "llama-batched-bench.log"
    with log.open("w") as err:
        out = subprocess.run(argv, check=True, stdout=subprocess.PIPE, stderr=err, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    # S_TG leaves the prefill out; the servers' figure includes it, so keep B x TG / T as well.
    levels = [
        {"concurrency": r["pl"], "tokens_per_s": r["speed_tg"], "prompt_tokens_per_s": r["speed_pp"],
         "tokens_per_s_with_prefill": r["pl"] * r["tg"] / r["t"],
         "ttft_ms": {"p50": None, "p95": None, "mean": None}}
        for r in rows
    ]  # fmt: skip
    return {"label": "llama-batched-bench (no HTTP)", "command": " ".join(argv), "levels": levels}


def versions(binaries: dict[str, Path], python: Path | None) -> list[str]:
    """What ran: cllm (and its git commit), the binding, llama.cpp's own build string."""
    git = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True)
    server = subprocess.run([str(binaries["llama-server"]), "--version"], capture_output=True, text=True)
    build = " ".join(line for line in (server.stdout + server.stderr).splitlines() if line.startswith("version"))
    found = [
        f"cllm {metadata.version('cllm')} (git {git.stdout.strip() or '?'})",
        f"llama-cpp-python {llama_build.binding_version()}: cllm's binding; llama-server and "
        f"llama-batched-bench built from its sdist's vendored llama.cpp ({build or 'version unknown'})",
    ]
    if python is not None:
        found.append(f"llama-cpp-python server: {pyserver_env.llama_cpp_server_version(python)}")
    return found


def main() -> None:
    plan, prepare_only = parse_args()
    for folder in (plan.cache / "logs", plan.out):
        folder.mkdir(parents=True, exist_ok=True)
    version = llama_build.binding_version()
    source = llama_build.source_tree(plan.cache, version)
    vocab = source / "models" / "ggml-vocab-qwen2.gguf"
    model = make_model.ensure_model(plan.cache, vocab, plan.shape, n_threads=plan.threads)
    binaries = llama_build.build_tools(plan.cache, version)
    sdist_root = source.parent.parent
    python = pyserver_env.server_python(plan.cache, sdist_root) if "llama-cpp-python" in plan.targets else None
    if prepare_only:
        return
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(dir=plan.cache, prefix="cllm-store-") as work:
        for name in plan.targets:
            if name == "cllm":
                outcome, create = cllm_outcome(plan, model, Path(work))
                outcomes.append(run_target(plan, outcome, create))
            elif name == "llama-server":
                outcomes.append(run_target(plan, llama_server_outcome(plan, binaries["llama-server"], model)))
            elif python is not None:
                outcomes.append(run_target(plan, python_server_outcome(plan, python, model)))
    batched = run_batched_bench(plan, binaries["llama-batched-bench"], model) if plan.batched_bench else None
    if batched:
        (plan.out / "llama-batched-bench.json").write_text(json.dumps(batched, indent=2) + "\n")
    results = [o.result for o in outcomes if o.result] + ([batched] if batched else [])
    plot = plan.out / "plot.png"
    try:
        plot_results(results, plot)
    except click.ClickException as exc:
        print(f"!! no plot: {exc.message}", flush=True)
        plot = None
    build = llama_build.build_commands(plan.cache, version)
    report.write(plan, model, outcomes, batched, versions(binaries, python), build, plot)
    print(f"\nwrote {plan.report}")


if __name__ == "__main__":
    main()
