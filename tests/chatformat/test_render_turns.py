"""Long renders on the server's threads compute in turns with pauses between, so that however many
loop, they leave the cores to llama.cpp's threads most of the time (``render_budget.check_turn``)."""

from __future__ import annotations

import threading
import time

import pytest

from cllm_ollama.chatformat.render_budget import PAUSE_S, TURN_S, RenderBudget, RenderTimeout


def spin(budget: RenderBudget, seconds: float) -> float:
    """A render's loop of pure Python, checking its budget as the Go engine does; the CPU time it
    took (its thread's alone: other threads of the test process do not count)."""
    cpu, end = time.thread_time(), time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(200))
        budget.check_turn()
    return time.thread_time() - cpu


def test_a_render_past_its_first_turn_waits_for_the_next() -> None:
    budget = RenderBudget(timeout=10.0)
    time.sleep(2 * TURN_S)  # its first turn, used up
    start = time.monotonic()
    budget.check_turn()
    assert time.monotonic() - start >= 0.8 * PAUSE_S


@pytest.mark.parametrize("renders", [1, 3])
def test_long_renders_together_take_about_half_a_core(renders: int) -> None:
    """Without turns, looping renders hold the GIL in turn and keep a core busy between them; with
    them, none computes during the pauses. Their CPU time can only fall below the bound on a busy
    machine, never rise above it."""
    used: list[float] = []
    threads = [
        threading.Thread(target=lambda: used.append(spin(RenderBudget(timeout=10.0), 0.6))) for _ in range(renders)
    ]
    wall = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    share = sum(used) / (time.monotonic() - wall)
    assert share < 0.75, f"{renders} renders took {share:.2f} of a core"


def test_turns_end_at_the_deadline() -> None:
    budget = RenderBudget(timeout=0.1)
    start = time.monotonic()
    with pytest.raises(RenderTimeout):
        spin(budget, 5.0)
    assert time.monotonic() - start < 2.0
