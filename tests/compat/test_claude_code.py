"""The real Claude Code (``@anthropic-ai/claude-code`` from npm, pinned in compat/js) run headless
against a live cllm, as a user points it at a local server (``ANTHROPIC_BASE_URL``): every request
it sends must be answered 200 and ``claude -p`` must exit 0 with what the model said.

Skipped unless compat/js's Claude Code is installed (``npm ci`` in compat/js, as ``.ci/run`` does) or
a ``claude`` is on PATH. The tiny random-weight model cannot choose a tool, so the tool round trip
(a Read of a file, its result sent back under the tool_use's id) is driven by the scripted engine
under the same real server and the same real Claude Code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness.claude import claude_binary, run_claude
from harness.codex import Exchange, RequestLog
from scripted import tool_call
from serving import serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings

CLAUDE = claude_binary()
pytestmark = pytest.mark.skipif(CLAUDE is None, reason="claude is not installed: run `npm ci` in compat/js")
MODEL = "tiny"
TIMEOUT_S = 300


def messages(log: RequestLog) -> list[Exchange]:
    return [e for e in log.exchanges if e.path == "/v1/messages"]


def assert_all_answered(log: RequestLog, run: Any) -> dict[str, Any]:
    """Claude Code's printed result, once every request it sent was answered 200 and it exited 0."""
    served = "\n".join(str(e) for e in log.exchanges)
    assert messages(log), "claude sent no /v1/messages request\n" + run.stderr[-3000:]
    assert all(e.status == 200 for e in log.exchanges), served + "\n" + run.stdout[-2000:] + run.stderr[-2000:]
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    result: dict[str, Any] = json.loads(run.stdout)
    assert result["type"] == "result" and not result["is_error"], result
    return result


def said(exchange: Exchange) -> str:
    """The text a streamed /v1/messages answer carried."""
    return "".join(
        e["delta"]["text"]
        for e in exchange.events()
        if e.get("type") == "content_block_delta" and e["delta"].get("type") == "text_delta"
    )


@pytest.mark.model
def test_claude_code_print_mode_on_the_tiny_model(agent_root: Path, tmp_path: Path) -> None:
    """Claude Code's requests as it sends them (its whole system prompt and tool list, ~34k tokens of
    the tiny model's vocabulary, streamed, with cache_control), read by the real engine."""
    assert CLAUDE is not None
    settings = Settings(models_dir=agent_root / "models", num_parallel=1, context_length=40960, num_thread=2)
    log = RequestLog(create_app(settings))
    with serve_in_thread(log) as url:
        run = run_claude(
            CLAUDE, url, MODEL, "Say hello.", tmp_path / "home", tmp_path / "work", TIMEOUT_S, ["--max-turns", "1"]
        )
    result = assert_all_answered(log, run)
    first = messages(log)[-1]
    body = first.json()
    assert body["stream"] is True and body["model"] == MODEL and len(body["tools"]) > 5
    assert first.events()[-1]["type"] == "message_stop"
    assert result["result"] == said(first)


def test_claude_code_runs_a_tool_and_sends_its_result_back_under_its_id(scripted_agent: Any, tmp_path: Path) -> None:
    """Turn 1 asks to Read a file, turn 2 answers: Claude Code reads it and sends the file's text
    back as the tool_result of that tool_use's id."""
    assert CLAUDE is not None
    url, log, turns = scripted_agent
    work = tmp_path / "work"
    work.mkdir()
    (work / "answer.txt").write_text("42\n")
    turns += [
        ["<think>", "Read it first.", "</think>", tool_call("Read", {"file_path": str(work / "answer.txt")})],
        ["The number is 42."],
    ]
    flags = ["--max-turns", "3", "--allowedTools", "Read"]
    run = run_claude(CLAUDE, url, MODEL, "What number is in answer.txt?", tmp_path / "home", work, TIMEOUT_S, flags)
    result = assert_all_answered(log, run)
    asking, answering = messages(log)[-2:]
    (use,) = [
        b
        for e in asking.events()
        if e.get("type") == "content_block_start"
        for b in [e["content_block"]]
        if b["type"] == "tool_use"
    ]
    assert use["name"] == "Read"
    history = answering.json()["messages"]
    sent = [
        b for m in history if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"
    ]
    assert [b["tool_use_id"] for b in sent] == [use["id"]]
    assert "42" in json.dumps(sent[0]["content"])
    assert result["result"] == "The number is 42." and turns == []
