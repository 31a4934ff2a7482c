"""How long rendering a prompt may take and how long its text may grow, for both template engines.

A chat template is code from a GGUF (or, for Go templates, from the request): it can loop, recurse
or multiply strings. Each request's rendering gets one ``RenderBudget``; the engines check it as they
go and stop with an error past it, or as soon as ``cancel`` is set (the client left).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..config import DEFAULT_RENDER_TIMEOUT_S
from ..errors import CllmError, RequestCanceled

# Far beyond any context window (a million tokens is a few million characters), small enough that
# a template cannot fill the server's memory with one prompt.
MAX_PROMPT_CHARS = 32 * 1024 * 1024
# A render that runs long (a Go template on a thread of the server's process, a Jinja one in a
# worker process that pauses itself between turns) computes in turns of TURN_S, one long render at
# a time, each turn followed by PAUSE_S where none computes (``_next_turn``): long renders take at
# most about half of one core, whatever their number. Renders of a few milliseconds never get
# here. Stepping aside 1 ms every 5 ms, each on its own, freed the GIL but not the CPU: two looping
# renders kept a core busy, waking hundreds of times a second, and llama.cpp's threads, which meet
# at a barrier after every op of the graph, waited at each op for the one without a core: another
# model's decode of 0.4 ms took 0.4-0.7 s, and its chat seconds, until the looping renders timed out.
TURN_S = 0.005
PAUSE_S = 0.005


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
    _turn_ends: float = field(init=False)

    def __post_init__(self) -> None:
        now = time.monotonic()
        self.deadline = now + self.timeout
        self._turn_ends = now + TURN_S

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def check(self) -> None:
        """Raise if the client left or the time is up."""
        if self.cancel.is_set():
            raise RequestCanceled()
        if time.monotonic() >= self.deadline:
            raise RenderTimeout(self.timeout)

    def check_turn(self) -> None:
        """``check``, from a render computing on a thread of the server's process: past its first
        TURN_S, it waits here (holding neither the GIL nor a core) for its next turn. (A render on
        a worker process has the worker paused while it waits: ``jinja_workers``.)"""
        self.check()
        if self.turn_over():
            self.wait_turn()

    def turn_over(self) -> bool:
        """Whether the render has computed for its turn (its first is TURN_S from the start)."""
        return time.monotonic() >= self._turn_ends

    def wait_turn(self, told: Callable[[float], None] | None = None) -> None:
        """Wait for the render's next turn, then ``check``; ``told`` hears when it starts."""
        start = _next_turn()
        if told is not None:
            told(start)
        self._turn_ends = start + TURN_S
        # ``cancel`` ends the wait at once; the deadline, at its end.
        self.cancel.wait(max(0.0, min(start, self.deadline) - time.monotonic()))
        self.check()


_turns = threading.Lock()
_free_at = 0.0  # when the last turn given out ends, its pause included


def _next_turn() -> float:
    """When the long render asking may compute next: after a pause, and after the turns given out
    before it with theirs. A turn is a time, not a lock: one its render never takes (it ended)
    lapses, and nothing is to be given back."""
    global _free_at
    with _turns:
        start = max(time.monotonic() + PAUSE_S, _free_at)
        _free_at = start + TURN_S + PAUSE_S
    return start
