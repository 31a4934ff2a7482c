"""The official ``ollama`` and ``openai`` npm clients, unchanged, against a live cllm (compat/js/check.mjs).

Skipped unless ``node`` is on PATH and ``compat/js/node_modules`` exists (``npm ci`` in
compat/js), so a checkout without the JS clients still passes. check.mjs asserts on real
values itself; this test requires every one of its checks to have run and passed (or, for a
check marked there as a known server bug, to have failed as expected: XFAIL; XPASS fails here).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

JS_DIR = Path(__file__).resolve().parents[2] / "compat" / "js"
NODE = shutil.which("node")
pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(NODE is None, reason="node is not installed"),
    pytest.mark.skipif(
        not all((JS_DIR / "node_modules" / p / "package.json").is_file() for p in ("ollama", "openai")),
        reason="compat/js/node_modules is absent: run `npm ci` in compat/js",
    ),
]
CHECKS = [
    "ollama.version",
    "ollama.list",
    "ollama.show",
    "ollama.generate",
    "ollama.generate stream",
    "ollama.chat stream",
    "ollama.chat format",
    "ollama.generate repeat_penalty",
    "ollama.embed",
    "ollama.ps",
    "ollama.abort",
    "ollama.error",
    "openai.models",
    "openai.chat.completions stream",
    "openai.embeddings",
    "openai.error",
]


def test_js_clients(compat_url: str) -> None:
    assert NODE is not None
    run = subprocess.run(
        [NODE, "check.mjs", compat_url, "tiny"], cwd=JS_DIR, capture_output=True, text=True, timeout=120, check=False
    )
    lines = [line for line in run.stdout.splitlines() if not line.startswith("#")]
    results = {line.split(" ", 1)[1].split(":", 1)[0]: line.split(" ", 1)[0] for line in lines}
    failures = [line for line in lines if not line.startswith(("PASS ", "XFAIL "))]
    assert not failures, "\n".join(failures) + run.stderr
    assert list(results) == CHECKS, run.stdout
    assert run.returncode == 0, run.stdout + run.stderr


def test_js_clients_with_and_without_the_key(keyed_url: str) -> None:
    """compat/js/check_key.mjs: the npm clients send a key (ollama's headers, openai's apiKey) and get 401 without."""
    assert NODE is not None
    run = subprocess.run(
        [NODE, "check_key.mjs", keyed_url, "k-compat", "tiny"],
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.stdout.split("\n")[:4] == [
        "PASS ollama with the key",
        "PASS ollama without the key",
        "PASS openai with the key",
        "PASS openai with a wrong key",
    ], run.stdout + run.stderr
    assert run.returncode == 0, run.stdout + run.stderr
