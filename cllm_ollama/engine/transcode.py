"""Images stb_image (libmtmd's loader) cannot read, decoded to RGB with Pillow: WebP.

Ollama takes WebP (its server decodes with golang.org/x/image/webp); stb_image does not read it.
Only what stb cannot read is decoded here, in the thread that tokenizes the prompt (never the
event loop or the engine's thread), and the image keeps its identity: the SHA-256 of the bytes
the client sent, so a re-sent WebP is reused from the KV cache like any other image.
"""

from __future__ import annotations

import io

from ..errors import MediaError


def is_webp(data: bytes) -> bool:
    """A RIFF container of WebP (lossy, lossless or animated)."""
    return data[:4] == b"RIFF" and data[8:12] == b"WEBP"


def decode_rgb(data: bytes, index: int, max_pixels: int) -> tuple[int, int, bytes]:
    """``(width, height, pixels)``, 8-bit RGB rows; the first frame of an animation.

    The size is read from the header first and refused past ``max_pixels`` before decoding.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data), formats=["WEBP"]) as image:
            width, height = image.size
            if width * height > max_pixels:
                raise MediaError(f"image {index}: {width}x{height} pixels is more than {max_pixels}")
            rgb = image.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise MediaError(f"image {index}: the image could not be decoded") from exc
    return rgb.width, rgb.height, rgb.tobytes()
