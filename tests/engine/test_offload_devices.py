"""The GPUs the fit counts are the devices llama.cpp loads onto, in the order ``tensor_split``
refers to: llama.cpp's own choice (``llama_prepare_model_devices``) drops an integrated GPU beside
a discrete one and a card a second backend lists again, and puts RPC servers first; a ``Model``
then names those devices to llama.cpp (``llama_model_params.devices``)."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import pytest

from cllm_ollama.engine.binding import core
from cllm_ollama.engine.binding.core import GPU_DEVICE, IGPU_DEVICE, BackendDevice, offload_order
from cllm_ollama.errors import EngineError

GIB = 2**30
CPU = BackendDevice(1, "CPU", 0, "CPU", None, 64 * GIB, 64 * GIB)


def gpu(handle: int, name: str, backend: str, device_id: str | None, kind: int = GPU_DEVICE) -> BackendDevice:
    return BackendDevice(handle, name, kind, backend, device_id, handle * GIB, 2 * handle * GIB)


# A laptop's Vulkan lists its integrated GPU first, the discrete one after it.
LAPTOP = [gpu(2, "Vulkan0", "Vulkan", "0000:00:02.0", IGPU_DEVICE), gpu(8, "Vulkan1", "Vulkan", "0000:01:00.0"), CPU]
# A build with CUDA and Vulkan: both list the same two cards.
TWO_BACKENDS = [
    gpu(24, "CUDA0", "CUDA", "0000:01:00.0"),
    gpu(12, "CUDA1", "CUDA", "0000:02:00.0"),
    gpu(23, "Vulkan0", "Vulkan", "0000:01:00.0"),
    gpu(11, "Vulkan1", "Vulkan", "0000:02:00.0"),
    CPU,
]


def names(devices: list[BackendDevice]) -> list[str]:
    return [d.name for d in devices]


def test_an_integrated_gpu_beside_a_discrete_one_is_left_out() -> None:
    assert names(offload_order(LAPTOP)) == ["Vulkan1"]


def test_a_card_two_backends_list_is_counted_once_as_the_first_listed_it() -> None:
    assert names(offload_order(TWO_BACKENDS)) == ["CUDA0", "CUDA1"]


def test_cards_without_a_bus_id_are_never_taken_for_one_another() -> None:
    assert names(offload_order([gpu(4, "A", "Vulkan", None), gpu(5, "B", "Vulkan", None)])) == ["A", "B"]


def test_rpc_servers_come_first_and_integrated_gpus_only_without_a_discrete_one() -> None:
    rpc = gpu(3, "RPC[10.0.0.2:50052]", "RPC", None)
    assert names(offload_order([*LAPTOP, rpc])) == ["RPC[10.0.0.2:50052]", "Vulkan1"]
    igpus = [
        gpu(2, "Vulkan0", "Vulkan", "0000:00:02.0", IGPU_DEVICE),
        gpu(2, "SYCL0", "SYCL", "0000:00:02.0", IGPU_DEVICE),  # the same chip, another backend
    ]
    assert names(offload_order([rpc, *igpus, CPU])) == ["RPC[10.0.0.2:50052]", "Vulkan0"]


def test_gpu_devices_and_their_free_memory_are_llama_cpps_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core, "registry_devices", lambda: TWO_BACKENDS)
    assert core.gpu_devices() == [("CUDA0", 24 * GIB, 48 * GIB), ("CUDA1", 12 * GIB, 24 * GIB)]
    assert core.gpu_free_memory() == 36 * GIB  # not the cards twice over
    monkeypatch.setattr(core, "registry_devices", lambda: LAPTOP)
    assert core.gpu_devices() == [("Vulkan1", 8 * GIB, 16 * GIB)]


def test_a_model_names_the_devices_the_fit_counted_in_their_order(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The devices (and so the split) are passed, not left to llama.cpp's own choice."""
    seen: list[list[int | None]] = []

    def load(path: bytes, params: Any) -> None:
        array = ctypes.cast(params.devices, ctypes.POINTER(ctypes.c_void_p))
        seen.append([array[i] for i in range(3)])
        return None  # no model: the load fails here, after the call

    monkeypatch.setattr(core, "registry_devices", lambda: TWO_BACKENDS)
    monkeypatch.setattr(core.ll, "llama_model_load_from_file", load)
    with pytest.raises(EngineError):
        core.Model(tmp_path / "m.gguf", tensor_split=(1.0, 1.0))
    assert seen == [[24, 12, None]]  # CUDA0, CUDA1, the terminating NULL


def test_without_gpus_llama_cpp_keeps_its_own_choice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[int | None] = []

    def load(path: bytes, params: Any) -> None:
        seen.append(params.devices)
        return None

    monkeypatch.setattr(core, "registry_devices", lambda: [CPU])
    monkeypatch.setattr(core.ll, "llama_model_load_from_file", load)
    with pytest.raises(EngineError):
        core.Model(tmp_path / "m.gguf")
    assert seen == [None]
    assert core.gpu_devices() == []


@pytest.mark.model
def test_this_builds_registry_is_read(tiny_gguf: Path) -> None:
    """The real registry: its devices (a CPU at least) are described, and a load still works."""
    listed = core.registry_devices()
    assert any(d.kind == 0 for d in listed) and all(d.name for d in listed)
    assert core.gpu_devices() == [(d.name, d.free, d.total) for d in offload_order(listed)]
    core.Model(tiny_gguf).close()
