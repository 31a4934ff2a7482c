"""The real OpenCode (``opencode-ai`` from npm, pinned in compat/js): where its binary is, and the
environment a headless run needs where nothing but the server may be reached (no update check,
no model catalogue from models.dev, no default plugins or language servers downloaded)."""

from __future__ import annotations

from pathlib import Path

from .npm_agents import agent_binary

QUIET = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
}


def opencode_binary() -> Path | None:
    """compat/js's pinned opencode (``npm ci`` there), else a ``opencode`` on PATH; None if neither."""
    return agent_binary("opencode")
