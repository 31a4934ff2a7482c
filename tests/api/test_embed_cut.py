"""An embedding input longer than the context is cut in its text, the model's special tokens kept
at both ends (as Ollama cuts the text and tokenizes it again)."""

from __future__ import annotations

import pytest

from cllm_ollama.api.ollama.embed import cut_text

BOS, EOS = 1, 2
TEXT = list(range(10, 20))


@pytest.mark.parametrize(
    ("tokens", "limit", "cut"),
    [
        ([BOS, *TEXT, EOS], 5, [BOS, 10, 11, 12, EOS]),  # a last-token pooler keeps its end-of-text token
        ([BOS, *TEXT], 4, [BOS, 10, 11, 12]),
        ([*TEXT, EOS], 3, [10, 11, EOS]),
        (TEXT, 2, [10, 11]),
        ([BOS, *TEXT, EOS], 2, [BOS, 10]),  # no room for any text beside both: the plain cut
    ],
)
def test_the_cut_keeps_the_special_tokens(tokens: list[int], limit: int, cut: list[int]) -> None:
    assert cut_text(tokens, TEXT, limit) == cut


def test_tokens_that_do_not_hold_the_text_are_cut_plainly() -> None:
    assert cut_text([BOS, 7, 8, 9, EOS], TEXT, 3) == [BOS, 7, 8]
