"""MXFP4 weights (the OCP microscaling format: blocks of 32 four-bit floats sharing a power-of-two
scale) from the layout transformers and the gpt-oss releases keep to ggml's, as llama.cpp's
converter (``repack_mxfp4``) and Ollama's repack them, without dequantizing.

A checkpoint keeps a block's 32 values in 16 bytes, value ``2i`` in byte ``i``'s low nibble and
``2i + 1`` in its high one, and the blocks' E8M0 exponents in a tensor of their own; ggml keeps
each block as its exponent byte, then 16 bytes holding value ``i`` low and value ``i + 16`` high.
The exponent and the four-bit codes mean the same in both.
"""

from __future__ import annotations

import numpy as np

BLOCK = 32  # values per block
BYTES = 17  # a ggml block: the exponent, then 16 bytes of nibbles


def to_ggml(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """``blocks`` (``(..., n, 16)`` bytes) and ``scales`` (``(..., n)``) as ggml's MXFP4 rows,
    ``(..., n * 17)`` bytes; a stack of experts one expert at a time, so that the unpacked values
    of only one (not of a 120B model's whole layer, gigabytes) are held at once."""
    out = np.empty((*scales.shape[:-1], scales.shape[-1] * BYTES), dtype=np.uint8)
    if blocks.ndim > 3:
        for i in range(blocks.shape[0]):
            out[i] = to_ggml(blocks[i], scales[i])
        return out
    values = np.stack([blocks & 0x0F, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], BLOCK)
    packed = values[..., :16] | (values[..., 16:] << 4)
    out[:] = np.concatenate([scales[..., None], packed], axis=-1).reshape(out.shape)
    return out
