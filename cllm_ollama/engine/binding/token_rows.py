"""A model's input embedding rows for tokens, read on the host, so that tokens can ride in an
embedding batch beside a media piece's rows.

A ``llama_batch`` holds token ids or embeddings, never both, and llama.cpp cuts a split-KV batch
into ubatches with as many rows of every sequence (``split_equal``): a media piece in a call of
its own is a second pass over the weights in the step of every running stream, which on a small
model or a CPU costs as much as the streams' whole step. A one-row piece can instead share the
streams' call if their tokens come as embeddings too: each is the row of ``token_embd.weight``
that llama.cpp's graph would fetch (``build_inp_embd``: ``ggml_get_rows``, which dequantizes with
the type's own ``to_float``, the function used here, so the rows are the same floats).

Only architectures whose graph does nothing else with token input qualify (``RIDES``): Gemma
scales token rows and not embedding rows, DeepSeek, GLM and Qwen 3.5 take token-only paths, and
Qwen3-VL's input rows are wider than ``n_embd`` (deepstack). A LoRA adapter on the embedding
table would be skipped by the embedding path: the caller does not ride with adapters set.
"""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .core import Model, ggml_library

# general.architecture values whose graph treats an embedding row as the token it stands for.
RIDES = frozenset({"llama", "qwen2", "qwen2vl", "qwen3", "mistral3"})
_TENSOR = b"token_embd.weight"
_F32 = 0  # ggml_type: a table stored as float32 has no to_float (its rows are read as they are)


class _GgufInitParams(ctypes.Structure):
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]


class _TypeTraits(ctypes.Structure):
    # ggml.h's struct ggml_type_traits, up to the one field read here.
    _fields_ = [
        ("type_name", ctypes.c_char_p),
        ("blck_size", ctypes.c_int64),
        ("blck_size_interleave", ctypes.c_int64),
        ("type_size", ctypes.c_size_t),
        ("is_quantized", ctypes.c_bool),
        ("to_float", ctypes.c_void_p),
    ]


_ToFloat = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def _base() -> ctypes.CDLL:
    lib = ggml_library("ggml-base")
    lib.gguf_init_from_file.restype = ctypes.c_void_p
    lib.gguf_init_from_file.argtypes = [ctypes.c_char_p, _GgufInitParams]
    lib.gguf_free.argtypes = [ctypes.c_void_p]
    lib.gguf_free.restype = None
    lib.gguf_find_tensor.restype = ctypes.c_int64
    lib.gguf_find_tensor.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    for name in ("gguf_get_tensor_offset", "gguf_get_tensor_size"):
        getattr(lib, name).restype = ctypes.c_size_t
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.gguf_get_data_offset.restype = ctypes.c_size_t
    lib.gguf_get_data_offset.argtypes = [ctypes.c_void_p]
    lib.gguf_get_tensor_type.restype = ctypes.c_int
    lib.gguf_get_tensor_type.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.ggml_row_size.restype = ctypes.c_size_t
    lib.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
    lib.ggml_get_type_traits.restype = ctypes.POINTER(_TypeTraits)
    lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
    return lib


class TokenRows:
    """``token_embd.weight`` of one GGUF, mapped read-only; ``rows`` dequantizes the rows of tokens.
    Owns the mapping: ``close`` releases it."""

    def __init__(self, path: Path, n_vocab: int, n_embd: int) -> None:
        """Raises ``ValueError`` where the table cannot be read so (no such tensor in this file, a
        split model, a type without a host dequantizer, a size that is not ``n_vocab`` rows)."""
        lib = _base()
        ctx = lib.gguf_init_from_file(str(path).encode(), _GgufInitParams(True, None))
        if not ctx:
            raise ValueError(f"{path.name} could not be read as a GGUF")
        try:
            tid = lib.gguf_find_tensor(ctx, _TENSOR)
            if tid < 0:
                raise ValueError(f"{path.name} has no {_TENSOR.decode()}")
            offset = lib.gguf_get_data_offset(ctx) + lib.gguf_get_tensor_offset(ctx, tid)
            size = lib.gguf_get_tensor_size(ctx, tid)
            kind = lib.gguf_get_tensor_type(ctx, tid)
        finally:
            lib.gguf_free(ctx)
        to_float = lib.ggml_get_type_traits(kind).contents.to_float
        row_bytes = lib.ggml_row_size(kind, n_embd)
        # A table may have more rows than the vocabulary has tokens (padded for the kernels).
        if not (to_float or kind == _F32) or size % row_bytes or size // row_bytes < n_vocab:
            raise ValueError(f"{path.name}'s {_TENSOR.decode()} (type {kind}, {size} bytes) is no table of rows here")
        self.n_embd = n_embd
        self._row_bytes = row_bytes
        self._n_vocab = n_vocab
        self._to_float = _ToFloat(to_float) if to_float else None  # None: stored as float32
        with open(path, "rb") as f:
            self._map: mmap.mmap | None = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        if offset + size > len(self._map):
            self.close()
            raise ValueError(f"{path.name} ends inside its {_TENSOR.decode()}")
        self._table = np.frombuffer(self._map, dtype=np.uint8, count=size, offset=offset)
        self._base = self._table.ctypes.data
        self._floats = self._table.view(np.float32).reshape(-1, n_embd) if kind == _F32 else None

    def rows(self, tokens: Sequence[int]) -> np.ndarray:
        """The embedding rows of ``tokens``, ``(len(tokens), n_embd)`` float32."""
        if any(not 0 <= token < self._n_vocab for token in tokens):
            raise ValueError(f"a token of {list(tokens)} is outside the vocabulary")
        if self._to_float is None:
            assert self._floats is not None
            return self._floats[list(tokens)]
        out = np.empty((len(tokens), self.n_embd), dtype=np.float32)
        base, step, width = self._base, self._row_bytes, out.strides[0]
        dst = out.ctypes.data
        for i, token in enumerate(tokens):
            self._to_float(base + token * step, dst + i * width, self.n_embd)
        return out

    def close(self) -> None:
        if self._map is not None:
            self._table = np.empty(0, dtype=np.uint8)  # the views go before the mapping they read
            self._floats = None
            self._map.close()
            self._map = None


def token_rows(model: Model) -> TokenRows | None:
    """The token rows of ``model`` where its tokens can ride as embeddings (``RIDES``), else None."""
    if model.meta("general.architecture") not in RIDES:
        return None
    try:
        return TokenRows(model.path, model.n_vocab, model.n_embd)
    except (ValueError, OSError, AttributeError):  # no such table; no libggml-base, or not these symbols
        return None
