"""Image bytes to RGB pixels for libmtmd, measured before they are decoded and reduced as they are.

stb_image (inside libmtmd, what its own helper decodes with) reads PNG, JPEG, GIF and BMP; libwebp
a still WebP, at the reduced size (``webp``); Pillow an animated one, and a JPEG that is reduced
anyway (decoded at a fraction of its size: ``transcode``).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from ...errors import MediaError
from ..media_budget import reduced_size
from ..transcode import PILLOW_WEBP_COPIES, decode_reduced, is_jpeg, is_webp, reduce_rgb, webp_size
from .webp import decode_scaled

# Formats stb_image decodes, by their first bytes, and WebP (decoded by Pillow). Anything else is
# refused before libmtmd sees it: its helper would take unknown bytes for audio or hand them to
# an ffmpeg subprocess as a video.
_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"BM")

T = TypeVar("T")

# What stb_image holds while it decodes, in full-size RGB images (measured at 8192x8192): a BMP is
# read into its output, a PNG inflated beside it, a JPEG's planes kept beside it, a GIF's canvas,
# background and history (9 bytes a pixel) beside it. The decode budget is charged as much.
_STB_COPIES = {b"BM": 1, b"\x89P": 2, b"\xff\xd8": 2, b"GI": 3}


def is_image(data: bytes) -> bool:
    """Whether ``data`` starts as an image the projector can decode (cheap; decoding may still fail)."""
    return data.startswith(_IMAGE_MAGIC) or is_webp(data)


@functools.cache
def _stb() -> ctypes.CDLL:
    """stb_image's decoder, which libmtmd exports."""
    import llama_cpp.mtmd_cpp as mtmd

    lib = mtmd._libmtmd
    lib.stbi_load_from_memory.restype = ctypes.c_void_p
    lib.stbi_load_from_memory.argtypes = (
        [ctypes.c_char_p, ctypes.c_int] + [ctypes.POINTER(ctypes.c_int)] * 3 + [ctypes.c_int]
    )
    lib.stbi_info_from_memory.restype = ctypes.c_int
    lib.stbi_info_from_memory.argtypes = [ctypes.c_char_p, ctypes.c_int] + [ctypes.POINTER(ctypes.c_int)] * 3
    lib.stbi_image_free.restype = None
    lib.stbi_image_free.argtypes = [ctypes.c_void_p]
    return lib  # type: ignore[no-any-return]


def image_size(data: bytes, index: int) -> tuple[int, int]:
    """``(width, height)`` as the image's header states it; nothing is decoded. ``MediaError``
    for bytes that are no image or a header that cannot be read."""
    if not is_image(data):
        raise MediaError(f"image {index}: unknown or unsupported image format")
    if is_webp(data):
        size = webp_size(data)
    else:
        nx, ny, nc = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        ok = _stb().stbi_info_from_memory(data, len(data), ctypes.byref(nx), ctypes.byref(ny), ctypes.byref(nc))
        size = (nx.value, ny.value) if ok else None
    if size is None or min(size) <= 0:
        raise MediaError(f"image {index}: the image could not be decoded")
    return size


Make = Callable[[int, int, Any], T]


def decode_cost(data: bytes, size: tuple[int, int], side: int) -> int:
    """What decoding the image of header size ``size`` holds at its peak, in RGB pixels: its full
    size times its decoder's working copies, or less where it is decoded at a smaller scale."""
    pixels = size[0] * size[1]
    if is_webp(data):  # an animation (VP8X's flag) goes to Pillow
        animated = data[12:16] == b"VP8X" and len(data) > 20 and data[20] & 0x02
        return pixels * PILLOW_WEBP_COPIES if animated else pixels
    if is_jpeg(data) and reduced_size(*size, side) != size:
        return pixels  # decoded at 1/2 to 1/8 scale, then reduced
    return pixels * _STB_COPIES.get(data[:2], 2)


def decode_image(data: bytes, index: int, size: tuple[int, int], side: int, make: Make[T]) -> T:
    """``make(width, height, pixels)`` over the image of header size ``size`` decoded to 8-bit RGB
    rows, its shorter side reduced to ``side`` where it is longer (``reduced_size``); what it
    holds meanwhile is ``decode_cost``. ``pixels`` lives during the call only."""
    target = reduced_size(*size, side)
    if is_webp(data):
        scaled = decode_scaled(data, target)
        if scaled is not None:
            return make(target[0], target[1], scaled.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)))
        return _made(decode_reduced(data, index, target), make)  # an animation, or no libwebp of our own
    if is_jpeg(data) and target != size:
        return _made(decode_reduced(data, index, target), make)
    return _stb_decode(data, index, side, make)


def _made(decoded: tuple[int, int, bytes], make: Make[T]) -> T:
    width, height, rgb = decoded
    return make(width, height, ctypes.cast(ctypes.c_char_p(rgb), ctypes.POINTER(ctypes.c_uint8)))


def _stb_decode(data: bytes, index: int, side: int, make: Make[T]) -> T:
    """stb_image's decode, as libmtmd's helper makes it, reduced before its buffer is freed
    (a small copy only is made), or handed to ``make`` as it is where it is small enough."""
    stb = _stb()
    nx, ny, nc = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    pixels = stb.stbi_load_from_memory(data, len(data), ctypes.byref(nx), ctypes.byref(ny), ctypes.byref(nc), 3)
    if not pixels:
        raise MediaError(f"image {index}: the image could not be decoded")
    try:
        width, height = nx.value, ny.value
        full = ctypes.cast(pixels, ctypes.POINTER(ctypes.c_uint8))
        target = reduced_size(width, height, side)
        if target == (width, height):
            return make(width, height, full)
        small = np.ascontiguousarray(reduce_rgb(np.ctypeslib.as_array(full, shape=(height, width, 3)), target))
        return make(*target, small.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)))
    finally:
        stb.stbi_image_free(pixels)
