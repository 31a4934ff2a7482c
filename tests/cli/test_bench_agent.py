"""``cllm bench -w agent``: a coding agent's session, then its first turn warm, after an unload
and (``--resume``, on a restarted server) after a restart, against the fake server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import benchfake
from benchfake import FakeServer, invoke_bench
from cllm_ollama.cli.bench_workloads import AFTER_RESTART, AFTER_UNLOAD, COLD, WARM, Kind, Workload, build_waves

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # compare.py's siblings are top-level

import compare
import report_agent

fake = benchfake.fake  # the fixture: a fake server and its URL


def test_an_agent_session_then_its_first_turn_warm_after_an_unload_and_after_a_restart(
    fake: tuple[FakeServer, str], tmp_path: Path
) -> None:
    server, url = fake
    out = tmp_path / "agent.json"
    common = ("--url", url, "--model", "m", "-w", "agent", "--system-tokens", "300", "--turns", "4", "--warmup", "0")
    invoke_bench(*common, "--json", str(out))
    chats = [b for b in server.bodies if "messages" in b]
    unloads = [b for b in server.bodies if "messages" not in b]
    # Each turn re-sends the history with one more tool result and answer; then turn 1 twice.
    assert [len(b["messages"]) for b in chats] == [2, 4, 6, 8, 2, 2]
    assert chats[4]["messages"] == chats[5]["messages"] == chats[0]["messages"]
    assert unloads == [{"model": "m", "keep_alive": 0}]
    assert server.bodies.index(unloads[0]) == 5  # between the warm turn and the one after the unload
    phases = json.loads(out.read_text())["levels"][0]["phases"]
    assert all(phases[name]["requests"] == 1 for name in (COLD, "turn 2", "turn 4", WARM, AFTER_UNLOAD))
    server.bodies.clear()
    invoke_bench(*common, "--resume", "--json", str(out))
    (resumed,) = server.bodies
    assert resumed["messages"] == chats[0]["messages"]  # the very preamble and first turn
    assert json.loads(out.read_text())["levels"][0]["phases"][AFTER_RESTART]["requests"] == 1


def test_the_agent_preamble_is_about_the_asked_length() -> None:
    waves = build_waves(Workload(Kind.AGENT, turns=3, system_tokens=16000, user_tokens=200), 1, "L0")
    (session,) = waves[0]
    assert session.system is not None and 15000 < len(session.system.split()) <= 16000  # a token a word
    assert [phase for phase, _ in session.turns] == [COLD, "turn 2", "turn 3"]


def test_compare_runs_the_agent_only_when_named_and_each_target_again_after_a_restart(tmp_path: Path) -> None:
    assert "agent" not in compare.parse_args([])[0].workloads  # "all" leaves the long session out
    plan, _ = compare.parse_args(["--workload", "agent", "--quick", "--out", str(tmp_path)])
    assert plan.prefix is not None and plan.prefix.agent_ctx >= plan.prefix.agent_tokens + 3 * 232
    found = [o for o, _ in compare.prefix_outcomes(plan, "agent", Path("/bin/llama-server"), Path("/m"), tmp_path)]
    assert [o.name for o in found] == [
        "cllm", "cllm-restart", "llama-server", "llama-server-restart", "llama-server-np1", "llama-server-np1-restart"
    ]  # fmt: skip
    cllm, again = found[:2]
    assert again.server is cllm.server  # the same command (and store, and prompt cache) started anew
    assert again.bench[-1] == "--resume" and again.bench[-2] == str(tmp_path / "agent" / "cllm-restart.json")
    assert cllm.server.shown_env["CLLM_CONTEXT_LENGTH"] == str(plan.prefix.agent_ctx)


def test_the_agent_report_compares_a_restart_with_the_cold_prefill(
    fake: tuple[FakeServer, str], tmp_path: Path
) -> None:
    _, url = fake
    plan, _ = compare.parse_args(["--workload", "agent", "--quick", "--out", str(tmp_path)])
    assert plan.prefix is not None
    outcomes = [o for o, _ in compare.prefix_outcomes(plan, "agent", Path("/bin/llama-server"), Path("/m"), tmp_path)]
    for outcome in outcomes[:2]:  # cllm's two runs, against the fake server
        out = tmp_path / f"{outcome.name}.json"
        args = ["--url", url, "--model", "m", *plan.prefix.bench_args("agent"), "--json", str(out)]
        invoke_bench(*args, *(["--resume"] if outcome.name.endswith("-restart") else []))
        outcome.result = json.loads(out.read_text())
    cold = outcomes[0].result["levels"][0]["phases"][COLD]["ttft_ms"]["p50"]  # type: ignore[index]
    restart = outcomes[1].result["levels"][0]["phases"][AFTER_RESTART]["ttft_ms"]["p50"]  # type: ignore[index]
    lines = report_agent.agent_table(outcomes[:2])
    (row,) = [line for line in lines if line.startswith("| cllm")]
    assert f"| {restart / cold:.2f} |" in row
