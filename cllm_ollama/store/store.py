"""The model store: named manifests over content-addressed blobs, in Ollama's on-disk layout.

``ModelStore`` is the only writer of ``<root>/manifests`` and ``<root>/blobs``; it resolves names
case-insensitively, reads a model's small layers into a ``ModelRecord``, and garbage-collects
blobs that no manifest references any more. It never reads or writes through a link that leads
out of the store (the root itself may be a link).

One rule for its writers: a blob that a manifest references, or that work in progress (a create,
copy, pull or show) has pinned through a ``Claim``, is never removed. Manifests are written, and
deletes and prunes decide what is unreferenced, under one lock; a manifest is written only once
every blob it names is here. A manifest whose blob is missing all the same (an older version, a
crash, a hand edit) is a broken model: logged once, listed as broken, deletable.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ..errors import CllmError, InvalidRequest, NotFound
from ..model_families import parser_capabilities, renderer_in_use
from . import manifests as mt
from .blobs import BlobWriter, atomic_write_bytes, fsync_dir, parse_digest, sha256_file, write_blob
from .gguf_info import gguf_info, projector_hears
from .locking import is_locked, remove_unless_locked
from .manifests import Layer, Manifest, ManifestError, manifest_path
from .names import ModelName, parse_name
from .pins import BlobPins

log = logging.getLogger("cllm.store")

# Ollama's layerPruneGracePeriod: a file this recent may belong to another process (a
# ``cllm pull`` working on the store directly) that has not written its manifest yet.
PRUNE_GRACE_S = 3600.0
_BLOB_NAME = re.compile(r"sha256-([0-9a-f]{64})")
# Ours (temp files, resumable downloads and their locks) and partial downloads in Ollama's
# layout (which registry pulls use: the file, its part files, our lock beside them).
_LEFTOVER_NAME = re.compile(r"\.(tmp|partial)-.+|sha256-[0-9a-f]{64}-partial(-\d+|\.lock)?")
_PART_SUFFIX = re.compile(r"(?<=-partial)-\d+$")
_DIGEST_IN_TEXT = re.compile(rb"sha256[:-]([0-9a-fA-F]{64})")
# A Go template's fields that grant a capability (Ollama reads ``Template.Vars``, lower-cased names).
_TEMPLATE_FIELDS = (
    ("tools", re.compile(r"\{\{[^}]*\.tools\b", re.IGNORECASE)),
    ("insert", re.compile(r"\{\{[^}]*\.suffix\b", re.IGNORECASE)),
)


class BrokenModel(NotFound):
    """A model whose manifest names a blob that is not in the store: it can only be deleted or made again."""

    def __init__(self, name: ModelName, digest: str) -> None:
        super().__init__(
            f"model '{name.display_shortest()}' is broken: blob {digest} not found; "
            "delete it, or pull or create it again"
        )


class OutsideStore(CllmError):
    """A path in the store that a link leads out of it: never read, written or pruned through."""

    def __init__(self, relative: Path) -> None:
        super().__init__(f"{relative} leads out of the model store: refusing to follow the link")


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
    draft_path: Path | None = None  # a Modelfile's DRAFT (the last draft layer, as Ollama reads it)
    params: dict[str, Any] = field(default_factory=dict)
    template: str | None = None  # an Ollama Go template: rendered instead of the GGUF's (chatformat/)
    system: str | None = None
    license: list[str] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    missing: tuple[str, ...] = ()  # digests of the layers whose blob is not in the store

    @property
    def broken(self) -> str | None:
        """Why the model cannot be used (a blob is missing), or None."""
        return str(BrokenModel(self.name, self.missing[0]).message) if self.missing else None

    @property
    def short_name(self) -> str:
        return self.name.display_shortest()

    @property
    def parent_model(self) -> str:
        """The model this one was made from, as its model layer says (Ollama's ``ParentModel``: the
        last model layer's ``from``); "" where it names none (one made from files)."""
        froms = [layer.from_ for layer in self.manifest.layers if layer.media_type == mt.MODEL]
        return froms[-1] if froms else ""

    @property
    def parser(self) -> str:
        """Ollama's output parser named in the config (a registry model's, a Modelfile's PARSER)."""
        value = self.config.get("parser")
        return value if isinstance(value, str) else ""

    @property
    def renderer(self) -> str:
        """Ollama's prompt renderer named in the config (a registry model's, a Modelfile's RENDERER)."""
        value = self.config.get("renderer")
        return value if isinstance(value, str) else ""

    @property
    def renderer_in_use(self) -> str:
        """The renderer prompts are rendered with: the config's, Gemma 4's legacy one resolved to
        its small or large renderer by the model's name or size, as Ollama resolves it."""
        size = self.config.get("model_type")
        return renderer_in_use(self.renderer, (self.short_name, str(self.name)), size if isinstance(size, str) else "")

    @property
    def capabilities(self) -> list[str]:
        """The GGUF's capabilities, plus ``vision`` when a projector layer comes with it (any
        projector, as Ollama's ``projectorCapabilities`` says) and ``audio`` when one of them hears;
        then what the model's Go template uses (``.Tools``, ``.Suffix``: Ollama's
        ``goTemplateCapabilities``) and what its named parser can (``parserCapabilities``). A model
        whose config names a renderer or parser takes no ``tools`` or ``thinking`` from the GGUF's
        chat template: Ollama reads those off the renderer's parser instead (``ggufCapabilities``
        skips the template where ``usesOllamaRenderedChat``)."""
        caps = list(gguf_info(self.model_path).capabilities) if self.model_path else []
        if self.renderer or self.parser:
            caps = [cap for cap in caps if cap not in ("tools", "thinking")]
        if self.projector_paths and "vision" not in caps:
            caps.append("vision")
        if "audio" not in caps and any(projector_hears(p) for p in self.projector_paths):
            caps.append("audio")
        extra = list(parser_capabilities(self.parser))
        if self.template and "completion" in caps:
            extra += [cap for cap, field in _TEMPLATE_FIELDS if field.search(self.template)]
        caps += [cap for cap in dict.fromkeys(extra) if cap not in caps]
        return caps


class ModelStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser()
        self.manifests_dir = self.root / "manifests"
        self.blobs_dir = self.root / "blobs"
        # Serialises manifest writes against garbage collection, so a blob being referenced
        # by a new manifest is never collected in between; the pins are read and changed under it.
        self._lock = threading.RLock()
        self._pins = BlobPins()
        self._reported_broken: set[tuple[ModelName, str]] = set()

    # -- blobs ---------------------------------------------------------------------------

    def blob_path(self, digest: str) -> Path:
        return self.blobs_dir / f"sha256-{parse_digest(digest)}"

    def has_blob(self, digest: str) -> bool:
        path = self.blob_path(digest)
        return path.is_file() and self._inside(path)

    def touch_blob(self, digest: str) -> None:
        """Mark an existing blob as just used, so a prune starting elsewhere spares it for a while."""
        path = self.blob_path(digest)
        if self._inside(path):
            with contextlib.suppress(OSError):  # a read-only store: nothing of ours prunes it either
                os.utime(path)

    def blob_writer(self) -> BlobWriter:
        return BlobWriter(self._writable(self.blobs_dir / "upload").parent)

    def write_blob_from(self, source: BinaryIO | Iterable[bytes], expected_digest: str | None = None) -> str:
        """Stream into the store, verifying ``expected_digest`` if given; returns ``sha256:<hex>``."""
        return write_blob(self._writable(self.blobs_dir / "upload").parent, source, expected_digest)

    def add_layer(self, data: bytes, media_type: str) -> tuple[Layer, bool]:
        """Store a small layer; also says whether the blob was already there."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        existed = self.has_blob(digest)
        if existed:
            self.touch_blob(digest)
        else:
            atomic_write_bytes(self._writable(self.blob_path(digest)), data)
        return Layer(media_type, digest, len(data)), existed

    def adopt_blob(self, path: Path, digest: str) -> None:
        """Move a verified file (same filesystem) into place as the blob ``digest``."""
        target = self._writable(self.blob_path(digest))
        with open(path, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(path, 0o644)
        os.replace(path, target)
        fsync_dir(target.parent)

    @contextlib.contextmanager
    def scratch_file(self, kind: str) -> Iterator[Path]:
        """An empty file beside the blobs (same filesystem, so ``Claim.adopt_file`` can move it in)
        for a layer being written, removed when the block ends if it was not adopted; named
        ``.tmp-<kind>-...``, which a prune takes should a crash leave one."""
        fd, name = tempfile.mkstemp(prefix=f".tmp-{kind}-", dir=self._writable(self.blobs_dir / "scratch").parent)
        os.close(fd)
        try:
            yield Path(name)
        finally:
            Path(name).unlink(missing_ok=True)

    def partial_path(self, digest: str) -> Path:
        """Where a resumable download of ``digest`` accumulates (hidden, beside the blobs).

        Appended to in place, so neither it nor its ``.lock`` sibling may be a link out.
        """
        path = self._readable(self.blobs_dir / f".partial-sha256-{parse_digest(digest)}")
        self._readable(path.with_name(path.name + ".lock"))
        return path

    def download_path(self, digest: str) -> Path:
        """Where a registry download of ``digest`` accumulates: Ollama's ``sha256-<hex>-partial``.

        Its part files (``-partial-<n>``) and lock (``.lock``) sit beside it; none may be a link out.
        """
        path = self._readable(self.blobs_dir / f"sha256-{parse_digest(digest)}-partial")
        self._readable(path.with_name(path.name + ".lock"))
        return path

    def digests_of(self, name: ModelName) -> set[str]:
        """The blobs the model stored under ``name`` uses now: what a pull or create that replaces it
        may leave unused (none where there is no such model or its manifest cannot be read)."""
        found = self.resolve(name)
        if found is None:
            return set()
        try:
            return {layer.digest for layer in Manifest.from_bytes(self.manifest_bytes(found)).all_layers}
        except (OSError, ManifestError, OutsideStore) as exc:
            log.warning("replacing %s, whose manifest cannot be read: %s", name, exc)
            return set()

    def discard_unused(self, digests: Iterable[str]) -> None:
        """Remove those of ``digests`` no manifest references (what a failed create leaves)."""
        with self._lock:
            used = self._referenced_digests()
            if used is None:
                return
            for digest in digests:
                if f"sha256:{parse_digest(digest)}" not in used and not self._pins.spare(digest):
                    self._writable(self.blob_path(digest)).unlink(missing_ok=True)

    def remove_unused_layers(
        self,
        old: set[str],
        record: ModelRecord,
        *,
        noprune: bool,
        replaced: Iterable[str] = (),
        report: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        """Once a pull or create has written ``record``, remove what it left unused, as Ollama does:
        the blobs of the model it replaced (``old``: its ``digests_of`` taken before) and those it
        rewrote into others (``replaced``: a GGUF in Ollama's converter's layout), unless
        ``noprune`` (OLLAMA_NOPRUNE). ``report`` gets Ollama's pull status first, where one is sent."""
        unused = (old | set(replaced)) - {layer.digest for layer in record.manifest.all_layers}
        if not unused or noprune:
            return
        if report is not None:
            report({"status": "removing unused layers"})
        self.discard_unused(unused)

    def prune(self, grace_s: float = PRUNE_GRACE_S) -> list[str]:
        """Remove blobs no manifest references and leftover temp and partial files, as Ollama does at start.

        Files modified in the last ``grace_s`` seconds are kept, and so is a partial download
        whose lock is held. Nothing is removed while a manifest cannot be read: it may
        reference any blob. Returns the names removed from ``blobs/``.
        """
        removed: list[str] = []
        if not self.blobs_dir.is_dir():
            return removed
        cutoff = time.time() - grace_s
        with self._lock:
            if not self._inside(self.blobs_dir):
                log.warning("not pruning: %s", OutsideStore(Path("blobs")))
                return removed
            used = self._referenced_digests()
            if used is None:
                log.warning("not pruning unused blobs while a manifest cannot be read")
                return removed
            entries = sorted(os.scandir(self.blobs_dir), key=lambda e: e.name)
            removed = [e.name for e in entries if _pruned(e, used, self._pins.spare, cutoff)]
            if self.manifests_dir.is_dir() and self._inside(self.manifests_dir):
                prune_manifest_dirs(self.manifests_dir, cutoff)
        if removed:
            log.info("pruned %d unused blobs and leftover files", len(removed))
        return removed

    # -- names and manifests -------------------------------------------------------------

    def _names_on_disk(self) -> Iterator[ModelName]:
        """Every name with a manifest file, readable or not (a broken one must stay deletable)."""
        return names_in(self.manifests_dir, self._manifest_exists)

    def resolve(self, name: str | ModelName) -> ModelName | None:
        """The stored spelling of ``name`` (matching ignores case), or None."""
        wanted = parse_name(name) if isinstance(name, str) else name
        with self._lock:  # a delete removes emptied directories: a scan beside it would trip on them
            if self._manifest_exists(manifest_path(self.manifests_dir, wanted)):
                return wanted
            return next((n for n in self._names_on_disk() if n.matches(wanted)), None)

    def get(self, name: str | ModelName) -> ModelRecord:
        """Raise ``InvalidRequest`` for a bad name, ``NotFound("model 'x:tag' not found")`` if absent."""
        wanted = parse_name(name) if isinstance(name, str) else name
        with self._lock:  # never between a delete's manifest and its blobs
            found = self.resolve(wanted)
            if found is None:
                raise NotFound(f"model '{wanted.display_shortest()}' not found")
            try:
                record = self._record(found)
            except FileNotFoundError as exc:
                raise NotFound(f"model '{wanted.display_shortest()}' not found") from exc
        if record.missing:
            self._report_broken(record)
            raise BrokenModel(record.name, record.missing[0])
        return record

    def list_models(self, *, broken: bool = False) -> list[ModelRecord]:
        """Every readable model, newest first (as Ollama's /api/tags); with ``broken``, also those
        missing a blob (``record.broken`` says which), so they can be seen and deleted."""
        records = []
        with self._lock:
            for name in self._names_on_disk():
                try:
                    records.append(self._record(name))
                except (OSError, ManifestError, ValueError, OutsideStore) as exc:
                    log.warning("skipping %s: %s", name, exc)
        for record in records:
            if record.missing:
                self._report_broken(record)
        records = [r for r in records if broken or not r.missing]
        records.sort(key=lambda r: r.modified_at, reverse=True)
        return records

    def report_broken(self) -> list[ModelRecord]:
        """Log each model that misses a blob (once per process); returns them. Run at start."""
        return [r for r in self.list_models(broken=True) if r.missing]

    def _report_broken(self, record: ModelRecord) -> None:
        key = (record.name, record.missing[0])
        with self._lock:
            if key in self._reported_broken:
                return
            self._reported_broken.add(key)
        log.warning("%s", record.broken)

    def claim(self) -> Claim:
        """Pins for work in progress: the blobs it checks or adds stay until it ends (``with``)."""
        return Claim(self)

    def write_manifest(self, name: str | ModelName, config: dict[str, Any], layers: list[Layer]) -> ModelRecord:
        """Store ``config`` as a blob and atomically (re)write the manifest of ``name``.

        An existing model whose name differs only in case is replaced under its own spelling.
        """
        wanted = parse_name(name) if isinstance(name, str) else name
        with self._lock:  # the config blob, too, stays until the manifest names it
            config_layer, _ = self.add_layer(orjson.dumps(config), mt.CONFIG_MEDIA_TYPE)
            manifest = Manifest(config=config_layer, layers=tuple(layers))
            return self.write_manifest_bytes(wanted, manifest.to_bytes())

    def write_manifest_bytes(self, name: str | ModelName, data: bytes) -> ModelRecord:
        """Atomically (re)write the manifest of ``name`` as ``data``, byte for byte (as pulled).

        Every blob it names must be here; an existing model whose name differs only in case is
        replaced under its own spelling.
        """
        wanted = parse_name(name) if isinstance(name, str) else name
        manifest = Manifest.from_bytes(data)
        with self._lock:
            return self._record(self._write_manifest_locked(wanted, manifest, data))

    def _write_manifest_locked(self, name: ModelName, manifest: Manifest, data: bytes) -> ModelName:
        """Write ``data`` as the manifest of ``name`` once every blob it names is confirmed here;
        returns the name written: an existing model's spelling where ``name`` differs from it only in
        case (Ollama's ``getExistingName``), so that a copy or pull to ``LLAMA3`` renames no ``llama3``."""
        missing = [layer.digest for layer in manifest.all_layers if not self.has_blob(layer.digest)]
        if missing:
            raise NotFound(f"blob {missing[0]} not found")
        target = self.resolve(name) or name
        atomic_write_bytes(self._writable(manifest_path(self.manifests_dir, target)), data)
        return target

    def manifest_bytes(self, name: ModelName) -> bytes:
        """The stored manifest of ``name`` (as resolved), byte for byte."""
        return self._readable(manifest_path(self.manifests_dir, name)).read_bytes()

    def copy(self, src: str | ModelName, dst: str | ModelName) -> ModelRecord:
        """Read the source and write the copy in one step: no delete of the source comes between. A
        destination that names a model in another case is written under that model's spelling (a
        copy onto the source's own name in another case changes nothing), as Ollama's copy."""
        target = parse_name(dst) if isinstance(dst, str) else dst
        with self._lock:
            record = self.get(src)
            # Byte for byte, as Ollama's CopyModel: the copy keeps the source's digest (its ID).
            data = self.manifest_bytes(record.name)
            return self._record(self._write_manifest_locked(target, record.manifest, data))

    def delete(self, name: str | ModelName) -> Path | None:
        """Remove the manifest, then every blob it used that no other manifest uses.

        A manifest that cannot be read is removed all the same; the blobs it used are left for
        the next prune. Returns the model file removed from disk, if one was.
        """
        wanted = parse_name(name) if isinstance(name, str) else name
        with self._lock:
            found = self.resolve(wanted)
            if found is None:
                raise NotFound(f"model '{wanted.display_shortest()}' not found")
            manifest: Manifest | None = None
            try:
                manifest = Manifest.from_bytes(self._readable(manifest_path(self.manifests_dir, found)).read_bytes())
            except (OSError, ManifestError, OutsideStore) as exc:
                log.warning("removing unreadable manifest %s: %s", found, exc)
            self._remove_manifest(found)
            still_used = self._referenced_digests() if manifest is not None else None
            if manifest is None or still_used is None:
                return None
            removed = None
            for layer in manifest.all_layers:
                if f"sha256:{layer.hex.lower()}" not in still_used and not self._pins.spare(layer.digest):
                    path = self._writable(self.blob_path(layer.digest))
                    path.unlink(missing_ok=True)
                    if layer.media_type == mt.MODEL:
                        removed = path
            return removed

    # -- internals -----------------------------------------------------------------------

    def _inside(self, path: Path) -> bool:
        """Whether ``path``, with every link on the way followed, stays in the store."""
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(self.root))

    def _readable(self, path: Path) -> Path:
        """``path`` if it (a file read or appended to in place) resolves inside the store."""
        if not self._inside(path):
            raise OutsideStore(path.relative_to(self.root))
        return path

    def _writable(self, path: Path) -> Path:
        """``path`` if its directory resolves inside the store; the file itself is only ever
        replaced or unlinked, which does not follow a link."""
        if not self._inside(path.parent):
            raise OutsideStore(path.parent.relative_to(self.root))
        return path

    def _manifest_exists(self, path: Path) -> bool:
        # A link counts even when it dangles or leads out: reading it fails, deleting it works.
        return (path.is_file() or path.is_symlink()) and self._inside(path.parent)

    def _remove_manifest(self, name: ModelName) -> None:
        path = self._writable(manifest_path(self.manifests_dir, name))
        path.unlink(missing_ok=True)
        # Drop emptied <model>, <namespace>, <host> directories, as Ollama does.
        for parent in (path.parent, path.parent.parent, path.parent.parent.parent):
            try:
                parent.rmdir()
            except OSError:
                break

    def _referenced_digests(self) -> set[str] | None:
        """``sha256:<hex>`` of every blob some manifest names; None if a manifest cannot be read."""
        return referenced_digests(
            self._readable(manifest_path(self.manifests_dir, name)) for name in self._names_on_disk()
        )

    def _blob_file(self, layer: Layer) -> Path:
        return self._readable(self.blob_path(layer.digest))

    def _record(self, name: ModelName) -> ModelRecord:
        return read_record(name, self._readable(manifest_path(self.manifests_dir, name)), self._blob_file)


def _pruned(entry: os.DirEntry[str], used: set[str], spare: Callable[[str], bool], cutoff: float) -> bool:
    """Remove one entry of ``blobs/`` if a prune should, and say whether it did: a blob no
    manifest references (``used``) nor a pin keeps (``spare``), or a leftover temp, partial or
    lock file, modified before ``cutoff``; a download another process still runs is kept."""
    path = Path(entry.path)
    if entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_mtime > cutoff:
        return False
    blob = _BLOB_NAME.fullmatch(entry.name)
    if blob is not None:
        if f"sha256:{blob.group(1)}" in used or spare(blob.group(1)):
            return False
    elif not _LEFTOVER_NAME.fullmatch(entry.name):
        return False  # not ours: left alone
    elif entry.name.endswith(".lock"):
        return remove_unless_locked(path)
    elif is_locked(path.with_name(_PART_SUFFIX.sub("", entry.name) + ".lock")):
        return False  # a download still running in another process
    path.unlink(missing_ok=True)
    return True


def names_in(manifests_dir: Path, exists: Callable[[Path], bool]) -> Iterator[ModelName]:
    """The names whose manifest file ``exists`` under ``manifests_dir`` (host/namespace/model/tag)."""
    if not manifests_dir.is_dir():
        return
    for path in sorted(manifests_dir.glob("*/*/*/*")):
        if not exists(path):
            continue
        host, namespace, model, tag = path.relative_to(manifests_dir).parts
        try:
            name = parse_name(f"{host}/{namespace}/{model}:{tag}")
        except InvalidRequest:
            continue  # temp files and foreign entries
        if name.parts == (host, namespace, model, tag):
            yield name


def referenced_digests(manifests: Iterable[Path]) -> set[str] | None:
    """``sha256:<hex>`` of every blob the manifest files name; None if one cannot be read.

    Digests are found by pattern rather than by schema, so a manifest laid out in a way we
    do not parse (a newer Ollama's) still protects its blobs; one that is not even JSON
    (truncated) may own any blob.
    """
    used: set[str] = set()
    paths = iter(manifests)
    while True:
        try:
            path = next(paths)
        except StopIteration:
            return used
        except OutsideStore as exc:
            log.warning("not collecting blobs: %s", exc)
            return None
        try:
            raw = path.read_bytes()
            orjson.loads(raw)
        except (OSError, orjson.JSONDecodeError) as exc:
            log.warning("not collecting blobs: cannot read %s: %s", path, exc)
            return None
        used.update(f"sha256:{hex_.decode().lower()}" for hex_ in _DIGEST_IN_TEXT.findall(raw))


def read_record(name: ModelName, path: Path, blob_file: Callable[[Layer], Path]) -> ModelRecord:
    """The model a manifest file describes, its blobs found by ``blob_file`` (missing ones listed)."""
    raw = path.read_bytes()
    manifest = Manifest.from_bytes(raw)
    modified = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC).astimezone()
    missing = tuple(layer.digest for layer in manifest.all_layers if not blob_file(layer).is_file())
    config: dict[str, Any] = {}
    config_path = blob_file(manifest.config)
    if manifest.config.digest not in missing:
        loaded = orjson.loads(config_path.read_bytes())
        config = loaded if isinstance(loaded, dict) else {}
    fields: dict[str, Any] = {"license": [], "messages": [], "params": {}}
    model_path = None
    projectors: list[Path] = []
    adapters: list[Path] = []
    draft = None
    for layer in manifest.layers:
        if layer.media_type == mt.MODEL:
            model_path = blob_file(layer)
        elif layer.media_type == mt.PROJECTOR:
            projectors.append(blob_file(layer))
        elif layer.media_type == mt.ADAPTER:
            adapters.append(blob_file(layer))
        elif layer.media_type == mt.DRAFT:
            draft = blob_file(layer)
        elif layer.digest in missing:
            continue
        elif layer.media_type in (mt.TEMPLATE, mt.PROMPT):
            fields["template"] = blob_file(layer).read_text(encoding="utf-8")
        elif layer.media_type == mt.SYSTEM:
            fields["system"] = blob_file(layer).read_text(encoding="utf-8")
        elif layer.media_type == mt.LICENSE:
            fields["license"].append(blob_file(layer).read_text(encoding="utf-8"))
        elif layer.media_type == mt.PARAMS:
            fields["params"] = orjson.loads(blob_file(layer).read_bytes()) or {}
        elif layer.media_type == mt.MESSAGES:
            fields["messages"] = orjson.loads(blob_file(layer).read_bytes()) or []
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
        draft_path=draft,
        missing=missing,
        **fields,
    )


def prune_manifest_dirs(manifests_dir: Path, cutoff: float) -> None:
    """Leftover temp files and emptied directories under ``manifests/`` (never through a link)."""
    for top, _dirs, files in os.walk(manifests_dir, topdown=False):
        for file in files:
            path = Path(top, file)
            if file.startswith(".tmp-") and path.lstat().st_mtime <= cutoff:
                path.unlink(missing_ok=True)
        if Path(top) != manifests_dir:
            with contextlib.suppress(OSError):  # not empty
                os.rmdir(top)


class Claim:
    """Blobs that one create, copy, pull or show relies on before (or while) a manifest names them.

    Each is pinned before it is checked or written, so a delete or prune running meanwhile
    leaves it; on exit the pins go, and a blob a delete wanted gone is removed then if unused.
    """

    def __init__(self, store: ModelStore) -> None:
        self._store = store
        self._held: list[str] = []

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc: object) -> None:
        store = self._store
        with store._lock:
            freed = store._pins.unpin(self._held)
            self._held.clear()
            if freed:
                store.discard_unused(freed)

    def pin(self, *digests: str) -> None:
        with self._store._lock:
            self._store._pins.pin(digests)
            self._held.extend(digests)

    def record(self, name: str | ModelName) -> ModelRecord:
        """The model ``name`` with every blob it uses pinned (``NotFound`` if it is gone or broken)."""
        with self._store._lock:
            record = self._store.get(name)
            self.pin(*(layer.digest for layer in record.manifest.all_layers))
            return record

    def manifest(self, name: ModelName) -> tuple[ModelName, bytes] | None:
        """The stored name and manifest bytes of ``name``, its blobs pinned; None if there is none."""
        with self._store._lock:
            found = self._store.resolve(name)
            if found is None:
                return None
            raw = self._store.manifest_bytes(found)
            self.pin(*(layer.digest for layer in Manifest.from_bytes(raw).all_layers))
            return found, raw

    def existing(self, digest: str) -> bool:
        """Pin ``digest``; whether its blob is here (a blob pinned and here stays)."""
        self.pin(digest)
        present = self._store.has_blob(digest)
        if present:
            self._store.touch_blob(digest)
        return present

    def adopt_file(self, path: Path, media_type: str) -> Layer:
        """A file written beside the blobs (same filesystem) moved in as a layer, its blob pinned first."""
        digest = "sha256:" + sha256_file(path)
        self.pin(digest)
        size = path.stat().st_size
        if self._store.has_blob(digest):
            path.unlink()
            self._store.touch_blob(digest)
        else:
            self._store.adopt_blob(path, digest)
        return Layer(media_type, digest, size)

    def add_layer(self, data: bytes, media_type: str) -> tuple[Layer, bool]:
        """``ModelStore.add_layer``, the new layer's blob pinned first."""
        self.pin("sha256:" + hashlib.sha256(data).hexdigest())
        return self._store.add_layer(data, media_type)
