"""The real GitHub Copilot CLI (``@github/copilot`` from npm, pinned in compat/js): where its binary
is, and the environment a headless run needs where nothing but the server may be reached (its
offline mode: no GitHub sign-in, telemetry, web tools or update)."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_BIN = ROOT / "compat" / "js" / "node_modules" / ".bin" / "copilot"

QUIET = {"COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false"}


def copilot_binary() -> Path | None:
    """compat/js's pinned Copilot CLI (``npm ci`` there), else a ``copilot`` on PATH; None if neither."""
    if _BIN.is_file() and shutil.which("node"):
        return _BIN
    found = shutil.which("copilot")
    return Path(found) if found else None
