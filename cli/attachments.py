"""Image and audio files named in a prompt, read and sent with it, as ``ollama run`` does.

Ollama's CLI (``cmd/interactive.go``: ``extractFileNames``, ``extractFileData``, ``getImageData``)
finds paths by a pattern, not by parsing: one starting ``/``, ``./``, ``\\`` (or a drive letter)
and ending ``.jpg``/``.jpeg``/``.png``/``.webp``/``.wav``, spaces allowed inside. A path that does
not exist stays text; one that exists but is not such a file, or is over 100 MB, fails the turn.
Each file read is said on stderr and its path taken out of the text. ``~`` is not expanded (the
pattern then finds the path from its first ``/``), as in Ollama.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import click

MAX_FILE_BYTES = 100 * 1024 * 1024  # Ollama's getImageData: 100MB
USAGE_FILES = "Use /path/to/file to include .jpg, .png, .webp images, or .wav audio files.\n"

# Go's RE2 with ASCII ``\b`` and ``\S``; leftmost, non-overlapping, lazy: the same matches.
_FILE_NAME = re.compile(r"(?:[a-zA-Z]:)?(?:\./|/|\\)[\S\\ ]+?\.(?i:jpg|jpeg|png|webp|wav)\b", re.ASCII)
# The shell escapes Ollama undoes (normalizeFilePath), as one left-to-right pass like Go's Replacer.
_ESCAPE = re.compile(r"\\([ ()\[\]{}$&;'\\*?~])")
_ALLOWED = ("image/jpeg", "image/png", "image/webp", "audio/wave")
# The signatures of Go's http.DetectContentType that a misnamed file most often has: enough to
# word the refusal as Ollama does ("invalid file type: image/gif").
_SIGNATURES = (
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
    (b"%PDF-", "application/pdf"),
    (b"ID3", "audio/mpeg"),
    (b"OggS\x00", "application/ogg"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b\x08", "application/x-gzip"),
    (b"\x00\x00\x01\x00", "image/x-icon"),
)
_BINARY = frozenset([*range(0x00, 0x09), 0x0B, *range(0x0E, 0x1B), *range(0x1C, 0x20)])


class FileError(Exception):
    """A named file that exists but cannot be sent: the turn fails with Ollama's words."""


def supports_media(show: dict[str, Any]) -> bool:
    """Whether `ollama run` would look for files: the model sees or hears (its capabilities, or,
    for an older server, a projector or vision keys in its /api/show)."""
    capabilities = show.get("capabilities") or []
    if "vision" in capabilities or "audio" in capabilities or show.get("projector_info"):
        return True
    return any(".vision." in key for key in show.get("model_info") or {})


def file_names(text: str) -> list[str]:
    """The candidate paths in ``text``, as typed (escapes kept)."""
    return _FILE_NAME.findall(text)


def normalize(path: str) -> str:
    r"""``a\ b.png`` -> ``a b.png``: what a shell's escapes meant."""
    return _ESCAPE.sub(r"\1", path)


def content_type(head: bytes) -> str:
    """Go's ``http.DetectContentType`` for the types Ollama accepts, and the common others."""
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head[:4] == b"RIFF" and head[8:14] == b"WEBPVP":
        return "image/webp"
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "audio/wave"
    for magic, kind in _SIGNATURES:
        if head.startswith(magic):
            return kind
    if any(byte in _BINARY for byte in head):
        return "application/octet-stream"
    return "text/plain; charset=utf-8"


def read_file(path: Path) -> bytes:
    """The file's bytes; ``FileNotFoundError`` when it is not there, ``FileError`` (Ollama's
    message) when it is not an image or WAV, or too large."""
    with path.open("rb") as f:  # FileNotFoundError, IsADirectoryError, PermissionError: the caller's
        head = f.read(512)
        if not head:
            raise FileError("EOF")  # Go's Read on an empty file
        kind = content_type(head)
        if kind not in _ALLOWED:
            raise FileError(f"invalid file type: {kind}")
        f.seek(0, 2)
        if f.tell() > MAX_FILE_BYTES:
            raise FileError("file size exceeds maximum limit (100MB)")
        f.seek(0)
        return f.read()


def _go_error(exc: OSError, path: str) -> str:
    """Go's words for a file that cannot be read: ``open /p.png: permission denied``."""
    verb = "read" if isinstance(exc, IsADirectoryError) else "open"  # Go opens a directory, then fails to read
    return f"{verb} {path}: {str(exc.strerror).lower()}"


def attach(text: str) -> tuple[str, list[str]]:
    """``text`` without the paths of the files it names, and those files base64-encoded (Ollama's
    ``images``, audio included). Prints ``Added image '...'``/``Added audio '...'`` per file on
    stderr; a path that does not exist stays in the text. Raises ``FileError`` on a file that
    cannot be sent, after printing Ollama's ``Couldn't process file: "..."``."""
    files: list[str] = []
    for typed in file_names(text):
        path = normalize(typed)
        try:
            data = read_file(Path(path))
        except FileNotFoundError:
            continue
        except (FileError, OSError) as exc:
            message = str(exc) if isinstance(exc, FileError) else _go_error(exc, path)
            click.echo(f"Couldn't process file: {json.dumps(message)}", err=True)
            raise FileError(message) from exc
        what = "audio" if path.lower().endswith(".wav") else "image"
        click.echo(f"Added {what} '{path}'", err=True)
        for form in (f"'{path}'", f"'{typed}'", f'"{path}"', f'"{typed}"', typed):
            text = text.replace(form, "")
        files.append(base64.b64encode(data).decode())
    return text.strip(), files
