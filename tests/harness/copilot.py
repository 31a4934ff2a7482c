"""The real GitHub Copilot CLI (``@github/copilot`` from npm, pinned in compat/js): where its binary
is, and the environment a headless run needs where nothing but the server may be reached (its
offline mode: no GitHub sign-in, telemetry, web tools or update)."""

from __future__ import annotations

from pathlib import Path

from .npm_agents import agent_binary

QUIET = {"COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false"}


def copilot_binary() -> Path | None:
    """compat/js's pinned copilot (``npm ci`` there), else a ``copilot`` on PATH; None if neither."""
    return agent_binary("copilot")
