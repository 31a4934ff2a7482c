"""``cllm launch claude``, ``codex``, ``copilot``, ``droid``, ``opencode``, ``pi`` and ``qwen`` start the
real agents (pinned in compat/js) pointed at a running cllm, as ``ollama launch`` starts them
against Ollama: the agent finds the server, asks for the model it was given, and prints what the
(scripted) model said.

Skipped unless compat/js's agents are installed (``npm ci`` there, as ``.ci/run`` does).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harness.claude import claude_binary
from harness.codex import codex_binary
from harness.copilot import QUIET as COPILOT_QUIET
from harness.copilot import copilot_binary
from harness.droid import droid_binary
from harness.opencode import QUIET, opencode_binary
from harness.pi import QUIET as PI_QUIET
from harness.pi import pi_binary
from harness.qwen import QUIET_SETTINGS, qwen_binary

TIMEOUT_S = 240
MODEL = "tiny"


def launch(
    url: str, binary: Path | None, home: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``cllm launch ARGS`` as a user runs it, the agent's binary found on PATH, HOME a fresh one and
    nothing reaching out past the server (there is no internet here)."""
    if binary is None:
        pytest.skip("the agents are not installed: run `npm ci` in compat/js")
    home.mkdir(parents=True)
    agents = ("ANTHROPIC_", "CLAUDE_", "OPENAI_", "CODEX_", "COPILOT_", "FACTORY_", "OPENCODE_", "PI_", "QWEN_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(agents)} | QUIET | (env or {})
    env |= {
        "OLLAMA_HOST": url,
        "HOME": str(home),
        "CODEX_HOME": str(home / ".codex"),
        "PATH": f"{binary.parent}{os.pathsep}{env.get('PATH', '')}",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
    }
    command = [sys.executable, "-c", "from cllm_ollama.cli.main import main; main()", "launch", *args]
    return subprocess.run(
        command, cwd=home, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S
    )


def test_launch_claude_runs_claude_code_on_the_model(scripted_agent: Any, tmp_path: Path) -> None:
    url, log, turns = scripted_agent
    turns += [["Hello from cllm."]]
    run = launch(
        url,
        claude_binary(),
        tmp_path / "home",
        "claude",
        "--model",
        MODEL,
        "--",
        "-p",
        "Say hello.",
        "--output-format",
        "json",
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    asked = [e for e in log.exchanges if e.path == "/v1/messages"]
    assert asked and all(e.status == 200 for e in log.exchanges), "\n".join(map(str, log.exchanges))
    assert {e.json()["model"] for e in asked} == {MODEL}
    assert json.loads(run.stdout)["result"] == "Hello from cllm."


def test_launch_codex_runs_codex_on_the_model(scripted_agent: Any, tmp_path: Path) -> None:
    url, log, turns = scripted_agent
    turns += [["Hello from cllm."]]
    work = tmp_path / "work"
    work.mkdir()
    exec_args = ["exec", "--skip-git-repo-check", "--ephemeral", "--json", "-C", str(work), "Say hello."]
    run = launch(url, codex_binary(), tmp_path / "home", "codex", "--model", MODEL, "--", *exec_args)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    asked = log.responses()
    assert asked and all(e.status == 200 for e in log.exchanges), "\n".join(map(str, log.exchanges))
    assert {e.json()["model"] for e in asked} == {MODEL}
    events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    said = [e["item"]["text"] for e in events if e["type"] == "item.completed" and e["item"]["type"] == "agent_message"]
    assert said == ["Hello from cllm."]
    assert not [
        e for e in events if e["type"] == "item.completed" and e["item"]["type"] == "error"
    ]  # the catalog knows it


def test_launch_copilot_runs_copilot_cli_on_the_model(scripted_agent: Any, tmp_path: Path) -> None:
    """Copilot CLI's prompt mode (offline: no GitHub sign-in) on the model through ``/v1/responses``,
    asking for no more output than the launch told it the model gives (its own default sends none)."""
    url, log, turns = scripted_agent
    turns += [["Hello from cllm."]]
    args = ("-p", "Say hello.", "--allow-all-tools", "-s")
    run = launch(url, copilot_binary(), tmp_path / "home", "copilot", "--model", MODEL, "--", *args, env=COPILOT_QUIET)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    asked = log.responses()
    assert asked and all(e.status == 200 for e in log.exchanges), "\n".join(map(str, log.exchanges))
    assert {e.json()["model"] for e in asked} == {MODEL}
    assert {e.json()["max_output_tokens"] for e in asked} == {8192}
    assert run.stdout.strip() == "Hello from cllm."


def test_launch_droid_runs_droid_on_the_model(scripted_agent: Any, tmp_path: Path) -> None:
    """Droid's ``exec`` on the model as a custom model (no Factory sign-in) through
    ``/v1/chat/completions``, from the settings file cllm gives it for the run: nothing is written
    into its own settings."""
    url, log, turns = scripted_agent
    turns += [["Hello from cllm."]]
    home = tmp_path / "home"
    run = launch(url, droid_binary(), home, "droid", "--model", MODEL, "--", "exec", "Say hello.")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    asked = [e for e in log.exchanges if e.path == "/v1/chat/completions"]
    assert asked and all(e.status == 200 for e in log.exchanges), "\n".join(map(str, log.exchanges))
    assert {(e.json()["model"], e.json()["max_tokens"]) for e in asked} == {(MODEL, 8192)}
    assert run.stdout.strip() == "Hello from cllm."
    assert not (home / ".factory" / "settings.json").exists()


def test_launch_opencode_runs_opencode_on_the_model(scripted_agent: Any, tmp_path: Path) -> None:
    """OpenCode's ``run`` on the model, through the provider ``OPENCODE_CONFIG_CONTENT`` gives it:
    one title request and one answer, both on the model, and no compaction (the context given
    holds its ~31k-token prompt, as the tiny model's tokenizer counts it)."""
    url, log, turns = scripted_agent
    turns += [["Hello from cllm."]] * 2  # its title and its answer, which may come in either order
    run = launch(url, opencode_binary(), tmp_path / "home", "opencode", "--model", MODEL, "--", "run", "Say hello.")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    asked = [e for e in log.exchanges if e.path == "/v1/chat/completions"]
    assert len(asked) == 2 and all(e.status == 200 for e in log.exchanges), "\n".join(map(str, log.exchanges))
    assert {e.json()["model"] for e in asked} == {MODEL}
    assert "Hello from cllm." in run.stdout


def test_launch_pi_runs_pi_on_the_model(scripted_agent: Any, tmp_path: Path) -> None:
    """Pi's print mode on the model through ``/v1/chat/completions``, from the provider cllm gives it
    as an extension for the run: told the model's output limit, nothing written into its own
    ``models.json`` or ``settings.json``. A model's tag (``tiny:latest``) stays part of its name, not
    Pi's thinking level; Pi's thinking ``off`` turns the (thinking) model's thinking off."""
    url, log, turns = scripted_agent
    turns += [["Hello from cllm."]] * 2
    home = tmp_path / "home"
    run = launch(url, pi_binary(), home, "pi", "--model", MODEL, "--", "-p", "Say hello.", env=PI_QUIET)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    off = ("--", "--thinking", "off", "-p", "Hi.")
    tagged = launch(url, pi_binary(), tmp_path / "home2", "pi", "--model", f"{MODEL}:latest", *off, env=PI_QUIET)
    assert tagged.returncode == 0, tagged.stdout[-2000:] + tagged.stderr[-2000:]
    asked = [e for e in log.exchanges if e.path == "/v1/chat/completions"]
    assert len(asked) == 2 and all(e.status == 200 for e in log.exchanges), "\n".join(map(str, log.exchanges))
    assert [e.json()["model"] for e in asked] == [MODEL, f"{MODEL}:latest"]
    assert {e.json().get("max_completion_tokens", e.json().get("max_tokens")) for e in asked} == {8192}
    assert [e.json().get("reasoning_effort") for e in asked] == ["medium", "none"]  # Pi's default, then off
    assert run.stdout.strip() == "Hello from cllm."
    assert not {"models.json", "settings.json"} & {p.name for p in (home / ".pi" / "agent").iterdir()}


def test_launch_qwen_runs_qwen_code_on_the_model(scripted_agent: Any, tmp_path: Path) -> None:
    """Qwen Code headless on the model through ``/v1/chat/completions``, told the context the model
    is served with (its ``/context`` reads it from the provider cllm gives as system defaults, over
    the system's own defaults, which are kept)."""
    url, log, turns = scripted_agent
    turns += [["Hello from cllm."]]
    system = tmp_path / "system-defaults.json"
    system.write_text(json.dumps(QUIET_SETTINGS))
    home = tmp_path / "home"
    env = {"QWEN_CODE_SYSTEM_DEFAULTS_PATH": str(system)}
    run = launch(url, qwen_binary(), home, "qwen", "--model", MODEL, "--", "Say hello.", env=env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    asked = [e for e in log.exchanges if e.path == "/v1/chat/completions"]
    assert asked and all(e.status == 200 for e in log.exchanges), "\n".join(map(str, log.exchanges))
    assert {e.json()["model"] for e in asked} == {MODEL}
    assert "Hello from cllm." in run.stdout
    context = launch(url, qwen_binary(), tmp_path / "home2", "qwen", "--model", MODEL, "--", "/context", env=env)
    assert context.returncode == 0 and "Model: tiny  Context window: 41.0k tokens" in context.stdout, context.stdout
    defaults = json.loads((home / ".qwen" / "cllm-launch-defaults-tiny.json").read_text())
    assert defaults["general"] == QUIET_SETTINGS["general"]
    (provider,) = defaults["modelProviders"]["openai"]
    assert provider["id"] == MODEL and provider["baseUrl"] == f"{url}/v1"
