"""A Pixtral projector's first encode on a heap full of NaN bit patterns; run by
``test_image_breaks.py`` in a process of its own (``python poisoned_heap.py DIR``), since what it
does to the allocator lasts for the process.

llama.cpp's Pixtral graph reads memory it never wrote into each [IMG_BREAK] row
(``cllm_ollama/engine/image_breaks.py``). In the test suite, what that memory held came from
earlier models' freed buffers, so the fault came once in many runs. Here ``mallopt`` serves every
allocation from the heap and keeps freed memory there, and a block filled with 0xFF (a NaN, read
as float32) is freed just before the projector loads: the compute buffer its first encode
allocates is carved from it, every time.

Prints one JSON object: the rows libmtmd's output left non-finite, the rows the binding's copy
still has non-finite, and whether that copy equals a clean encode's (the same projector file,
loaded before the heap was poisoned).
"""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path

import llama_cpp.mtmd_cpp as mtmd
import numpy as np

from cllm_ollama.engine.binding import MediaItem, Model, Projector
from cllm_ollama.testing.images import png

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_PERTURB = -1, -3, -6  # glibc's mallopt parameters
BLOCK = 16 << 10  # no bigger than a projector's compute buffer: every free chunk that could hold one is taken


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def poison_heap() -> None:
    """Every free chunk of the heap, and 64 MiB past them, filled with 0xFF and freed again."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.mallinfo2.restype = _Mallinfo2
    assert libc.mallopt(M_MMAP_THRESHOLD, 1 << 30) and libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)
    # And every block malloc hands out from now on comes filled with 0xFF (the complement of the low
    # byte of 0x100): the fault does not depend on where the projector's buffers land in the heap,
    # which any import or path length moves.
    assert libc.mallopt(M_PERTURB, 0x100)
    blocks = []
    for _ in range((libc.mallinfo2().fordblks + (64 << 20)) // BLOCK):
        block = libc.malloc(BLOCK)
        assert block
        ctypes.memset(block, 0xFF, BLOCK)
        blocks.append(block)
    for block in blocks:
        libc.free(block)


def encode(model: Model, mmproj: Path, image: bytes) -> tuple[np.ndarray, np.ndarray]:
    """One image through a freshly loaded projector: (libmtmd's output as it is, the binding's copy)."""
    projector = Projector(model, mmproj, n_threads=1)
    prompt = projector.tokenize(projector.marker, [image])
    try:
        item = next(p for p in prompt.parts if isinstance(p, MediaItem))
        embd = prompt.encode(item)
        raw = np.ctypeslib.as_array(mtmd.mtmd_get_output_embd(projector.ptr), shape=embd.shape).copy()
        return raw, embd
    finally:
        prompt.close()
        projector.close()


def main() -> None:
    # The model is written by the caller: the writers' imports would reshape this process's heap.
    text, mmproj = Path(sys.argv[1]), Path(sys.argv[2])
    image = png(32, 32, seed=3)
    model = Model(text)
    _, clean = encode(model, mmproj, image)
    poison_heap()
    raw, embd = encode(model, mmproj, image)
    model.close()
    rows = ~np.isfinite(raw).all(axis=1)
    print(
        json.dumps(
            {
                "raw_nonfinite_rows": np.flatnonzero(rows).tolist(),
                "nonfinite_rows": np.flatnonzero(~np.isfinite(embd).all(axis=1)).tolist(),
                "equals_clean": bool(np.array_equal(embd, clean)),
            }
        )
    )


if __name__ == "__main__":
    main()
