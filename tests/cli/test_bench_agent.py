"""``cllm bench -w agent``: a coding agent's session, then its first turn warm, after an unload
and (``--resume``, on a restarted server) after a restart, against the fake server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import benchfake
from benchfake import FakeServer, invoke_bench
from cllm_ollama.cli.bench_client import Api, dialect_messages
from cllm_ollama.cli.bench_workloads import (
    AFTER_RESTART,
    AFTER_UNLOAD,
    COLD,
    WARM,
    Kind,
    Workload,
    build_waves,
    history,
)

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


def test_the_agent_speaks_anthropic_as_claude_code_does_and_reads_its_cache_counters(
    fake: tuple[FakeServer, str], tmp_path: Path
) -> None:
    server, url = fake
    out = tmp_path / "agent.json"
    invoke_bench("--url", url, "--model", "m", "-w", "agent", "--api", "anthropic-messages", "--system-tokens", "50",
                 "--turns", "2", "--warmup", "0", "--max-tokens", "9", "--json", str(out))  # fmt: skip
    first, second = [b for b in server.bodies if "messages" in b][:2]
    # The system prompt a top-level block list, breakpoints on it and on the last message only.
    assert first["system"][0]["cache_control"] == {"type": "ephemeral"} and first["max_tokens"] == 9
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert isinstance(second["messages"][0]["content"], str)  # an earlier turn: no breakpoint
    # The answer the server streamed goes back into the history, with the tool call it made; the
    # next turn is that call's result, the breakpoint on it.
    text, use = second["messages"][1]["content"]
    assert text == {"type": "text", "text": "<L0r1/1>t1 t2 t3 t4 "}
    assert (use["type"], use["id"], use["name"]) == ("tool_use", "call_1", "read_file")
    (result,) = second["messages"][-1]["content"]
    assert (result["type"], result["tool_use_id"]) == ("tool_result", "call_1")
    assert result["content"].startswith("L0r2:") and result["cache_control"] == {"type": "ephemeral"}
    cold = json.loads(out.read_text())["levels"][0]["phases"][COLD]
    # The prompt is the uncached input plus the cache's writes and reads; reads are the cached tokens.
    assert (cold["prompt_tokens_mean"], cold["cached_tokens_mean"]) == (benchfake.PROMPT_EVAL_COUNT, benchfake.CACHED)
    assert cold["generated_tokens"] == benchfake.EVAL_COUNT
    assert report_agent.new_tokens(cold) == benchfake.PROMPT_EVAL_COUNT - benchfake.CACHED


def test_a_server_that_cannot_unload_has_its_slots_taken_by_other_prompts_instead(
    fake: tuple[FakeServer, str], tmp_path: Path
) -> None:
    server, url = fake
    server.unloads = False
    invoke_bench("--url", url, "--model", "m", "-w", "agent", "--api", "openai-chat", "--system-tokens", "50",
                 "--turns", "2", "--warmup", "0", "--evict", "3")  # fmt: skip
    chats = [b for b in server.bodies if "messages" in b]
    # The session (2 turns, warm), 3 distinct one-message prompts, then the turn after the "unload".
    assert [len(b["messages"]) for b in chats] == [2, 4, 2, 1, 1, 1, 2]
    assert len({b["messages"][0]["content"] for b in chats[3:6]}) == 3
    assert chats[6]["messages"] == chats[0]["messages"]
    server.bodies.clear()
    server.unloads = True  # a server that unloads gets no such prompts
    invoke_bench("--url", url, "--model", "m", "-w", "agent", "--system-tokens", "50", "--turns", "2",
                 "--warmup", "0", "--evict", "3")  # fmt: skip
    assert [len(b.get("messages", [])) for b in server.bodies] == [2, 4, 2, 0, 2]


def test_compare_sends_the_agent_to_cllm_as_anthropic_and_to_llama_server_with_its_ram_cache(tmp_path: Path) -> None:
    plan, _ = compare.parse_args(["--workload", "agent", "--out", str(tmp_path)])
    assert plan.prefix is not None and plan.prefix.agent_ctx == 32768
    found = [o for o, _ in compare.prefix_outcomes(plan, "agent", Path("/bin/llama-server"), Path("/m"), tmp_path)]
    by_name = {o.name: o for o in found}

    def arg(o: compare.Outcome, name: str) -> str:
        return o.bench[o.bench.index(name) + 1]

    assert arg(by_name["cllm"], "--api") == "anthropic-messages" and "--evict" not in by_name["cllm"].bench
    np8, np1 = by_name["llama-server"], by_name["llama-server-np1"]
    assert (arg(np8, "--api"), arg(np8, "--evict"), arg(np1, "--evict")) == ("openai-chat", "8", "1")
    assert arg(by_name["llama-server-restart"], "--evict") == "8"
    assert "--cache-ram" in np8.server.argv and "--cache-prompt" in np8.server.argv
    assert np1.server.argv[np1.server.argv.index("-c") + 1] == "32768"


def _phase(ttft: float, prompt: float, cached: float | None) -> dict[str, object]:
    return {"ttft_ms": {"p50": ttft}, "prompt_tokens_mean": prompt, "cached_tokens_mean": cached}


def test_the_agent_report_checks_the_issue_s_targets(tmp_path: Path) -> None:
    plan, _ = compare.parse_args(["--workload", "agent", "--out", str(tmp_path)])
    found = [o for o, _ in compare.prefix_outcomes(plan, "agent", Path("/bin/llama-server"), Path("/m"), tmp_path)]
    cllm, restart, server = found[0], found[1], found[2]
    phases = {
        COLD: _phase(100000.0, 16000, 0),
        "turn 2": _phase(2000.0, 16300, 16000),
        "turn 3": _phase(2200.0, 16600, 16300),
        WARM: _phase(300.0, 16000, 15999),
        AFTER_UNLOAD: _phase(6000.0, 16000, 15999),
    }
    cllm.result = {"levels": [{"requests": 6, "errors": 0, "decode_tokens_per_s": 30.0, "phases": phases}]}
    restart.result = {"levels": [{"requests": 1, "errors": 0, "phases": {AFTER_RESTART: _phase(4000.0, 16000, 15999)}}]}
    theirs = {COLD: _phase(90000.0, 16000, 0), "turn 2": _phase(1800.0, 16300, 16000)}
    server.result = {"levels": [{"requests": 6, "errors": 0, "decode_tokens_per_s": 25.0, "phases": theirs}]}
    outcomes = [cllm, restart, server]
    text = "\n".join(report_agent.agent_table(outcomes) + report_agent.turns_table(outcomes))
    assert "| cllm (8 slots) | 16000 | 100000 | 300 | 6000 | 4000 | 0.06 | 0.04 | 15999 | 30.0 |" in text
    assert "| turn 3 | 300 | 2200 | 7.33 | – | – | – |" in text  # new tokens: prompt less cached
    verdicts = report_agent.verdicts(outcomes)
    assert verdicts[0] == "- After an unload: TTFT / cold prefill 0.060 (target ≤ 0.05): NOT met."
    assert verdicts[1] == "- After a restart: TTFT / cold prefill 0.040 (target ≤ 0.05): met."
    assert "6.67–7.33 ms per new token (cold prefill: 6.25 ms per token)" in verdicts[2]
    assert verdicts[3] == "- Decode tok/s, cllm / llama-server -np 8: 1.20 (target ≥ 1.00)."


def test_each_api_gets_the_agent_s_tool_calls_and_results_in_its_own_shape() -> None:
    messages = history("S", ["task", "result"], ["looking"], tools=True)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    openai = dialect_messages(Api.OPENAI_CHAT, messages)
    call = openai[2]["tool_calls"][0]
    assert (call["id"], call["type"], call["function"]["name"]) == ("call_1", "function", "read_file")
    assert json.loads(call["function"]["arguments"]) == {"path": "src/1.py"}  # a JSON string, as OpenAI's
    assert openai[3] == {"role": "tool", "content": "result", "tool_call_id": "call_1"}
    ollama = dialect_messages(Api.CHAT, messages)
    assert ollama[2]["tool_calls"] == [{"function": {"name": "read_file", "arguments": {"path": "src/1.py"}}}]
    assert ollama[3] == {"role": "tool", "content": "result"}
    # Without tools (the chat workloads) nothing changes.
    assert dialect_messages(Api.OPENAI_CHAT, history("S", ["a", "b"], ["x"])) == history("S", ["a", "b"], ["x"])
    # An empty answer gives Anthropic no empty text block (it refuses one).
    (use,) = dialect_messages(Api.ANTHROPIC, history(None, ["t", "r"], [""], tools=True))[1]["content"]
    assert use["type"] == "tool_use"
