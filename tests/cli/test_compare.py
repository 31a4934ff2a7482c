"""bench/compare.py's prefix workloads: the plan, the targets it starts, the bench arguments and the report."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from benchfake import FakeServer, serving
from click.testing import CliRunner
from cllm_ollama.cli.bench import bench_command

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))  # compare.py imports its siblings as top-level modules

import compare  # noqa: E402
import report  # noqa: E402
from plan import Outcome  # noqa: E402
from targets import Running, Server  # noqa: E402


def test_default_plan_runs_every_workload_with_the_issue_s_chat_load() -> None:
    plan, _ = compare.parse_args([])
    assert plan.workloads == ("distinct", "chat", "shared-prefix-burst", "preamble")
    pp = plan.prefix
    assert pp is not None
    assert (pp.slots, pp.ctx, pp.users, pp.turns, pp.system_tokens, pp.max_tokens) == (8, 8192, 12, 3, 450, 128)
    assert (pp.burst, pp.burst_prefix, pp.preamble_tokens) == (16, 1000, 6600)


def test_one_workload_alone_and_quick() -> None:
    plan, _ = compare.parse_args(["--workload", "chat", "--quick", "--users", "3"])
    assert plan.workloads == ("chat",) and plan.prefix is not None
    assert (plan.prefix.users, plan.prefix.turns, plan.prefix.max_tokens) == (3, 2, 8)
    distinct, _ = compare.parse_args(["--workload", "distinct"])
    assert distinct.prefix is None
    with pytest.raises(SystemExit):
        compare.parse_args(["--workload", "chat,nope"])


def test_a_cllm_only_run_builds_nothing() -> None:
    assert not compare.needs_tools(compare.parse_args(["--workload", "chat", "--targets", "cllm"])[0])
    assert compare.needs_tools(compare.parse_args(["--workload", "chat"])[0])
    assert compare.needs_tools(compare.parse_args(["--workload", "distinct", "--targets", "cllm"])[0])


def test_prefix_targets_have_the_same_slots_context_and_threads(tmp_path: Path) -> None:
    plan, _ = compare.parse_args(["--workload", "chat", "--cache", str(tmp_path), "--out", str(tmp_path / "out")])
    found = compare.prefix_outcomes(plan, "chat", Path("/bin/llama-server"), Path("/m.gguf"), tmp_path)
    outcomes = [o for o, _ in found]
    assert [o.name for o in outcomes] == ["cllm", "llama-server", "llama-server-np1"]
    assert [o.label for o in outcomes] == ["cllm (8 slots)", "llama-server -np 8", "llama-server -np 1"]
    cllm, np8, np1 = (o.server for o in outcomes)
    assert cllm.shown_env["CLLM_NUM_PARALLEL"] == "8" and cllm.shown_env["CLLM_CONTEXT_LENGTH"] == "8192"
    assert cllm.shown_env["CLLM_NUM_THREAD"] == "2"

    def flag(server: Server, name: str) -> str:
        return server.argv[server.argv.index(name) + 1]

    assert (flag(np8, "-np"), flag(np8, "-c"), flag(np8, "-t")) == ("8", str(8 * 8192), "2")
    assert (flag(np1, "-np"), flag(np1, "-c"), flag(np1, "-t")) == ("1", "8192", "2")
    assert "--cache-ram" not in np8.argv  # llama-server's default host-RAM cache stays on
    apis = [o.bench[o.bench.index("--api") + 1] for o in outcomes]
    assert apis == ["chat", "openai-chat", "openai-chat"]
    assert outcomes[1].bench[-1] == str(tmp_path / "out" / "chat" / "llama-server.json")


@pytest.fixture
def fake() -> Iterator[tuple[FakeServer, str]]:
    server = FakeServer()
    with serving(server) as url:
        yield server, url


@pytest.mark.parametrize("workload", ["chat", "shared-prefix-burst", "preamble"])
def test_the_bench_arguments_run(fake: tuple[FakeServer, str], tmp_path: Path, workload: str) -> None:
    _, url = fake
    plan, _ = compare.parse_args(["--workload", workload, "--quick"])
    assert plan.prefix is not None
    out = tmp_path / "r.json"
    args = ["--url", url, "--model", "m", *plan.prefix.bench_args(workload), "--json", str(out)]
    result = CliRunner().invoke(bench_command, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["workload"]["name"] == workload and doc["levels"][0]["errors"] == 0


def _outcome(name: str, label: str, workload: str, level: dict[str, Any]) -> Outcome:
    server = Server(name, [name, "--port", "1234"], "http://127.0.0.1:1234", "/health", Path("log"))
    outcome = Outcome(name, server, ["--url", "http://127.0.0.1:1234"], workload=workload, label=label)
    outcome.result = {"label": label, "workload": {"name": workload}, "levels": [level]}
    outcome.peak_rss_kib = 2048 * 1024
    return outcome


def _level(tps: float, ttft: float, phases: dict[str, float]) -> dict[str, Any]:
    def lat(p50: float) -> dict[str, float]:
        return {"p50": p50, "p95": p50 * 2, "mean": p50}

    return {
        "concurrency": 12, "requests": 36, "errors": 0, "tokens_per_s": tps, "generated_tokens": 1000,
        "requests_per_s": tps / 50,
        "wall_s": 60.0, "ttft_ms": lat(ttft), "itl_ms": lat(100.0), "prompt_tokens_mean": 700.0,
        "cached_tokens_mean": None, "phases": {name: {"ttft_ms": lat(v), "itl_ms": lat(100.0)}
                                               for name, v in phases.items()},
    }  # fmt: skip


def test_prefix_report_tables_and_targets(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x" * 1024)
    plan, _ = compare.parse_args(["--workload", "chat,shared-prefix-burst,preamble", "--report",
                                  str(tmp_path / "B.md"), "--out", str(tmp_path / "results")])  # fmt: skip
    outcomes = [
        _outcome("cllm", "cllm (8 slots)", "chat", _level(45.0, 2000.0, {"turn 1": 4000.0, "turns 2+": 1000.0})),
        _outcome("llama-server", "llama-server -np 8", "chat", _level(30.0, 8000.0, {"turn 1": 9000.0})),
        _outcome("llama-server-np1", "llama-server -np 1", "chat", _level(25.0, 16000.0, {})),
        _outcome("cllm", "cllm (8 slots)", "shared-prefix-burst", _level(20.0, 1000.0, {})),
        _outcome("llama-server", "llama-server -np 8", "shared-prefix-burst", _level(20.0, 5000.0, {})),
        _outcome("cllm", "cllm (8 slots)", "preamble",
                 _level(9.0, 500.0, {"first chat": 20000.0, "later chats": 400.0, "short prompt": 300.0})),
    ]  # fmt: skip
    charts = {"chat": tmp_path / "results" / "plot-chat.png"}
    text = "\n".join(report.prefix_report(plan, model, outcomes, ["cllm 0.1.0"], charts))
    assert "| cllm (8 slots) | 45.0 | 1000 | 60.0 | 2000 | 4000 | 4000 | 8000 | 1000 | 2000 |" in text
    assert "- Generated tok/s, cllm / llama-server -np 8: 1.50 (target ≥ 1.7)" in text
    assert "- TTFT mean, cllm / llama-server -np 8: 0.25 (target –)" in text
    # Little's law: requests/s x mean TTFT users wait on average.
    assert "- cllm (8 slots): 0.90 requests/s x 2.00 s mean TTFT = 1.8 users waiting" in text
    assert "1.8 users waiting for a first token on average; 27.8 tokens per answer" in text
    assert "- Generated tok/s, cllm / llama-server -np 1: 1.80\n" in text
    assert "- TTFT p50, cllm / llama-server -np 8: 0.25 (target ≤ 0.40)" in text
    assert "- TTFT p50, cllm / llama-server -np 8: 0.20 (target ≤ 0.30)" in text  # the burst
    assert "| cllm (8 slots) | 20000 | 400 | 800 | 300 | 1.33 | 0 / 36 | – | 2048 |" in text
    assert "![chat: tokens/s and TTFT](results/plot-chat.png)" in text
    assert "--port PORT" in text and "--url http://127.0.0.1:PORT" in text


def test_either_part_of_the_report_is_rewritten_alone(tmp_path: Path) -> None:
    path = tmp_path / "BENCHMARKS.md"
    report.write(path, ["# Benchmarks", "", "distinct 1"], None)
    assert path.read_text() == "# Benchmarks\n\ndistinct 1\n"
    report.write(path, None, ["## Prefix", "chat 1"])
    path.write_text(path.read_text() + "\n## Other runs (by hand)\n")
    report.write(path, None, ["## Prefix", "chat 2"])
    text = path.read_text()
    assert text.startswith("# Benchmarks\n\ndistinct 1\n") and "## Other runs (by hand)" in text
    assert "chat 2" in text and "chat 1" not in text and text.count(report.BEGIN) == 1
    report.write(path, ["# Benchmarks", "", "distinct 2"], None)
    text = path.read_text()
    assert "distinct 2" in text and "distinct 1" not in text and "chat 2" in text
    main, section = report.split_sections(text)
    assert section is not None and section.startswith(report.BEGIN) and section.endswith(report.END)
    assert main == "# Benchmarks\n\ndistinct 2\n"


def test_the_vision_workload_serves_the_projector_to_both_and_reports_follow_ups(
    fake: tuple[FakeServer, str], tmp_path: Path
) -> None:
    plan, _ = compare.parse_args(["--workload", "vision", "--quick", "--cache", str(tmp_path), "--out",
                                  str(tmp_path / "out"), "--report", str(tmp_path / "B.md")])  # fmt: skip
    assert plan.workloads == ("vision",) and plan.prefix is not None
    assert compare.parse_args([])[0].workloads == ("distinct", "chat", "shared-prefix-burst", "preamble")
    text, mmproj = Path("/t.gguf"), Path("/mmproj.gguf")
    found = compare.prefix_outcomes(plan, "vision", Path("/bin/llama-server"), text, tmp_path, mmproj)
    outcomes = [o for o, _ in found]
    assert [o.label for o in outcomes] == [
        "cllm (8 slots)",
        "llama-server --mmproj -np 8",
        "llama-server --mmproj -np 1",
    ]
    np8 = outcomes[1].server.argv
    assert np8[np8.index("-m") + 1] == "/t.gguf" and np8[np8.index("--mmproj") + 1] == "/mmproj.gguf"
    assert (tmp_path / "Modelfile.bench-gemma3-vision").read_text() == "FROM /t.gguf\nFROM /mmproj.gguf\n"
    _, url = fake
    out = tmp_path / "r.json"
    args = ["--url", url, "--model", "m", *plan.prefix.bench_args("vision"), "--json", str(out)]
    result = CliRunner().invoke(bench_command, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["workload"]["name"] == "vision" and list(doc["levels"][0]["phases"])[:2] == ["turn 1", "turns 2+"]
    level = {"turn 1": 3000.0, "turns 2+": 300.0}
    theirs = _level(40.0, 2000.0, {**level, "turns 2+": 1500.0})
    reported = [
        _outcome("cllm", "cllm (8 slots)", "vision", _level(40.0, 1000.0, level)),
        _outcome("llama-server", "llama-server --mmproj -np 8", "vision", theirs),
    ]
    lines = "\n".join(report.prefix_report(plan, None, reported, ["cllm 0.1.0"], {}))
    assert "### Chats about a picture, re-sent every turn (`vision`)" in lines
    assert "- Follow-up TTFT p50, cllm / llama-server --mmproj -np 8: 0.20 (target ≤ 0.30)" in lines
    assert "- Generated tok/s, cllm / llama-server --mmproj -np 8: 1.00 (target ≥ 1.00)" in lines


@pytest.mark.parametrize(("env", "on"), [(None, True), ({"PYTHONFAULTHANDLER": ""}, False)])
def test_a_server_runs_with_faulthandler_unless_its_environment_says_not(
    tmp_path: Path, env: dict[str, str] | None, on: bool
) -> None:
    """The bench's servers say where a crash in native code was, except where the environment
    leaves faulthandler off (bench/gpu_check.sh on a GPU, where every load with it died)."""
    argv = [sys.executable, "-c", "import faulthandler; print(faulthandler.is_enabled())"]
    log = tmp_path / "server.log"
    base = None if env is None else {**os.environ, **env}
    with Running(Server("probe", argv, "http://127.0.0.1:1", "/", log, base)) as running:
        assert running.proc is not None and running.proc.wait(60) == 0
    assert log.read_text().splitlines()[0] == str(on)
