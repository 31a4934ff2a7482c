"""The catalog (``models/catalog.json``, package ``cllm_ollama.catalog``): library names -> GGUF files."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import orjson

from .names import DEFAULT_HOST, DEFAULT_NAMESPACE, ModelName


@dataclass(frozen=True)
class CatalogEntry:
    """Where a library model's weights live on the Hugging Face Hub, and its defaults."""

    repo: str
    file: str
    revision: str | None = None
    size: int | None = None
    sha256: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    license: str | None = None
    projector: str | None = None  # the repo's mmproj GGUF, for a model that sees


class Catalog:
    def __init__(self, data: dict[str, Any]) -> None:
        self._families: dict[str, dict[str, Any]] = {k.lower(): v for k, v in data["families"].items()}

    def lookup(self, name: ModelName) -> CatalogEntry | None:
        """The entry for a ``registry.ollama.ai/library`` name (case-insensitive), following aliases."""
        if (name.host.lower(), name.namespace.lower()) != (DEFAULT_HOST, DEFAULT_NAMESPACE):
            return None
        family = self._families.get(name.model.lower())
        if family is None:
            return None
        tags = {k.lower(): v for k, v in family["tags"].items()}
        aliases = {k.lower(): v.lower() for k, v in family.get("aliases", {}).items()}
        tag = name.tag.lower()
        source = tags.get(aliases.get(tag, tag))
        if source is None:
            return None
        return CatalogEntry(
            repo=source["repo"],
            file=source["file"],
            revision=source.get("revision"),
            size=source.get("size"),
            sha256=source.get("sha256"),
            params=dict(family.get("params", {})),
            license=family.get("license"),
            projector=source.get("projector"),
        )

    def names(self) -> list[str]:
        """Every pullable ``model:tag``, aliases included."""
        out = []
        for model, family in self._families.items():
            out += [f"{model}:{tag}" for tag in family["tags"]]
            out += [f"{model}:{alias}" for alias in family.get("aliases", {})]
        return sorted(out)


@cache
def default_catalog() -> Catalog:
    text = resources.files("cllm_ollama.catalog").joinpath("catalog.json").read_bytes()
    return Catalog(orjson.loads(text))
