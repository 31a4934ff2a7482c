"""The GGUF header read without ``gguf.GGUFReader`` (``gguf_header``): the same metadata and tensor
sizes as the reference reader, long arrays skipped, and a file changed in place read again."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGUFValueType

from cllm_ollama.gguf_header import file_header
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
