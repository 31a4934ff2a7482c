"""Go's ``%q``, written once (``gostrconv``), against outputs of Go's own ``strconv.Quote``
(its quote_test.go and the runes its ``unicode.IsPrint`` refuses)."""

from __future__ import annotations

import pytest

from cllm_ollama.chatformat.gotemplate import render_go_template
from cllm_ollama.gostrconv import go_quote

# (input, strconv.Quote(input)) as Go prints them.
GO_QUOTED = [
    ("plain", '"plain"'),
    ("", '""'),
    ("\a\b\f\r\n\t\v", r'"\a\b\f\r\n\t\v"'),
    ("\\", r'"\\"'),
    ('"Fran & Freddie\'s Diner\t☺"', r'"\"Fran & Freddie' + "'" + r's Diner\t☺\""'),
    ("\u263a", '"☺"'),
    ("\U0010ffff", r'"\U0010ffff"'),
    ("\x04", r'"\x04"'),
    ("\x00\x1f\x7f", r'"\x00\x1f\x7f"'),
    ("!\u00a0!\u2000!\u3000!", r'"!\u00a0!\u2000!\u3000!"'),
    ("\u0085\u00ad\u2028\ufeff", r'"\u0085\u00ad\u2028\ufeff"'),
    ("\u200b\U000e0001", r'"\u200b\U000e0001"'),
    ("é 😀 <&>", '"é 😀 <&>"'),
    ("\ufffd", '"\ufffd"'),
]


@pytest.mark.parametrize(("text", "quoted"), GO_QUOTED)
def test_go_quote_matches_strconv_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


def test_a_lone_surrogate_is_quoted_as_go_decodes_it() -> None:
    # Go's JSON decoder reads "\ud800" as U+FFFD; its strings cannot hold a surrogate.
    assert go_quote("a\ud800b") == '"a\ufffdb"'


@pytest.mark.parametrize(("text", "quoted"), GO_QUOTED)
def test_template_printf_q_is_strconv_quote(text: str, quoted: str) -> None:
    assert render_go_template('{{ printf "%q" .S }}', {"S": text}) == quoted
