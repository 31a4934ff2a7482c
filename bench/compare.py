"""cllm against llama.cpp's llama-server, llama-cpp-python's server and llama-batched-bench, in one run.

Usage: ``python bench/compare.py [--quick] [--workload distinct,chat,shared-prefix-burst,preamble]``.
``--workload agent``, ``long`` and ``embed`` run only when named.

- distinct: unrelated prompts on a random-weight model, against cllm, llama-server and
  llama-cpp-python's server, with llama-batched-bench as the ceiling.
- chat, shared-prefix-burst, preamble (issue 7): prompts that share prefixes, on the real-weight
  Qwen2.5-Coder-0.5B-Instruct (fetched by tests/harness/real_model.py), against cllm,
  ``llama-server -np N`` (its defaults: prompt cache and host-RAM cache on) and ``llama-server
  -np 1`` (how Ollama runs it by default); every target restarted for every workload.
- agent (issue 18, only when named): a coding agent's session, cllm through ``/v1/messages``,
  llama-server through ``/v1/chat/completions``: cold, turn by turn, warm, after an unload (llama-server:
  after its slots served other prompts) and after a restart.
- long (issue 18, only when named): prefill and decode speed at 16k and 32k tokens of context, cllm
  against ``llama-server -np 1`` on the same context, threads, flash attention, KV type and batch.

Writes bench/results/ (*.json and plot.png; <workload>/*.json and plot-<workload>.png) and
BENCHMARKS.md: each part (distinct, the prefix workloads, agent, long) is rewritten only by a run
of it, so parts can be rerun alone. Models, sources and builds stay in ~/.cache/cllm-bench.
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
import embed
import llama_build
import make_model
import pyserver_env
import real_model  # tests/harness/real_model.py, through bench/real_model.py
import report
import report_agent
import report_long
import vision_bench
from cllm_ollama.cli.bench import plot_results
from plan import (
    AGENT,
    DISTINCT,
    EMBED,
    LONG,
    PREFIX_WORKLOADS,
    SELECTABLE,
    SESSION_WORKLOADS,
    VISION,
    WORKLOADS,
    LongPlan,
    Outcome,
    Plan,
    PrefixPlan,
)
from targets import Running, Server, free_port

REPO = Path(__file__).resolve().parent.parent
MODEL_NAME = "bench-qwen3"
REAL_MODEL_NAME = "bench-qwen25-coder"
# Per request of the agent and long workloads: a cold 16k or 32k-token prefill on two cores takes minutes.
LONG_TIMEOUT_S = 1800
DISTINCT_TARGETS = ("cllm", "llama-server", "llama-cpp-python")
PREFIX_TARGETS = ("cllm", "llama-server", "llama-server-np1")
TARGETS = (*DISTINCT_TARGETS, "llama-server-np1")


def _parser() -> argparse.ArgumentParser:
    """The command line: the distinct workload's settings, then each other workload's group."""
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
    p.add_argument(
        "--targets",
        default=",".join(TARGETS),
        help=f"subset of {','.join(TARGETS)} (distinct runs the first three, the prefix workloads "
        "cllm, llama-server and llama-server-np1)",
    )
    p.add_argument("--no-batched-bench", action="store_true")
    p.add_argument("--prepare-only", action="store_true", help="make the models, the build and the venv, then stop")
    p.add_argument(
        "--workload",
        default="all",
        help=f"comma-separated, of {','.join(SELECTABLE)}, or all (all but agent, long and embed) [default: all]",
    )
    _prefix_args(p)
    _long_and_embed_args(p)
    return p


def _prefix_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("prefix workloads (chat, shared-prefix-burst, preamble)")
    g.add_argument("--slots", type=int, default=8, help="slots of cllm and llama-server -np N")
    g.add_argument("--chat-ctx", type=int, default=8192, help="context per slot, every target")
    g.add_argument("--users", type=int, help="chat: users, all at once [12; --quick: 2]")
    g.add_argument("--turns", type=int, help="chat: turns per user [3; --quick: 2]")
    g.add_argument("--system-tokens", type=int, help="chat: system prompt [450; --quick: 64]")
    g.add_argument("--users-per-system", type=int, default=0, help="chat: users sharing one system prompt (0: all)")
    g.add_argument("--user-tokens", type=int, default=32, help="chat: tokens per user message")
    g.add_argument("--stagger", type=float, default=0.0, help="chat: seconds between user starts (0: a burst)")
    g.add_argument("--chat-max-tokens", type=int, help="chat: most tokens per answer [128; --quick: 8]")
    g.add_argument("--burst", type=int, help="shared-prefix-burst: requests at once [16; --quick: 4]")
    g.add_argument("--burst-prefix", type=int, help="shared-prefix-burst: prefix tokens [1000; --quick: 128]")
    g.add_argument("--preamble-tokens", type=int, help="preamble: tokens [6600; --quick: 512]")
    g.add_argument("--preamble-chats", type=int, help="preamble: chats [4; --quick: 2]")
    g.add_argument("--preamble-in-flight", type=int, default=1, help="preamble: chats at once (1: one by one)")
    g.add_argument("--short-max-tokens", type=int, help="burst and preamble: tokens per answer [32; --quick: 8]")
    g.add_argument("--agent-tokens", type=int, help="agent: preamble tokens [16000; --quick: 1024]")
    g.add_argument("--agent-turns", type=int, help="agent: turns [10; --quick: 3]")
    g.add_argument("--vision-users", type=int, help="vision: users chatting at once [6; --quick: 2]")
    g.add_argument("--vision-turns", type=int, help="vision: turns per user, each re-sending the image [3; --quick: 2]")
    g.add_argument("--real-model", type=Path, help="the GGUF to use [default: fetched by tests/harness/real_model.py]")


def _long_and_embed_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("long contexts (long)")
    g.add_argument("--long-depths", help="tokens of context, comma-separated [16384,32768; --quick: 1024,2048]")
    g.add_argument("--long-requests", type=int, help="cold prompts per depth [2; --quick: 1]")
    g.add_argument("--long-max-tokens", type=int, help="generated per prompt [128; --quick: 16]")
    g.add_argument("--flash-attention", choices=("on", "off"), default="on", help="both targets [on]")
    e = p.add_argument_group("embed workload (only when named)")
    e.add_argument("--embed-slots", type=int, default=8, help="cllm's slots and llama-server -np N's")
    e.add_argument("--embed-concurrency", default="1,8", help="concurrent clients, comma-separated")
    e.add_argument("--embed-requests", type=int, help="requests per level [64; --quick: 4]")
    e.add_argument("--embed-inputs", type=int, default=1, help="texts per request")
    e.add_argument("--embed-prompt-tokens", type=int, default=64, help="tokens per text")


def _prefix_plan(a: argparse.Namespace, pick: Callable[[int | None, int, int], int]) -> PrefixPlan:
    """The session workloads' settings (chat, burst, preamble, agent, vision), ``pick`` choosing
    between a given value, the default and the --quick one."""
    return PrefixPlan(
        slots=a.slots,
        ctx=a.chat_ctx,
        users=pick(a.users, 12, 2),
        turns=pick(a.turns, 3, 2),
        system_tokens=pick(a.system_tokens, 450, 64),
        users_per_system=a.users_per_system,
        user_tokens=a.user_tokens,
        stagger=a.stagger,
        max_tokens=pick(a.chat_max_tokens, 128, 8),
        burst=pick(a.burst, 16, 4),
        burst_prefix=pick(a.burst_prefix, 1000, 128),
        burst_max_tokens=pick(a.short_max_tokens, 32, 8),
        preamble_tokens=pick(a.preamble_tokens, 6600, 512),
        preamble_chats=pick(a.preamble_chats, 4, 2),
        preamble_in_flight=a.preamble_in_flight,
        real_model=a.real_model.expanduser().resolve() if a.real_model else None,
        agent_tokens=pick(a.agent_tokens, 16000, 1024),
        agent_turns=pick(a.agent_turns, 10, 3),
        vision_users=pick(a.vision_users, 6, 2),
        vision_turns=pick(a.vision_turns, 3, 2),
        vision_max_tokens=pick(a.chat_max_tokens, 64, 8),
    )


def parse_args(argv: list[str] | None = None) -> tuple[Plan, bool]:
    """The plan, and whether to stop after preparing the model and the build."""
    p = _parser()
    a = p.parse_args(argv)
    levels = a.concurrency or ("1,4" if a.quick else "1,8,32")
    targets = tuple(t for t in a.targets.split(",") if t)
    unknown = set(targets) - set(TARGETS)
    if unknown:
        p.error(f"unknown targets: {', '.join(sorted(unknown))}")
    workloads = WORKLOADS if a.workload == "all" else tuple(w for w in a.workload.split(",") if w)
    unknown = set(workloads) - set(SELECTABLE)
    if unknown or not workloads:
        p.error(f"unknown workloads: {', '.join(sorted(unknown))}; choose from {', '.join(SELECTABLE)} or all")
    quick = a.quick

    def pick(value: int | None, default: int, small: int) -> int:
        return value if value is not None else (small if quick else default)

    prefix = _prefix_plan(a, pick)
    depths = tuple(int(d) for d in (a.long_depths or ("1024,2048" if quick else "16384,32768")).split(","))
    long = LongPlan(
        depths=depths,
        ctx=max(depths),
        requests=pick(a.long_requests, 2, 1),
        max_tokens=pick(a.long_max_tokens, 128, 16),
        flash_attention=a.flash_attention == "on",
    )
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
        workloads=tuple(w for w in SELECTABLE if w in workloads),
        prefix=prefix if set(workloads) & {*SESSION_WORKLOADS, LONG, VISION} else None,
        long=long if LONG in workloads else None,
        embed=embed.EmbedPlan(
            slots=a.embed_slots,
            levels=tuple(int(c) for c in a.embed_concurrency.split(",")),
            requests=pick(a.embed_requests, 64, 4),
            inputs=a.embed_inputs,
            prompt_tokens=a.embed_prompt_tokens,
            ctx=a.ctx,
        )
        if EMBED in workloads
        else None,
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


def _nothing() -> None:
    pass


def result_path(plan: Plan, workload: str, name: str) -> Path:
    """Where ``cllm bench`` writes a target's results: the distinct workload's at the top, as before."""
    return plan.out / f"{name}.json" if workload == DISTINCT else plan.out / workload / f"{name}.json"


def run_target(
    plan: Plan,
    outcome: Outcome,
    setup: Callable[[], None] = lambda: None,
    runs: list[tuple[list[str], Path]] | None = None,
) -> Outcome:
    """Start the server, wait for it, bench it, read its peak RSS, stop it; errors are recorded.

    ``runs``: several ``cllm bench`` runs on the one server (their arguments and the JSON each
    writes) instead of the outcome's own; its result is then the last run's.
    """
    runs = runs or [(outcome.bench, result_path(plan, outcome.workload, outcome.name))]
    for _, path in runs:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
    outcome.loadavg_before = " ".join(Path("/proc/loadavg").read_text().split()[:2])
    print(f"\n== {outcome.workload}: {outcome.name}: {outcome.server.command_line}", flush=True)
    if float(outcome.loadavg_before.split()[0]) > 0.5:
        print(f"!! load average {outcome.loadavg_before}: other work is running, figures will be noisy")
    try:
        with Running(outcome.server) as running:
            running.wait_ready()
            setup()
            for args, _ in runs:
                subprocess.run([sys.executable, "-m", "cllm_ollama.cli.bench", *args], check=True)
            outcome.peak_rss_kib = running.peak_rss_kib()
        outcome.result = json.loads(runs[-1][1].read_text())
    except (RuntimeError, subprocess.CalledProcessError, OSError) as exc:
        outcome.error = str(exc)
        print(f"!! {outcome.name} failed: {exc}", flush=True)
    return outcome


def cllm_outcome(plan: Plan, model: Path, work: Path) -> tuple[Outcome, Callable[[], None]]:
    """``cllm serve`` on an empty store in ``work``, and the ``cllm create`` that imports the model."""
    server, create = cllm_server(plan, model, MODEL_NAME, work, plan.slots, plan.ctx)
    bench = bench_args(plan, "cllm", server.base_url, "generate", "cllm")
    return Outcome("cllm", server, bench), create


def cllm_server(
    plan: Plan,
    model: Path,
    name: str,
    work: Path,
    slots: int,
    ctx: int,
    projector: Path | None = None,
    extra: dict[str, str] | None = None,
) -> tuple[Server, Callable[[], None]]:
    """The ``cllm serve`` command on the store in ``work``, and what imports ``model`` there as ``name``
    (with ``projector`` as its projector layer: a second FROM, as in Ollama); ``extra``: more settings."""
    port = free_port()
    settings = {
        "CLLM_NUM_PARALLEL": str(slots),
        "CLLM_CONTEXT_LENGTH": str(ctx),
        "CLLM_NUM_THREAD": str(plan.threads),
        "CLLM_KEEP_ALIVE": "-1",
        **(extra or {}),
        "OLLAMA_MODELS": str(work / "models"),
        "OLLAMA_HOST": f"127.0.0.1:{port}",
    }
    env = os.environ | settings
    cllm = shutil.which("cllm", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    argv = [cllm or "cllm", "serve"]
    log = plan.cache / "logs" / "cllm.log"
    server = Server("cllm", argv, f"http://127.0.0.1:{port}", "/api/version", log, env, settings)
    modelfile = work / f"Modelfile.{name}"
    modelfile.write_text(f"FROM {model}\n" + (f"FROM {projector}\n" if projector else ""))
    created = work / f".created-{name}"

    def create() -> None:
        # Once per store: the prefix workloads restart the server for every workload.
        if not created.exists():
            subprocess.run([argv[0], "create", name, "-f", str(modelfile)], check=True, env=env)
            created.touch()

    return server, create


def llama_server_outcome(plan: Plan, binary: Path, model: Path) -> Outcome:
    server = llama_server(plan, binary, model, "llama-server", plan.slots, plan.ctx)
    bench = bench_args(plan, "llama-server", server.base_url, "openai-completions", "llama-server")
    return Outcome("llama-server", server, bench)


def llama_server(
    plan: Plan, binary: Path, model: Path, name: str, slots: int, ctx: int, extra: tuple[str, ...] = ()
) -> Server:
    """llama-server with ``slots`` slots of ``ctx`` tokens each, and ``extra``; on its defaults otherwise."""
    port = free_port()
    argv = [
        str(binary), "-m", str(model), "-np", str(slots), "-c", str(slots * ctx),
        "-t", str(plan.threads), "--cont-batching", *extra, "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    log = plan.cache / "logs" / f"{name}.log"
    return Server(name, argv, f"http://127.0.0.1:{port}", "/health", log)


def prefix_outcomes(
    plan: Plan, workload: str, binary: Path, model: Path, work: Path, projector: Path | None = None
) -> list[tuple[Outcome, Callable[[], None]]]:
    """The prefix workload's targets, in order: cllm, llama-server -np N, llama-server -np 1
    (serving ``projector`` beside the model for the vision workload)."""
    assert plan.prefix is not None
    pp = plan.prefix
    found: list[tuple[Outcome, Callable[[], None]]] = []
    agent = workload == AGENT
    ctx = pp.agent_ctx if agent else pp.ctx
    model_name = vision_bench.MODEL_NAME if projector else REAL_MODEL_NAME
    for name in (t for t in PREFIX_TARGETS if t in plan.targets):
        setup, evict = _nothing, []
        if name == "cllm":
            server, setup = cllm_server(plan, model, model_name, work, pp.slots, ctx, projector)
            # The agent speaks Anthropic's Messages API, as Claude Code does.
            api, label = "anthropic-messages" if agent else "chat", f"cllm ({pp.slots} slots)"
        else:
            slots = pp.slots if name == "llama-server" else 1
            mmproj = ("--mmproj", str(projector)) if projector else ()
            # The agent's yardstick: the prompt cache and its host-RAM tier, named though on by default.
            cache = ("--cache-prompt", "--cache-ram", "8192") if agent else ()
            server = llama_server(plan, binary, model, name, slots, ctx, (*mmproj, *cache))
            api, label = "openai-chat", f"llama-server {'--mmproj ' if projector else ''}-np {slots}"
            evict = ["--evict", str(slots)] if agent else []  # it cannot unload: its slots serve others
        bench = [
            "--url", server.base_url, "--api", api, "--model", model_name, "--label", label,
            *pp.bench_args(workload), *evict, *(["--timeout", str(LONG_TIMEOUT_S)] if agent else []),
            "--json", str(result_path(plan, workload, name)),
        ]  # fmt: skip
        found.append((Outcome(name, server, bench, workload=workload, label=label), setup))
        if workload == AGENT:
            # The same target started again (a restart; cllm on the same store and prompt cache
            # directory): the session's known preamble once more.
            resumed = [*bench[:-1], str(result_path(plan, workload, f"{name}-restart")), "--resume"]
            found.append((Outcome(f"{name}-restart", server, resumed, workload=workload, label=label), setup))
    return found


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
    found = [f"cllm {metadata.version('cllm')} (git {git.stdout.strip() or '?'})"]
    if "llama-server" in binaries:
        server = subprocess.run([str(binaries["llama-server"]), "--version"], capture_output=True, text=True)
        build = " ".join(line for line in (server.stdout + server.stderr).splitlines() if line.startswith("version"))
        found.append(
            f"llama-cpp-python {llama_build.binding_version()}: cllm's binding; llama-server and "
            f"llama-batched-bench built from its sdist's vendored llama.cpp ({build or 'version unknown'})"
        )
    else:
        found.append(f"llama-cpp-python {llama_build.binding_version()}: cllm's binding (llama.cpp tools not used)")
    if python is not None:
        found.append(f"llama-cpp-python server: {pyserver_env.llama_cpp_server_version(python)}")
    return found


def prefix_model(plan: Plan) -> Path:
    """The real-weight GGUF: the one given, else the cached or freshly fetched one."""
    assert plan.prefix is not None
    if plan.prefix.real_model is not None:
        return plan.prefix.real_model
    try:
        return real_model.real_model_path(quiet=False)
    except real_model.RealModelUnavailable as exc:
        raise SystemExit(f"!! the prefix workloads need the real-weight model: {exc}") from None


def plot(results: list[dict[str, Any]], path: Path) -> Path | None:
    try:
        plot_results(results, path)
    except click.ClickException as exc:
        print(f"!! no plot: {exc.message}", flush=True)
        return None
    return path


def run_distinct(plan: Plan, binaries: dict[str, Path], model: Path, python: Path | None) -> list[str]:
    """The distinct workload on every target; the lines of its report."""
    version = llama_build.binding_version()
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(dir=plan.cache, prefix="cllm-store-") as work:
        for name in (t for t in plan.targets if t in DISTINCT_TARGETS):
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
    chart = plot(results, plan.out / "plot.png")
    build = llama_build.build_commands(plan.cache, version)
    return report.distinct_report(plan, model, outcomes, batched, versions(binaries, python), build, chart)


def run_sessions(
    plan: Plan,
    binaries: dict[str, Path],
    model: Path | None,
    workloads: tuple[str, ...],
    vision: tuple[Path, Path] | None = None,
) -> tuple[list[Outcome], dict[str, Path | None]]:
    """Each session workload on cllm, llama-server -np N and -np 1 in turn (the vision workload on
    ``vision``'s model and projector); their outcomes and plots."""
    outcomes: list[Outcome] = []
    charts: dict[str, Path | None] = {}
    with tempfile.TemporaryDirectory(dir=plan.cache, prefix="cllm-store-") as work:
        for workload in workloads:
            binary = binaries.get("llama-server", Path("llama-server"))
            if workload == VISION:
                assert vision is not None
                text, mmproj = vision
                targets = prefix_outcomes(plan, workload, binary, text, Path(work), mmproj)
            else:
                assert model is not None
                targets = prefix_outcomes(plan, workload, binary, model, Path(work))
            done = [run_target(plan, outcome, setup) for outcome, setup in targets]
            outcomes += done
            charts[workload] = plot([o.result for o in done if o.result], plan.out / f"plot-{workload}.png")
    return outcomes, charts


def run_prefix(
    plan: Plan, binaries: dict[str, Path], model: Path | None, vision: tuple[Path, Path] | None
) -> list[str] | None:
    """The prefix workloads that were asked for (vision among them); the lines of their report
    section (None: none asked)."""
    workloads = tuple(w for w in plan.workloads if w in (*PREFIX_WORKLOADS, VISION))
    if not workloads:
        return None
    outcomes, charts = run_sessions(plan, binaries, model, workloads, vision)
    return report.prefix_report(plan, model, outcomes, versions(binaries, None), charts)


def run_agent(plan: Plan, binaries: dict[str, Path], model: Path) -> list[str]:
    """The agent's session on every prefix target, each then restarted; the lines of its section."""
    outcomes, charts = run_sessions(plan, binaries, model, (AGENT,))
    return report_agent.agent_report(plan, model, outcomes, versions(binaries, None), charts.get(AGENT))


def long_outcomes(plan: Plan, binary: Path, model: Path, work: Path) -> list[tuple[Outcome, Callable[[], None]]]:
    """cllm and llama-server -np 1 on one slot of the same context, threads, flash attention, KV type
    and batch; each outcome's ``bench`` runs once per depth, with that depth's ``--prompt-tokens``."""
    lp = plan.long
    assert lp is not None
    fa = "on" if lp.flash_attention else "off"
    found: list[tuple[Outcome, Callable[[], None]]] = []
    for name in (t for t in ("cllm", "llama-server") if t in plan.targets):
        setup = _nothing
        if name == "cllm":
            same = {"OLLAMA_FLASH_ATTENTION": "1" if lp.flash_attention else "0",
                    "OLLAMA_KV_CACHE_TYPE": lp.kv_type, "CLLM_NUM_BATCH": str(lp.n_batch)}  # fmt: skip
            server, setup = cllm_server(plan, model, REAL_MODEL_NAME, work, 1, lp.ctx, extra=same)
            api, label = "generate", "cllm (1 slot)"
        else:
            flags = ("-fa", fa, "-ctk", lp.kv_type, "-ctv", lp.kv_type, "-b", str(lp.n_batch), "-ub", "512")
            server = llama_server(plan, binary, model, name, 1, lp.ctx, flags)
            api, label = "openai-completions", "llama-server -np 1"
        bench = [
            "--url", server.base_url, "--api", api, "--model", REAL_MODEL_NAME, "--label", label,
            "--concurrency", "1", "--requests", str(lp.requests), "--max-tokens", str(lp.max_tokens),
            "--warmup", "1", "--warmup-tokens", "16", "--timeout", str(LONG_TIMEOUT_S),
        ]  # fmt: skip
        found.append((Outcome(name, server, bench, workload=LONG, label=label), setup))
    return found


def run_long(plan: Plan, binaries: dict[str, Path], model: Path) -> list[str]:
    """Each long-context target started once, then a cold prompt per depth; the lines of its section."""
    lp = plan.long
    assert lp is not None
    results: dict[str, dict[int, dict[str, Any]]] = {}
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(dir=plan.cache, prefix="cllm-store-") as work:
        binary = binaries.get("llama-server", Path("llama-server"))
        for outcome, setup in long_outcomes(plan, binary, model, Path(work)):
            paths = {depth: result_path(plan, LONG, f"{outcome.name}-{depth}") for depth in lp.depths}
            runs = [
                ([*outcome.bench, "--prompt-tokens", str(lp.prompt_tokens(depth)), "--json", str(path)], path)
                for depth, path in paths.items()
            ]
            outcomes.append(run_target(plan, outcome, setup, runs))
            # What ran before a failure still counts.
            results[outcome.name] = {d: json.loads(path.read_text()) for d, path in paths.items() if path.exists()}
    return report_long.long_report(plan, model, outcomes, results, versions(binaries, None))


def embed_outcomes(plan: Plan, binary: Path, model: Path, work: Path) -> list[tuple[Outcome, Callable[[], None]]]:
    """The embed workload's targets, in order: cllm, llama-server --embeddings -np N, and -np 1."""
    ep = plan.embed
    assert ep is not None
    found: list[tuple[Outcome, Callable[[], None]]] = []
    for name in (t for t in embed.TARGETS if t in plan.targets):
        setup = _nothing
        if name == "cllm":
            server, setup = cllm_server(plan, model, embed.MODEL_NAME, work, ep.slots, ep.ctx)
            api, label = "embed", f"cllm ({ep.slots} slots)"
        else:
            slots = ep.slots if name == "llama-server" else 1
            server = llama_server(plan, binary, model, name, slots, ep.ctx, embed.LLAMA_SERVER_ARGS)
            api, label = "openai-embeddings", f"llama-server --embeddings -np {slots}"
        bench = ep.bench_args(server.base_url, api, label, result_path(plan, EMBED, name))
        found.append((Outcome(name, server, bench, workload=EMBED, label=label), setup))
    return found


def run_embed(plan: Plan, binaries: dict[str, Path], model: Path) -> list[str]:
    """The embed workload on each target in turn; its report section."""
    assert plan.embed is not None
    with tempfile.TemporaryDirectory(dir=plan.cache, prefix="cllm-store-") as work:
        binary = binaries.get("llama-server", Path("llama-server"))
        targets = embed_outcomes(plan, binary, model, Path(work))
        outcomes = [run_target(plan, outcome, setup) for outcome, setup in targets]
    return embed.report(plan, plan.embed, model, outcomes, versions(binaries, None))


def needs_tools(plan: Plan) -> bool:
    """Whether this run starts llama-server or llama-batched-bench (a cllm-only run builds nothing)."""
    servers = any(t in plan.targets for t in ("llama-server", "llama-server-np1"))
    return servers or (DISTINCT in plan.workloads and plan.batched_bench)


def main() -> None:
    plan, prepare_only = parse_args()
    for folder in (plan.cache / "logs", plan.out):
        folder.mkdir(parents=True, exist_ok=True)
    version = llama_build.binding_version()
    source = llama_build.source_tree(plan.cache, version)
    distinct = DISTINCT in plan.workloads
    model = real = python = embedder = None
    vocab = source / "models" / "ggml-vocab-qwen2.gguf"
    if plan.embed is not None:
        pooling = embed.POOLING_LAST
        embedder = make_model.ensure_model(plan.cache, vocab, plan.shape, n_threads=plan.threads, pooling=pooling)
    if distinct:
        model = make_model.ensure_model(plan.cache, vocab, plan.shape, n_threads=plan.threads)
        sdist_root = source.parent.parent
        python = pyserver_env.server_python(plan.cache, sdist_root) if "llama-cpp-python" in plan.targets else None
    if set(plan.workloads) & {*SESSION_WORKLOADS, LONG}:
        real = prefix_model(plan)
    vision = None
    if VISION in plan.workloads:
        vision = make_model.ensure_vision_model(plan.cache, vocab, plan.threads)
    binaries = llama_build.build_tools(plan.cache, version) if needs_tools(plan) else {}
    if prepare_only:
        return
    distinct_lines = run_distinct(plan, binaries, model, python) if model is not None else None
    sections: dict[str, list[str] | None] = {}
    if plan.prefix is not None:
        sections[report.PREFIX] = run_prefix(plan, binaries, real, vision)
    if real is not None:
        sections[AGENT] = run_agent(plan, binaries, real) if AGENT in plan.workloads else None
        sections[LONG] = run_long(plan, binaries, real) if LONG in plan.workloads else None
    embed_lines = run_embed(plan, binaries, embedder) if embedder is not None else None
    kept = embed.section(plan.report)
    report.write(plan.report, distinct_lines, sections.pop(report.PREFIX, None), sections)
    embed.write(plan.report, embed_lines, kept)
    print(f"\nwrote {plan.report}")


if __name__ == "__main__":
    main()
