"""An independent look at a store on disk: does every manifest's config and layers have its blob?

Reads the files directly (not through ``ModelStore``), so a bug in the store cannot hide itself.
Shared by the store race tests and the soak's verdict, with ``publish``: models for them to pull.
"""

from __future__ import annotations

import json
from pathlib import Path

from cllm_ollama.store.manifests import MODEL, SYSTEM
from tests.fakeregistry import FakeRegistry


def missing_blobs(models_dir: Path) -> list[str]:
    """``<manifest path>: <digest>`` for every blob a manifest names that is absent or the wrong size;
    a manifest that is not a readable Docker v2 manifest is reported too."""
    problems: list[str] = []
    manifests = models_dir / "manifests"
    for path in sorted(p for p in manifests.rglob("*") if p.is_file() and not p.name.startswith(".")):
        name = str(path.relative_to(manifests))
        try:
            manifest = json.loads(path.read_bytes())
            layers = [manifest["config"], *(manifest.get("layers") or [])]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems.append(f"{name}: unreadable manifest ({exc})")
            continue
        for layer in layers:
            blob = models_dir / "blobs" / layer["digest"].replace(":", "-")
            if not blob.is_file():
                problems.append(f"{name}: {layer['digest']} missing")
            elif blob.stat().st_size != layer["size"]:
                problems.append(f"{name}: {layer['digest']} has {blob.stat().st_size} bytes, not {layer['size']}")
    return problems


def publish(registry: FakeRegistry, models_dir: Path, names: tuple[str, ...]) -> None:
    """Put each of ``names`` (``library/<name>:latest``) in ``registry``: the store's tiny GGUF plus a
    system layer of its own, so that pulls of shared names write and reference blobs of their own."""
    gguf = (models_dir.parent / "tiny.gguf").read_bytes()  # where tests.schema_fuzz.write_store puts it
    config = {"model_format": "gguf", "model_family": "qwen3", "model_families": ["qwen3"]}
    for name in names:
        layers = [(MODEL, gguf), (SYSTEM, f"pulled {name}".encode())]
        registry.add_model(f"library/{name}", "latest", layers, config)
