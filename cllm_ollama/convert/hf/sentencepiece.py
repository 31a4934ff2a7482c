"""SentencePiece's ``tokenizer.model`` read without the sentencepiece package: the file is a protobuf
``ModelProto`` whose field 1 repeats ``SentencePiece {string piece = 1; float score = 2; Type type = 3}``
(``sentencepiece_model.proto``), and those three are all llama.cpp's vocabulary needs."""

from __future__ import annotations

import struct
from collections.abc import Iterator

from .errors import ImportRefused

_NORMAL = 1  # SentencePiece's types are llama.cpp's: NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4, UNUSED 5, BYTE 6
_BAD = "tokenizer.model is not a SentencePiece model"


def pieces(data: bytes) -> list[tuple[str, float, int]]:
    """Each piece's text, score and type, by id."""
    out = []
    for field, value in _fields(data):
        if field != 1 or not isinstance(value, bytes):
            continue
        piece, score, kind = "", 0.0, _NORMAL
        for sub, item in _fields(value):
            if sub == 1 and isinstance(item, bytes):
                try:
                    piece = item.decode("utf-8")
                except UnicodeDecodeError:
                    raise ImportRefused(f"{_BAD} (a piece is not UTF-8)") from None
            elif sub == 2 and isinstance(item, float):
                score = item
            elif sub == 3 and isinstance(item, int):
                kind = item
        if not 1 <= kind <= 6:
            raise ImportRefused(f"{_BAD} (a piece of type {kind})")
        out.append((piece, score, kind))
    if not out:
        raise ImportRefused(f"{_BAD} (it has no pieces)")
    return out


def _fields(data: bytes) -> Iterator[tuple[int, int | float | bytes]]:
    """A message's fields in order: varints as ints, 32-bit ones as floats, length-delimited as bytes."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        field, wire = key >> 3, key & 7
        value: int | float | bytes
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 1:
            value, i = data[i : i + 8], i + 8
        elif wire == 2:
            n, i = _varint(data, i)
            value, i = data[i : i + n], i + n
        elif wire == 5:
            value, i = (struct.unpack("<f", data[i : i + 4])[0] if i + 4 <= len(data) else 0.0), i + 4
        else:
            raise ImportRefused(_BAD)
        if i > len(data):
            raise ImportRefused(f"{_BAD} (it ends inside a field)")
        yield field, value


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ImportRefused(f"{_BAD} (it ends inside a number)")
        byte = data[i]
        value |= (byte & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if not byte & 0x80:
            return value, i
