"""A prompt with media (images, audio), as the engine's prefix machinery and positions need to see it.

A tokenized prompt with media (``binding.MediaPrompt.parts``) is runs of text tokens and media
items: an image (or a tile of a large one), or up to 30 s of audio (a longer clip is several
items). Each item fills ``n_tokens`` KV cells but advances the position by ``n_pos`` (fewer, for
M-RoPE models such as Qwen2-VL), and is either in a sequence whole or not at all. The engine treats both kinds alike:
encoded off the engine thread, decoded as embeddings, reused by identity.

``cell_keys`` gives one int per KV cell: text tokens as themselves, a media item's cells as a
negative number derived from its id (the SHA-256 of its bytes; of them and its tile or window
after a medium's first chunk). The token-prefix machinery (common
prefixes, block hashes, the host cache) then works unchanged: the same image in another turn,
slot or saved state matches, a different one does not, and no token id is negative.
``whole_prefix`` cuts a matched prefix back to the start of any image it ends inside, and
``position_after`` says where a sequence that holds the first N cells continues.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Protocol


class Media(Protocol):
    """What the engine needs of one media item (``binding.MediaItem`` is one)."""

    @property
    def id(self) -> str: ...  # the SHA-256 of its medium's bytes (and of its tile or window), hex

    @property
    def n_tokens(self) -> int: ...

    @property
    def n_pos(self) -> int: ...

    @property
    def whole(self) -> bool: ...  # its tokens attend both ways (Gemma 3's images): one piece


Part = Sequence[int] | Media


def media_key(media: Media) -> int:
    """The negative cell key of an image: 62 bits of its hash, never a token id (those are >= 0)."""
    return -1 - int(media.id[:16], 16) // 4


def _spans(parts: Sequence[Part]) -> Iterator[tuple[int, int, int, Media | None]]:
    """(first cell, cells, positions, the media item or None for text) of each part, in order."""
    cell = 0
    for part in parts:
        if isinstance(part, Sequence):
            yield cell, len(part), len(part), None
            cell += len(part)
        else:
            yield cell, part.n_tokens, part.n_pos, part
            cell += part.n_tokens


def cell_keys(parts: Sequence[Part]) -> tuple[int, ...]:
    """One key per KV cell: a text token's id, or its image's ``media_key``."""
    out: list[int] = []
    for part in parts:
        out += part if isinstance(part, Sequence) else [media_key(part)] * part.n_tokens
    return tuple(out)


def media_cells(parts: Sequence[Part], media: Sequence[bytes]) -> list[int]:
    """The KV cells each item of ``media`` (in the order it was tokenized with ``parts``) takes:
    its chunks (an image's tiles and overview, a clip's windows) and the text between them. An
    item's first chunk is known by its id, the SHA-256 of its bytes; a chunk known by no item's
    (a stand-in prompt) counts toward the item before it, or the first."""
    digests = [hashlib.sha256(data).hexdigest() for data in media]
    cells = [0] * len(media)
    item, between = -1, 0  # the item whose chunks are being met; text since its last chunk
    for part in parts:
        if isinstance(part, Sequence):
            between += len(part)
            continue
        if item + 1 < len(media) and part.id == digests[item + 1]:
            item += 1  # the next item's first chunk: the text before it is the prompt's
        elif item >= 0:
            cells[item] += between  # text between one item's chunks (a sliced image's rows)
        item = max(item, 0)
        if media:
            cells[item] += part.n_tokens
        between = 0
    return cells


def whole_prefix(parts: Sequence[Part], n_cells: int) -> int:
    """``n_cells`` cut back to the start of the image it ends inside, if any: a sequence holds an
    image whole or not at all (its tokens were decoded together, non-causally for Gemma 3)."""
    for start, size, _, media in _spans(parts):
        if media is not None and start < n_cells < start + size:
            return start
    return n_cells


def position_after(parts: Sequence[Part], n_cells: int) -> int:
    """The position that follows the first ``n_cells`` cells (a whole prefix): for M-RoPE models
    less than ``n_cells``, since an image's cells share positions."""
    pos = 0
    for start, size, n_pos, media in _spans(parts):
        if start + size <= n_cells:
            pos += n_pos
        elif start < n_cells:
            if media is not None:
                raise ValueError(f"{n_cells} cells end inside an image (cells {start}..{start + size})")
            pos += n_cells - start
    return pos
