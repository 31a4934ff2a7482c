"""The GPU tier (``-m gpu``): a real ``cllm serve`` on llama.cpp's Vulkan backend, built apart from
the pinned llama-cpp-python's own source by ``bench/vulkan_build.sh`` and loaded through
``LLAMA_CPP_LIB_PATH`` / ``MTMD_CPP_LIB``. On a machine without a GPU it runs on Mesa's software
Vulkan (lavapipe, ``llvmpipe``): a GPU code path (device memory reports, partial offload, state
copies from device buffers) checked on CPUs. Skipped, saying why, when the build is absent."""

from __future__ import annotations

import os
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


@pytest.fixture(scope="session")
def vulkan_env() -> dict[str, str]:
    """The environment that makes a child process's llama_cpp load the Vulkan build and see its
    device; skips the tier when there is no build or no device."""
    lib = vulkan_build()
    if not (lib / "libllama.so").exists() or not (lib / "libggml-vulkan.so").exists():
        pytest.skip(f"no Vulkan build of llama.cpp in {lib}: run bench/vulkan_build.sh (README: GPU builds)")
    # llama.cpp's Vulkan backend passes over CPU-type devices unless they are named: lavapipe is one.
    env = {"LLAMA_CPP_LIB_PATH": str(lib), "MTMD_CPP_LIB": str(lib)}
    env["GGML_VK_VISIBLE_DEVICES"] = os.environ.get("GGML_VK_VISIBLE_DEVICES", "0")
    probe = "from cllm_ollama.engine.binding import gpu_devices; print(repr(gpu_devices()))"
    seen = subprocess.run(
        [sys.executable, "-c", probe], env={**os.environ, **env}, capture_output=True, text=True, timeout=300
    )
    if seen.returncode != 0:
        pytest.fail(f"the Vulkan build does not load:\n{seen.stderr[-3000:]}")
    if seen.stdout.strip().splitlines()[-1:] == ["[]"]:
        pytest.skip(f"the Vulkan build in {lib} finds no device (vulkaninfo --summary; mesa-vulkan-drivers)")
    return env
