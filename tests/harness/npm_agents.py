"""Where the agents pinned in compat/js are: their binaries as ``npm ci`` there installs them."""

from __future__ import annotations

import shutil
from pathlib import Path

BIN_DIR = Path(__file__).resolve().parents[2] / "compat" / "js" / "node_modules" / ".bin"


def agent_binary(name: str) -> Path | None:
    """compat/js's pinned ``name`` (``npm ci`` there), else ``name`` on PATH; None if neither."""
    pinned = BIN_DIR / name
    if pinned.is_file() and shutil.which("node"):
        return pinned
    found = shutil.which(name)
    return Path(found) if found else None
