"""Llama 4's picture tokens put back in the order its language model reads them, after libmtmd
encodes a tile.

llama.cpp's Llama 4 graph (``tools/mtmd/models/llama4.cpp`` in the llama.cpp that llama-cpp-python
0.3.36 builds) pixel-shuffles a tile's patches without the second transpose of Meta's
``pixel_shuffle`` (transformers' too; llama.cpp's is commented out): each token it makes holds the
right patches, but a tile's tokens come column by column, where the model was trained on them row
by row. ``tests/store/test_transformers_oracle.py`` measured it: libmtmd's tokens are transformers'
with the grid transposed, and equal to them once put back.

libmtmd makes each tile of a picture (llava-uhd's slices and the overview, all ``image_size``
squares) a media chunk of its own, ``side * side`` tokens (``ProjectorGeometry.column_tile_side``);
each is transposed back as it is encoded.
"""

from __future__ import annotations

import numpy as np

from ..errors import EngineError

# The projector type whose tiles libmtmd leaves column by column.
COLUMN_TILES_KIND = "llama4"
# Part of a saved prompt state's identity wherever a projector feeds the model: states of images
# saved before the tokens were put back hold them in libmtmd's order, and must not be restored.
EMBEDDING_ORDER = "llama4 tiles by rows"


def by_rows(embd: np.ndarray, side: int) -> np.ndarray:
    """A tile's ``side * side`` token rows, given column by column, row by row. ``EngineError`` for
    another number of rows: a libmtmd that tiles otherwise, whose order cannot be known here."""
    if embd.shape[0] != side * side:
        raise EngineError(f"a Llama 4 tile of {embd.shape[0]} tokens, not {side}x{side}: libmtmd tiles otherwise")
    return np.ascontiguousarray(embd.reshape(side, side, -1).swapaxes(0, 1).reshape(embd.shape))
