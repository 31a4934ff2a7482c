"""The real OpenCode (``opencode-ai`` from npm, pinned in compat/js): where its binary is, and the
environment a headless run needs where nothing but the server may be reached (no update check,
no model catalogue from models.dev, no default plugins or language servers downloaded)."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_BIN = ROOT / "compat" / "js" / "node_modules" / ".bin" / "opencode"

QUIET = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
}


def opencode_binary() -> Path | None:
    """compat/js's pinned OpenCode (``npm ci`` there), else an ``opencode`` on PATH; None if neither."""
    if _BIN.is_file() and shutil.which("node"):
        return _BIN
    found = shutil.which("opencode")
    return Path(found) if found else None
