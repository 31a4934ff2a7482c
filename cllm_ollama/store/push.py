"""Push a model to an Ollama registry as Ollama's PushModel does (server/images.go, server/upload.go).

For each layer, then the config: ``HEAD`` the blob; if the registry lacks it, ``POST
/v2/<ns>/<model>/blobs/uploads/``, send the bytes in parts of 100 MB to 1 GB (``PATCH`` with
``Content-Range``; a 307 answer sends the part to the URL it names with ``PUT``, as the public
registry does), then ``PUT <location>?digest=sha256:<hex>``. Last, ``PUT`` the manifest, byte
for byte as stored. Statuses: ``retrieving manifest``, ``pushing <12 hex>`` (digest, total,
completed), ``pushing manifest``, ``success``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from ..errors import CllmError, NotFound
from .download import Part, plan_parts
from .manifests import Layer, Manifest
from .names import ModelName, parse_name
from .registry import Registry, RegistryError, scheme_of
from .registry_pull import RegistryOptions, open_registry
from .store import ModelStore

Report = Callable[[dict[str, Any]], None]
PROGRESS_INTERVAL_S = 0.1
_CHUNK = 1 << 20


class PushError(CllmError):
    """A push the registry or the network failed."""


def push_model(store: ModelStore, name: str, report: Report, *, options: RegistryOptions | None = None) -> None:
    """Upload the blobs ``name``'s registry lacks, then its manifest; raise ``CllmError`` on failure."""
    options = options or RegistryOptions()
    wanted = parse_name(name)
    report({"status": "retrieving manifest"})
    scheme = scheme_of(name)
    if scheme == "http" and not options.insecure:
        raise PushError("insecure protocol http")
    with store.claim() as claim:  # a delete meanwhile leaves the blobs until they are sent
        stored = claim.manifest(wanted)
        if stored is None:
            report({"status": "couldn't retrieve manifest"})
            raise NotFound(f"model '{wanted.display_shortest()}' not found")
        _push(store, *stored, report, options, scheme)
    report({"status": "success"})


def _push(
    store: ModelStore, found: ModelName, raw: bytes, report: Report, options: RegistryOptions, scheme: str | None
) -> None:
    manifest = Manifest.from_bytes(raw)
    try:
        with open_registry(found, options, scheme) as registry:
            for layer in (*manifest.layers, manifest.config):
                _push_blob(store, registry, found, layer, report)
            report({"status": "pushing manifest"})
            registry.put_manifest(found, raw)
    except RegistryError as exc:
        raise PushError(exc.message) from exc


def _event(layer: Layer, completed: int) -> dict[str, Any]:
    event: dict[str, Any] = {"status": f"pushing {layer.hex[:12]}", "digest": layer.digest, "total": layer.size}
    if completed:
        event["completed"] = completed
    return event


class _Progress:
    """Bytes sent of one blob, reported at most every 0.1 s; a part sent again is counted once."""

    def __init__(self, layer: Layer, report: Report) -> None:
        self.layer = layer
        self.report = report
        self.done = 0  # parts the registry accepted
        self.part = 0  # bytes of the part in flight
        self._last = 0.0

    def sent(self, n: int) -> None:
        self.part += n
        now = time.monotonic()
        if now - self._last >= PROGRESS_INTERVAL_S:
            self._last = now
            self.report(_event(self.layer, self.done + self.part))


def _push_blob(store: ModelStore, registry: Registry, name: Any, layer: Layer, report: Report) -> None:
    if registry.has_blob(name, layer.digest):
        report(_event(layer, layer.size))
        return
    path = store.blob_path(layer.digest)
    if not store.has_blob(layer.digest):
        raise NotFound(f"blob {layer.digest} not found")
    response = registry.check(registry.send("POST", registry.url(name, "blobs", "uploads") + "/"))
    if response.status_code == 201:  # mounted from another repository
        report(_event(layer, layer.size))
        return
    location = _location(response)
    progress = _Progress(layer, report)
    report(_event(layer, 0))
    md5s = hashlib.md5(usedforsecurity=False)
    parts = plan_parts(layer.size)
    for part in parts:
        location, digest = _push_part(registry, location, path, part, progress)
        md5s.update(digest)
        progress.done += part.size
        progress.part = 0
    # Ollama's commit: the digest, and an S3-style etag (md5 of the parts' md5s, then their count).
    url = httpx.URL(location).copy_add_param("digest", layer.digest)
    url = url.copy_add_param("etag", f"{md5s.hexdigest()}-{len(parts)}")
    headers = {"Content-Type": "application/octet-stream", "Content-Length": "0"}
    registry.check(registry.send("PUT", str(url), headers=headers, content=b""))
    report(_event(layer, layer.size))


def _location(response: httpx.Response) -> str:
    location = response.headers.get("docker-upload-location") or response.headers.get("location")
    if not location:
        raise PushError(f"{response.status_code}: the registry gave no upload location")
    return str(response.url.join(location))


def _push_part(registry: Registry, location: str, path: Path, part: Part, progress: _Progress) -> tuple[str, bytes]:
    """Send one part; returns where the next goes and the part's md5."""
    md5 = [hashlib.md5(usedforsecurity=False)]

    def body() -> Iterator[bytes]:
        # Called again when a 401 or a redirect makes the part go once more: count it once.
        progress.part = 0
        md5[0] = hashlib.md5(usedforsecurity=False)
        for chunk in _read(path, part.offset, part.size):
            md5[0].update(chunk)
            progress.sent(len(chunk))
            yield chunk

    headers = {
        "Content-Type": "application/octet-stream",
        "Content-Length": str(part.size),
        "X-Redirect-Uploads": "1",
        "Content-Range": f"{part.offset}-{part.offset + part.size - 1}",
    }
    response = registry.send("PATCH", location, headers=headers, content=body, follow=False)
    if response.status_code == 307:  # the part goes to the URL named, without our token
        target = str(response.url.join(response.headers["location"]))
        upload_next = response.headers.get("docker-upload-location")
        put_headers = {"Content-Type": "application/octet-stream", "Content-Length": str(part.size)}
        try:
            put = registry.client.put(target, headers=put_headers, content=body())
        except httpx.HTTPError as exc:
            raise RegistryError(f'Put "{target}": {exc}') from exc
        registry.check(put)
        return (str(response.url.join(upload_next)) if upload_next else location), md5[0].digest()
    registry.check(response)
    return _location(response), md5[0].digest()


def _read(path: Path, offset: int, size: int) -> Iterator[bytes]:
    with open(path, "rb") as f:
        f.seek(offset)
        left = size
        while left:
            chunk = f.read(min(_CHUNK, left))
            if not chunk:
                raise PushError(f"{path.name} is shorter than its manifest says")
            left -= len(chunk)
            yield chunk
