"""How long rendering a prompt may take and how long its text may grow, for both template engines.

A chat template is code from a GGUF (or, for Go templates, from the request): it can loop, recurse
or multiply strings. Each request's rendering gets one ``RenderBudget``; the engines check it as they
go and stop with an error past it, or as soon as ``cancel`` is set (the client left).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from ..config import DEFAULT_RENDER_TIMEOUT_S
from ..errors import CllmError, RequestCanceled

# Far beyond any context window (a million tokens is a few million characters), small enough that
# a template cannot fill the server's memory with one prompt.
MAX_PROMPT_CHARS = 32 * 1024 * 1024
# A render that runs long (Go templates render on threads of the server's process) steps aside
# this often, for this long: while it holds the GIL, the event loop and every other request's
# thread wait their turn, and a looping template made every other chat wait for its timeout.
# Renders of a few milliseconds never get here.
YIELD_EVERY_S = 0.005
YIELD_S = 0.001


class RenderTimeout(CllmError):
    """500, as Ollama answers any template that fails to execute: the model's template is at fault."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"template: rendering timed out after {timeout:g}s", 500)


class PromptTooLong(CllmError):
    def __init__(self, max_chars: int) -> None:
        super().__init__(f"template: rendered prompt is longer than {max_chars} characters", 500)


@dataclass
class RenderBudget:
    """The limits of one request's rendering; the clock starts when the budget is made."""

    timeout: float = DEFAULT_RENDER_TIMEOUT_S
    max_chars: int = MAX_PROMPT_CHARS
    cancel: threading.Event = field(default_factory=threading.Event)
    deadline: float = field(init=False)
    _yield_at: float = field(init=False)

    def __post_init__(self) -> None:
        now = time.monotonic()
        self.deadline = now + self.timeout
        self._yield_at = now + YIELD_EVERY_S

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def check(self) -> None:
        """Raise if the client left or the time is up."""
        if self.cancel.is_set():
            raise RequestCanceled()
        now = time.monotonic()
        if now >= self.deadline:
            raise RenderTimeout(self.timeout)
        if now >= self._yield_at:
            time.sleep(YIELD_S)
            self._yield_at = now + YIELD_EVERY_S
