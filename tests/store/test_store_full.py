"""A full disk under the model store: a 100 MB upload into a 30 MB filesystem (a real tmpfs) is
Ollama's worded 500 (Go's error for the write), with no traceback, nothing half-written kept, and
the server serving on."""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings

MIB = 1 << 20


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "disk"
    root.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=30m", "tmpfs", str(root)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a 30 MB tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    try:
        yield root
    finally:
        subprocess.run(["umount", str(root)], check=True)


def test_an_upload_past_a_full_disk_is_worded_and_leaves_nothing(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    body = bytes(100 * MIB)
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    settings = Settings(models_dir=small_disk / "models")

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 4 * MIB):
            yield body[start : start + 4 * MIB]

    with caplog.at_level(logging.INFO), TestClient(create_app(settings), base_url="http://localhost") as client:
        reply = client.post(f"/api/blobs/{digest}", content=chunks())
        assert reply.status_code == 500
        error = reply.json()["error"]
        assert error.startswith("write ") and error.endswith(": no space left on device")
        assert "blobs/" in error and "Errno" not in error
        blobs = small_disk / "models" / "blobs"
        assert [p.name for p in blobs.iterdir()] == []  # the partial file is gone
        assert client.get("/api/tags").status_code == 200
        small = b"fits"
        assert client.post(f"/api/blobs/sha256:{hashlib.sha256(small).hexdigest()}", content=small).status_code == 201
    assert all(record.exc_info is None for record in caplog.records)
    assert os.statvfs(small_disk).f_bfree > 0  # room again for what fits
