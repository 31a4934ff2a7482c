"""A GGUF file's header (its metadata and tensor table) read without its weights, shared by the
store (what ``/api/show`` and ``/api/tags`` say) and the engine (fitting layers to memory before a load).

``gguf.GGUFReader`` builds an object per array element: 10 s for a 150k-token vocabulary
(Qwen's), and a load fitted on GPUs read the file that way two to six times. This reads the header
itself, with the ``gguf`` package's type tables, and skips arrays longer than asked for.
"""

from __future__ import annotations

import math
import mmap
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

A = TypeVar("A")
T = TypeVar("T")

GGUF_MAGIC = b"GGUF"
_SCALARS: dict[GGUFValueType, str] = {
    GGUFValueType.UINT8: "<B",
    GGUFValueType.INT8: "<b",
    GGUFValueType.UINT16: "<H",
    GGUFValueType.INT16: "<h",
    GGUFValueType.UINT32: "<I",
    GGUFValueType.INT32: "<i",
    GGUFValueType.FLOAT32: "<f",
    GGUFValueType.BOOL: "<?",
    GGUFValueType.UINT64: "<Q",
    GGUFValueType.INT64: "<q",
    GGUFValueType.FLOAT64: "<d",
}
# GGUF writers nest no arrays in practice (llama.cpp reads none): a deeper header is crafted, and
# would exhaust the stack.
MAX_ARRAY_DEPTH = 8


class GGUFError(ValueError):
    """Not a GGUF file, or a truncated/corrupt header."""


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of the table: its dimensions in GGUF's order (fastest first) and element type."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int

    @property
    def n_elements(self) -> int:
        return math.prod(self.shape)

    @property
    def n_bytes(self) -> int:
        """Bytes of its data (0 for a type this ``gguf`` package does not know)."""
        try:
            block, size = GGML_QUANT_SIZES[GGMLQuantizationType(self.ggml_type)]
        except (KeyError, ValueError):
            return 0
        return self.n_elements * size // block


@dataclass(frozen=True)
class Header:
    """The metadata (arrays longer than the read kept are empty lists), where each value lies in
    the file (its bytes, for a look into a skipped array), and the tensor table."""

    kv: dict[str, Any]
    spans: dict[str, tuple[int, int]]
    tensors: tuple[TensorEntry, ...]

    def architecture(self) -> str | None:
        arch = self.kv.get("general.architecture")
        return arch if isinstance(arch, str) else None


class _Cursor:
    def __init__(self, buf: mmap.mmap | bytes, keep: int) -> None:
        self.buf = buf
        self.pos = 0
        self.keep = keep

    def unpack(self, fmt: str) -> Any:
        try:
            (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        except struct.error as exc:
            raise GGUFError("truncated GGUF header") from exc
        self.pos += struct.calcsize(fmt)
        return value

    def skip(self, n: int) -> None:
        """Move past ``n`` bytes, which must lie in the buffer (a crafted length may be 2**63)."""
        if self.pos + n > len(self.buf):
            raise GGUFError("truncated GGUF header")
        self.pos += n

    def string(self) -> str:
        n = self.unpack("<Q")
        start = self.pos
        self.skip(n)
        return self.buf[start : self.pos].decode("utf-8", errors="replace")

    def value_type(self) -> GGUFValueType:
        raw = self.unpack("<I")
        try:
            return GGUFValueType(raw)
        except ValueError as exc:
            raise GGUFError(f"unknown GGUF value type {raw}") from exc

    def value(self, vtype: GGUFValueType, keep: bool = False, depth: int = 0) -> Any:
        if vtype == GGUFValueType.STRING:
            return self.string()
        if vtype == GGUFValueType.ARRAY:
            return self.array(keep, depth + 1)
        value = self.unpack(_SCALARS[vtype])
        # Shortest float32 text (1e-06, not 9.99999997e-07), as Go marshals a float32.
        return float(str(np.float32(value))) if vtype == GGUFValueType.FLOAT32 else value

    def array(self, keep: bool, depth: int) -> list[Any]:
        if depth > MAX_ARRAY_DEPTH:
            raise GGUFError(f"GGUF arrays nested more than {MAX_ARRAY_DEPTH} deep")
        etype = self.value_type()
        count = self.unpack("<Q")
        keep = keep or count <= self.keep
        if etype in _SCALARS:
            dtype = np.dtype(_SCALARS[etype])
            start = self.pos
            self.skip(dtype.itemsize * count)
            return np.frombuffer(self.buf, dtype, count, start).tolist() if keep else []
        if etype == GGUFValueType.STRING and not keep:
            for _ in range(count):
                self.skip(self.unpack("<Q"))
            return []
        items = [self.value(etype, keep, depth) for _ in range(count)]
        return items if keep else []


def read_header(buf: mmap.mmap | bytes, keep: int) -> Header:
    """The header at the start of ``buf``; arrays of more than ``keep`` elements left empty."""
    cur = _Cursor(buf, keep)
    if buf[:4] != GGUF_MAGIC:
        raise GGUFError("invalid file magic")
    cur.pos = len(GGUF_MAGIC)
    version = cur.unpack("<I")
    if version not in (2, 3):
        raise GGUFError(f"unsupported GGUF version {version}")
    n_tensors = cur.unpack("<Q")
    n_kv = cur.unpack("<Q")
    kv: dict[str, Any] = {}
    spans: dict[str, tuple[int, int]] = {}
    for _ in range(n_kv):
        key = cur.string()
        vtype = cur.value_type()
        start = cur.pos
        kv[key] = cur.value(vtype)
        spans[key] = (start, cur.pos)
    tensors = []
    for _ in range(n_tensors):
        name = cur.string()
        dims = tuple(cur.unpack("<Q") for _ in range(cur.unpack("<I")))
        ggml_type = cur.unpack("<I")
        cur.unpack("<Q")  # data offset
        tensors.append(TensorEntry(name, dims, ggml_type))
    return Header(kv, spans, tuple(tensors))


def over_file(path: str | Path, read: Callable[[mmap.mmap, A], T], arg: A) -> T:
    """``read`` over the file's bytes (mapped, not read into memory), not cached: for a result
    too big to keep (a whole vocabulary) that is wanted once."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        return read(buf, arg)


def per_file(read: Callable[[mmap.mmap, A], T]) -> Callable[[Path, A], T]:
    """``read`` over a file's bytes, its result reused while the file's mtime and size stay the
    same (the last 32 files and arguments)."""

    @lru_cache(maxsize=32)
    def cached(path: str, mtime_ns: int, size: int, arg: A) -> T:
        return over_file(path, read, arg)

    def reused(path: Path, arg: A) -> T:
        st = Path(path).stat()
        return cached(str(path), st.st_mtime_ns, st.st_size, arg)

    return reused


# ``read_header`` of the file at a path, arrays of more than ``keep`` elements left empty.
file_header = per_file(read_header)
