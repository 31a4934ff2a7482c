"""A load's memory check counts what the process really holds: its estimate of the host RAM the
process holds once loaded (what it held, the weights' host copy, the compute buffers, the KV
cache) is measured against the process's resident set after a load and a decode."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cllm_ollama.engine.loaded import LoadedModel, LoadSpec, host_fixed_bytes, resolved_spec
from cllm_ollama.engine.memory import GIB, check_memory_fit, resident_bytes
from cllm_ollama.engine.request import Request
from cllm_ollama.errors import InsufficientMemory
from cllm_ollama.testing.ggufs import Shape, write_qwen3

pytestmark = pytest.mark.model

MIB = 2**20
# Four layers of 2 KV heads of 64: 2 KiB of f16 KV a token, 64 MiB for 4 slots of 8192 (llama.cpp
# clears the cache when it makes it: all of it is resident at once).
SHAPE = Shape(n_layer=4, n_embd=256, n_head=4, n_head_kv=2, head_dim=64, n_ff=512)


# Without flash attention first: measured after another load in the same process, the resident set
# carries what that load's allocators kept, beyond what this load adds.
@pytest.mark.parametrize("flash_attention", [False, None])
def test_the_estimate_covers_what_the_process_holds_after_a_load(tmp_path: Path, flash_attention: bool | None) -> None:
    """Also without flash attention (a model on the CPU by default), whose attention scores and
    mask take (4 heads + 1) x 512 rows x 8192 cells of floats (80 MiB) more once a prompt fills
    most of a slot."""
    path = write_qwen3(tmp_path / "m.gguf", shape=SHAPE)
    spec = LoadSpec(path=path, n_slots=4, n_ctx_slot=8192, n_batch=512, n_threads=2, flash_attention=flash_attention)
    loaded = LoadedModel(spec, 4)
    try:
        held_kv = loaded.model.kv_bytes_per_token("f16") * 8192 * 4
        assert held_kv == 64 * MIB

        async def decode() -> None:
            # Micro-batches of 512 rows over most of a slot's cells.
            prompt = tuple(loaded.tokenize("one two three four " * 1800))[:7000]
            async for _ in loaded.generate(Request(prompt=prompt, num_predict=4)):
                pass

        asyncio.run(decode())
        measured = resident_bytes()
        fixed = host_fixed_bytes(resolved_spec(loaded.spec, loaded.model), loaded.model, offloaded=False)
        assert 0 < measured <= loaded.host_estimate, (measured / MIB, loaded.host_estimate / MIB)
        # Not padded past use: at most the weights' pages counted twice (resident when it
        # measured, and again as the weights) and the compute buffers' reserve beyond use.
        assert loaded.host_estimate - measured <= fixed + 32 * MIB, (measured / MIB, loaded.host_estimate / MIB)
    finally:
        loaded.close()


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
