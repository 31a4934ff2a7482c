"""Llama 4's picture tokens put back in the order its language model reads them, after libmtmd
encodes a tile.

llama.cpp's Llama 4 graph (``tools/mtmd/models/llama4.cpp`` in the llama.cpp that llama-cpp-python
0.3.36 builds) pixel-shuffles a tile's patches without the second transpose of Meta's
``pixel_shuffle`` (transformers' too; llama.cpp's is commented out): each token it makes holds the
right patches, but a tile's tokens come column by column, where the model was trained on them row
by row. ``tests/store/test_transformers_oracle.py`` measured it: libmtmd's tokens are transformers'
with the grid transposed, and equal to them once put back.

libmtmd makes each tile of a picture (llava-uhd's slices and the overview, all ``image_size``
squares) a media chunk of its own, ``side * side`` tokens; each is transposed back as it is encoded.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

_KIND = "llama4"


def column_tile_side(projector: Path) -> int:
    """Tokens a side of one tile of the projector whose tiles libmtmd leaves column by column
    (Llama 4's: its tile's patches a side over the pixel shuffle's factor); 0 for any other."""
    fields = gguf.GGUFReader(projector).fields

    def contents(key: str) -> object:
        field = fields.get(key)
        return field.contents() if field is not None and field.data else None

    kind = contents("clip.vision.projector_type") or contents("clip.projector_type")
    size, patch, merge = (contents(f"clip.vision.{k}") for k in ("image_size", "patch_size", "projector.scale_factor"))
    if kind != _KIND or not (isinstance(size, int) and isinstance(patch, int) and isinstance(merge, int)):
        return 0
    return size // patch // merge if patch > 0 and merge > 0 else 0


def by_rows(embd: np.ndarray, side: int) -> np.ndarray:
    """A tile's ``side * side`` token rows, given column by column, row by row (``embd`` as it is
    when it holds another number of rows: then it is no such tile, and nothing is guessed)."""
    if side <= 0 or embd.shape[0] != side * side:
        return embd
    return np.ascontiguousarray(embd.reshape(side, side, -1).swapaxes(0, 1).reshape(embd.shape))
