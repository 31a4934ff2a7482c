"""Images reduced as they are decoded, and those stb_image (libmtmd's loader) cannot read, decoded
to RGB with Pillow: WebP.

Ollama takes WebP (its server decodes with golang.org/x/image/webp); stb_image does not read it.
Only what stb cannot read, and a JPEG that is reduced anyway (libjpeg decodes it at 1/2 to 1/8
scale: ``Image.draft``), is decoded here, in the thread that tokenizes the prompt (never the
event loop or the engine's thread), and the image keeps its identity: the SHA-256 of the bytes
the client sent, so a re-sent image is reused from the KV cache like any other.

No path makes a second full-size copy: Pillow's decode is reduced before it is converted, and
stb_image's buffer is box-filtered band by band into the small copy (``reduce_rgb``).
"""

from __future__ import annotations

import io

import numpy as np

from ..errors import MediaError

# Full-size pixels box-filtered at once: a band's temporaries are a few MB, never a copy of the image.
_BAND_PIXELS = 1 << 20


def is_webp(data: bytes) -> bool:
    """A RIFF container of WebP (lossy, lossless or animated)."""
    return data[:4] == b"RIFF" and data[8:12] == b"WEBP"


def is_jpeg(data: bytes) -> bool:
    return data[:3] == b"\xff\xd8\xff"


def pillow_size(data: bytes) -> tuple[int, int] | None:
    """The size a WebP or JPEG header states (only the header is read), or None if it cannot be read."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data), formats=["WEBP", "JPEG"]) as image:
            return image.size
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
        return None


def decode_reduced(data: bytes, index: int, size: tuple[int, int]) -> tuple[int, int, bytes]:
    """``(width, height, pixels)`` of a WebP or JPEG decoded to 8-bit RGB rows at ``size`` (the
    header's own size, or less: ``media_budget.reduced_size``); the first frame of an animation."""
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
