"""The real Factory Droid (``droid`` from npm, pinned in compat/js): where its binary is."""

from __future__ import annotations

from pathlib import Path

from .npm_agents import agent_binary


def droid_binary() -> Path | None:
    """compat/js's pinned droid (``npm ci`` there), else a ``droid`` on PATH; None if neither."""
    return agent_binary("droid")
