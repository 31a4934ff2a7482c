"""A checkpoint's files by their names in its folder: what the converter reads, wherever they lie
(a folder on disk, or blobs an ``/api/create`` request names)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ImportRefused


@dataclass(frozen=True)
class Checkpoint:
    """``files``: name in the folder (``config.json``, ``model-00001-of-00002.safetensors``) -> path."""

    name: str
    files: Mapping[str, Path]

    @classmethod
    def folder(cls, folder: Path) -> Checkpoint:
        """The files of a folder on disk, its subfolders' by their relative paths."""
        files = {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file()}
        return cls(folder.name, files)

    def has(self, name: str) -> bool:
        return name in self.files

    def data(self, name: str) -> bytes:
        return self.files[name].read_bytes()

    def text(self, name: str) -> str:
        try:
            return self.files[name].read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ImportRefused(f"{name} is not UTF-8 text") from None

    def json(self, name: str) -> dict[str, Any] | None:
        """The JSON object in ``name``; None if there is no such file."""
        if name not in self.files:
            return None
        try:
            value = json.loads(self.text(name))
        except ValueError as e:
            raise ImportRefused(f"{name} is not valid JSON: {e}") from None
        if not isinstance(value, dict):
            raise ImportRefused(f"{name} is not a JSON object")
        return value

    def weights(self) -> list[tuple[str, Path]]:
        """The model's safetensors files by name, in name order (shards in turn): the folder's own,
        not a subfolder's (a sentence-transformers module's, gpt-oss's ``original/`` release)."""
        return [
            (name, self.files[name]) for name in sorted(self.files) if name.endswith(".safetensors") and "/" not in name
        ]
