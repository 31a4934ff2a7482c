"""Draws Ollama progress statuses as ``ollama pull`` does: a bar per layer (size, speed, ETA), lines otherwise."""

from __future__ import annotations

import math
import shutil
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

_BAR_WIDTH = 25


def human_bytes(n: float) -> str:
    """Ollama's ``format.HumanBytes``: decimal units, no decimals from 10 up (522 MB, 1.2 GB)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            value = n / scale
            return f"{int(value)} {unit}" if value >= 10 or value == math.trunc(value) else f"{value:.1f} {unit}"
    return f"{int(n)} B"


def human_duration(seconds: float) -> str:
    """Go-style rounded durations: 9s, 1m5s, 2h3m."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s"
    return f"{s // 3600}h{s % 3600 // 60}m"


class ProgressPrinter:
    """Feed it every status object; on a terminal bars redraw in place, elsewhere finished bars print once."""

    def __init__(self, out: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.out = out or sys.stderr
        self.tty = self.out.isatty()
        self.clock = clock
        self._digest: str | None = None  # the layer whose bar is on the current line
        self._start: tuple[float, int] = (0.0, 0)  # when we first saw it, and its completed bytes then
        self._printed: set[str] = set()

    def __call__(self, event: dict[str, Any]) -> None:
        status = str(event.get("status", ""))
        digest, total = event.get("digest"), event.get("total")
        if digest and total:
            self._bar(status, str(digest), int(total), int(event.get("completed") or 0))
        else:
            self.close()
            self.out.write(status + "\n")
            self.out.flush()

    def close(self) -> None:
        """End the line of an open bar."""
        if self._digest is not None and self.tty:
            self.out.write("\n")
        self._digest = None

    def _bar(self, status: str, digest: str, total: int, completed: int) -> None:
        now = self.clock()
        if digest != self._digest:
            self.close()
            self._digest, self._start = digest, (now, completed)
        done = completed >= total
        if not self.tty and (not done or digest in self._printed):
            return
        pct = min(100, completed * 100 // total)
        filled = _BAR_WIDTH * pct // 100
        line = f"{status}: {pct:3d}% ▕{'█' * filled}{' ' * (_BAR_WIDTH - filled)}▏ "
        if done:
            line += human_bytes(total)
            self._printed.add(digest)
        else:
            line += f"{human_bytes(completed)}/{human_bytes(total)}"
            started, base = self._start
            elapsed = now - started
            if elapsed > 0 and completed > base:
                rate = (completed - base) / elapsed
                line += f"  {human_bytes(rate)}/s  {human_duration((total - completed) / rate)}"
        if self.tty:
            width = shutil.get_terminal_size().columns
            self.out.write("\r" + line[: width - 1].ljust(width - 1))
        else:
            self.out.write(line + "\n")
            self._digest = None
        self.out.flush()
