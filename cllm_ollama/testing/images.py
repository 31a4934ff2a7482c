"""Small real image files for tests, written without an imaging library."""

from __future__ import annotations

import struct
import zlib

import numpy as np


def png_claiming(width: int, height: int) -> bytes:
    """A small PNG whose header claims ``width`` x ``height`` (a decompression bomb's first bytes)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return _PNG_MAGIC + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(b"\0" * 64)) + _chunk(b"IEND", b"")


def bmp_claiming(width: int, height: int) -> bytes:
    """A 54-byte BMP header claiming a ``width`` x ``height`` 24-bit picture and no pixels: stb_image
    decodes it (missing rows read as black) to ``width * height * 3`` bytes."""
    row = (width * 3 + 3) & ~3
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, row * height, 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 54 + row * height, 0, 0, 54) + info


def png(width: int, height: int, seed: int = 0) -> bytes:
    """A ``width`` x ``height`` RGB PNG of random pixels (a different picture per ``seed``)."""
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    rows = b"".join(b"\x00" + pixels[y].tobytes() for y in range(height))  # filter type 0 per row
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return _PNG_MAGIC + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(rows)) + _chunk(b"IEND", b"")


_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
