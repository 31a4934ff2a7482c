"""Images reduced as they are decoded, and those stb_image (libmtmd's loader) cannot read, decoded
to RGB with Pillow: WebP.

Ollama takes WebP (its server decodes with golang.org/x/image/webp); stb_image does not read it.
A still WebP is decoded by libwebp at the reduced size (``binding.webp``); an animated one (its
first frame), and a JPEG that is reduced anyway (libjpeg decodes it at 1/2 to 1/8 scale:
``Image.draft``), are decoded here, in the thread that tokenizes the prompt (never the
event loop or the engine's thread), and the image keeps its identity: the SHA-256 of the bytes
the client sent, so a re-sent image is reused from the KV cache like any other.

No path makes a second full-size copy: Pillow's decode is reduced before it is converted, and
stb_image's buffer is box-filtered band by band into the small copy (``reduce_rgb``).
"""

from __future__ import annotations

import io

import numpy as np

from ..errors import MediaError

# What Pillow's WebP reader holds at once, in full-size RGB images: libwebp's animation decoder's
# two RGBA canvases, the frame's bytes and Pillow's own 4-byte pixels.
PILLOW_WEBP_COPIES = 6

# Full-size pixels box-filtered at once: a band's temporaries are a few MB, never a copy of the image.
_BAND_PIXELS = 1 << 20


def is_webp(data: bytes) -> bool:
    """A RIFF container of WebP (lossy, lossless or animated)."""
    return data[:4] == b"RIFF" and data[8:12] == b"WEBP"


def is_jpeg(data: bytes) -> bool:
    return data[:3] == b"\xff\xd8\xff"


def webp_size(data: bytes) -> tuple[int, int] | None:
    """The canvas size a WebP's header states (its first 30 bytes: an extended file's canvas, a
    lossy or a lossless bitstream's frame), or None where it does not read as one. Read here,
    not by Pillow: opening a WebP with Pillow allocates two canvases of that size."""
    if len(data) < 30:
        return None
    chunk = data[12:16]
    if chunk == b"VP8X":
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        return int.from_bytes(data[26:28], "little") & 0x3FFF, int.from_bytes(data[28:30], "little") & 0x3FFF
    if chunk == b"VP8L" and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def decode_reduced(data: bytes, index: int, size: tuple[int, int]) -> tuple[int, int, bytes]:
    """``(width, height, pixels)`` of a WebP or JPEG decoded by Pillow to 8-bit RGB rows at ``size``
    (the header's own size, or less: ``media_budget.reduced_size``); the first frame of an
    animation. A WebP costs ``PILLOW_WEBP_COPIES`` times its pixels on the way."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data), formats=["WEBP", "JPEG"]) as opened:
            image: Image.Image = opened
            if image.size != size:
                opened.draft("RGB", size)  # JPEG: decoded at the smallest scale still >= size
                image = opened.resize(size, Image.Resampling.BICUBIC, reducing_gap=2.0)
            rgb = image if image.mode == "RGB" else image.convert("RGB")
            return rgb.width, rgb.height, rgb.tobytes()
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise MediaError(f"image {index}: the image could not be decoded") from exc


def reduce_rgb(pixels: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """A full-size ``(height, width, 3)`` uint8 image (stb_image's buffer, not copied) reduced to
    ``size``, ``(height, width, 3)`` uint8: box-filtered by the largest whole factor that stays at
    or above ``size``, a band of rows at a time, then resized to ``size`` exactly (bicubic)."""
    from PIL import Image

    height, width = pixels.shape[:2]
    k = max(1, min(width // size[0], height // size[1]))
    rows, cols = height // k, width // k
    small = np.empty((rows, cols, 3), dtype=np.uint8)
    step = max(1, _BAND_PIXELS // (k * width))  # reduced rows per band
    for top in range(0, rows, step):
        n = min(rows, top + step) - top
        band = pixels[top * k : (top + n) * k, : cols * k]
        down = band.reshape(n, k, cols * k * 3).sum(axis=1, dtype=np.uint32)  # k rows summed
        box = down.reshape(n, cols, k, 3).sum(axis=2)  # then k columns
        small[top : top + n] = box // (k * k)
    if (cols, rows) == size:
        return small
    return np.asarray(Image.fromarray(small).resize(size, Image.Resampling.BICUBIC))
