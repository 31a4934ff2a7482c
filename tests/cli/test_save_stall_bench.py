"""bench/save_stall.py's profile on a tiny model: the GPU check (``bench/gpu_check.sh``) runs it on
the device path, where a broken step costs a lent GPU's scarce minutes (its disk read-back once
compared a ``Read`` as if it were the bytes)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import save_stall

from cllm_ollama.engine.binding import Model
from cllm_ollama.testing.core_ggufs import write_qwen3


@pytest.mark.model
def test_the_profile_saves_restores_and_reads_a_state_back_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = Model(write_qwen3(tmp_path / "m.gguf"))
    try:
        save_stall.profile(model, [64], 2)
    finally:
        model.close()
    out = capsys.readouterr().out
    assert "per MB: copy into ready pages" in out and out.count("\n") >= 3
