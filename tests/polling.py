"""Waiting for state another thread or process changes: poll a condition, with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def until(condition: Callable[[], T], timeout: float = 30) -> T:
    """Poll ``condition`` until it returns something true, and return that; fail past ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)
    return value
