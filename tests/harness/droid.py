"""The real Factory Droid (``droid`` from npm, pinned in compat/js): where its binary is."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_BIN = ROOT / "compat" / "js" / "node_modules" / ".bin" / "droid"


def droid_binary() -> Path | None:
    """compat/js's pinned Droid (``npm ci`` there), else a ``droid`` on PATH; None if neither."""
    if _BIN.is_file() and shutil.which("node"):
        return _BIN
    found = shutil.which("droid")
    return Path(found) if found else None
