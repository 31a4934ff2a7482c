"""The model store: named manifests over content-addressed blobs, in Ollama's on-disk layout.

``ModelStore`` is the only writer of ``<root>/manifests`` and ``<root>/blobs``; it resolves names
case-insensitively, reads a model's small layers into a ``ModelRecord``, and garbage-collects
blobs that no manifest references any more.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ..errors import InvalidRequest, NotFound
from . import manifests as mt
from .blobs import BlobWriter, atomic_write_bytes, fsync_dir, parse_digest, write_blob
from .gguf_info import gguf_info
from .manifests import Layer, Manifest, ManifestError, manifest_path
from .names import ModelName, parse_name

log = logging.getLogger("cllm.store")


@dataclass(frozen=True)
class ModelRecord:
    """One named model as stored: its manifest plus the decoded small layers."""

    name: ModelName
    digest: str  # sha256 hex of the manifest bytes, as /api/tags shows it
    size: int  # config + layers
    modified_at: datetime
    manifest: Manifest
    config: dict[str, Any]
    model_path: Path | None
    projector_paths: tuple[Path, ...] = ()
    adapter_paths: tuple[Path, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    template: str | None = None  # an Ollama Go template: shown, never rendered
    system: str | None = None
    license: list[str] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def short_name(self) -> str:
        return self.name.display_shortest()

    @property
    def capabilities(self) -> list[str]:
        """The GGUF's capabilities, plus ``vision`` when a projector layer comes with it."""
        caps = list(gguf_info(self.model_path).capabilities) if self.model_path else []
        if self.projector_paths and "vision" not in caps:
            caps.append("vision")
        return caps


class ModelStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser()
        self.manifests_dir = self.root / "manifests"
        self.blobs_dir = self.root / "blobs"
        # Serialises manifest writes against garbage collection, so a blob being referenced
        # by a new manifest is never collected in between.
        self._lock = threading.RLock()

    # -- blobs ---------------------------------------------------------------------------

    def blob_path(self, digest: str) -> Path:
        return self.blobs_dir / f"sha256-{parse_digest(digest)}"

    def has_blob(self, digest: str) -> bool:
        return self.blob_path(digest).is_file()

    def blob_writer(self) -> BlobWriter:
        return BlobWriter(self.blobs_dir)

    def write_blob_from(self, source: BinaryIO | Iterable[bytes], expected_digest: str | None = None) -> str:
        """Stream into the store, verifying ``expected_digest`` if given; returns ``sha256:<hex>``."""
        return write_blob(self.blobs_dir, source, expected_digest)

    def add_layer(self, data: bytes, media_type: str) -> tuple[Layer, bool]:
        """Store a small layer; also says whether the blob was already there."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        existed = self.has_blob(digest)
        if not existed:
            atomic_write_bytes(self.blob_path(digest), data)
        return Layer(media_type, digest, len(data)), existed

    def adopt_blob(self, path: Path, digest: str) -> None:
        """Move a verified file (same filesystem) into place as the blob ``digest``."""
        target = self.blob_path(digest)
        with open(path, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(path, 0o644)
        os.replace(path, target)
        fsync_dir(target.parent)

    def partial_path(self, digest: str) -> Path:
        """Where a resumable download of ``digest`` accumulates (hidden, beside the blobs)."""
        return self.blobs_dir / f".partial-sha256-{parse_digest(digest)}"

    # -- names and manifests -------------------------------------------------------------

    def _names_on_disk(self) -> Iterator[ModelName]:
        if not self.manifests_dir.is_dir():
            return
        for path in sorted(self.manifests_dir.glob("*/*/*/*")):
            if not path.is_file():
                continue
            host, namespace, model, tag = path.relative_to(self.manifests_dir).parts
            try:
                name = parse_name(f"{host}/{namespace}/{model}:{tag}")
            except InvalidRequest:
                continue  # temp files and foreign entries
            if name.parts == (host, namespace, model, tag):
                yield name

    def resolve(self, name: str | ModelName) -> ModelName | None:
        """The stored spelling of ``name`` (matching ignores case), or None."""
        wanted = parse_name(name) if isinstance(name, str) else name
        if manifest_path(self.manifests_dir, wanted).is_file():
            return wanted
        return next((n for n in self._names_on_disk() if n.matches(wanted)), None)

    def get(self, name: str | ModelName) -> ModelRecord:
        """Raise ``InvalidRequest`` for a bad name, ``NotFound("model 'x:tag' not found")`` if absent."""
        wanted = parse_name(name) if isinstance(name, str) else name
        found = self.resolve(wanted)
        if found is None:
            raise NotFound(f"model '{wanted.display_shortest()}' not found")
        try:
            return self._record(found)
        except FileNotFoundError as exc:
            raise NotFound(f"model '{wanted.display_shortest()}' not found") from exc

    def list_models(self) -> list[ModelRecord]:
        """Every readable model, newest first (as Ollama's /api/tags)."""
        records = []
        for name in self._names_on_disk():
            try:
                records.append(self._record(name))
            except (OSError, ManifestError, ValueError) as exc:
                log.warning("skipping %s: %s", name, exc)
        records.sort(key=lambda r: r.modified_at, reverse=True)
        return records

    def write_manifest(self, name: str | ModelName, config: dict[str, Any], layers: list[Layer]) -> ModelRecord:
        """Store ``config`` as a blob and atomically (re)write the manifest of ``name``.

        An existing model with the same name in another case is replaced, not duplicated.
        """
        wanted = parse_name(name) if isinstance(name, str) else name
        config_layer, _ = self.add_layer(orjson.dumps(config), mt.CONFIG_MEDIA_TYPE)
        manifest = Manifest(config=config_layer, layers=tuple(layers))
        with self._lock:
            missing = [layer.digest for layer in manifest.all_layers if not self.has_blob(layer.digest)]
            if missing:
                raise NotFound(f"blob {missing[0]} not found")
            existing = self.resolve(wanted)
            if existing is not None and existing.parts != wanted.parts:
                self._remove_manifest(existing)
            atomic_write_bytes(manifest_path(self.manifests_dir, wanted), manifest.to_bytes())
        return self._record(wanted)

    def copy(self, src: str | ModelName, dst: str | ModelName) -> ModelRecord:
        record = self.get(src)
        target = parse_name(dst) if isinstance(dst, str) else dst
        with self._lock:
            existing = self.resolve(target)
            if existing is not None and existing.parts != target.parts:
                self._remove_manifest(existing)
            atomic_write_bytes(manifest_path(self.manifests_dir, target), record.manifest.to_bytes())
        return self._record(target)

    def delete(self, name: str | ModelName) -> None:
        """Remove the manifest, then every blob it used that no other manifest uses."""
        record = self.get(name)
        with self._lock:
            self._remove_manifest(record.name)
            still_used = self._referenced_digests()
            if still_used is None:
                return
            for layer in record.manifest.all_layers:
                if layer.digest not in still_used:
                    self.blob_path(layer.digest).unlink(missing_ok=True)

    # -- internals -----------------------------------------------------------------------

    def _remove_manifest(self, name: ModelName) -> None:
        path = manifest_path(self.manifests_dir, name)
        path.unlink(missing_ok=True)
        # Drop emptied <model>, <namespace>, <host> directories, as Ollama does.
        for parent in (path.parent, path.parent.parent, path.parent.parent.parent):
            try:
                parent.rmdir()
            except OSError:
                break

    def _referenced_digests(self) -> set[str] | None:
        """Digests some manifest uses; None if a manifest is unreadable (it may own any blob)."""
        used: set[str] = set()
        for name in self._names_on_disk():
            try:
                manifest = Manifest.from_bytes(manifest_path(self.manifests_dir, name).read_bytes())
            except (OSError, ManifestError) as exc:
                log.warning("not collecting blobs: cannot read %s: %s", name, exc)
                return None
            used.update(layer.digest for layer in manifest.all_layers)
        return used

    def _read_text(self, layer: Layer) -> str:
        return self.blob_path(layer.digest).read_text(encoding="utf-8")

    def _record(self, name: ModelName) -> ModelRecord:
        path = manifest_path(self.manifests_dir, name)
        raw = path.read_bytes()
        manifest = Manifest.from_bytes(raw)
        modified = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC).astimezone()
        config: dict[str, Any] = {}
        if self.has_blob(manifest.config.digest):
            loaded = orjson.loads(self.blob_path(manifest.config.digest).read_bytes())
            config = loaded if isinstance(loaded, dict) else {}
        fields: dict[str, Any] = {"license": [], "messages": [], "params": {}}
        model_path = None
        projectors: list[Path] = []
        adapters: list[Path] = []
        for layer in manifest.layers:
            if layer.media_type == mt.MODEL:
                model_path = self.blob_path(layer.digest)
            elif layer.media_type == mt.PROJECTOR:
                projectors.append(self.blob_path(layer.digest))
            elif layer.media_type == mt.ADAPTER:
                adapters.append(self.blob_path(layer.digest))
            elif layer.media_type == mt.TEMPLATE:
                fields["template"] = self._read_text(layer)
            elif layer.media_type == mt.SYSTEM:
                fields["system"] = self._read_text(layer)
            elif layer.media_type == mt.LICENSE:
                fields["license"].append(self._read_text(layer))
            elif layer.media_type == mt.PARAMS:
                fields["params"] = orjson.loads(self.blob_path(layer.digest).read_bytes()) or {}
            elif layer.media_type == mt.MESSAGES:
                fields["messages"] = orjson.loads(self.blob_path(layer.digest).read_bytes()) or []
        return ModelRecord(
            name=name,
            digest=hashlib.sha256(raw).hexdigest(),
            size=sum(layer.size for layer in manifest.all_layers),
            modified_at=modified,
            manifest=manifest,
            config=config,
            model_path=model_path,
            projector_paths=tuple(projectors),
            adapter_paths=tuple(adapters),
            **fields,
        )
