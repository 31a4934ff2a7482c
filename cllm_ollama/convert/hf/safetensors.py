"""Safetensors files read as they lie on disk: a JSON header, then each tensor's bytes, memory-mapped
so that a model of many gigabytes is read one tensor at a time (Ollama's ``reader_safetensors.go``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ImportRefused

# What a header's ``dtype`` is read as; BF16 as its raw 16 bits, which numpy has no type for.
DTYPES: dict[str, np.dtype[Any]] = {
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(np.uint16),
    # Integer buffers some checkpoints carry (BERT's position_ids): read, never converted.
    "I64": np.dtype(np.int64),
    "I32": np.dtype(np.int32),
    # MXFP4 weights' blocks and scales (gpt-oss's), repacked as they are (``mxfp4``).
    "U8": np.dtype(np.uint8),
}
FLOATS = ("F32", "F16", "BF16")
_MAX_HEADER = 100 << 20  # safetensors' own limit on the JSON header


@dataclass(frozen=True)
class SourceTensor:
    """One tensor of a checkpoint: its name and dtype there, and its data, a view of the mapped file."""

    name: str
    dtype: str
    data: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    def with_data(self, data: np.ndarray) -> SourceTensor:
        """The same tensor, its data a view of this one's (a part of it, transposed)."""
        return SourceTensor(self.name, self.dtype, data)

    def require_float(self) -> None:
        """``ImportRefused`` for an integer tensor where weights are wanted."""
        if self.dtype not in FLOATS:
            raise ImportRefused(f"tensor {self.name} is {self.dtype}; cllm converts F32, F16 and BF16 weights")


def to_f32(values: np.ndarray, dtype: str) -> np.ndarray:
    """``values`` (a source tensor's data, or rows of it) as F32: BF16's raw bits widened."""
    if dtype == "BF16":
        return (values.astype(np.uint32) << 16).view(np.float32)
    return values.astype(np.float32, copy=False)


def read(path: Path, name: str) -> list[SourceTensor]:
    """The tensors of the ``.safetensors`` file ``name`` at ``path``, in its header's order;
    ``ImportRefused`` for a file that is no safetensors file, or holds a type cllm does not convert."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if not 2 <= n <= min(_MAX_HEADER, size - 8):
            raise ImportRefused(f"{name}: not a safetensors file")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, ValueError):
            raise ImportRefused(f"{name}: not a safetensors file (its header is no JSON)") from None
    if not isinstance(header, dict):
        raise ImportRefused(f"{name}: not a safetensors file (its header is no JSON object)")
    mapped = np.memmap(path, dtype=np.uint8, mode="r") if size > 8 + n else np.zeros(0, np.uint8)
    tensors = []
    for tensor, info in header.items():
        if tensor != "__metadata__":
            tensors.append(_tensor(name, tensor, info, mapped, 8 + n))
    return tensors


def _tensor(file: str, name: str, info: Any, mapped: np.ndarray, base: int) -> SourceTensor:
    try:
        dtype, shape, (begin, end) = info["dtype"], [int(d) for d in info["shape"]], info["data_offsets"]
        begin, end = int(begin), int(end)
    except (KeyError, TypeError, ValueError):
        raise ImportRefused(f"{file}: tensor {name} has no valid dtype, shape and data_offsets") from None
    if dtype not in DTYPES:
        raise ImportRefused(
            f"{file}: tensor {name} is {dtype}; cllm converts F32, F16 and BF16 checkpoints (dequantize it first)"
        )
    itemsize = DTYPES[dtype].itemsize
    count = int(np.prod(shape, dtype=np.int64))
    if (
        min(shape, default=1) < 0
        or not 0 <= begin <= end
        or end - begin != count * itemsize
        or base + end > len(mapped)
    ):
        raise ImportRefused(f"{file}: tensor {name}'s data_offsets do not fit its shape or the file")
    data = mapped[base + begin : base + end].view(DTYPES[dtype]).reshape(shape or [1])
    return SourceTensor(name, dtype, data)
