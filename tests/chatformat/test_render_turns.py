"""Long renders compute in turns with pauses between, so that however many loop, they leave the
cores to llama.cpp's threads most of the time: Go ones on the server's threads
(``render_budget.check_turn``), Jinja ones in worker processes that pause themselves between turns."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cllm_ollama.chatformat.jinja_workers import MAX_PAUSE_S, RenderPool
from cllm_ollama.chatformat.render_budget import PAUSE_S, TURN_S, RenderBudget, RenderTimeout

LOOPING = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"


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


def cpu_seconds(pid: int) -> float:
    """A process's user and system time so far (Linux's /proc), 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def render_workers(parent: int) -> list[int]:
    """The render workers ``parent`` started, busy ones included (``RenderPool.pids`` names the idle)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"jinja_workers" in cmdline:
            pids.append(int(stat.parent.name))
    return pids


def rendering(parent: int, past: float = 0.3) -> list[int]:
    """``parent``'s render workers whose CPU time is ``past`` seconds: past a Python process's start,
    or into a worker's own imports (~0.4 s on two cores)."""
    return [pid for pid in render_workers(parent) if cpu_seconds(pid) > past]


def wait_for(condition: Callable[[], object], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_looping_jinja_renders_pause_between_their_turns() -> None:
    """Two looping templates in worker processes: without turns they would take a core each."""
    pool = RenderPool(3)
    errors: list[BaseException] = []

    def loop() -> None:
        try:
            with pool.session(LOOPING, [{"role": "user", "content": "x"}], RenderBudget(timeout=3.0)) as session:
                session.render()
        except RenderTimeout as e:
            errors.append(e)

    try:
        threads = [threading.Thread(target=loop) for _ in range(2)]
        for thread in threads:
            thread.start()
        # Both workers are rendering once both have used CPU time beyond a Python process's start.
        wait_for(lambda: len(rendering(os.getpid())) >= 2, 10.0)
        pids = rendering(os.getpid())
        cpu, wall = sum(map(cpu_seconds, pids)), time.monotonic()
        time.sleep(1.0)  # the window the share is measured over
        share = (sum(map(cpu_seconds, pids)) - cpu) / (time.monotonic() - wall)
        for thread in threads:
            thread.join()
    finally:
        pool.close()
    assert len(errors) == 2  # both ran to the timeout, and were stopped no earlier
    assert share < 0.75, f"the looping workers took {share:.2f} of a core"


SERVER = f"""
from cllm_ollama.chatformat.jinja_workers import RenderPool
from cllm_ollama.chatformat.render_budget import RenderBudget
with RenderPool(1).session({LOOPING!r}, [], RenderBudget(timeout=60.0)) as session:
    session.render()
"""


def test_a_worker_whose_server_dies_mid_render_exits() -> None:
    """A looping render never reads the end of its stdin, and a worker stopped from outside when its
    server died stayed stopped forever: an orphaned worker ends itself, paused or not (the case of
    a server that dies while its worker still imports is the next test's)."""
    server = subprocess.Popen([sys.executable, "-c", SERVER])
    try:
        wait_for(lambda: rendering(server.pid, past=1.5), 20.0)  # well into the render
        (worker,) = render_workers(server.pid)
        server.kill()
        server.wait()
        wait_for(lambda: not Path(f"/proc/{worker}").exists() or zombie(worker), MAX_PAUSE_S + 10.0)
    finally:
        server.kill()
        server.wait()


def test_a_worker_whose_server_died_before_it_served_exits() -> None:
    """A server gone before its worker's ``serve`` ran: the worker is another's child already, and
    watching its parent as it starts would never see it leave."""
    parent = subprocess.Popen([sys.executable, "-c", "import os, sys; sys.stdout.write(str(os.getpid()))"],
                              stdout=subprocess.PIPE)  # fmt: skip
    gone, _ = parent.communicate()
    main = "import os; from cllm_ollama.chatformat.jinja_workers import serve; serve(os.pipe()[0], {})"
    worker = subprocess.Popen(
        [sys.executable, "-c", main.format(int(gone))], stdin=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert worker.wait(timeout=MAX_PAUSE_S + 20.0) == 1  # _exit_when_orphaned's exit status
    finally:
        worker.kill()
        worker.wait()
        assert worker.stdin is not None and worker.stderr is not None
        worker.stdin.close()
        errors = worker.stderr.read()
        worker.stderr.close()
    assert errors == b""  # not a traceback's exit


def zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
