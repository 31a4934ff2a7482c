"""A script beside a test, run in a process of its own for what lasts a process (the heap, the
allocators' kept memory): its report is the JSON object its last line prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def child_report(script: Path, *args: str, timeout: float = 300) -> Any:
    """Run ``python script args...``; fails the test with the child's stderr if it failed."""
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
