"""Tests import the live-server helper from here; it lives in the harness so that its commands
(``python -m harness.codex``) serve the same way."""

import hashlib
from pathlib import Path
from typing import Any

import httpx
from harness.serving import serve_in_thread

__all__ = ["create_from_files", "serve_in_thread"]


def create_from_files(url: str, name: str, paths: tuple[Path, ...], parameters: dict[str, Any] | None = None) -> None:
    """Model ``name`` created on the server at ``url`` from GGUF files (uploaded as blobs first),
    with the Modelfile ``parameters`` given."""
    files = {}
    for path in paths:
        data = path.read_bytes()
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        assert httpx.post(f"{url}/api/blobs/{digest}", content=data).status_code == 201
        files[path.name] = digest
    body: dict[str, Any] = {"model": name, "files": files, "stream": False}
    if parameters:
        body["parameters"] = parameters
    r = httpx.post(f"{url}/api/create", json=body, timeout=60)
    assert r.status_code == 200, r.text
