"""Malformed bodies get Go's decoder words, as Ollama's handlers answer them; a body's first value is
what is read, as Go's json.Decoder reads it (what follows is ignored)."""

from __future__ import annotations

import pytest
import zstandard
from starlette.testclient import TestClient

from cllm_ollama.api.go_json import GoSyntaxError, first_value
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"x", "invalid character 'x' looking for beginning of value"),
        (b'{"model":"m"', "unexpected EOF"),
        (b'{"model":nul', "unexpected EOF"),
        (b"[", "unexpected EOF"),
        (b'{"a" 1}', "invalid character '1' after object key"),
        (b'{"a":1 "b":2}', "invalid character '\"' after object key:value pair"),
        (b"[1 2]", "invalid character '2' after array element"),
        (b"{a:1}", "invalid character 'a' looking for beginning of object key string"),
        (b"{'a':1}", "invalid character '\\'' looking for beginning of object key string"),
        (b'{"a":1,}', "invalid character '}' looking for beginning of object key string"),
        (b"[1,]", "invalid character ']' looking for beginning of value"),
        (b'{"a":tru}', "invalid character '}' in literal true (expecting 'e')"),
        (b'{"a":falsy}', "invalid character 'y' in literal false (expecting 'e')"),
        (b'{"a":"\x01"}', "invalid character '\\x01' in string literal"),
        (b'{"a":"\\q"}', "invalid character 'q' in string escape code"),
        (b'{"a":"\\u12g4"}', "invalid character 'g' in \\u hexadecimal character escape"),
        (b'{"a":-x}', "invalid character 'x' in numeric literal"),
        (b'{"a":1.}', "invalid character '}' after decimal point in numeric literal"),
        (b'{"a":1e}', "invalid character '}' in exponent of numeric literal"),
        (b'{"a":01}', "invalid character '1' after object key:value pair"),
        (b"\xc3\xa9", "invalid character '\u00c3' looking for beginning of value"),  # a byte, as a rune
        (b"[" * 10001, "invalid character '[' exceeded max depth"),
    ],
)
def test_gos_words_for_a_malformed_body(body: bytes, error: str) -> None:
    with pytest.raises(GoSyntaxError) as raised:
        first_value(body)
    assert str(raised.value) == error


@pytest.mark.parametrize(
    ("body", "value"),
    [
        (b'{"a":1} xyz', b'{"a":1}'),
        (b'  {"a": [1, {"b": null}]}{}', b'  {"a": [1, {"b": null}]}'),
        (b"123abc", b"123"),
        (b"true]", b"true"),
        (b'"s"x', b'"s"'),
        (b"-1.5e+3", b"-1.5e+3"),
    ],
)
def test_the_first_value_is_what_is_read(body: bytes, value: bytes) -> None:
    assert first_value(body) == value


def test_over_http_ollamas_answers(store_settings: Settings) -> None:
    with TestClient(create_app(store_settings), base_url="http://localhost") as client:
        cut = client.post("/api/show", content=b'{"model": "nope"')
        assert (cut.status_code, cut.json()) == (400, {"error": "unexpected EOF"})
        # What follows the first value is not read: the lookup happens, and says not found.
        trailing = client.post("/api/show", content=b'{"model": "nope"} and more')
        assert (trailing.status_code, trailing.json()) == (404, {"error": "model 'nope:latest' not found"})
        # Bytes that are not UTF-8 inside a string are replaced, as Go's decoder does.
        latin = client.post("/api/show", content=b'{"model": "nope", "system": "caf\xe9"}')
        assert (latin.status_code, latin.json()) == (404, {"error": "model 'nope:latest' not found"})
        bad = client.post("/v1/chat/completions", content=b"{oops")
        assert bad.status_code == 400
        assert bad.json()["error"]["message"] == "invalid character 'o' looking for beginning of object key string"
        # A number past float64's range is refused, as Go's decoder refuses it, where Python would
        # read inf (or an exact integer) and fail later with a 500.
        for number in (b"1e400", b"-1e400", b"1" + b"0" * 400):
            huge = client.post("/api/chat", content=b'{"model": "nope", "options": {"temperature": %s}}' % number)
            error = f"json: cannot unmarshal number {number.decode()} into Go value of type float64"
            assert (huge.status_code, huge.json()) == (400, {"error": error})
        tiny = client.post("/api/show", content=b'{"model": "nope", "options": {"temperature": 1e-400}}')
        assert tiny.status_code == 404  # underflows to 0, as Go reads it


def test_a_zstd_body_is_read_as_ollama_reads_codexs(store_settings: Settings) -> None:
    """Codex compresses its /v1/responses bodies with zstd (Content-Encoding), which Ollama reads."""
    zstd = zstandard.ZstdCompressor()
    headers = {"Content-Encoding": "zstd", "Content-Type": "application/json"}
    with TestClient(create_app(store_settings), base_url="http://localhost") as client:
        body = zstd.compress(b'{"model": "nope", "input": "Hi"}')
        found = client.post("/v1/responses", content=body, headers=headers)
        assert found.status_code == 404  # decoded: the model was looked up
        broken = client.post("/v1/responses", content=b"not zstd", headers=headers)
        assert broken.status_code == 400 and broken.json()["error"]["message"] == "failed to decompress zstd body"
        bomb = zstd.compress(b'{"model": "nope", "input": "' + b"a" * (21 << 20) + b'"}')
        big = client.post("/v1/responses", content=bomb, headers=headers)
        assert big.status_code == 400 and big.json()["error"]["message"] == "http: request body too large"
