"""The GPU tier (``-m gpu``): a real ``cllm serve`` on llama.cpp's Vulkan backend, built apart from
the pinned llama-cpp-python's own source by ``bench/vulkan_build.sh`` and loaded through
``LLAMA_CPP_LIB_PATH`` / ``MTMD_CPP_LIB``. On a machine without a GPU it runs on Mesa's software
Vulkan (lavapipe, ``llvmpipe``): a GPU code path (device memory reports, partial offload, state
copies from device buffers) checked on CPUs. Skipped, saying why, when the build is absent."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.fspath).parents:
            item.add_marker(pytest.mark.gpu)
            item.add_marker(pytest.mark.model)  # `-m "not model"` (the fast suite) leaves it out too


def vulkan_build() -> Path:
    """The folder of the Vulkan build's libraries: VULKAN_BUILD_DIR's (bench/vulkan_build.sh's
    default, ~/.cache/cllm-vulkan) ``build/bin``."""
    root = Path(os.environ.get("VULKAN_BUILD_DIR") or Path.home() / ".cache" / "cllm-vulkan")
    return root / "build" / "bin"


def build_env() -> dict[str, str]:
    """What ``bench/vulkan_build.sh --env`` sets (the build's libraries, the device named, and the
    lavapipe it fetched on a machine without a GPU): the one place that says it."""
    script = HERE.parents[1] / "bench" / "vulkan_build.sh"
    exports = subprocess.run(["bash", str(script), "--env"], capture_output=True, text=True, check=True).stdout
    names = re.findall(r"(?:export|\s)\s*([A-Z_][A-Z0-9_]*)=", exports)
    shown = subprocess.run(
        ["bash", "-c", 'eval "$1" && env -0', "-", exports], capture_output=True, text=True, check=True
    ).stdout
    seen = dict(item.split("=", 1) for item in shown.split("\0") if "=" in item)
    return {name: seen[name] for name in names}


def hardware_vulkan() -> bool:
    """Whether vulkaninfo sees a device that is not a CPU (lavapipe is one)."""
    try:
        summary = subprocess.run(["vulkaninfo", "--summary"], capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    kinds = [line.split("=")[-1].strip() for line in summary.splitlines() if "deviceType" in line]
    return any(kind != "PHYSICAL_DEVICE_TYPE_CPU" for kind in kinds)


@pytest.fixture(scope="session")
def vulkan_env() -> dict[str, str]:
    """The environment that makes a child process's llama_cpp load the Vulkan build and see its
    device; skips the tier when there is no build or no device."""
    lib = vulkan_build()
    if not (lib / "libllama.so").exists() or not (lib / "libggml-vulkan.so").exists():
        pytest.skip(f"no Vulkan build of llama.cpp in {lib}: run bench/vulkan_build.sh (README: GPU builds)")
    env = build_env()
    if "VK_ICD_FILENAMES" not in env and not hardware_vulkan():
        pytest.skip(
            "no GPU, and no Mesa 25 lavapipe beside the Vulkan build (Debian 12's corrupts the heap after "
            "a few model reloads, bench/vulkan_lavapipe.sh): run bench/vulkan_build.sh"
        )
    probe = "from cllm_ollama.engine.binding import gpu_devices; print(repr(gpu_devices()))"
    seen = subprocess.run(
        [sys.executable, "-c", probe], env={**os.environ, **env}, capture_output=True, text=True, timeout=300
    )
    if seen.returncode != 0:
        pytest.fail(f"the Vulkan build does not load:\n{seen.stderr[-3000:]}")
    if seen.stdout.strip().splitlines()[-1:] == ["[]"]:
        pytest.skip(f"the Vulkan build in {lib} finds no device (vulkaninfo --summary; mesa-vulkan-drivers)")
    return env


# What bench/vulkan_build.sh --env adds to name the lavapipe it unpacked (Mesa 25's).
LAVAPIPE_VARS = ("VK_ICD_FILENAMES", "LD_LIBRARY_PATH")


@pytest.fixture(scope="session")
def system_vulkan_env(vulkan_env: dict[str, str]) -> dict[str, str]:
    """The Vulkan build on the system's own driver (Debian 12's lavapipe, or a GPU's), whose free
    device memory stays put from one process to the next: Mesa 25's lavapipe reports the host's
    MemAvailable, which moves by hundreds of MB between a probe and a server's load, so no test can
    leave room for exactly some of a small model's layers there. Only for a server that loads once
    (Debian 12's lavapipe corrupts the heap over reloads)."""
    return {name: value for name, value in vulkan_env.items() if name not in LAVAPIPE_VARS}
