"""The GGUF header read without ``gguf.GGUFReader`` (``gguf_header``): the same metadata and tensor
sizes as the reference reader, long arrays skipped, a file changed in place read again, a verbose
read (the whole vocabulary) never cached, and a crafted header refused as a bad GGUF."""

from __future__ import annotations

import gc
import os
import struct
import weakref
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader, GGUFValueType

from cllm_ollama.gguf_header import GGUF_MAGIC, MAX_ARRAY_DEPTH, GGUFError, file_header, read_header
from cllm_ollama.store.gguf_info import gguf_info
from cllm_ollama.testing.ggufs import write_jamba


def reference_value(reader: GGUFReader, key: str) -> object:
    field = reader.fields[key]
    if field.types[0] == GGUFValueType.ARRAY:
        return [field.parts[i][0].item() for i in field.data]
    if field.types[0] == GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode()
    value = field.parts[field.data[0]][0]
    return float(str(np.float32(value))) if field.types[0] == GGUFValueType.FLOAT32 else value.item()


def test_the_header_says_what_the_reference_reader_says(tmp_path: Path) -> None:
    path = write_jamba(tmp_path / "m.gguf")  # per-layer head counts: an array beside the scalars
    reader = GGUFReader(path)
    header = file_header(path, 64)
    assert [(t.name, t.shape, t.ggml_type, t.n_bytes) for t in header.tensors] == [
        (t.name, tuple(int(d) for d in t.shape), int(t.tensor_type), int(t.n_bytes)) for t in reader.tensors
    ]
    arrays = {k for k, f in reader.fields.items() if f.types[0] == GGUFValueType.ARRAY}
    per_layer = "jamba.attention.head_count_kv"
    assert per_layer in arrays and header.kv[per_layer] == reference_value(reader, per_layer)
    for key in reader.fields:
        if key.startswith("GGUF."):
            continue  # the reference reader's own header fields
        expected = reference_value(reader, key)
        if key in arrays and len(reader.fields[key].data) > 64:
            assert header.kv[key] == [], key  # the vocabulary: skipped, its bytes still located
            start, end = header.spans[key]
            assert end - start > len(reader.fields[key].data)
        else:
            assert header.kv[key] == expected, key
    assert header.architecture() == "jamba" and header.kv["jamba.block_count"] == len(header.kv[per_layer])


def test_a_file_rewritten_in_place_is_read_again(tmp_path: Path) -> None:
    path = write_jamba(tmp_path / "m.gguf")
    first = file_header(path, 64)
    assert file_header(path, 64) is first
    write_jamba(path, seed=1)
    os.utime(path, ns=(1, 1))  # a new mtime even within the clock's resolution
    assert file_header(path, 64) is not first


def test_a_verbose_read_is_not_kept(tiny_gguf: Path) -> None:
    """A verbose read holds every array (~40 MB for a 128k-token vocabulary): each pull or create
    of a model makes one, which a cache would keep long after, the model deleted or not."""
    info = gguf_info(tiny_gguf, verbose=True)
    assert info.tensors and len(info.model_info["tokenizer.ggml.tokens"]) > 64  # the long arrays are there
    read = weakref.ref(info)
    del info
    gc.collect()
    assert read() is None  # nothing kept it
    assert gguf_info(tiny_gguf) is gguf_info(tiny_gguf)  # a brief read (long arrays skipped) is reused


def one_key_gguf(vtype: GGUFValueType, payload: bytes) -> bytes:
    """A version 3 GGUF without tensors whose one key, ``k``, holds ``payload`` of type ``vtype``."""
    return GGUF_MAGIC + struct.pack("<IQQQ", 3, 0, 1, 1) + b"k" + struct.pack("<I", vtype) + payload


def nested_arrays(depth: int) -> bytes:
    """An array of one array of ... (``depth`` arrays in all) of no bytes, as a key's value."""
    return struct.pack("<IQ", GGUFValueType.ARRAY, 1) * (depth - 1) + struct.pack("<IQ", GGUFValueType.UINT8, 0)


# Headers of ~100 bytes that a reader trusting them answers with OverflowError or RecursionError.
CRAFTED = {
    # Ten strings, the first 2**63 bytes long: past the buffer, where the skip of a long array must stop.
    "huge string": one_key_gguf(GGUFValueType.ARRAY, struct.pack("<IQQ", GGUFValueType.STRING, 10, 2**63)),
    "deep arrays": one_key_gguf(GGUFValueType.ARRAY, nested_arrays(3000)),
}


@pytest.mark.parametrize("keep", [0, 1 << 62])
@pytest.mark.parametrize(
    ("crafted", "error"),
    [
        ("huge string", "^truncated GGUF header$"),
        ("deep arrays", f"^GGUF arrays nested more than {MAX_ARRAY_DEPTH} deep$"),
    ],
)
def test_a_crafted_header_is_a_gguf_error(crafted: str, error: str, keep: int) -> None:
    with pytest.raises(GGUFError, match=error):
        read_header(CRAFTED[crafted], keep)


def test_arrays_nested_up_to_the_limit_are_read() -> None:
    value: list[object] = []
    for _ in range(MAX_ARRAY_DEPTH - 1):
        value = [value]
    assert read_header(one_key_gguf(GGUFValueType.ARRAY, nested_arrays(MAX_ARRAY_DEPTH)), 64).kv["k"] == value
    with pytest.raises(GGUFError, match="nested"):
        read_header(one_key_gguf(GGUFValueType.ARRAY, nested_arrays(MAX_ARRAY_DEPTH + 1)), 64)
