"""The GPU check carries every runtime dependency the GPU machine's image lacks (bench/gpu_prepare.py).

zstandard joined cllm's dependencies without joining the carried wheels, and the CPU rehearsal of
the check then found `cllm serve` dying at import (ModuleNotFoundError) before it could load
anything: on a lent GPU that would have cost the session's only device run."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))  # gpu_prepare's siblings are top-level

import gpu_prepare  # noqa: E402


def _name(requirement: str) -> str:
    """A requirement's project name, normalised as pip compares them."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def test_every_runtime_dependency_is_carried_or_on_the_image() -> None:
    with open(ROOT / "pyproject.toml", "rb") as f:
        needed = {_name(r) for r in tomllib.load(f)["project"]["dependencies"]}
    present = {_name(r) for r in (*gpu_prepare.CARRIED, *gpu_prepare.ON_THE_IMAGE)}
    # llama-cpp-python travels as its own wheel, built from the pinned sdist with the GPU build's libraries.
    assert needed - present - {"llama-cpp-python"} == set()


def test_what_is_carried_is_pinned_as_pyproject_pins_it() -> None:
    with open(ROOT / "pyproject.toml", "rb") as f:
        pinned = {_name(r): r for r in tomllib.load(f)["project"]["dependencies"] if "==" in r}
    for carried in gpu_prepare.CARRIED:
        if _name(carried) in pinned:
            # A wheel carries no extras: httpx[socks]'s socksio is carried as its own pin.
            assert carried == re.sub(r"\[[^]]*\]", "", pinned[_name(carried)].replace(" ", ""))
