"""The real Qwen Code (``@qwen-code/qwen-code`` from npm, pinned in compat/js): where its binary is,
and the settings a headless run needs where nothing but the server may be reached (no update check,
no usage statistics)."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_BIN = ROOT / "compat" / "js" / "node_modules" / ".bin" / "qwen"

# Qwen Code's settings (as system defaults: the launch's own are merged over them) for a machine
# with no internet.
QUIET_SETTINGS = {
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
}


def qwen_binary() -> Path | None:
    """compat/js's pinned Qwen Code (``npm ci`` there), else a ``qwen`` on PATH; None if neither."""
    if _BIN.is_file() and shutil.which("node"):
        return _BIN
    found = shutil.which("qwen")
    return Path(found) if found else None
