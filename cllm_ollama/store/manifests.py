"""Docker v2 manifests with Ollama's media types, and where a name's manifest lives on disk."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..model_families import ARCH_NAMED
from .blobs import DIGEST_RE
from .gguf_info import GGUFInfo
from .names import ModelName

MANIFEST_MEDIA_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG_MEDIA_TYPE = "application/vnd.docker.container.image.v1+json"
_OLLAMA = "application/vnd.ollama.image."
MODEL = _OLLAMA + "model"
PROJECTOR = _OLLAMA + "projector"
ADAPTER = _OLLAMA + "adapter"
# A speculative-decoding draft (an MTP head or a DFlash drafter) for Ollama's llama-server runner:
# stored, shown and pushed with its model; cllm decodes without it.
DRAFT = _OLLAMA + "draft"
TEMPLATE = _OLLAMA + "template"
SYSTEM = _OLLAMA + "system"
PARAMS = _OLLAMA + "params"
LICENSE = _OLLAMA + "license"
MESSAGES = _OLLAMA + "messages"
PROMPT = _OLLAMA + "prompt"  # the template layer's old name: read as a template
TENSOR = _OLLAMA + "tensor"  # safetensors models for Ollama's MLX engine: not runnable here


class ManifestError(ValueError):
    """A manifest file that is not a Docker v2 manifest we can read."""


@dataclass(frozen=True)
class Layer:
    media_type: str
    digest: str  # "sha256:<hex>"
    size: int
    # The model a create took the layer from (Ollama's ``Layer.From``, its ``parent_model``); "" if none.
    from_: str = ""

    @property
    def hex(self) -> str:
        return self.digest.split(":", 1)[1]

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest, "size": self.size}
        return obj | {"from": self.from_} if self.from_ else obj  # Go's omitempty


@dataclass(frozen=True)
class Manifest:
    config: Layer
    layers: tuple[Layer, ...]

    @property
    def all_layers(self) -> tuple[Layer, ...]:
        return (self.config, *self.layers)

    def to_bytes(self) -> bytes:
        return orjson.dumps(
            {
                "schemaVersion": 2,
                "mediaType": MANIFEST_MEDIA_TYPE,
                "config": self.config.to_json(),
                "layers": [layer.to_json() for layer in self.layers],
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> Manifest:
        try:
            obj = orjson.loads(data)
            return cls(
                config=_layer(obj["config"]),
                layers=tuple(_layer(layer) for layer in obj.get("layers") or ()),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"unreadable manifest: {exc}") from exc


def _layer(obj: dict[str, Any]) -> Layer:
    digest = obj["digest"]
    # Checked here, not at its first use (``blob_path``'s 400): such a manifest is one more
    # unreadable one, left out of the list and deletable.
    if not isinstance(digest, str) or not digest.startswith("sha256:") or not DIGEST_RE.match(digest):
        raise ValueError(f"invalid layer digest {digest!r}")
    source = obj.get("from")
    return Layer(
        media_type=str(obj.get("mediaType", "")),
        digest=digest,
        size=int(obj.get("size", 0)),
        from_=source if isinstance(source, str) else "",
    )


def manifest_path(manifests_dir: Path, name: ModelName) -> Path:
    """``manifests/<host>/<namespace>/<model>/<tag>``; refuses any part that is not a plain file name."""
    for part in name.parts:
        if part in ("", ".", "..") or any(c in part for c in "/\\\0"):
            raise ValueError(f"model name {name!r} escapes the store")
    return manifests_dir.joinpath(*name.parts)


def model_config(info: GGUFInfo, kept: dict[str, Any] | None = None) -> dict[str, Any]:
    """The config blob Ollama writes for a GGUF model; /api/tags reads its details from it.

    ``kept``: an earlier config of the same model (a registry's, for a file cllm rewrote) whose
    renderer, parser and required version stay. Without a renderer or a parser, the architecture's
    own where Ollama's create names them (Gemma 4's, Nemotron 3's, Laguna's)."""
    config: dict[str, Any] = {
        "model_format": "gguf",
        "model_family": info.family,
        "model_families": list(info.families),
        "model_type": info.parameter_size,
        "file_type": info.quantization_level,
    }
    config |= {k: v for k, v in (kept or {}).items() if k in NAMED_FIELDS and isinstance(v, str) and v}
    if info.architecture in ARCH_NAMED:
        renderer, parser = ARCH_NAMED[info.architecture]
        config.setdefault("renderer", renderer)
        config.setdefault("parser", parser)
    return config


# The config's names for Ollama's renderer, parser and required version (its ``model.ConfigV2``).
NAMED_FIELDS = ("renderer", "parser", "requires")
