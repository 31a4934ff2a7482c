"""The real Qwen Code (``@qwen-code/qwen-code`` from npm, pinned in compat/js): where its binary is,
and the settings a headless run needs where nothing but the server may be reached (no update check,
no usage statistics)."""

from __future__ import annotations

from pathlib import Path

from .npm_agents import agent_binary

# Qwen Code's settings (as system defaults: the launch's own are merged over them) for a machine
# with no internet.
QUIET_SETTINGS = {
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
}


def qwen_binary() -> Path | None:
    """compat/js's pinned qwen (``npm ci`` there), else a ``qwen`` on PATH; None if neither."""
    return agent_binary("qwen")
