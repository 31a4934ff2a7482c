"""WebP decoded by libwebp straight to the size the projector keeps (its decoder scales rows as it
goes: ``WebPDecoderOptions.use_scaling``), RGB into a buffer of that size, and nothing else.

Pillow's WebP reader goes through libwebp's animation decoder, which allocates two RGBA canvases
of the full size when the file is opened, then copies the frame twice more (a 34-byte 8192x8192
WebP cost 1.4 GB): it is only the fallback for animations and where libwebp cannot be loaded.
The library is Pillow's own copy (its wheel bundles one), else the system's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from pathlib import Path

import numpy as np

# libwebp's decode.h: the ABI version its structures below are laid out for (1.x: 0x0209).
_ABI_VERSION = 0x0209
_MODE_RGB = 0
_OK = 0


class _Features(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int) for name in ("width", "height", "has_alpha", "has_animation", "format")] + [
        ("pad", ctypes.c_uint32 * 5)
    ]


class _RGBA(ctypes.Structure):
    _fields_ = [("rgba", ctypes.c_void_p), ("stride", ctypes.c_int), ("size", ctypes.c_size_t)]


class _YUVA(ctypes.Structure):
    _fields_ = (
        [(name, ctypes.c_void_p) for name in "yuva"]
        + [(f"{name}_stride", ctypes.c_int) for name in "yuva"]
        + [(f"{name}_size", ctypes.c_size_t) for name in "yuva"]
    )


class _Buffers(ctypes.Union):
    _fields_ = [("RGBA", _RGBA), ("YUVA", _YUVA)]


class _DecBuffer(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int) for name in ("colorspace", "width", "height", "is_external_memory")] + [
        ("u", _Buffers),
        ("pad", ctypes.c_uint32 * 4),
        ("private_memory", ctypes.c_void_p),
    ]


class _Options(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_int)
        for name in (
            "bypass_filtering",
            "no_fancy_upsampling",
            "use_cropping",
            "crop_left",
            "crop_top",
            "crop_width",
            "crop_height",
            "use_scaling",
            "scaled_width",
            "scaled_height",
            "use_threads",
            "dithering_strength",
            "flip",
            "alpha_dithering_strength",
        )
    ] + [("pad", ctypes.c_uint32 * 5)]


class _Config(ctypes.Structure):
    _fields_ = [("input", _Features), ("output", _DecBuffer), ("options", _Options)]


@functools.cache
def _libwebp() -> ctypes.CDLL | None:
    """libwebp (Pillow's bundled copy first), its decode functions typed; None where none loads."""
    import PIL

    bundled = sorted((Path(PIL.__file__).parent.parent / "pillow.libs").glob("libwebp-*.so*"))
    system = ctypes.util.find_library("webp")
    for name in [str(p) for p in bundled] + ([system] if system else []):
        try:
            lib = ctypes.CDLL(name)
            lib.WebPInitDecoderConfigInternal.restype = ctypes.c_int
            lib.WebPInitDecoderConfigInternal.argtypes = [ctypes.POINTER(_Config), ctypes.c_int]
            lib.WebPGetFeaturesInternal.restype = ctypes.c_int
            lib.WebPGetFeaturesInternal.argtypes = [
                ctypes.c_char_p,
                ctypes.c_size_t,
                ctypes.POINTER(_Features),
                ctypes.c_int,
            ]
            lib.WebPDecode.restype = ctypes.c_int
            lib.WebPDecode.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(_Config)]
            lib.WebPFreeDecBuffer.restype = None
            lib.WebPFreeDecBuffer.argtypes = [ctypes.POINTER(_DecBuffer)]
        except (OSError, AttributeError):
            continue
        return lib
    return None


def decode_scaled(data: bytes, size: tuple[int, int]) -> np.ndarray | None:
    """The still WebP ``data`` decoded to RGB at ``size`` (``(height, width, 3)`` uint8), or None
    where libwebp is missing, the file is an animation or libwebp refuses it (the caller then
    tries Pillow, which reports a broken file as such)."""
    lib = _libwebp()
    if lib is None:
        return None
    config = _Config()
    if not lib.WebPInitDecoderConfigInternal(ctypes.byref(config), _ABI_VERSION):
        return None  # another ABI
    if lib.WebPGetFeaturesInternal(data, len(data), ctypes.byref(config.input), _ABI_VERSION) != _OK:
        return None
    if config.input.has_animation:
        return None
    width, height = size
    out = np.empty((height, width, 3), dtype=np.uint8)
    if (config.input.width, config.input.height) != size:
        config.options.use_scaling = 1
        config.options.scaled_width, config.options.scaled_height = width, height
    config.output.colorspace = _MODE_RGB
    config.output.is_external_memory = 1
    config.output.u.RGBA.rgba = out.ctypes.data
    config.output.u.RGBA.stride = width * 3
    config.output.u.RGBA.size = out.nbytes
    try:
        return out if lib.WebPDecode(data, len(data), ctypes.byref(config)) == _OK else None
    finally:
        lib.WebPFreeDecBuffer(ctypes.byref(config.output))
