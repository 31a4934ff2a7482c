"""OLLAMA_LOAD_TIMEOUT: a model load that goes that long without progress is given up, as Ollama's.

Progress is the share of the weights read, which llama.cpp reports after each tensor; the clock
runs from the load's start, and again from each report. A load that is slow but moving is never
cut: only one stuck (a file on a hung network mount, a device that stopped answering).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from ..errors import EngineError


class LoadStalled(EngineError):
    """Ollama's words when its runner's load stalls past OLLAMA_LOAD_TIMEOUT."""

    def __init__(self, progress: float) -> None:
        super().__init__(f"timed out waiting for llama runner to start - progress {progress:.2f} - ")


class StallWatch:
    """The progress of one load against its stall timeout (``math.inf``: none)."""

    def __init__(self, timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout = timeout
        self._clock = clock
        self._last = clock()
        self.progress = 0.0
        self.stalled = False

    def heard(self, share: float) -> bool:
        """A progress report; False (the load is to end) when it came later than the timeout."""
        now = self._clock()
        if now - self._last > self.timeout:
            self.stalled = True
            return False
        self._last, self.progress = now, share
        return True

    def remaining(self) -> float:
        """How long the load may still go without a report (``math.inf``: for ever)."""
        return math.inf if math.isinf(self.timeout) else self._last + self.timeout - self._clock()

    def error(self) -> LoadStalled:
        return LoadStalled(self.progress)
