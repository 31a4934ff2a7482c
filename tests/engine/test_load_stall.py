"""OLLAMA_LOAD_TIMEOUT: a load that goes that long without progress is given up with Ollama's words,
in the probe's child (killed) and in the server's own load (ended by its progress callback)."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pytest

from cllm_ollama.config import DEFAULT_LOAD_TIMEOUT_S, Settings
from cllm_ollama.engine import probe as probe_module
from cllm_ollama.engine.load_stall import LoadStalled, StallWatch
from cllm_ollama.engine.weights import SharedWeights


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_load_that_keeps_moving_is_never_stalled() -> None:
    clock = FakeClock()
    watch = StallWatch(10.0, clock)
    for share in (0.1, 0.5, 0.9):
        clock.now += 9.0  # slow, but each report within the timeout of the last
        assert watch.heard(share)
    assert watch.remaining() == 10.0 and not watch.stalled


def test_a_report_later_than_the_timeout_ends_the_load() -> None:
    clock = FakeClock()
    watch = StallWatch(10.0, clock)
    assert watch.heard(0.25)
    clock.now += 10.5
    assert watch.remaining() < 0
    assert not watch.heard(0.5)
    assert watch.stalled
    assert watch.error().message == "timed out waiting for llama runner to start - progress 0.25 - "


def test_no_timeout_never_stalls() -> None:
    clock = FakeClock()
    watch = StallWatch(math.inf, clock)
    clock.now += 1e9
    assert watch.heard(1.0) and watch.remaining() == math.inf


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, DEFAULT_LOAD_TIMEOUT_S),
        ("10m", 600.0),
        ("90", 90.0),  # Ollama: a bare integer is seconds
        ("1h30m", 5400.0),
        ("0", math.inf),  # zero or less: no limit
        ("-1", math.inf),
        ("-5m", math.inf),
        ("soon", DEFAULT_LOAD_TIMEOUT_S),  # unparsable: the default, as Ollama's
    ],
)
def test_ollama_load_timeout_reads_as_ollamas(value: str | None, seconds: float) -> None:
    env = {} if value is None else {"OLLAMA_LOAD_TIMEOUT": value}
    assert Settings.from_env(env).load_timeout == seconds


def test_the_cllm_twin_wins() -> None:
    assert Settings.from_env({"OLLAMA_LOAD_TIMEOUT": "1m", "CLLM_LOAD_TIMEOUT": "2m"}).load_timeout == 120.0


def test_a_probe_whose_load_hangs_is_killed_and_refused(tmp_path: Path) -> None:
    """A file that never yields a byte (a FIFO nobody writes: llama.cpp's open waits for ever, as on
    a hung network mount): the child makes no progress, and is killed after the stall timeout."""
    stuck = tmp_path / "stuck.gguf"
    os.mkfifo(stuck)
    start = time.monotonic()
    with pytest.raises(LoadStalled) as info:
        probe_module.probe(stuck, n_gpu_layers=0, embedding_only=False, stall_timeout=1.0)
    assert info.value.message == "timed out waiting for llama runner to start - progress 0.00 - "
    assert time.monotonic() - start < 30.0


@pytest.mark.model
def test_a_probe_with_progress_passes_under_a_stall_timeout(tiny_gguf: Path, tmp_path: Path) -> None:
    model = tmp_path / "watched.gguf"  # a path no other test has probed (a pass is remembered)
    model.write_bytes(tiny_gguf.read_bytes())
    assert probe_module.probe(model, n_gpu_layers=0, embedding_only=False, stall_timeout=60.0) is None


@pytest.mark.model
def test_the_servers_own_load_ends_at_a_late_report(tiny_gguf: Path) -> None:
    """A zero timeout makes every report late: the first one ends the load, and nothing is held."""
    weights = SharedWeights()
    with pytest.raises(LoadStalled):
        weights.acquire(tiny_gguf, 0, stall_timeout=0.0)
    assert weights.loaded() == []
    model = weights.acquire(tiny_gguf, 0, stall_timeout=60.0)
    weights.release(model)
