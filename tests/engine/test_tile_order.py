"""Llama 4's tile tokens, which libmtmd leaves column by column, put back row by row (``tile_order``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cllm_ollama.engine.media_budget import ProjectorGeometry
from cllm_ollama.engine.tile_order import by_rows
from cllm_ollama.errors import EngineError
from cllm_ollama.testing import vision_ggufs


def test_a_tile_s_tokens_given_column_by_column_come_back_row_by_row() -> None:
    side, width = 3, 2
    row_major = np.arange(side * side * width, dtype=np.float32).reshape(side * side, width)
    columns = row_major.reshape(side, side, width).swapaxes(0, 1).reshape(side * side, width)
    assert np.array_equal(by_rows(columns, side), row_major)
    with pytest.raises(EngineError, match="tile of 4 tokens, not 3x3"):  # a libmtmd that tiles otherwise
        by_rows(row_major[:4], side)


def test_only_llama4_projectors_have_their_tiles_put_back(tmp_path: Path) -> None:
    """Llama 4's tile is its patches a side over the merge (32 / 8 / 2: 2 tokens; a merge unstated
    is 1, as clip.cpp takes it); another projector's tokens are left as libmtmd makes them."""
    llama4 = ProjectorGeometry.read(vision_ggufs.write_llama4_projector(tmp_path / "llama4.gguf"))
    assert llama4.column_tile_side() == 2
    assert ProjectorGeometry(kind="llama4", image_size=32, patch_size=8).column_tile_side() == 4
    text = vision_ggufs.write_mistral3(tmp_path / "mistral3.gguf")
    pixtral = ProjectorGeometry.read(vision_ggufs.write_pixtral_projector(tmp_path / "pixtral.gguf", text))
    assert pixtral.column_tile_side() == 0
