"""Content-addressed blobs (``blobs/sha256-<hex>``) and the atomic-write primitives the store uses.

Every file appears under its final name only complete and fsynced: temp file in the same
directory, fsync, ``os.replace``, fsync of the directory.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from ..errors import InvalidRequest, StorageFull

DIGEST_RE = re.compile(r"^sha256[:-]([0-9a-fA-F]{64})$")
_CHUNK = 1 << 20


class DigestMismatch(InvalidRequest):
    def __init__(self, expected: str, got: str) -> None:
        super().__init__(f'digest mismatch, expected "{expected}", got "{got}"')


def parse_digest(text: str) -> str:
    """``sha256:<hex>`` or ``sha256-<hex>`` -> lower-case hex; 400 ``invalid digest format`` otherwise."""
    m = DIGEST_RE.match(text) if isinstance(text, str) else None
    if m is None:
        raise InvalidRequest("invalid digest format")
    return m.group(1).lower()


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_path_for(path: Path) -> Path:
    """A hidden sibling of ``path``: same filesystem for ``os.replace``, never read as a blob or tag."""
    return path.with_name(f".tmp-{path.name}-{secrets.token_hex(4)}")


def commit_file(tmp: Path, path: Path) -> None:
    """Make a finished, fsynced temp file visible under its final name."""
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def full_disk(exc: OSError, path: Path) -> StorageFull | OSError:
    """A full disk (or quota) as the store's worded error; any other failure as it was."""
    return StorageFull(path) if exc.errno in (errno.ENOSPC, errno.EDQUOT) else exc


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path_for(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        commit_file(tmp, path)
    except OSError as exc:
        raise full_disk(exc, tmp) from None
    finally:
        tmp.unlink(missing_ok=True)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


class BlobWriter:
    """Streams bytes into a temp file in ``blobs/`` while hashing; ``commit`` verifies and renames.

    Used for uploads (chunks arrive from the network) and for copying local files in.
    """

    def __init__(self, blobs_dir: Path) -> None:
        blobs_dir.mkdir(parents=True, exist_ok=True)
        self._dir = blobs_dir
        self._tmp = temp_path_for(blobs_dir / "upload")
        self._file: BinaryIO = open(self._tmp, "wb")  # noqa: SIM115 - closed in commit/abort
        self._hash = hashlib.sha256()
        self.size = 0

    def write(self, chunk: bytes) -> None:
        """Append ``chunk``; a full disk is a ``StorageFull`` (the caller aborts: nothing is kept)."""
        try:
            self._file.write(chunk)
        except OSError as exc:
            raise full_disk(exc, self._tmp) from None
        self._hash.update(chunk)
        self.size += len(chunk)

    def commit(self, expected_digest: str | None = None) -> str:
        """Verify against ``expected_digest`` (any accepted form) and publish; returns ``sha256:<hex>``."""
        try:
            got = self._hash.hexdigest()
            if expected_digest is not None and parse_digest(expected_digest) != got:
                raise DigestMismatch(expected_digest, f"sha256:{got}")
            try:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()
            except OSError as exc:
                raise full_disk(exc, self._tmp) from None
            final = self._dir / f"sha256-{got}"
            if final.is_symlink() or not final.exists():
                commit_file(self._tmp, final)  # a link is replaced, never written through
            else:
                os.utime(final)  # just used: a prune starting elsewhere spares it for a while
            return f"sha256:{got}"
        finally:
            self.abort()

    def abort(self) -> None:
        self._file.close()
        self._tmp.unlink(missing_ok=True)


def write_blob(blobs_dir: Path, source: BinaryIO | Iterable[bytes], expected_digest: str | None = None) -> str:
    """Copy a binary file object or an iterable of chunks into the blob store; returns ``sha256:<hex>``."""
    writer = BlobWriter(blobs_dir)
    try:
        if hasattr(source, "read"):
            while chunk := source.read(_CHUNK):  # type: ignore[union-attr]
                writer.write(chunk)
        else:
            for chunk in source:  # type: ignore[union-attr]
                writer.write(chunk)
    except BaseException:
        writer.abort()
        raise
    return writer.commit(expected_digest)
