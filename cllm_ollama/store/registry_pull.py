"""Pull from an Ollama registry (registry.ollama.ai or a private one) as Ollama's PullModel does.

Statuses, in order: ``pulling manifest`` (sent by the caller), ``pulling <12 hex>`` for each layer
then the config (with digest, total, completed), ``verifying sha256 digest``, ``writing manifest``,
``removing unused layers`` when a model's new version no longer needs blobs of its old one, and
``success``. The manifest is stored byte for byte as the registry sent it, and only once every
blob it names is here and verified, so a failed pull lists nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from ..config import DEFAULT_REGISTRY_URL, Settings
from ..convert.framework import LayoutRefused
from ..errors import PullError
from . import manifests as mt
from .conversion import HEADER_PROBE_BYTES, HEADER_PROBE_MIN_BLOB, adapt_layers, check_prefix
from .download import DigestMismatch, download_blob
from .keys import ollama_signer
from .manifests import Layer, Manifest, ManifestError
from .names import ModelName
from .registry import Registry, RegistryError, registry_url
from .store import Claim, ModelStore

log = logging.getLogger("cllm.store")

Report = Callable[[dict[str, Any]], None]
MANIFEST_PREFIX = "pull model manifest: "


@dataclass(frozen=True)
class RegistryOptions:
    """How a pull or push reaches registries: the request's ``insecure`` and the server's settings."""

    insecure: bool = False
    registry_url: str = DEFAULT_REGISTRY_URL
    prefer_registry: bool = False
    noprune: bool = False

    @classmethod
    def from_settings(cls, settings: Settings, *, insecure: bool = False) -> RegistryOptions:
        return cls(
            insecure=insecure,
            registry_url=settings.registry_url,
            prefer_registry=settings.prefer_registry,
            noprune=settings.noprune,
        )


class ManifestUnavailable(PullError):
    """The registry did not give us the manifest (not there, unreachable, refused)."""


class _Unrunnable(PullError):
    """A model laid out so that cllm cannot run it: refused before its manifest is written."""

    def __init__(self, message: str, digests: list[str]) -> None:
        super().__init__(message)
        self.digests = digests


def open_registry(name: ModelName, options: RegistryOptions, scheme: str | None = None) -> Registry:
    """The registry ``name`` lives on (raises ``RegistryError`` for http:// without insecure).

    Token requests are signed with the user's Ollama key when there is one, as Ollama signs them.
    """
    url = registry_url(name, insecure=options.insecure, default_url=options.registry_url, scheme=scheme)
    return Registry(url, signer=ollama_signer())


def pull_from_registry(
    store: ModelStore, name: ModelName, report: Report, options: RegistryOptions, scheme: str | None = None
) -> Any:
    """Download ``name``'s manifest and blobs, verify them, then write the manifest; returns the record."""
    try:
        registry = open_registry(name, options, scheme)
    except RegistryError as exc:
        raise PullError(exc.message) from exc
    try:
        with store.claim() as claim:  # the blobs stay until the manifest names them
            return _pull_claimed(store, claim, registry, name, report, options)
    except _Unrunnable as exc:
        store.discard_unused(exc.digests)  # unpinned now: the blobs of a model cllm cannot run go
        raise


def _pull_claimed(
    store: ModelStore, claim: Claim, registry: Registry, name: ModelName, report: Report, options: RegistryOptions
) -> Any:
    with registry:
        try:
            raw = registry.manifest(name)
        except RegistryError as exc:
            raise ManifestUnavailable(MANIFEST_PREFIX + exc.message) from exc
        manifest = _parse(raw)
        old = store.digests_of(name)
        mismatch: DigestMismatch | None = None
        claim.pin(*(layer.digest for layer in manifest.all_layers))
        try:  # a model cllm cannot run is refused before its gigabytes are downloaded
            _check_header(store, registry, name, manifest)
        except LayoutRefused as exc:
            raise _Unrunnable(str(exc), []) from exc
        for layer in _layers(manifest):
            try:
                download_blob(store, layer.hex, layer.size, report, _locator(registry, name, layer))
            except DigestMismatch as exc:  # reported after "verifying sha256 digest", as Ollama does
                mismatch = mismatch or exc
            except RegistryError as exc:
                raise PullError(exc.message) from exc
    report({"status": "verifying sha256 digest"})
    if mismatch is not None:
        raise mismatch
    # A GGUF laid out by Ollama's converter is rewritten (or refused) now, never at its first request.
    try:
        adapted = adapt_layers(store, claim, list(manifest.layers), report)
    except LayoutRefused as exc:
        raise _Unrunnable(str(exc), [layer.digest for layer in manifest.all_layers]) from exc
    report({"status": "writing manifest"})
    try:
        if adapted is None:
            record = store.write_manifest_bytes(name, raw)
        else:  # what the store holds (and pushes) is the rewritten model
            kept = _registry_config(store, manifest)  # its renderer and parser names stay
            record = store.write_manifest(name, mt.model_config(adapted.model, kept), adapted.layers)
    except OSError as exc:
        raise PullError(f"writing manifest: {exc.strerror or exc}") from exc
    replaced = adapted.replaced if adapted is not None else ()
    store.remove_unused_layers(old, record, noprune=options.noprune, replaced=replaced, report=report)
    report({"status": "success"})
    return record


def _registry_config(store: ModelStore, manifest: Manifest) -> dict[str, Any]:
    """The config blob the registry sent (downloaded with the layers); empty if it is not JSON."""
    try:
        config = orjson.loads(store.blob_path(manifest.config.digest).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return config if isinstance(config, dict) else {}


def _check_header(store: ModelStore, registry: Registry, name: ModelName, manifest: Manifest) -> None:
    """The model blob's first bytes, read with one ranged request, checked for a layout cllm cannot run."""
    model = next((layer for layer in manifest.layers if layer.media_type == mt.MODEL), None)
    if model is None or model.size < HEADER_PROBE_MIN_BLOB or store.has_blob(model.digest):
        return
    wanted = min(model.size, HEADER_PROBE_BYTES)
    url = registry.url(name, "blobs", model.digest)
    data = bytearray()
    try:
        response = registry.send("GET", url, headers={"Range": f"bytes=0-{wanted - 1}"}, stream=True)
        try:
            if response.status_code in (200, 206):
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) >= wanted:
                        break
        finally:
            response.close()
    except (RegistryError, httpx.HTTPError) as exc:
        log.info(
            "%s: the model's header could not be read first (%s): its layout is checked after the download", name, exc
        )
        return
    check_prefix(bytes(data[:wanted]))


def _locator(registry: Registry, name: ModelName, layer: Layer) -> Callable[[], tuple[str, dict[str, str]]]:
    return lambda: registry.blob_source(name, layer.digest)


def _parse(raw: bytes) -> Manifest:
    try:
        manifest = Manifest.from_bytes(raw)
    except ManifestError as exc:
        raise PullError(MANIFEST_PREFIX + str(exc)) from exc
    for layer in manifest.all_layers:  # its digests were checked as it was read
        if layer.size < 0:
            raise PullError(f"{MANIFEST_PREFIX}invalid layer size {layer.size} of {layer.digest}")
    media_types = {layer.media_type for layer in manifest.layers}
    if mt.TENSOR in media_types:
        raise PullError(
            "this model is in Ollama's safetensors format (for its MLX engine), which cllm cannot run: "
            "pull a GGUF tag of it"
        )
    if mt.MODEL not in media_types:
        raise PullError(f"{MANIFEST_PREFIX}the model has no GGUF layer ({mt.MODEL}): cllm cannot run it")
    return manifest


def _layers(manifest: Manifest) -> list[Layer]:
    """The layers then the config, each digest once (as Ollama downloads them)."""
    seen: set[str] = set()
    out = []
    for layer in (*manifest.layers, manifest.config):
        if layer.digest not in seen:
            seen.add(layer.digest)
            out.append(Layer(layer.media_type, layer.digest.lower(), layer.size))
    return out
