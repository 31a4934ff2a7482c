"""Small real image files for tests, written without an imaging library."""

from __future__ import annotations

import struct
import zlib

import numpy as np


def png(width: int, height: int, seed: int = 0) -> bytes:
    """A ``width`` x ``height`` RGB PNG of random pixels (a different picture per ``seed``)."""
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    rows = b"".join(b"\x00" + pixels[y].tobytes() for y in range(height))  # filter type 0 per row

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
