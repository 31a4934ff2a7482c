"""The real Claude Code (``@anthropic-ai/claude-code``, pinned in compat/js) run headless against a
cllm, as a user points it at a local server: ``ANTHROPIC_BASE_URL`` set, its main and small fast
models both the served one, no telemetry, update checks or other traffic (there is no internet)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .codex import run_headless
from .npm_agents import agent_binary


def claude_binary() -> Path | None:
    """compat/js's pinned claude (``npm ci`` there), else a ``claude`` on PATH; None if neither."""
    return agent_binary("claude")


def run_claude(
    binary: Path,
    url: str,
    model: str,
    prompt: str,
    home: Path,
    workdir: Path,
    timeout: float,
    extra: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """``claude -p PROMPT --output-format json [EXTRA]`` in ``workdir``, its HOME ``home``."""
    home.mkdir(parents=True, exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env |= {
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "cllm-local",
        "ANTHROPIC_MODEL": model,
        "ANTHROPIC_SMALL_FAST_MODEL": model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }
    return run_headless([str(binary), "-p", prompt, "--output-format", "json", *extra], env, timeout, workdir)
