"""Makes what ``bench/gpu_check.sh`` carries to the GPU machine, which has no package registry and
takes at most 64 MiB beside the working tree: a trimmed llama.cpp source (the pinned sdist's,
without the vocabularies but Qwen's, docs, tests or web sources), llama-cpp-python's Python part as a
wheel (its C libraries come from the GPU build: ``llama_cpp/lib`` is pointed at it there), and the
wheels of cllm's runtime that the machine's image lacks. Then prints the ``run`` call to make.

Usage: ``python bench/gpu_prepare.py [--local]``. ``--local`` also makes what the CPU rehearsal
(``GPU_CHECK_BACKEND=cpu bench/gpu_check.sh``) needs here: the same wheels for this Python, and a
bare virtual environment with the image's packages standing in for the GPU machine's Python.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import llama_build

REPO = Path(__file__).resolve().parent.parent
CARRY = REPO / ".gpu-carry"
LOCAL = REPO / ".gpu-local"
LIMIT = 64 << 20
# Pinned as cllm's pyproject pins them (and llama-cpp-python's diskcache), carried because the
# GPU machine's image (/work/.library/device/KINDS.md) lacks them or may hold another version.
CARRIED = (
    "starlette==1.10.0",
    "uvicorn==0.54.0",
    "orjson==3.13.0",
    "msgspec==0.22.0",
    "gguf==0.19.0",
    "python-multipart==0.0.34",
    "prometheus-client==0.26.0",
    "click==8.5.1",
    "httpx==0.28.1",
    "socksio==1.0.0",  # httpx[socks]
    "diskcache==5.6.3",
    # A C extension: the wheel for the GPU machine's Python is fetched below (cllm serve imports it).
    "zstandard==0.25.0",
    # Builds cllm there (pip --no-build-isolation): the image's setuptools may predate PEP 639's
    # `license = "MIT"`, which setuptools reads from 77 on.
    "setuptools==80.9.0",
)
# What cllm and the bench import that the image holds already (KINDS.md's package list): the CPU
# rehearsal installs these into its stand-in Python, from the registry, here.
ON_THE_IMAGE = (
    "numpy", "jinja2", "anyio", "h11", "httpcore", "idna", "certifi", "huggingface-hub", "pillow",
    "matplotlib", "pyyaml", "tqdm", "typing-extensions", "packaging", "setuptools", "wheel",
)  # fmt: skip
# Left out of the carried llama.cpp: none of it is compiled for llama-server and the libraries.
DROPPED = (
    "docs", "media", "tests", "gguf-py", "conversion", "benches", "examples", "pocs", "scripts/apple",
    "tools/ui/src", "tools/ui/tests", "tools/ui/static", "tools/server/tests", "tools/server/webui",
    ".devops", ".github",
    *(f"ggml/src/ggml-{b}" for b in ("sycl", "opencl", "hexagon", "cann", "metal", "webgpu", "openvino",
                                      "et", "virtgpu", "musa", "zdnn", "rpc")),
)  # fmt: skip
KEPT_VOCAB = "ggml-vocab-qwen2.gguf"  # bench/make_model.py's tokenizer


def _keep(relative: str) -> bool:
    parts = relative.split("/")
    if parts[0] == "models" and len(parts) > 1:
        return parts[1] == KEPT_VOCAB
    return not any(relative == d or relative.startswith(d + "/") for d in DROPPED)


def trimmed_source(llama: Path, dst: Path) -> None:
    """``llama`` (vendor/llama.cpp of the sdist) as ``dst`` (tar.gz, top folder ``llama.cpp``)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    part = dst.with_suffix(".part")
    with tarfile.open(part, "w:gz", compresslevel=6) as tar:
        for path in sorted(llama.rglob("*")):
            relative = path.relative_to(llama).as_posix()
            if path.is_file() and _keep(relative):
                tar.add(path, arcname=f"llama.cpp/{relative}", recursive=False)
    part.rename(dst)


def binding_wheel(sdist_root: Path, version: str, folder: Path) -> Path:
    """llama-cpp-python's Python package (no C libraries) as a pure wheel of the pinned version, so
    that ``importlib.metadata`` finds the version the bench checks."""
    folder.mkdir(parents=True, exist_ok=True)
    dst = folder / f"llama_cpp_python-{version}-py3-none-any.whl"
    info = f"llama_cpp_python-{version}.dist-info"
    files: dict[str, bytes] = {}
    package = sdist_root / "llama_cpp"
    for path in sorted(package.rglob("*")):
        relative = path.relative_to(package).as_posix()
        if path.is_file() and not relative.startswith("lib/") and "__pycache__" not in relative:
            files[f"llama_cpp/{relative}"] = path.read_bytes()
    files[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: llama_cpp_python\nVersion: {version}\n"
        "Requires-Dist: numpy\nRequires-Dist: diskcache\nRequires-Dist: jinja2\n"
    ).encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: cllm-gpu-prepare\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = io.StringIO()
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write(f"{name},sha256={digest},{len(data)}\n")
    record.write(f"{info}/RECORD,,\n")
    files[f"{info}/RECORD"] = record.getvalue().encode()
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as whl:
        for name, data in files.items():
            whl.writestr(name, data)
    return dst


def download(folder: Path, python_version: str) -> None:
    """The carried wheels, binary for ``python_version`` on manylinux x86-64, without their needs
    (those are on the image, or carried too)."""
    folder.mkdir(parents=True, exist_ok=True)
    platforms = [f"--platform=manylinux_2_{n}_x86_64" for n in (17, 27, 28)] + ["--platform=manylinux2014_x86_64"]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
         f"--python-version={python_version}", "--implementation=cp", *platforms, "-d", str(folder), *CARRIED],
        check=True,
    )  # fmt: skip


def stand_in_python(folder: Path) -> Path:
    """A bare virtual environment holding the image's packages that cllm needs: the CPU rehearsal's
    stand-in for the GPU machine's ``python3``."""
    python = folder / "bin" / "python"
    if not python.exists():
        venv.create(folder, with_pip=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *ON_THE_IMAGE], check=True)
    return python


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def tree_size() -> int:
    """What travels besides the carried folder: tracked files and untracked ones git does not ignore."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True, capture_output=True,
    ).stdout.split(b"\0")  # fmt: skip
    return sum((REPO / name.decode()).stat().st_size for name in listed if name and (REPO / name.decode()).is_file())


RUN_COMMAND = "bash bench/gpu_check.sh"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "cllm-bench")
    p.add_argument("--local", action="store_true", help="also prepare the CPU rehearsal here")
    a = p.parse_args()
    version = llama_build.binding_version()
    llama = llama_build.source_tree(a.cache, version)
    source = CARRY / f"llama.cpp-{version}.tar.gz"
    if not source.exists():
        trimmed_source(llama, source)
    wheels = CARRY / "wheels"
    binding_wheel(llama.parent.parent, version, wheels)
    download(wheels, "3.12")
    if a.local:
        local_wheels = LOCAL / "wheels"
        binding_wheel(llama.parent.parent, version, local_wheels)
        download(local_wheels, f"{sys.version_info.major}.{sys.version_info.minor}")
        print(f"stand-in python: {stand_in_python(LOCAL / 'image-python')}")
    carried, tree = size(CARRY), tree_size()
    print(f"carried {CARRY.name}/: {carried / 2**20:.1f} MiB (source {size(source) / 2**20:.1f} MiB, "
          f"wheels {size(wheels) / 2**20:.1f} MiB); working tree {tree / 2**20:.1f} MiB; limit 64 MiB")  # fmt: skip
    if carried + tree > LIMIT - (2 << 20):
        raise SystemExit("!! over the 64 MiB the device call carries: trim more")
    print("\nThe device call (one command, ~10 minutes; results come back from $OUT):")
    print(f'  run(command="{RUN_COMMAND}", carry=[".gpu-carry"], timeout_s=600)')


if __name__ == "__main__":
    main()
