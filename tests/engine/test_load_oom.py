"""A load that runs out of memory (a GPU's, most often: its free memory moved since the fit, or the
estimate fell short) is ``InsufficientMemory``, which the pool meets by evicting idle models and
retrying with fewer slots, not an ``EngineError`` that reads as a broken file. A broken file stays
one."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from harness.child_report import child_report

from cllm_ollama.engine import probe as probe_module
from cllm_ollama.engine.binding import Model
from cllm_ollama.engine.load_stall import StallWatch
from cllm_ollama.errors import EngineError, InsufficientMemory
from cllm_ollama.testing.ggufs import Shape, write_qwen3

CHILD = Path(__file__).with_name("short_of_memory.py")
# 16 KiB of KV a token: 64 MiB for 4 slots of 1024.
WIDE = Shape(n_layer=4, n_embd=256, n_head=4, n_head_kv=4, head_dim=256, n_ff=256)


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_qwen3(tmp_path_factory.mktemp("oom") / "wide.gguf", shape=WIDE)


@pytest.mark.model
def test_weights_or_a_kv_cache_llama_cpp_cannot_allocate_are_short_memory(wide: Path) -> None:
    """For real: llama.cpp's allocations fail past a cap on the process's memory. The context says
    how many slots to retry with (half); the weights, none (fewer slots would not help them)."""
    got = child_report(CHILD, "binding", str(wide))
    assert got["context"][:2] == ["InsufficientMemory", 2]
    # Which allocation meets the cap first (the KV buffer, or a smaller one before it: bad_alloc)
    # follows the heap's layout, which a byte more of anything moves: either is memory short.
    reason = got["context"][2]
    assert "failed to allocate buffer for kv cache" in reason or "std::bad_alloc" in reason, reason
    assert got["model"][:2] == ["InsufficientMemory", None]


@pytest.mark.model
def test_a_broken_file_is_still_an_engine_error(tmp_path: Path, tiny_gguf: Path) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny_gguf.read_bytes()[: tiny_gguf.stat().st_size // 2])
    with pytest.raises(EngineError, match="not within the file bounds") as e:
        Model(cut)
    assert not isinstance(e.value, InsufficientMemory)


def fresh(tiny_gguf: Path, tmp_path: Path) -> Path:
    """A copy no other test has probed (a pass is remembered)."""
    model = tmp_path / "never-probed.gguf"
    model.write_bytes(tiny_gguf.read_bytes())
    return model


@pytest.mark.model
def test_a_probe_whose_child_runs_out_of_memory_is_retried_not_refused(
    tiny_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe's child, for real, short of memory for its context: it says so by its exit status
    and the parent raises ``InsufficientMemory``; nothing is remembered, so a retry probes again."""
    model = fresh(tiny_gguf, tmp_path)
    runs: list[list[str]] = []
    run_child = probe_module.run_child

    def capped(cmd: list[str], watch: StallWatch) -> subprocess.CompletedProcess[str]:
        runs.append(cmd)
        assert cmd[1:5] == ["-X", "faulthandler", "-m", probe_module.__name__]
        return run_child([sys.executable, str(CHILD), "probe", *cmd[5:]], watch)

    monkeypatch.setattr(probe_module, "run_child", capped)
    for _ in range(2):
        with pytest.raises(InsufficientMemory, match="not enough memory to load this model") as e:
            probe_module.probe(model, n_gpu_layers=0, embedding_only=False)
        assert "not enough memory for a context of 1 x 64 tokens" in e.value.message and e.value.fits is None
    assert len(runs) == 2


# What a CUDA build's child says when a cudaMalloc inside a kernel launch fails (CUDA_CHECK aborts).
CUDA_ABORT = (
    "CUDA error: out of memory\n  current device: 0, in function ggml_cuda_pool_alloc at ggml-cuda.cu:490\n"
    "  cudaMalloc((void **) &ptr, look_ahead_size)\n/build/ggml/src/ggml-cuda/ggml-cuda.cu:96: CUDA error\n"
)
ASSERT_ABORT = "/build/ggml/src/ggml.c:1700: GGML_ASSERT(n_dims <= GGML_MAX_DIMS) failed\n"


@pytest.mark.parametrize(("stderr", "short"), [(CUDA_ABORT, True), (ASSERT_ABORT, False)])
def test_an_abort_is_short_memory_only_when_llama_cpp_said_so(
    tiny_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stderr: str, short: bool
) -> None:
    model = fresh(tiny_gguf, tmp_path)

    def aborted(cmd: list[str], watch: StallWatch) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, -6, "", stderr)

    monkeypatch.setattr(probe_module, "run_child", aborted)
    with pytest.raises(EngineError) as e:
        probe_module.probe(model, n_gpu_layers=99, embedding_only=False)
    assert isinstance(e.value, InsufficientMemory) == short
    said = "ggml-cuda.cu:96: CUDA error" if short else "GGML_ASSERT(n_dims <= GGML_MAX_DIMS) failed"
    assert e.value.message.endswith(said)


def test_a_child_the_oom_killer_took_is_short_of_memory(
    tiny_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGKILL the probe did not send (it raises for its own kills) is the kernel's OOM killer
    or a cgroup limit: the pool then unloads idle models and tries again, rather than calling the
    file broken."""
    model = fresh(tiny_gguf, tmp_path)

    def killed(cmd: list[str], watch: StallWatch) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, -signal.SIGKILL, "", "llama_model_load: loading tensors\n")

    monkeypatch.setattr(probe_module, "run_child", killed)
    with pytest.raises(InsufficientMemory, match=r"not enough memory to load this model: .*SIGKILL"):
        probe_module.probe(model, n_gpu_layers=99, embedding_only=False)
