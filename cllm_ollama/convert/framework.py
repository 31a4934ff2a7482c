"""The converter's shared machinery: what a layout check reads (``Header``), what it writes
(``Rewrite`` of ``Tensor``s, streamed by ``rewrite``), and the helpers several families' maps
share (tensor and key renaming, CLIP projector keys, fused and promoted tensors).

The store never loads a model: this reads and writes GGUF headers and tensor bytes only.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

_F32 = GGUFValueType.FLOAT32
_U32 = GGUFValueType.UINT32
_STR = GGUFValueType.STRING
_BOOL = GGUFValueType.BOOL
_ARRAY = GGUFValueType.ARRAY
_F32_TYPE = GGMLQuantizationType.F32

KV = dict[str, tuple[Any, GGUFValueType]]  # keys a rewrite sets: name -> (value, GGUF type)


class LayoutRefused(ValueError):
    """A GGUF laid out for Ollama's Go engine that cllm's llama.cpp cannot load and cllm does not map."""


def refusal(arch: str, why: str) -> str:
    return f"architecture \"{arch}\" written by Ollama's converter is not supported by cllm's llama.cpp ({why})"


class HeaderSource(Protocol):
    """A GGUF header as the store's ``gguf_info(path, verbose=True)`` reads it (kept structural so
    that the converter does not import the store)."""

    @property
    def architecture(self) -> str: ...

    @property
    def model_info(self) -> dict[str, Any]: ...

    @property
    def tensors(self) -> Sequence[Mapping[str, Any]]: ...


@dataclass(frozen=True)
class Header:
    """What the layout checks read: the metadata and each tensor's ggml shape."""

    arch: str
    kv: dict[str, Any]
    shapes: dict[str, list[int]]
    types: dict[str, str] = field(default_factory=dict)  # each tensor's ggml type name ("F32", "MXFP4", "4")

    @classmethod
    def of(cls, info: HeaderSource) -> Header:
        """From ``gguf_info(path, verbose=True)`` (tensors are only listed when read verbosely)."""
        return cls(
            info.architecture,
            info.model_info,
            {t["name"]: t["shape"] for t in info.tensors},
            {t["name"]: t["type"] for t in info.tensors},
        )

    def has(self, key: str) -> bool:
        return f"{self.arch}.{key}" in self.kv

    def head_size(self) -> int:
        """A text model's head width: its key length, else its width over its heads."""
        heads = self.kv.get(f"{self.arch}.attention.head_count") or 1
        return int(
            self.kv.get(f"{self.arch}.attention.key_length")
            or (self.kv.get(f"{self.arch}.embedding_length") or 0) // heads
        )

    def any_tensor(self, *prefixes: str) -> bool:
        return any(name.startswith(prefixes) for name in self.shapes)

    def any_tensor_ending(self, suffix: str) -> bool:
        return any(name.endswith(suffix) for name in self.shapes)

    def rows(self, name: str) -> int | None:
        """A matrix's second ggml dimension (a vocabulary's size for an embedding)."""
        shape = self.shapes.get(name)
        return shape[1] if shape and len(shape) > 1 else None

    def first_rows(self, name: str) -> int | None:
        """The second ggml dimension of the first block's ``name`` that has one."""
        for key, shape in self.shapes.items():
            if re.fullmatch(r"blk\.\d+\." + re.escape(name), key) and len(shape) > 1:
                return shape[1]
        return None


Marker = Callable[[Header], bool]


def always(h: Header) -> bool:
    """An architecture name only Ollama's converter writes."""
    return True


@dataclass(frozen=True)
class Tensor:
    """One tensor of the GGUF being written: its ggml type, its data's numpy shape and dtype as
    ``GGUFReader`` gives them (rows first; bytes per row for quantized types), and ``data``, which
    produces the bytes only when they are written: a view of the memory-mapped source, or computed
    from it (split, merged, converted), so a 13 GB model is never held in memory whole."""

    name: str
    kind: GGMLQuantizationType
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    data: Callable[[], np.ndarray]

    @classmethod
    def of(cls, name: str, kind: GGMLQuantizationType, array: np.ndarray) -> Tensor:
        return cls(name, kind, tuple(array.shape), array.dtype, lambda: array)

    def renamed(self, name: str) -> Tensor:
        return Tensor(name, self.kind, self.shape, self.dtype, self.data)

    def take(self, part: slice, name: str, axis: int = 0) -> Tensor:
        """The ``part`` of its numpy ``axis`` (whole rows of a quantized tensor stay whole), as ``name``."""
        shape = list(self.shape)
        shape[axis] = len(range(*part.indices(shape[axis])))
        index = (slice(None),) * axis + (part,)
        source = self.data
        return Tensor(name, self.kind, tuple(shape), self.dtype, lambda: np.ascontiguousarray(source()[index]))

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


@dataclass(frozen=True)
class Rewrite:
    """One GGUF written from another: its tensors kept and renamed, its metadata edited."""

    role: str  # "model" or "projector": the Ollama layer it becomes
    arch: str
    keep_tensor: Callable[[str], bool]
    renames: tuple[tuple[str, str], ...] = ()  # substring replacements in tensor names, in order
    exact: dict[str, str] = field(default_factory=dict)  # whole tensor names replaced (before ``renames``)
    keep_key: Callable[[str], bool] = lambda key: True
    key_prefixes: tuple[str, str] | None = None  # a key prefix renamed (the architecture's)
    set_kv: KV = field(default_factory=dict)
    to_f32: frozenset[str] = frozenset()  # (renamed) F16 tensors llama.cpp wants in F32
    vocab_rows: int | None = None  # tokenizer arrays cut to the embedding's rows
    # After the renames: what the written tensors are made of (split, merged, transformed or
    # synthesized, still produced at write time); None writes them as they are.
    tensors: Callable[[list[Tensor]], list[Tensor]] | None = None

    def key_name(self, key: str) -> str:
        if self.key_prefixes is not None and key.startswith(self.key_prefixes[0]):
            return self.key_prefixes[1] + key.removeprefix(self.key_prefixes[0])
        return key

    def tensor_name(self, name: str) -> str:
        if name in self.exact:
            return self.exact[name]
        for old, new in self.renames:
            name = name.replace(old, new)
        return name


Converter = Callable[[Header], list[Rewrite]]


# --- writing ---------------------------------------------------------------------------------------


def rewrite(src: Path, dst: Path, rw: Rewrite) -> None:
    """Write ``dst`` from ``src`` as ``rw`` says, streamed tensor by tensor from the memory-mapped
    source: bytes copied as they are (F16 promoted where llama.cpp wants F32), or produced by the
    map's ``tensors`` hook as each is written. A tensor produced unlike its declared shape raises
    ``ValueError`` (the caller removes ``dst``)."""
    reader = GGUFReader(src)
    writer = GGUFWriter(dst, rw.arch)
    try:
        _copy_keys(reader, writer, rw)
        tensors = _source_tensors(reader, rw)
        if rw.tensors is not None:
            tensors = rw.tensors(tensors)
        _write_tensors(writer, tensors)
    finally:
        writer.close()


def write(dst: Path, arch: str, kv: KV, tensors: Sequence[Tensor]) -> None:
    """Write a new GGUF ``dst`` of ``arch`` with the keys ``kv`` and ``tensors``, each produced as it
    is written. A tensor produced unlike its declared shape raises ``ValueError`` (the caller
    removes ``dst``)."""
    writer = GGUFWriter(dst, arch)
    try:
        _add_keys(writer, kv)
        _write_tensors(writer, tensors)
    finally:
        writer.close()


def _write_tensors(writer: GGUFWriter, tensors: Sequence[Tensor]) -> None:
    for t in tensors:
        writer.add_tensor_info(t.name, t.shape, t.dtype, t.nbytes, raw_dtype=t.kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in tensors:
        data = t.data()
        if tuple(data.shape) != t.shape or data.dtype != t.dtype:
            raise ValueError(f"tensor {t.name} was produced as {data.dtype}{data.shape}, not {t.dtype}{t.shape}")
        writer.write_tensor_data(data)
        del data  # one produced tensor in memory at a time, not two


_VOCAB_ARRAYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type")


def _copy_keys(reader: GGUFReader, writer: GGUFWriter, rw: Rewrite) -> None:
    for f in reader.fields.values():
        key = rw.key_name(f.name)
        if f.name.startswith("GGUF.") or key in ("general.architecture", "general.alignment") or key in rw.set_kv:
            continue
        if not rw.keep_key(f.name):
            continue
        value = f.contents()
        if rw.vocab_rows is not None and key in _VOCAB_ARRAYS and isinstance(value, list):
            value = value[: rw.vocab_rows]
        sub_type = f.types[-1] if f.types[0] == _ARRAY else None
        writer.add_key_value(key, value, f.types[0], sub_type=sub_type)
    _add_keys(writer, rw.set_kv)


def _add_keys(writer: GGUFWriter, kv: KV) -> None:
    for key, (value, kind) in kv.items():
        sub_type = _array_type(value[0]) if kind == _ARRAY else None
        writer.add_key_value(key, value, kind, sub_type=sub_type)


def _array_type(first: Any) -> GGUFValueType:
    """The element type of an array ``set_kv`` states, from its first element."""
    if isinstance(first, bool):
        return _BOOL
    if isinstance(first, str):
        return _STR
    return _F32 if isinstance(first, float) else GGUFValueType.INT32


def _source_tensors(reader: GGUFReader, rw: Rewrite) -> list[Tensor]:
    """The kept tensors under their new names, their data still in the mapped source."""
    tensors: list[Tensor] = []
    for t in reader.tensors:
        if not rw.keep_tensor(t.name):
            continue
        name = rw.tensor_name(t.name)
        data, kind = t.data, t.tensor_type
        if name in rw.to_f32 and kind == GGMLQuantizationType.F16:
            tensors.append(Tensor(name, _F32_TYPE, tuple(data.shape), np.dtype(np.float32), _as_f32(data)))
        else:
            tensors.append(Tensor.of(name, kind, data))
    return tensors


def _as_f32(data: np.ndarray) -> Callable[[], np.ndarray]:
    return lambda: np.asarray(data, dtype=np.float32)


# --- renaming --------------------------------------------------------------------------------------


def suffix_renames(pairs: tuple[tuple[str, str], ...]) -> Callable[[str], str]:
    """Tensor-name fixes at a name component's end (``.attn_out`` but never ``.attn_output``)."""
    patterns = [(re.compile(re.escape(old) + r"(?=\.|$)"), new) for old, new in pairs]

    def rename(name: str) -> str:
        for pattern, new in patterns:
            name = pattern.sub(new, name)
        return name

    return rename


def renaming(rename: Callable[[str], str]) -> Callable[[list[Tensor]], list[Tensor]]:
    """A ``Rewrite.tensors`` hook that renames every tensor with ``rename``."""
    return lambda tensors: [t.renamed(rename(t.name)) for t in tensors]


def keep_all(name: str) -> bool:
    return True


# --- towers and projectors -------------------------------------------------------------------------


def vision_tensor(name: str) -> bool:
    return name.startswith(("v.", "mm."))


def without_tower(text: Rewrite, *key_prefixes: str) -> Rewrite:
    """A text rewrite that also leaves out the tower's tensors and keys."""
    keep_tensor, keep_key = text.keep_tensor, text.keep_key
    return dataclasses.replace(
        text,
        keep_tensor=lambda name: keep_tensor(name) and not vision_tensor(name),
        keep_key=lambda key: keep_key(key) and not key.startswith(key_prefixes),
    )


def projector(renames: tuple[tuple[str, str], ...], set_kv: KV, *to_f32: str) -> Rewrite:
    """The CLIP GGUF of a tower inside a model file: its tensors renamed, general keys kept, the
    ``to_f32`` tensors (patch embeddings: llama.cpp's converter keeps them F32) promoted."""
    return Rewrite(
        role="projector",
        arch="clip",
        keep_tensor=vision_tensor,
        renames=renames,
        keep_key=lambda key: key.startswith("general.") and key != "general.file_type",
        set_kv=set_kv,
        to_f32=frozenset(to_f32),
    )


def clip_keys(h: Header, projector_type: str, activation: str) -> KV:
    """What every CLIP projector split out of a model file states: its type, activation, ViT shape,
    and an output as wide as the text model's input."""
    return {
        "clip.has_vision_encoder": (True, _BOOL),
        activation: (True, _BOOL),
        "clip.projector_type": (projector_type, _STR),
        "clip.vision.block_count": tower_key(h, "block_count", _U32),
        "clip.vision.embedding_length": tower_key(h, "embedding_length", _U32),
        "clip.vision.attention.head_count": tower_key(h, "attention.head_count", _U32),
        "clip.vision.attention.layer_norm_epsilon": tower_key(h, "attention.layer_norm_epsilon", _F32, 1e-6),
        "clip.vision.patch_size": tower_key(h, "patch_size", _U32),
        "clip.vision.projection_dim": (h.kv.get(f"{h.arch}.embedding_length"), _U32),
    }


# OpenAI CLIP's pixel statistics: Ollama's converter's default, and many towers' own.
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def triple(value: Any, default: list[float]) -> list[float]:
    """Pixel statistics a file states (three numbers), else ``default``."""
    return [float(x) for x in value] if isinstance(value, list) and len(value) == 3 else default


def tower_key(h: Header, key: str, kind: GGUFValueType, default: Any = None) -> tuple[Any, GGUFValueType]:
    """``<arch>.vision.<key>`` for a projector's metadata; refused when the tower does not state it."""
    value = h.kv.get(f"{h.arch}.vision.{key}", default)
    if value is None:
        raise LayoutRefused(refusal(h.arch, f"its vision tower states no {h.arch}.vision.{key}"))
    return value, kind


# --- tensor data -----------------------------------------------------------------------------------

VIT_QKV = re.compile(r"(v\.blk\.\d+\.)attn_([qkv])\.(weight|bias)")  # a ViT block's Q, K or V


def row_width(t: Tensor) -> int:
    """Elements per row of a quantized tensor (its numpy shape counts bytes)."""
    block, size = GGML_QUANT_SIZES[t.kind]
    return t.shape[-1] // size * block


def in_f32(t: Tensor) -> Tensor:
    """``t`` as F32 (dequantized from F16, BF16 or a quantized type)."""
    if t.kind == _F32_TYPE:
        return t
    width = t.shape[-1] if t.kind == GGMLQuantizationType.F16 else row_width(t)
    shape = (*t.shape[:-1], width)
    source, kind = t.data, t.kind
    return Tensor(t.name, _F32_TYPE, shape, np.dtype(np.float32), lambda: dequantize(source(), kind).reshape(shape))


def f32_shaped(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``t``'s numbers in F32, as ``shape`` (the same count)."""
    source = in_f32(t).data
    return Tensor(
        t.name, _F32_TYPE, shape, np.dtype(np.float32), lambda: np.asarray(source(), np.float32).reshape(shape)
    )


def stacked(parts: list[Tensor], name: str) -> Tensor:
    """Projections stacked into one, rows after rows (a fused Q/K/V); in F32 when their types
    differ (Ollama's files can hold F16 Q and K beside a Q8_0 V)."""
    first = parts[0]
    if len({p.kind for p in parts}) == 1:
        shape = (sum(p.shape[0] for p in parts), *first.shape[1:])
        return Tensor(name, first.kind, shape, first.dtype, lambda: np.concatenate([p.data() for p in parts]))
    f32 = [in_f32(p) for p in parts]
    shape = (sum(p.shape[0] for p in f32), *f32[0].shape[1:])
    return Tensor(name, _F32_TYPE, shape, np.dtype(np.float32), lambda: np.concatenate([p.data() for p in f32]))


def fused_qkv(t: Tensor, by_name: dict[str, Tensor]) -> list[Tensor]:
    """``t`` as it is, unless it is a ViT block's Q, K or V: Q's place gets the block's fused
    ``attn_qkv`` (``by_name`` holds the three), K's and V's nothing."""
    qkv = VIT_QKV.fullmatch(t.name)
    if qkv is None:
        return [t]
    block, which, part = qkv.groups()
    if which != "q":
        return []
    return [stacked([by_name[f"{block}attn_{x}.{part}"] for x in "qkv"], f"{block}attn_qkv.{part}")]
