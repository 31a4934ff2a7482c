"""The real Codex CLI (``@openai/codex`` from npm, pinned in compat/js) run headless against a live
cllm: every request it sends must be answered 200 and ``codex exec`` must exit 0.

Skipped unless compat/js's Codex is installed (``npm ci`` in compat/js, as ``.ci/run`` does) or a
``codex`` is on PATH. The tiny random-weight model cannot choose a tool, so the tool-call round
trips (a shell command, a namespaced call, over three turns, ``call_id`` kept) are driven by the
scripted engine under the same real server and the same real Codex.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness.codex import RequestLog, codex_binary, function_calls, run_codex
from scripted import tool_call
from serving import serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings

CODEX = codex_binary()
pytestmark = pytest.mark.skipif(CODEX is None, reason="codex is not installed: run `npm ci` in compat/js")
MODEL = "tiny"
TIMEOUT_S = 240


def served(log: RequestLog) -> str:
    return "\n".join(str(e) for e in log.exchanges)


def assert_all_answered(log: RequestLog, run: Any) -> None:
    assert log.responses(), "codex sent no /v1/responses request\n" + run.stderr[-3000:]
    assert all(e.status == 200 for e in log.exchanges), served(log) + "\n" + run.stderr[-3000:]
    assert run.returncode == 0, run.stderr[-3000:]


@pytest.mark.model
def test_codex_exec_on_the_tiny_model(agent_root: Path, tmp_path: Path) -> None:
    """Codex's first request as it is (40 kB: 9 tools, a namespace, web_search, include, ...)."""
    assert CODEX is not None
    settings = Settings(models_dir=agent_root / "models", num_parallel=1, context_length=4096, num_thread=2)
    log = RequestLog(create_app(settings))
    with serve_in_thread(log) as url:
        run = run_codex(CODEX, url, MODEL, "Say hello.", tmp_path / "home", tmp_path / "work", TIMEOUT_S)
    assert_all_answered(log, run)
    (first, *_) = log.responses()
    body = first.json()
    kinds = {tool["type"] for tool in body["tools"]}
    assert body["stream"] is True and {"function", "namespace", "web_search"} <= kinds
    assert first.events()[-1]["type"] == "response.completed"
    # What Codex printed is what the model said (its --json events end with the turn's usage).
    events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert events[-1]["type"] == "turn.completed", run.stdout[-2000:]
    said = [e["item"]["text"] for e in events if e["type"] == "item.completed" and e["item"]["type"] == "agent_message"]
    streamed = [e["delta"] for e in first.events() if e["type"] == "response.output_text.delta"]
    assert said == ["".join(streamed)] or not streamed


def test_codex_tool_calls_round_trip_with_their_call_ids(scripted_agent: Any, tmp_path: Path) -> None:
    """Turn 1 runs a shell command, turn 2 calls a namespace member, turn 3 answers: Codex runs each
    call and sends its output back under the call's id, the namespaced one under its namespace."""
    assert CODEX is not None
    url, log, turns = scripted_agent
    turns += [
        ["<think>", "Look first.", "</think>", tool_call("exec_command", {"cmd": "echo codex-round-trip"})],
        [tool_call("multi_agent_v1.close_agent", {"target": "nobody"})],
        ["Done: the command printed codex-round-trip."],
    ]
    run = run_codex(CODEX, url, MODEL, "Run echo.", tmp_path / "home", tmp_path / "work", TIMEOUT_S)
    assert_all_answered(log, run)
    first, second, third = log.responses()
    (shell, shell_out), *_ = function_calls(second.json())
    assert shell["name"] == "exec_command" and json.loads(shell["arguments"]) == {"cmd": "echo codex-round-trip"}
    answered = [e["item"] for e in first.events() if e["type"] == "response.output_item.done"]
    assert shell["call_id"] == answered[-1]["call_id"] and shell_out is not None
    assert "codex-round-trip" in json.dumps(shell_out["output"])
    reasoning = [i for i in second.json()["input"] if i.get("type") == "reasoning"]
    assert reasoning and reasoning[-1].get("encrypted_content") == "Look first."
    calls = dict((c["call_id"], (c, out)) for c, out in function_calls(third.json()))
    (closing, closing_out), *_ = [v for v in calls.values() if v[0]["name"] == "close_agent"]
    assert closing.get("namespace") == "multi_agent_v1" and closing_out is not None
    # Codex ran it as its own tool: an unknown name would have come back as "unsupported call".
    assert "unsupported" not in json.dumps(closing_out["output"]).lower()
    assert shell["call_id"] in calls  # the first turn's call is still in the history, id and all
    assert turns == []


def test_codex_oss_mode_reads_the_model_listing(scripted_agent: Any, tmp_path: Path) -> None:
    """``codex --oss`` (its built-in Ollama provider, as Ollama users run it) lists the models on
    /v1/models and /api/tags and asks /api/version before its first turn."""
    assert CODEX is not None
    url, log, turns = scripted_agent
    turns += [["Hello."]]
    oss = ["--oss", "--local-provider", "ollama", "-m", f"{MODEL}:latest"]
    env = {"CODEX_OSS_BASE_URL": f"{url}/v1"}
    run = run_codex(CODEX, url, MODEL, "Say hello.", tmp_path / "home", tmp_path / "work", TIMEOUT_S, oss, env)
    assert_all_answered(log, run)
    asked = [(e.method, e.path) for e in log.exchanges]
    assert {("GET", "/v1/models"), ("GET", "/api/tags"), ("POST", "/v1/responses")} <= set(asked), asked
    assert log.responses()[0].json()["model"] == f"{MODEL}:latest" and turns == []
