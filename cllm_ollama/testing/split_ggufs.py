"""A GGUF in shards as llama.cpp's ``gguf-split`` writes them (``NAME-00001-of-00003.gguf``, each
with ``split.no``, ``split.count`` and ``split.tensors.count``): how large models are published,
and what ``ollama create`` merges back into one file."""

from __future__ import annotations

from pathlib import Path

import gguf

from . import core_ggufs as gg


def split_gguf(src: Path, folder: Path, n_shards: int) -> tuple[Path, ...]:
    """``src``'s metadata and tensors in ``n_shards`` files in ``folder`` named as gguf-split names
    them, the tensors spread evenly (gguf-py's own split writer), in shard order."""
    reader = gguf.GGUFReader(src)
    arch = str(reader.fields[gguf.Keys.General.ARCHITECTURE].contents())
    per_shard = -(-len(reader.tensors) // n_shards)
    writer = gguf.GGUFWriter(folder / f"{src.stem}.gguf", arch, split_max_tensors=per_shard)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue  # written by the writer itself
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), value_type, sub_type=sub_type)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, tensor.data, raw_shape=tensor.data.shape, raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return tuple(sorted(folder.glob(f"{src.stem}-*-of-*.gguf")))


def write_qwen3_split(folder: Path, n_shards: int = 2) -> tuple[Path, ...]:
    """A tiny Qwen3 (``write_qwen3``) in ``n_shards`` shards in ``folder``, and only those."""
    folder.mkdir(parents=True, exist_ok=True)
    whole = gg.write_qwen3(folder / "qwen3-split.gguf")
    try:
        return split_gguf(whole, folder, n_shards)
    finally:
        whole.unlink()
