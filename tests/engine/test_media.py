"""The engine's view of a prompt with images (``engine/media.py``): cell keys the token-prefix
machinery can match, prefixes that never cut an image, positions that M-RoPE images advance by
less than their cells. Pure Python: media items here are stand-ins with a hash and sizes."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pytest

from cllm_ollama.engine.media import cell_keys, media_key, position_after, whole_prefix
from cllm_ollama.engine.prompt_cache import block_keys, common_prefix


@dataclass(frozen=True)
class Image:
    id: str
    n_tokens: int
    n_pos: int
    whole: bool = False


def image(data: bytes, n_tokens: int = 4, n_pos: int | None = None) -> Image:
    return Image(hashlib.sha256(data).hexdigest(), n_tokens, n_tokens if n_pos is None else n_pos)


CAT, DOG = image(b"cat"), image(b"dog")


def test_an_images_cells_are_its_negative_key_and_text_stays_tokens() -> None:
    keys = cell_keys([(5, 6), CAT, (7,)])
    assert keys == (5, 6, *[media_key(CAT)] * 4, 7)
    assert media_key(CAT) < 0 and media_key(CAT) != media_key(DOG)
    assert media_key(CAT) == media_key(image(b"cat"))  # the same bytes, the same key


def test_a_turn_that_resends_the_image_shares_the_prefix_through_it() -> None:
    first = [(1, 2, 3), CAT, (4, 5)]
    second = [(1, 2, 3), image(b"cat"), (4, 5, 9, 9, 9)]
    other = [(1, 2, 3), DOG, (4, 5)]
    assert common_prefix(cell_keys(first), cell_keys(second)) == len(cell_keys(first))
    # Another picture matches only the text before it.
    assert common_prefix(cell_keys(first), cell_keys(other)) == 3
    # Block hashes (the host cache's index) see the image's cells like any tokens.
    text = tuple(range(28))  # the 32-cell first block ends with the image's 4 cells
    assert block_keys(cell_keys([text, CAT, (1,)])) == block_keys(cell_keys([text, image(b"cat"), (2, 3)]))
    assert block_keys(cell_keys([text, CAT, (1,)])) != block_keys(cell_keys([text, DOG, (1,)]))


def test_distinct_images_get_distinct_keys() -> None:
    keys = {media_key(image(str(i).encode())) for i in range(1000)}
    assert len(keys) == 1000


@pytest.mark.parametrize(("n", "whole"), [(0, 0), (2, 2), (3, 3), (4, 3), (6, 3), (7, 7), (8, 8)])
def test_a_prefix_never_ends_inside_an_image(n: int, whole: int) -> None:
    parts = [(1, 2, 3), CAT, (4,)]  # cells 0-2 text, 3-6 the image, 7 text
    assert whole_prefix(parts, n) == whole


def test_positions_follow_cells_for_text_and_n_pos_for_images() -> None:
    qwen_image = image(b"cat", n_tokens=9, n_pos=3)  # a 3x3 grid of tokens: 3 M-RoPE positions
    parts = [(1, 2), qwen_image, (3, 4, 5)]
    assert [position_after(parts, n) for n in (0, 1, 2, 11, 12, 14)] == [0, 1, 2, 5, 6, 8]
    with pytest.raises(ValueError, match="inside an image"):
        position_after(parts, 5)
    gemma_image = image(b"cat", n_tokens=4)
    assert position_after([(1,), gemma_image, (2,)], 6) == 6  # one position per cell
