"""bench/segv_trace.c and gpu_check.sh's ``native_names``: where a load dies on a lent GPU, the
check prints the native stack with them, whose minutes a broken tool would waste."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
CRASH = "import ctypes; ctypes.string_at(0)"  # strlen on NULL, inside _ctypes


@pytest.fixture(scope="module")
def segv_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    lib = tmp_path_factory.mktemp("segv") / "segv_trace.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(BENCH / "segv_trace.c"), "-ldl"], check=True)
    return lib


def named(stderr: str) -> str:
    """``stderr`` through gpu_check.sh's own ``native_names``."""
    script = f'eval "$(sed -n "/^native_names()/,/^}}/p" {BENCH / "gpu_check.sh"})"; native_names'
    return subprocess.run(["bash", "-c", script], input=stderr, capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("faulthandler", [False, True])
def test_a_dying_process_says_its_native_stack(segv_trace: Path, faulthandler: bool) -> None:
    cmd = [sys.executable, *(["-X", "faulthandler"] if faulthandler else []), "-c", CRASH]
    run = subprocess.run(cmd, env={"LD_PRELOAD": str(segv_trace)}, capture_output=True, text=True, timeout=60)
    assert run.returncode == -11  # it still dies as it would have
    assert "segv_trace: signal 11 (Segmentation fault)" in run.stderr
    assert ("Fatal Python error: Segmentation fault" in run.stderr) is faulthandler  # both stacks, when on
    frames = named(run.stderr)
    assert "strlen" in frames  # where it faulted, named from libc's symbols
    assert "_ctypes" in frames and "string_at" in frames


def test_a_process_that_lives_says_nothing(segv_trace: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", "print('fine')"], env={"LD_PRELOAD": str(segv_trace)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (run.returncode, run.stdout, run.stderr) == (0, "fine\n", "")
