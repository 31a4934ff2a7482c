"""Pull: a model name -> its source -> a model in the store.

Where a name is pulled from (``pull_source``):

- ``hf.co/<user>/<repo>[:quant]`` and the catalog's names (``qwen3:0.6b``...): a GGUF on the
  Hugging Face Hub. huggingface_hub does the HTTP (HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE); the
  sha256 is checked here against the hub's LFS record. With ``CLLM_PREFER_REGISTRY`` set, catalog
  names try Ollama's registry first and come from the Hub only if it cannot give the manifest.
- Any other name: an Ollama registry (``registry_pull``): registry.ollama.ai for names without a
  host (``llama3.1``, ``user/model:tag``), the named host otherwise (``host[:port]/ns/model:tag``).

Blocking; progress goes to a ``report`` callback as Ollama's status objects (a ``report`` that
raises aborts the pull, leaving the partial download to resume).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import orjson
from huggingface_hub import HfApi, constants, hf_hub_url
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.file_download import http_get
from huggingface_hub.hf_api import RepoFile
from huggingface_hub.utils import build_hf_headers
from huggingface_hub.utils import tqdm as hf_tqdm

from .. import __version__
from ..errors import PullError
from ..gguf_header import GGUFError
from . import catalog as catalog_module
from . import manifests as mt
from .blobs import sha256_file
from .catalog import Catalog
from .gguf_info import gguf_info
from .locking import exclusive
from .names import ModelName, parse_name
from .registry import scheme_of
from .registry_pull import ManifestUnavailable, RegistryOptions, pull_from_registry
from .store import Claim, ModelRecord, ModelStore

Report = Callable[[dict[str, Any]], None]
PROGRESS_INTERVAL_S = 0.1
NOT_FOUND = "pull model manifest: file does not exist"
DEFAULT_QUANT = "q4_k_m"
# When the repo has no Q4_K_M: the next most sensible default, as the Hub's Ollama bridge does.
_FALLBACK_QUANTS = ("q4_k_s", "q4_0", "q5_k_m", "q8_0")


@dataclass(frozen=True)
class Source:
    """One GGUF file on the Hub, with what the Hub says its bytes are."""

    repo: str
    file: str
    revision: str
    sha256: str
    size: int
    params: dict[str, Any] = field(default_factory=dict)
    license: str | None = None
    projector: Source | None = None  # the repo's mmproj GGUF, pulled beside a model that sees


HUB = "hub"
REGISTRY = "registry"
REGISTRY_THEN_HUB = "registry, then hub"
log = logging.getLogger("cllm.store")


def pull_source(name: ModelName, catalog: Catalog, *, prefer_registry: bool = False) -> str:
    """``HUB``, ``REGISTRY`` or ``REGISTRY_THEN_HUB``: where ``name`` is pulled from."""
    if name.is_huggingface:
        return HUB
    if catalog.lookup(name) is not None:
        return REGISTRY_THEN_HUB if prefer_registry else HUB
    return REGISTRY


def pull_model(
    store: ModelStore,
    name: str,
    report: Report,
    *,
    catalog: Catalog | None = None,
    options: RegistryOptions | None = None,
) -> ModelRecord:
    """Download ``name`` into ``store`` and write its manifest; raise ``PullError`` on failure."""
    options = options or RegistryOptions()
    wanted = parse_name(name)
    catalog = catalog or catalog_module.default_catalog()
    source = pull_source(wanted, catalog, prefer_registry=options.prefer_registry)
    if source == HUB:
        report({"status": "pulling manifest"})
        return _pull_hub(store, wanted, report, catalog, options)
    scheme = scheme_of(name)
    if scheme == "http" and not options.insecure:
        raise PullError("insecure protocol http")
    report({"status": "pulling manifest"})
    if source == REGISTRY:
        return pull_from_registry(store, wanted, report, options, scheme)
    try:
        return pull_from_registry(store, wanted, report, options, scheme)
    except ManifestUnavailable as exc:
        log.warning("%s: %s; pulling it from the Hugging Face Hub instead", wanted.display_shortest(), exc.message)
    return _pull_hub(store, wanted, report, catalog, options)


def _pull_hub(
    store: ModelStore, wanted: ModelName, report: Report, catalog: Catalog, options: RegistryOptions
) -> ModelRecord:
    with store.claim() as claim:  # no delete takes a blob between its download and the manifest
        return _pull_hub_claimed(store, claim, wanted, report, catalog, options)


def _pull_hub_claimed(
    store: ModelStore, claim: Claim, wanted: ModelName, report: Report, catalog: Catalog, options: RegistryOptions
) -> ModelRecord:
    old = store.digests_of(wanted)
    source = _resolve(store, wanted, catalog)
    layers = [_fetch_model(store, claim, source, report)]
    projector = _fetch_projector(store, claim, source, report, required=not wanted.is_huggingface)
    if projector is not None:
        layers.append(projector)
    small = {
        mt.PARAMS: orjson.dumps(source.params) if source.params else None,
        mt.LICENSE: source.license.encode() if source.license else None,
    }
    for media_type, data in small.items():
        if data is not None:
            layer, _ = claim.add_layer(data, media_type)
            report(_progress(layer.hex, layer.size, layer.size))
            layers.append(layer)
    try:
        info = gguf_info(store.blob_path(layers[0].digest))
    except GGUFError as exc:
        raise PullError(f"{source.repo}/{source.file} is not a usable GGUF file: {exc}") from exc
    report({"status": "writing manifest"})
    record = store.write_manifest(wanted, mt.model_config(info), layers)
    store.remove_unused_layers(old, record, noprune=options.noprune, report=report)
    report({"status": "success"})
    return record


def _fetch_projector(
    store: ModelStore, claim: Claim, source: Source, report: Report, *, required: bool
) -> mt.Layer | None:
    """The repo's projector as a ``projector`` layer (Ollama's), when it has one libmtmd can load.

    One the catalog names must be a CLIP GGUF; an ``hf.co`` repo's ``mmproj`` file that is not
    one is left out (its bytes dropped): the model is still pulled, without vision.
    """
    if source.projector is None:
        return None
    layer = _fetch_model(store, claim, source.projector, report, mt.PROJECTOR)
    try:
        arch = gguf_info(store.blob_path(layer.digest)).architecture
    except GGUFError as exc:
        arch = f"unreadable: {exc}"
    if arch == "clip":
        return layer
    problem = f"{source.repo}/{source.projector.file} is no projector (architecture {arch})"
    if required:
        raise PullError(problem)
    log.warning("%s: pulling the model without it", problem)
    store.discard_unused([layer.digest])
    return None


# -- resolving a name to a file on the Hub ---------------------------------------------------


def _resolve(store: ModelStore, name: ModelName, catalog: Catalog) -> Source:
    if name.is_huggingface:
        return _hub_call(lambda: _resolve_hf(name))
    entry = catalog.lookup(name)
    if entry is None:
        raise PullError(NOT_FOUND)
    if entry.sha256 and entry.size and not entry.projector and store.has_blob(f"sha256:{entry.sha256}"):
        # Pinned and already here: no need to ask the Hub (works offline).
        return Source(
            entry.repo,
            entry.file,
            entry.revision or constants.DEFAULT_REVISION,
            entry.sha256,
            entry.size,
            entry.params,
            entry.license,
        )
    revision = entry.revision or constants.DEFAULT_REVISION
    file = _hub_call(lambda: _file_info(entry.repo, entry.file, revision))
    if entry.sha256 and file.lfs and file.lfs.sha256 != entry.sha256:
        raise PullError(
            f"pull model manifest: the hub's {entry.repo}/{entry.file} has sha256 {file.lfs.sha256}, "
            f"the catalog expects {entry.sha256}"
        )
    source = _source(entry.repo, file, revision, entry.params, entry.license)
    if (projector_file := entry.projector) is not None:
        projector = _hub_call(lambda: _file_info(entry.repo, projector_file, revision))
        source = replace(source, projector=_source(entry.repo, projector, revision, {}, None))
    return source


def _file_info(repo: str, path: str, revision: str) -> RepoFile:
    infos = HfApi().get_paths_info(repo, [path], revision=revision)
    match = next((i for i in infos if isinstance(i, RepoFile) and i.path == path), None)
    if match is None:
        raise PullError(NOT_FOUND)
    return match


def _resolve_hf(name: ModelName) -> Source:
    repo = f"{name.namespace}/{name.model}"
    files = [
        f
        for f in HfApi().list_repo_tree(repo, recursive=True)
        if isinstance(f, RepoFile) and f.path.lower().endswith(".gguf")
    ]
    chosen = pick_gguf([f.path for f in files], name.tag)
    if chosen is None:
        raise PullError(NOT_FOUND)
    file = next(f for f in files if f.path == chosen)
    source = _source(repo, file, constants.DEFAULT_REVISION, {}, None)
    projector = pick_projector([f.path for f in files])
    if projector is not None:
        match = next(f for f in files if f.path == projector)
        source = replace(source, projector=_source(repo, match, constants.DEFAULT_REVISION, {}, None))
    return source


def pick_gguf(paths: list[str], tag: str) -> str | None:
    """Ollama's ``hf.co`` tag rule: a quant (case-insensitive, default Q4_K_M) or a full file name.

    Projectors (mmproj) and split files are never the model.
    """
    candidates = sorted(p for p in paths if "mmproj" not in _base(p) and not re.search(r"-of-\d+\.gguf$", _base(p)))
    want = tag.lower()
    for path in candidates:
        if _base(path) == want:
            return path
    quants = (DEFAULT_QUANT, *_FALLBACK_QUANTS) if want == "latest" else (want,)
    for quant in quants:
        for path in candidates:
            if re.search(rf"(^|[-._]){re.escape(quant)}\.gguf$", _base(path)):
                return path
    return candidates[0] if want == "latest" and candidates else None


# Projector precisions by preference: as precise as the model needs, half the bytes of f32.
_PROJECTOR_TYPES = ("f16", "bf16", "q8_0", "f32")


def pick_projector(paths: list[str]) -> str | None:
    """The repo's ``mmproj`` GGUF a model that sees is pulled with (f16 when there are several)."""
    projectors = sorted(p for p in paths if "mmproj" in _base(p) and _base(p).endswith(".gguf"))
    for kind in _PROJECTOR_TYPES:
        for path in projectors:
            if re.search(rf"(^|[-._]){re.escape(kind)}\.gguf$", _base(path)):
                return path
    return projectors[0] if projectors else None


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1].lower()


def _source(repo: str, file: RepoFile, revision: str, params: dict[str, Any], license: str | None) -> Source:
    if file.lfs is None:
        raise PullError(f"pull model manifest: {repo}/{file.path} has no sha256 on the hub (not an LFS file)")
    return Source(repo, file.path, revision, file.lfs.sha256, file.size, params, license)


def _hub_call(fn: Callable[[], Any]) -> Any:
    """Run a Hub metadata call, turning its failures into one-line ``PullError`` messages."""
    try:
        return fn()
    except OfflineModeIsEnabled as exc:
        raise PullError(
            "pull model manifest: the Hugging Face Hub is unreachable: offline mode is enabled (HF_HUB_OFFLINE)"
        ) from exc
    except GatedRepoError as exc:
        raise PullError(
            "pull model manifest: the repository is gated: accept its terms on huggingface.co and set HF_TOKEN"
        ) from exc
    except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError, HFValidationError) as exc:
        raise PullError(NOT_FOUND) from exc
    except httpx.TransportError as exc:
        raise PullError(
            f"pull model manifest: cannot reach the Hugging Face Hub at {constants.ENDPOINT}: "
            f"{exc or type(exc).__name__}"
        ) from exc
    except HfHubHTTPError as exc:
        raise PullError(f"pull model manifest: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    return next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


# -- downloading one blob --------------------------------------------------------------------


def _progress(hex_digest: str, total: int, completed: int) -> dict[str, Any]:
    event: dict[str, Any] = {
        "status": f"pulling {hex_digest[:12]}",
        "digest": f"sha256:{hex_digest}",
        "total": total,
    }
    if completed:
        event["completed"] = completed
    return event


def _fetch_model(
    store: ModelStore, claim: Claim, source: Source, report: Report, media_type: str = mt.MODEL
) -> mt.Layer:
    """The model (or projector) blob, downloaded (or resumed) unless present; one downloader per blob at a time."""
    layer = mt.Layer(media_type, f"sha256:{source.sha256}", source.size)
    if claim.existing(layer.digest):
        report(_progress(source.sha256, source.size, source.size))
        return layer
    partial = store.partial_path(layer.digest)
    lock_file = partial.with_name(partial.name + ".lock")
    partial.parent.mkdir(parents=True, exist_ok=True)
    report(_progress(source.sha256, source.size, 0))
    with exclusive(lock_file):
        if store.has_blob(layer.digest):  # another pull finished it while we waited
            report(_progress(source.sha256, source.size, source.size))
            return layer
        _download(source, partial, report)
        report({"status": "verifying sha256 digest"})
        got = sha256_file(partial)
        if got != source.sha256:
            partial.unlink(missing_ok=True)
            raise PullError(
                f"digest mismatch, file must be downloaded again: want sha256:{source.sha256}, got sha256:{got}"
            )
        store.adopt_blob(partial, layer.digest)
    return layer


def _download(source: Source, partial: Path, report: Report) -> None:
    """Append the missing bytes of ``source`` to ``partial`` (HTTP Range when resuming)."""
    throttle = _Throttle(report, source.sha256, source.size)
    url = hf_hub_url(source.repo, source.file, revision=source.revision)
    headers = build_hf_headers(library_name="cllm", library_version=__version__)
    try:
        with open(partial, "ab") as f:
            resume = f.tell()
            if resume > source.size:  # not a prefix of this file: start over
                f.truncate(0)
                resume = 0
            http_get(
                url,
                f,
                resume_size=resume,
                headers=headers,
                expected_size=source.size,
                displayed_filename=source.file,
                tqdm_class=_tqdm_reporting(throttle),
            )
    except OfflineModeIsEnabled as exc:
        raise PullError("download failed: offline mode is enabled (HF_HUB_OFFLINE)") from exc
    except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError) as exc:
        raise PullError(NOT_FOUND) from exc
    except (httpx.TransportError, HfHubHTTPError) as exc:
        raise PullError(f"download of {source.file} interrupted ({_first_line(exc)}); pull again to resume") from exc
    except OSError as exc:
        raise PullError(f"download of {source.file} failed: {exc}") from exc


class _Throttle:
    """Reports download progress at most every ``PROGRESS_INTERVAL_S``, and always at the end."""

    def __init__(self, report: Report, hex_digest: str, total: int) -> None:
        self._report = report
        self._digest = hex_digest
        self._total = total
        self._last = 0.0

    def __call__(self, completed: int) -> None:
        now = time.monotonic()
        if completed >= self._total or now - self._last >= PROGRESS_INTERVAL_S:
            self._last = now
            self._report(_progress(self._digest, self._total, completed))


def _tqdm_reporting(on_bytes: Callable[[int], None]) -> type[hf_tqdm]:
    """A silent tqdm class for ``http_get`` that hands the running byte count to ``on_bytes``."""

    class _Reporting(hf_tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)
            self.done = int(kwargs.get("initial") or 0)

        def update(self, n: float | None = 1) -> bool | None:
            self.done += int(n or 0)
            on_bytes(self.done)
            return None

    return _Reporting
