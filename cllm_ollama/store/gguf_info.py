"""What a GGUF file says about its model (architecture, sizes, template, capabilities), cached per file.

``gguf.GGUFReader`` builds an object per array element (seconds for a 150k-token vocab), so
this reads the header itself, with the ``gguf`` package's type tables, and skips long arrays.
"""

from __future__ import annotations

import math
import mmap
import re
import struct
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType, LlamaFileType

from ..model_families import CHAT_MARKERS, template_thinks
from .gguf_check import hyperparameter_problems

GGUF_MAGIC = b"GGUF"
_SHORT_ARRAY = 5  # /api/show empties longer arrays unless verbose
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
# Encoder-only architectures llama.cpp runs for embeddings even without a pooling_type key.
_EMBEDDING_ARCHS = {
    "bert",
    "nomic-bert",
    "nomic-bert-moe",
    "jina-bert-v2",
    "jina-bert-v3",
    "modern-bert",
    "neo-bert",
}
_FILE_TYPE_GUESSED = 1024


class GGUFError(ValueError):
    """Not a GGUF file, or a truncated/corrupt header."""


# Special tokens that name a chat format (Gemma, Llama 3, ChatML, Mistral/Llama 2, Phi-3): a GGUF
# without a chat template gets the format its vocabulary speaks (api/builtin_templates.py).


@dataclass(frozen=True)
class GGUFInfo:
    architecture: str
    context_length: int | None
    embedding_length: int | None
    block_count: int | None
    chat_template: str | None
    file_type: int | None
    quantization_level: str
    parameter_count: int
    parameter_size: str
    model_info: dict[str, Any]
    capabilities: tuple[str, ...]
    family: str
    families: tuple[str, ...]
    tensors: tuple[dict[str, Any], ...]  # only filled when read with verbose=True
    # Why llama.cpp would abort on this file (see gguf_check); empty for a sound one.
    problems: tuple[str, ...] = ()
    # Which of ``CHAT_MARKERS`` the vocabulary holds: they pick a chat format when the GGUF has no template.
    chat_markers: tuple[str, ...] = ()

    @property
    def is_embedding(self) -> bool:
        """Loaded for pooled outputs only (no generation slots): embedding models and rerankers."""
        return "embedding" in self.capabilities or "rerank" in self.capabilities


def is_gguf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == GGUF_MAGIC


def gguf_info(path: Path, *, verbose: bool = False) -> GGUFInfo:
    """Read (or reuse) the metadata of ``path``; the cache key includes mtime and size."""
    st = Path(path).stat()
    return _cached_info(str(path), st.st_mtime_ns, st.st_size, verbose)


@lru_cache(maxsize=32)
def _cached_info(path: str, mtime_ns: int, size: int, verbose: bool) -> GGUFInfo:
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        return _read(buf, verbose)


def projector_hears(path: Path) -> bool:
    """Whether a projector GGUF has an audio encoder: Ollama's ``projectorHasAudio``, less what its
    ``projectorSuppressesAudioCapability`` hides (Gemma 3n's vision projector)."""
    try:
        kv = gguf_info(path).model_info
    except (GGUFError, OSError):
        return False
    if kv.get("clip.vision.projector_type") == "gemma3nv":
        return False
    return any(key.endswith("has_audio_encoder") and value is True for key, value in kv.items())


def gguf_info_of_prefix(data: bytes) -> GGUFInfo:
    """The metadata and tensor list read from a file's first bytes (verbose); ``GGUFError`` when
    they end before the tensor list does."""
    return _read(data, True)


def human_number(n: int) -> str:
    """Ollama's ``format.HumanNumber``: 751.63M, 8.2B, 4B, 135K."""
    for scale, suffix, decimals in ((1e9, "B", 1), (1e6, "M", 2), (1e3, "K", 0)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f}{suffix}" if value == math.floor(value) else f"{value:.{decimals}f}{suffix}"
    return str(n)


class _Cursor:
    def __init__(self, buf: mmap.mmap | bytes) -> None:
        self.buf = buf
        self.pos = 0

    def unpack(self, fmt: str) -> Any:
        try:
            (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        except struct.error as exc:
            raise GGUFError("truncated GGUF header") from exc
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        n = self.unpack("<Q")
        if self.pos + n > len(self.buf):
            raise GGUFError("truncated GGUF header")
        text = self.buf[self.pos : self.pos + n].decode("utf-8", errors="replace")
        self.pos += n
        return text

    def value_type(self) -> GGUFValueType:
        raw = self.unpack("<I")
        try:
            return GGUFValueType(raw)
        except ValueError as exc:
            raise GGUFError(f"unknown GGUF value type {raw}") from exc

    def value(self, vtype: GGUFValueType, keep_arrays: bool) -> Any:
        if vtype == GGUFValueType.STRING:
            return self.string()
        if vtype == GGUFValueType.ARRAY:
            return self.array(keep_arrays)
        value = self.unpack(_SCALARS[vtype])
        # Shortest float32 text (1e-06, not 9.99999997e-07), as Go marshals a float32.
        return float(str(np.float32(value))) if vtype == GGUFValueType.FLOAT32 else value

    def array(self, keep: bool) -> list[Any]:
        etype = self.value_type()
        count = self.unpack("<Q")
        keep = keep or count <= _SHORT_ARRAY
        if etype in _SCALARS:
            dtype = np.dtype(_SCALARS[etype])
            nbytes = dtype.itemsize * count
            if self.pos + nbytes > len(self.buf):
                raise GGUFError("truncated GGUF header")
            data = np.frombuffer(self.buf, dtype, count, self.pos).tolist() if keep else []
            self.pos += nbytes
            return data
        if etype == GGUFValueType.STRING and not keep:
            for _ in range(count):
                n = self.unpack("<Q")
                self.pos += n
            return []
        items = [self.value(etype, keep) for _ in range(count)]
        return items if keep else []


def _read(buf: mmap.mmap | bytes, verbose: bool) -> GGUFInfo:
    cur = _Cursor(buf)
    if buf[:4] != GGUF_MAGIC:
        raise GGUFError("invalid file magic")
    cur.pos = len(GGUF_MAGIC)
    version = cur.unpack("<I")
    if version not in (2, 3):
        raise GGUFError(f"unsupported GGUF version {version}")
    n_tensors = cur.unpack("<Q")
    n_kv = cur.unpack("<Q")
    kv: dict[str, Any] = {}
    markers: tuple[str, ...] = ()
    for _ in range(n_kv):
        key = cur.string()
        start = cur.pos
        kv[key] = cur.value(cur.value_type(), verbose)
        if key == "tokenizer.ggml.tokens":
            vocab = bytes(buf[start : cur.pos])
            markers = tuple(m for m in CHAT_MARKERS if m.encode() in vocab)

    n_params = 0
    elements_by_type: Counter[int] = Counter()
    tensors: list[dict[str, Any]] = []
    for _ in range(n_tensors):
        name = cur.string()
        dims = [cur.unpack("<Q") for _ in range(cur.unpack("<I"))]
        ggml_type = cur.unpack("<I")
        cur.unpack("<Q")  # data offset
        n = math.prod(dims)
        n_params += n
        elements_by_type[ggml_type] += n
        if verbose:
            tensors.append({"name": name, "type": _ggml_type_name(ggml_type), "shape": dims})

    arch = str(kv.get("general.architecture", "unknown"))
    template = kv.get("tokenizer.chat_template")
    file_type = kv.get("general.file_type")
    model_info = {k: v for k, v in kv.items() if k not in ("general.name", "tokenizer.chat_template")}
    model_info.setdefault("general.parameter_count", n_params)
    n_params = int(model_info["general.parameter_count"])
    return GGUFInfo(
        architecture=arch,
        context_length=_int_or_none(kv.get(f"{arch}.context_length")),
        embedding_length=_int_or_none(kv.get(f"{arch}.embedding_length")),
        block_count=_int_or_none(kv.get(f"{arch}.block_count")),
        chat_template=template if isinstance(template, str) else None,
        file_type=_int_or_none(file_type),
        quantization_level=_quantization_level(file_type, elements_by_type),
        parameter_count=n_params,
        parameter_size=human_number(n_params),
        model_info=model_info,
        capabilities=_capabilities(kv, arch, template if isinstance(template, str) else ""),
        family=arch,
        families=(arch,),
        tensors=tuple(tensors),
        problems=tuple(hyperparameter_problems(kv, arch)),
        chat_markers=markers,
    )


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _ggml_type_name(value: int) -> str:
    try:
        return GGMLQuantizationType(value).name
    except ValueError:
        return str(value)


def _quantization_level(file_type: Any, elements_by_type: Counter[int]) -> str:
    """``general.file_type`` as Ollama names it (Q4_K_M, F16); else the dominant tensor type."""
    if isinstance(file_type, int):
        try:
            name = LlamaFileType(file_type & ~_FILE_TYPE_GUESSED).name
        except ValueError:
            return "unknown"
        return name.removeprefix("MOSTLY_").removeprefix("ALL_")
    if elements_by_type:
        return _ggml_type_name(elements_by_type.most_common(1)[0][0])
    return "unknown"


# llama_pooling_type's rank: a reranker's classifier head (bge-reranker, jina-reranker, Qwen3-Reranker).
_POOLING_RANK = 4


def _capabilities(kv: dict[str, Any], arch: str, template: str) -> tuple[str, ...]:
    """Ollama's rules, read off the GGUF: the chat template is what cllm renders."""
    embedding = f"{arch}.pooling_type" in kv or arch in _EMBEDDING_ARCHS
    if kv.get(f"{arch}.pooling_type") == _POOLING_RANK:  # a reranker scores pairs, and does nothing else
        return ("rerank",)
    caps = ["embedding" if embedding else "completion"]
    if f"{arch}.vision.block_count" in kv:
        caps.append("vision")
    if f"{arch}.audio.block_count" in kv:
        caps.append("audio")
    if re.search(r"\btools\b", template):
        caps.append("tools")
    fim = "tokenizer.ggml.fim_pre_token_id" in kv and "tokenizer.ggml.fim_suf_token_id" in kv
    if fim or re.search(r"\bsuffix\b", template):
        caps.append("insert")
    if "<think>" in template or "enable_thinking" in template or template_thinks(template):
        caps.append("thinking")
    return tuple(caps)
