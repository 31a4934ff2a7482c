"""A load's memory check counts what the process really holds: its estimate of the host RAM the
process holds once loaded (what it held, the weights' host copy, the compute buffers, the KV
cache) is measured against the process's resident set after a load and a decode."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness.child_report import child_report

from cllm_ollama.engine.memory import GIB, check_memory_fit, resident_bytes
from cllm_ollama.errors import InsufficientMemory
from cllm_ollama.testing.ggufs import Shape, write_qwen3

pytestmark = pytest.mark.model

MIB = 2**20
# Four layers of 2 KV heads of 64: 2 KiB of f16 KV a token, 64 MiB for 4 slots of 8192 (llama.cpp
# clears the cache when it makes it: all of it is resident at once).
SHAPE = Shape(n_layer=4, n_embd=256, n_head=4, n_head_kv=2, head_dim=64, n_ff=512)


@pytest.mark.parametrize("flash", ["off", "auto"])
def test_the_estimate_covers_what_the_process_holds_after_a_load(tmp_path: Path, flash: str) -> None:
    """Also without flash attention (a model on the CPU by default), whose attention scores and
    mask take (4 heads + 1) x 512 rows x 8192 cells of floats (80 MiB) more once a prompt fills
    most of a slot. In a process of its own (``fresh_load.py``), as ``cllm serve`` loads."""
    path = write_qwen3(tmp_path / "m.gguf", shape=SHAPE)
    child = Path(__file__).with_name("fresh_load.py")
    got = child_report(child, str(path), flash)
    measured, estimate = got["measured"], got["estimate"]
    assert got["kv"] == 64 * MIB
    assert 0 < measured <= estimate, (measured / MIB, estimate / MIB)
    # Not padded past use: at most the weights' pages counted twice (resident when it
    # measured, and again as the weights) and the compute buffers' reserve beyond use.
    assert estimate - measured <= got["fixed"] + 32 * MIB, (measured / MIB, estimate / MIB)


def test_unloads_give_what_llama_cpp_freed_back_to_the_system(tmp_path: Path) -> None:
    """A server that loads and unloads models holds about what one load leaves, not more each time:
    without ``malloc_trim`` glibc kept 42-70 MiB more after three more cycles of this model (2k slots,
    a 1.8k-token prompt), with it 14-15 (threads' arenas, llama.cpp's one-time tables)."""
    path = write_qwen3(tmp_path / "m.gguf", shape=SHAPE)
    after = child_report(Path(__file__).with_name("reloads.py"), str(path), "4")["after_unload"]
    assert max(after[1:]) - after[0] <= 32 * MIB, [a / MIB for a in after]


def test_the_refusal_counts_what_the_process_holds_on_both_sides() -> None:
    """Free memory is net of the process's own: 1 GiB held and 1 GiB free is 2 GiB it could hold."""
    fit = {"kv_bytes_per_token": 1024, "n_ctx_slot": 1024 * 1024, "n_slots": 2, "host_weights": GIB}
    with pytest.raises(InsufficientMemory) as e:
        check_memory_fit(**fit, host_free=2 * GIB, host_held=GIB)
    assert e.value.message == "model requires more system memory (4.0 GiB) than is available (3.0 GiB)"
    assert e.value.fits == 1


def test_resident_bytes_reads_vmrss(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmHWM:\t  900 kB\nVmRSS:\t  812 kB\n")
    assert resident_bytes(status) == 812 * 1024
    assert resident_bytes(tmp_path / "missing") == 0
    assert resident_bytes() > 0
