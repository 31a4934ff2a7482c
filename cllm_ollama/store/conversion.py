"""The store's side of the layout converter (``cllm_ollama.convert``): at pull and create, every
GGUF layer is checked, and one laid out by Ollama's converter is rewritten once into blobs of
llama.cpp's layout, or refused, before a manifest is written. A registry pull reads a big model's
header first (``check_prefix``), so that a refused model is not downloaded at all."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..convert.dispatch import plan
from ..convert.framework import Header, LayoutRefused, Rewrite, rewrite
from ..gguf_header import GGUFError
from . import manifests as mt
from .gguf_info import GGUFInfo, gguf_info, gguf_info_of_prefix
from .manifests import Layer
from .store import Claim, ModelStore

# How much of a model blob a registry pull reads first to decide its layout before downloading
# it: a GGUF's metadata and tensor list (a 262k-token vocabulary's header is ~6 MB).
HEADER_PROBE_BYTES = 8 << 20
HEADER_PROBE_MIN_BLOB = 64 << 20  # a smaller model is downloaded and then checked: little is lost


def check_prefix(data: bytes) -> None:
    """Raise ``LayoutRefused`` if a GGUF's first bytes already show a layout cllm cannot run
    (nothing when they hold too little of the header to tell: decided after the download)."""
    try:
        info = gguf_info_of_prefix(data)
    except GGUFError:
        return
    plan(Header.of(info))


@dataclass(frozen=True)
class Adapted:
    """A model's layers with its Ollama-layout GGUFs replaced by what llama.cpp loads."""

    layers: list[Layer]
    replaced: list[str]  # digests of the blobs no longer needed (discard once the manifest is written)
    model: GGUFInfo  # the (new) model GGUF's header, for the config


def adapt_layers(
    store: ModelStore, claim: Claim, layers: list[Layer], report: Callable[[dict[str, Any]], None]
) -> Adapted | None:
    """Check every GGUF layer's layout; rewrite those Ollama's converter laid out differently (once,
    here, before the manifest). None when every one loads as it is; raises ``LayoutRefused``."""
    out: list[Layer] = []
    replaced: list[str] = []
    for layer in layers:
        found = _plan_for(store, layer)
        if found is None:
            out.append(layer)
            continue
        arch, rewrites = found
        report({"status": f"converting {arch} from Ollama's layout"})
        replaced.append(layer.digest)
        out += [_written(store, claim, layer, arch, rw) for rw in rewrites]
    if not replaced:
        return None
    model = next(layer for layer in out if layer.media_type == mt.MODEL)
    return Adapted(out, replaced, gguf_info(store.blob_path(model.digest)))


def _written(store: ModelStore, claim: Claim, layer: Layer, arch: str, rw: Rewrite) -> Layer:
    """One rewrite of ``layer``'s blob, adopted into the store as a model or projector layer."""
    try:
        with store.scratch_file("layout") as out:
            rewrite(store.blob_path(layer.digest), out, rw)
            return claim.adopt_file(out, mt.MODEL if rw.role == "model" else mt.PROJECTOR)
    except (OSError, ValueError) as exc:  # a full disk, a file whose tensors are not where it says
        raise LayoutRefused(f"converting {arch} from Ollama's layout failed: {exc}") from exc


def _plan_for(store: ModelStore, layer: Layer) -> tuple[str, list[Rewrite]] | None:
    if layer.media_type not in (mt.MODEL, mt.PROJECTOR):
        return None
    try:
        info = gguf_info(store.blob_path(layer.digest), verbose=True)
    except (GGUFError, OSError):
        return None  # not a GGUF: the loader's own checks say so
    rewrites = plan(Header.of(info))
    return None if rewrites is None else (info.architecture, rewrites)
