"""bench/gpu_probe_steps.py on a tiny model: the GPU check runs it, under each context setting, where
a load dies on a lent GPU, whose minutes a broken script would waste."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cllm_ollama.testing.core_ggufs import write_qwen3

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "gpu_probe_steps.py"
# The probe as it runs, and a crowd of sequences with the callback, each prompt in its own.
SETTINGS = [
    [],
    ["--progress", "--seqs", "4", "--ctx", "320", "--batch", "512", "--every-seq"],
    # The load's own switches, all at once: the diagnosis runs each apart.
    ["--no-devices", "--no-mmap", "--no-extra-bufts", "--imports", "--no-faulthandler", "--no-log-callback"],
]


@pytest.mark.model
@pytest.mark.parametrize("settings", SETTINGS)
def test_each_stage_is_said_and_the_run_ends(tmp_path: Path, settings: list[str]) -> None:
    model = write_qwen3(tmp_path / "m.gguf")
    run = subprocess.run(
        [sys.executable, str(SCRIPT), str(model), "--gpu-layers", "0", *settings],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    stages = [line.split("] ", 1)[1] for line in run.stdout.splitlines()]
    first_words = [s.split(" ")[0] for s in stages]
    assert first_words == ["settings", "Model", "Context", "Context:", "logits", "logits", "closing", "closing", "done"]
    padded = "512" if "--every-seq" in settings else "256"  # llama.cpp pads a sequence's cells to a multiple of 256
    assert f"n_ctx_seq {padded}," in run.stdout


@pytest.mark.model
@pytest.mark.parametrize("settings", [[], ["--no-mmap", "--no-faulthandler", "--no-log-callback"]])
def test_a_raw_load_goes_through_llama_cpp_alone(tmp_path: Path, settings: list[str]) -> None:
    model = write_qwen3(tmp_path / "m.gguf")
    run = subprocess.run(
        [sys.executable, str(SCRIPT), str(model), "--gpu-layers", "0", "--raw", *settings],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    stages = [line.split("] ", 1)[1] for line in run.stdout.splitlines()]
    assert stages[1:] == ["llama_model_load_from_file (llama_cpp alone) ...", "loaded: True; done"]
