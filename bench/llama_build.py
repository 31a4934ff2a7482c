"""Builds llama.cpp's ``llama-server`` and ``llama-batched-bench`` from the pinned llama-cpp-python sdist.

The vendored llama.cpp in that sdist is the very commit our binding runs, so the comparison
measures the serving layer, not two different kernels.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

TOOLS = ("llama-server", "llama-batched-bench")
CMAKE_FLAGS = (
    "-G", "Ninja",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=ON",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    # Without the AMX kernels, as cllm runs (its binding leaves them out): this llama.cpp's die with
    # SIGILL once GCC built them natively on an AMX CPU (their tile configuration optimised away).
    "-DCMAKE_C_FLAGS=-U__AMX_INT8__",
    "-DCMAKE_CXX_FLAGS=-U__AMX_INT8__",
)  # fmt: skip


def binding_version() -> str:
    """The installed llama-cpp-python: the build must match the binding cllm runs on."""
    return metadata.version("llama_cpp_python")


def sdist(cache: Path, version: str) -> Path:
    """The sdist tarball, fetched with pip (source only) when the cache lacks it."""
    folder = cache / "sdist"
    found = sorted(folder.glob(f"llama_cpp_python-{version}.tar.gz"))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         "--dest", str(folder), f"llama-cpp-python=={version}"],
        check=True,
    )  # fmt: skip
    return next(folder.glob(f"llama_cpp_python-{version}.tar.gz"))


def source_tree(cache: Path, version: str) -> Path:
    """The vendored llama.cpp of the unpacked sdist."""
    root = cache / "src" / f"llama_cpp_python-{version}"
    llama = root / "vendor" / "llama.cpp"
    if not (llama / "CMakeLists.txt").exists():
        tarball = sdist(cache, version)
        shutil.rmtree(root, ignore_errors=True)
        with tarfile.open(tarball) as tar:
            tar.extractall(root.parent, filter="data")
    return llama


def build_dir(cache: Path, version: str) -> Path:
    return cache / "build" / f"llama.cpp-{version}"


def build_tools(cache: Path, version: str, jobs: int = 2) -> dict[str, Path]:
    """Configure and build the two tools unless both binaries already exist."""
    build = build_dir(cache, version)
    binaries = {tool: build / "bin" / tool for tool in TOOLS}
    if all(path.exists() for path in binaries.values()):
        return binaries
    source = source_tree(cache, version)
    subprocess.run(["cmake", "-S", str(source), "-B", str(build), *CMAKE_FLAGS], check=True)
    subprocess.run(["cmake", "--build", str(build), "-j", str(jobs), "--target", *TOOLS], check=True)
    return binaries


def build_commands(cache: Path, version: str, jobs: int = 2) -> list[str]:
    """The shell commands ``build_tools`` runs, for the report."""
    source, build = source_tree(cache, version), build_dir(cache, version)
    return [
        f"cmake -S {source} -B {build} {' '.join(CMAKE_FLAGS)}",
        f"cmake --build {build} -j {jobs} --target {' '.join(TOOLS)}",
    ]
