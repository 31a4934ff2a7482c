"""Freed heap handed back to the system after a model is unloaded.

glibc's malloc keeps what is freed for reuse, and raises its mmap threshold each time a large
block is freed, so after a first model's buffers the next model's medium-sized ones (compute
buffers, host-side state, llama.cpp's per-context tables) come from arenas that a free never
shrinks. A server that loads and unloads models ran resident 25 MiB higher a cycle on the real
Qwen2.5-0.5B (six loads of 2k-8k slots: 104 MiB held after the first unload, 255 after the sixth;
with ``malloc_trim`` 62 and 99), and the memory check before a load counts that as taken.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS, Windows)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError, TypeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


def return_freed_heap() -> bool:
    """Give the pages of freed heap back to the system (every arena's); whether any went back."""
    trim = _malloc_trim()
    return trim is not None and bool(trim(0))
