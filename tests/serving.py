"""Tests import the live-server helper from here; it lives in the harness so that its commands
(``python -m harness.codex``) serve the same way."""

import hashlib
from pathlib import Path

import httpx
from harness.serving import serve_in_thread

__all__ = ["create_from_files", "serve_in_thread"]


def create_from_files(url: str, name: str, paths: tuple[Path, ...]) -> None:
    """Model ``name`` created on the server at ``url`` from GGUF files (uploaded as blobs first)."""
    files = {}
    for path in paths:
        data = path.read_bytes()
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        assert httpx.post(f"{url}/api/blobs/{digest}", content=data).status_code == 201
        files[path.name] = digest
    r = httpx.post(f"{url}/api/create", json={"model": name, "files": files, "stream": False}, timeout=60)
    assert r.status_code == 200, r.text
