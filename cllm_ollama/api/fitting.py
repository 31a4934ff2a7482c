"""Fitting a prompt to its context, on the API's side of the engine: how far a context grows for a
prompt, how a text prompt is cut as Ollama cuts it, and how a prompt with media is counted so
that old turns leave with their images.

A prompt with images or audio is measured in KV cells once the projector has tokenized it
(``EngineClient.tokenize_media``). Ollama's ``chatPrompt`` (server/prompt.go) drops the oldest
messages, never system messages or the last one, counting a flat 768 tokens per image of each
message it keeps; here each item counts the cells the projector gave it (``MediaCounter``), and
the prompt that results is tokenized again to be sure it fits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..chatformat.prompt import Tokenizer
from ..engine.frontdoor import EngineClient
from ..engine.media import Part, cell_keys, media_cells
from ..errors import ContextOverflow
from .media import TAGS


def fit_prompt(tokens: list[int], limit: int, *, num_keep: int, num_predict: int, truncate: bool) -> list[int]:
    """Make a prompt fit its context as Ollama does: keep the first ``num_keep`` tokens and
    the end, dropping from the middle, or refuse with Ollama's message when ``truncate`` is off.

    Truncation leaves room to generate (``num_predict`` tokens, at most half the context, or a
    quarter of it when unbounded) instead of filling the context with prompt.
    """
    if len(tokens) < limit:
        return tokens
    if not truncate:
        raise ContextOverflow()
    room = min(num_predict, limit // 2) if num_predict > 0 else limit // 4
    keep_total = max(1, limit - max(1, room))
    keep_head = max(0, min(num_keep, keep_total - 1))
    return tokens[:keep_head] + tokens[len(tokens) - (keep_total - keep_head) :]


def grown_context(n_prompt: int, limit: int, loaded: EngineClient, most: int) -> int:
    """The context that holds a prompt of ``n_prompt`` tokens with a quarter more (at least 1,024)
    for the reply, as a power of two, at most ``most`` and the trained context; 0 when the prompt
    fits ``limit`` or a larger context would not be larger than the loaded one."""
    if n_prompt < limit:
        return 0
    n_ctx = min(1 << (n_prompt + max(n_prompt // 4, 1024) - 1).bit_length(), most, loaded.n_ctx_train)
    return n_ctx if n_ctx > loaded.n_ctx_slot else 0


class MediaCounter:
    """A tokenizer (``chatformat.prompt.Tokenizer``) for turn dropping only: the text between
    ``[img-N]`` tags tokenized piece by piece (as libmtmd tokenizes the text between its markers),
    each tag counted as the cells item N takes. Its tokens are counts, never a prompt to run:
    a tag stands as ``cells[N]`` copies of -1."""

    def __init__(self, loaded: Tokenizer, cells: Sequence[int]) -> None:
        self.loaded = loaded
        self.cells = list(cells)

    @property
    def bos_text(self) -> str:
        return self.loaded.bos_text

    @property
    def eos_text(self) -> str:
        return self.loaded.eos_text

    def fim_tokens(self) -> tuple[int, int, int] | None:
        return self.loaded.fim_tokens()

    def tokenize(self, text: str, *, add_special: bool = True) -> list[int]:
        out: list[int] = []
        start, seen = 0, set()
        for tag in TAGS.finditer(text):
            item = int(tag.group(1))
            if item >= len(self.cells) or item in seen:
                continue  # not an item's tag, or not its first (``place_markers``): text
            seen.add(item)
            out += self._text(text[start : tag.start()], add_special and not start)
            out += [-1] * self.cells[item]
            start = tag.end()
        return out + self._text(text[start:], add_special and not start)

    def _text(self, piece: str, add_special: bool) -> list[int]:
        return self.loaded.tokenize(piece, add_special=add_special) if piece or add_special else []

    def calibrate(self, text: str, n_cells: int) -> None:
        """Count each item present in ``text`` a little more where ``text`` tokenized with its
        media took ``n_cells`` and this counts fewer: the text libmtmd writes around each item
        (Gemma 3's begin and end of image), and items whose tag the template left out."""
        short = n_cells - len(self.tokenize(text))
        present = sorted({int(t.group(1)) for t in TAGS.finditer(text)} & set(range(len(self.cells))))
        if short > 0 and present:
            more = math.ceil(short / len(present))
            for item in present:
                self.cells[item] += more

    def dropped(self, whole: str, fitted: str) -> list[int]:
        """The items whose tags ``whole`` has and ``fitted`` (it without some turns) lacks: they
        leave with their turns."""
        return [i for i in range(len(self.cells)) if f"[img-{i}]" in whole and f"[img-{i}]" not in fitted]


def media_counter(
    loaded: Tokenizer, text: str, parts: Sequence[Part], items: Sequence[bytes], order: Sequence[int]
) -> MediaCounter:
    """A ``MediaCounter`` for a prompt whose ``text`` (``[img-N]`` tags in place) the projector
    tokenized into ``parts`` with ``items``, the media in ``order`` (``media.place_markers``).
    Blocking: it tokenizes ``text``."""
    cells = [0] * len(order)
    for i, n in zip(order, media_cells(parts, items), strict=True):
        cells[i] = n
    counter = MediaCounter(loaded, cells)
    counter.calibrate(text, len(cell_keys(parts)))
    return counter
