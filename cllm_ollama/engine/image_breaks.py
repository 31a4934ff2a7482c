"""Pixtral's [IMG_BREAK] rows, mended after libmtmd encodes an image.

llama.cpp's Pixtral graph (``tools/mtmd/models/pixtral.cpp`` in the llama.cpp that
llama-cpp-python 0.3.36 builds) makes the [IMG_BREAK] embedding that ends each row of an image
as ``0 * t + img_break``, where ``t`` is a tensor nothing writes: whatever the projector's compute
buffer held. Where that memory holds the bit pattern of an Inf or a NaN (an earlier model's
buffers freed to the heap: a ``-inf`` attention mask, say), the row is NaN there, and through
attention so is every logit after the image. Whether it happens depends on what the allocator
hands the first encode after the projector loads, so it comes and goes from run to run.

A spoiled row still equals ``img_break`` wherever that memory held a finite number, which is how
it is told from the image's own rows, and it is written back whole.
"""

from __future__ import annotations

import logging
from pathlib import Path

import gguf
import numpy as np

log = logging.getLogger("cllm.engine")

IMG_BREAK = "v.token_embd.img_break"  # the tensor's name in a projector GGUF (llama.cpp's converter)


def image_break_row(projector: Path) -> np.ndarray | None:
    """The projector's [IMG_BREAK] embedding as float32; None when it has none (not Pixtral)."""
    for tensor in gguf.GGUFReader(projector).tensors:
        if tensor.name == IMG_BREAK:
            return gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32).reshape(-1)
    return None


def mend_image_breaks(embd: np.ndarray, row: np.ndarray | None) -> np.ndarray:
    """``embd`` (one image's rows) with each row that is ``row`` but for non-finite values set to
    ``row``, in place. Left as it is when no row is finite: then the projector itself failed, and
    nothing here should make that look like a sound image."""
    bad = ~np.isfinite(embd)
    if row is None or row.shape != embd.shape[1:] or bad.any(axis=1).all():
        return embd
    mended = 0
    for i in np.flatnonzero(bad.any(axis=1)):
        finite = ~bad[i]
        if np.array_equal(embd[i][finite], row[finite]):
            embd[i] = row
            mended += 1
    if mended:
        log.debug("mended %d [IMG_BREAK] rows that llama.cpp's Pixtral graph left non-finite", mended)
    return embd
