"""pyproject.toml lists its packages by hand: a new sub-package left out would be missing from the wheel."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_is_in_the_wheel() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "cllm_ollama").rglob("__init__.py")}
    assert found <= listed, f"not in pyproject.toml's packages: {sorted(found - listed)}"


def test_the_test_harness_stays_out_of_the_wheel() -> None:
    """What means nothing installed (a checkout's compat/js, a model pip-downloaded at run time, a
    server in a thread for tests) lives in tests/harness; the package never imports it."""
    testing = {path.stem for path in (ROOT / "cllm_ollama" / "testing").glob("*.py")}
    assert not testing & {"codex", "real_model", "serving"}
    for path in (ROOT / "cllm_ollama").rglob("*.py"):
        text = path.read_text()
        assert "from harness" not in text and "import harness" not in text, path
