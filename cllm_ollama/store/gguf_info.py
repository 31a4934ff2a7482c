"""What a GGUF file says about its model (architecture, sizes, template, capabilities), cached per
file: its header (``gguf_header``, long arrays skipped) read as Ollama's ``/api/show`` tells it.
"""

from __future__ import annotations

import math
import mmap
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf import GGMLQuantizationType, LlamaFileType

from ..gguf_header import GGUF_MAGIC, GGUFError, over_file, per_file, read_header
from ..model_families import CHAT_MARKERS, THINK_CLOSES, template_thinks
from .gguf_check import hyperparameter_problems

_SHORT_ARRAY = 5  # /api/show empties longer arrays unless verbose
_ALL = 1 << 62
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
    tensors: tuple[dict[str, Any], ...]  # /api/show lists them, verbose or not
    # Why llama.cpp would abort on this file (see gguf_check); empty for a sound one.
    problems: tuple[str, ...] = ()
    # Which of ``CHAT_MARKERS`` the vocabulary holds: they pick a chat format when the GGUF has no template.
    chat_markers: tuple[str, ...] = ()
    # Which of ``THINK_CLOSES`` are whole tokens of the vocabulary (a format's grammar waits for one).
    whole_tokens: tuple[str, ...] = ()

    @property
    def is_embedding(self) -> bool:
        """Loaded for pooled outputs only (no generation slots): embedding models and rerankers."""
        return "embedding" in self.capabilities or "rerank" in self.capabilities


def is_gguf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == GGUF_MAGIC


def gguf_info(path: Path, *, verbose: bool = False) -> GGUFInfo:
    """Read (or reuse) the metadata of ``path``; the cache key includes mtime and size.

    A verbose read is never kept: it holds every array (~40 MB of vocabulary and merges for a
    128k-token model), and it is wanted once (a layout check at pull or create, a verbose
    ``/api/show``), where 32 cached ones would hold a gigabyte, of deleted models too."""
    return over_file(path, _read, True) if verbose else _info(path, False)


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


def _read(buf: mmap.mmap | bytes, verbose: bool) -> GGUFInfo:
    header = read_header(buf, _ALL if verbose else _SHORT_ARRAY)
    kv = header.kv
    markers: tuple[str, ...] = ()
    whole: tuple[str, ...] = ()
    if "tokenizer.ggml.tokens" in header.spans:
        start, end = header.spans["tokenizer.ggml.tokens"]
        vocab = bytes(buf[start:end])
        markers = tuple(m for m in CHAT_MARKERS if m.encode() in vocab)
        # A GGUF string is its length (little-endian u64), then its bytes: a whole token, not a part of one.
        whole = tuple(t for t in THINK_CLOSES if len(t.encode()).to_bytes(8, "little") + t.encode() in vocab)

    n_params = 0
    elements_by_type: Counter[int] = Counter()
    tensors: list[dict[str, Any]] = []
    for tensor in header.tensors:
        n_params += tensor.n_elements
        elements_by_type[tensor.ggml_type] += tensor.n_elements
        tensors.append({"name": tensor.name, "type": _ggml_type_name(tensor.ggml_type), "shape": list(tensor.shape)})

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
        whole_tokens=whole,
    )


_info = per_file(_read)  # brief reads only: see gguf_info


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


# llama.cpp's (and gguf-split's) names for a split model's shards: NAME-00001-of-00003.gguf.
SHARD_NAME = re.compile(r"^(.*)-(\d{5})-of-(\d{5})\.gguf$")


def shard_name(prefix: str, index: int, count: int) -> str:
    """The file name of shard ``index`` (from 0) of ``count``, as llama.cpp's loader looks for it."""
    return f"{prefix}-{index + 1:05d}-of-{count:05d}.gguf"


def shard_files(path: Path) -> list[Path]:
    """``path``, or where it names one shard of a split model (``SHARD_NAME``), every shard of it
    beside it, in order: what loading it takes, as llama.cpp finds the others by their names."""
    name = SHARD_NAME.match(path.name)
    if name is None:
        return [path]
    count = int(name[3])
    shards = [path.with_name(shard_name(name[1], i, count)) for i in range(count)]
    return [shard for shard in shards if shard.is_file()] or [path]


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
