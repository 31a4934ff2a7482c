"""GGUFs written by Ollama's own converter: loaded as they are, mapped once, or refused, at pull and create.

Ollama's library models (gemma3, qwen2.5vl, mistral-small3.1, gpt-oss...) were converted for
its Go engine, with architecture names, keys and tensor names llama.cpp does not all accept,
and often one GGUF with the vision tower inside. Ollama itself now runs them in llama-server
through an in-memory shim (``llama/compat/llama-ollama-compat.cpp`` in ollama/ollama), whose
``detect_ollama_*`` markers this module mirrors. cllm decides when the model enters the store,
never at its first request: a layout whose difference is mechanical is rewritten once into
what llama.cpp expects (the rewritten files are what the store holds and pushes); any other
is refused with the architecture named, before a manifest is written.

The store never loads a model: this reads and writes GGUF headers and tensor bytes only.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter

from . import manifests as mt
from .gguf_info import GGUFError, GGUFInfo, gguf_info, gguf_info_of_prefix
from .manifests import Layer
from .store import Claim, ModelStore

# Every architecture the llama.cpp inside llama-cpp-python 0.3.36 names (``src/llama-arch.cpp``).
LLAMA_CPP_ARCHITECTURES = frozenset(
    """clip llama llama4 deci falcon grok gpt2 gptj gptneox mpt baichuan starcoder refact bert modern-bert
    nomic-bert nomic-bert-moe neo-bert jina-bert-v2 jina-bert-v3 eurobert bloom stablelm qwen qwen2 qwen2moe
    qwen2vl qwen3 qwen3moe qwen3next qwen3vl qwen3vlmoe qwen35 qwen35moe qwen4exp phi2 phi3 phimoe plamo
    plamo2 plamo3 codeshell orion internlm2 minicpm minicpm3 gemma gemma2 gemma3 gemma3n gemma4
    gemma4-assistant gemma-embedding starcoder2 mamba mamba2 maple jamba falcon-h1 xverse command-r cohere2
    cohere2moe dbrx olmo olmo2 olmoe muse-glimmer openelm arctic deepseek deepseek2 deepseek2-ocr deepseek32
    deepseek4 chatglm glm4 glm4moe glm-dsa bitnet t5 t5encoder jais jais2 nemotron nemotron_h nemotron_h_moe
    exaone exaone4 exaone-moe rwkv6 rwkv6qwen2 rwkv7 arwkv7 granite granitemoe granitehybrid graniteswitch
    granite_swa chameleon wavtokenizer-dec plm bailingmoe bailingmoe2 bailingmoe3 dots1 dots3note arcee afmoe
    laguna ernie4_5 ernie4_5-moe hunyuan-moe hunyuan-dense hunyuan_vl hy_v3 hy_v4 smollm3 gpt-oss lfm2 lfm2moe
    dream smallthinker llada llada-moe seed_oss grovemoe apertus minimax-01 hrm_text minimax-m2 minimax-m3
    cogvlm rnd1 pangu-embedded mistral3 eagle3 dflash mistral4 paddleocr mimo2 step35 spark2_5 llama-embed
    maincoder kimi-linear kimi-k3 glm5-next talkie mellum nanbeige qwen3tts pockettts""".split()  # noqa: SIM905 - a list to read against llama-arch.cpp
)


class LayoutRefused(ValueError):
    """A GGUF laid out for Ollama's Go engine that cllm's llama.cpp cannot load and cllm does not map."""


@dataclass(frozen=True)
class Header:
    """What the layout checks read: the metadata and each tensor's ggml shape."""

    arch: str
    kv: dict[str, Any]
    shapes: dict[str, list[int]]
    types: dict[str, str] = field(default_factory=dict)  # each tensor's ggml type name ("F32", "MXFP4", "4")

    @classmethod
    def of(cls, info: GGUFInfo) -> Header:
        """From ``gguf_info(path, verbose=True)`` (tensors are only listed when read verbosely)."""
        return cls(
            info.architecture,
            info.model_info,
            {t["name"]: t["shape"] for t in info.tensors},
            {t["name"]: t["type"] for t in info.tensors},
        )

    def has(self, key: str) -> bool:
        return f"{self.arch}.{key}" in self.kv

    def any_tensor(self, *prefixes: str) -> bool:
        return any(name.startswith(prefixes) for name in self.shapes)

    def any_tensor_ending(self, suffix: str) -> bool:
        return any(name.endswith(suffix) for name in self.shapes)

    def rows(self, name: str) -> int | None:
        """A matrix's second ggml dimension (a vocabulary's size for an embedding)."""
        shape = self.shapes.get(name)
        return shape[1] if shape and len(shape) > 1 else None


def refusal(arch: str, why: str) -> str:
    return f"architecture \"{arch}\" written by Ollama's converter is not supported by cllm's llama.cpp ({why})"


_Marker = Callable[[Header], bool]


def _always(h: Header) -> bool:
    """An architecture name only Ollama's converter writes."""
    return True


# Ollama-converter layouts llama.cpp cannot load as they are, each with its marker (as Ollama's
# compat shim detects it) and why cllm refuses it: the map is not mechanical (tensors merged,
# split or repacked, towers llama.cpp reads differently). The text models cllm maps are in
# ``layouts_text``.
_REFUSED: dict[str, tuple[_Marker, str]] = {
    "glmocr": (_always, "llama.cpp has no glmocr architecture"),
    "mllama": (_always, "llama.cpp has no Llama 3.2 Vision (mllama) architecture"),
}


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
    set_kv: dict[str, tuple[Any, GGUFValueType]] = field(default_factory=dict)
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


def plan(h: Header) -> list[Rewrite] | None:
    """What to write instead of a GGUF laid out by Ollama's converter: None when llama.cpp loads it
    as it is; raises ``LayoutRefused`` (naming the architecture) when cllm cannot run it."""
    if h.arch == "gemma3" and "dense.0.weight" in h.shapes:
        return [_embeddinggemma(h)]
    if h.arch == "gemma3" and _ollama_gemma3(h):
        return _gemma3(h)
    if h.arch == "qwen25vl":
        return _qwen25vl(h)
    if h.arch == "mistral3" and not h.any_tensor("v.", "mm.") and _MISTRAL3_KEYS.keys() & h.kv.keys():
        return [_mistral3_text(h)]
    if h.arch == "llama" and _llama3_metadata_gap(h):
        return [_llama3_metadata(h)]
    if h.arch == "clip" and not _projector_types(h) and h.any_tensor("mm."):
        return [_llava_projector()]
    from .layouts_ocr import plan_ocr
    from .layouts_omni import plan_omni
    from .layouts_text import plan_text  # the text maps build on this module's framework
    from .layouts_vision import plan_vision

    # The towers first: a gemma4 or qwen35 with one inside splits it out beside its text map.
    vision = plan_vision(h)
    if vision is not None:
        return vision
    text = plan_text(h)
    if text is not None:
        return text
    towers = plan_ocr(h) or plan_omni(h)
    if towers is not None:
        return towers
    refused = _REFUSED.get(h.arch)
    if refused is not None and refused[0](h):
        raise LayoutRefused(refusal(h.arch, refused[1]))
    if h.arch not in LLAMA_CPP_ARCHITECTURES:
        raise LayoutRefused(refusal(h.arch, "llama.cpp has no such architecture"))
    if h.arch != "clip" and h.any_tensor("v.", "mm.", "a."):
        # llama.cpp's loader refuses a model file with tensors it does not read.
        raise LayoutRefused(refusal(h.arch, "its vision or audio tower is inside the model file"))
    return None


def _projector_types(h: Header) -> list[str]:
    """The projector types a CLIP GGUF states: one for all, or one per modality (Gemma 4's has both)."""
    keys = ("clip.projector_type", "clip.vision.projector_type", "clip.audio.projector_type")
    return [h.kv[key] for key in keys if h.kv.get(key)]


def _ollama_gemma3(h: Header) -> bool:
    """Ollama's gemma3 markers (``detect_ollama_gemma3``): an embedded vision tower, its rope key
    names, its tokenizer flags, or no RMS-norm epsilon (every version of its converter left it out)."""
    return (
        h.has("mm.tokens_per_image")
        or h.any_tensor("v.", "mm.")
        or h.has("rope.global.freq_base")
        or h.has("rope.local.freq_base")
        or "tokenizer.ggml.add_padding_token" in h.kv
        or "tokenizer.ggml.add_unknown_token" in h.kv
        or not h.has("attention.layer_norm_rms_epsilon")
    )


_F32 = GGUFValueType.FLOAT32
_U32 = GGUFValueType.UINT32
_STR = GGUFValueType.STRING
_BOOL = GGUFValueType.BOOL
_ARRAY = GGUFValueType.ARRAY
# Ollama's SigLIP names -> clip.cpp's (``kGemma3ClipRenames``). HF's fc1 widens (clip.cpp's
# ffn_up) and fc2 narrows (ffn_down); clip.cpp would also swap them back by shape.
_GEMMA3_CLIP_RENAMES = (
    ("v.patch_embedding", "v.patch_embd"),
    ("v.position_embedding", "v.position_embd"),
    ("v.post_layernorm", "v.post_ln"),
    (".layer_norm1", ".ln1"),
    (".layer_norm2", ".ln2"),
    (".attn_output", ".attn_out"),
    (".mlp.fc1", ".ffn_up"),
    (".mlp.fc2", ".ffn_down"),
    ("mm.mm_input_projection", "mm.input_projection"),
    ("mm.mm_soft_emb_norm", "mm.soft_emb_norm"),
)


def _projector(
    renames: tuple[tuple[str, str], ...], set_kv: dict[str, tuple[Any, GGUFValueType]], *to_f32: str
) -> Rewrite:
    """The CLIP GGUF of a tower inside a model file: its tensors renamed, general keys kept, the
    ``to_f32`` tensors (patch embeddings: llama.cpp's converter keeps them F32) promoted."""
    return Rewrite(
        role="projector",
        arch="clip",
        keep_tensor=_vision_tensor,
        renames=renames,
        keep_key=lambda key: key.startswith("general.") and key != "general.file_type",
        set_kv=set_kv,
        to_f32=frozenset(to_f32),
    )


def _clip_keys(h: Header, projector_type: str, activation: str) -> dict[str, tuple[Any, GGUFValueType]]:
    """What every CLIP projector split out of a model file states: its type, activation, ViT shape,
    and an output as wide as the text model's input."""
    return {
        "clip.has_vision_encoder": (True, _BOOL),
        activation: (True, _BOOL),
        "clip.projector_type": (projector_type, _STR),
        "clip.vision.block_count": _tower_key(h, "block_count", _U32),
        "clip.vision.embedding_length": _tower_key(h, "embedding_length", _U32),
        "clip.vision.attention.head_count": _tower_key(h, "attention.head_count", _U32),
        "clip.vision.attention.layer_norm_epsilon": _tower_key(h, "attention.layer_norm_epsilon", _F32, 1e-6),
        "clip.vision.patch_size": _tower_key(h, "patch_size", _U32),
        "clip.vision.projection_dim": (h.kv.get(f"{h.arch}.embedding_length"), _U32),
    }


def _tower_key(h: Header, key: str, kind: GGUFValueType, default: Any = None) -> tuple[Any, GGUFValueType]:
    """``<arch>.vision.<key>`` for a projector's metadata; refused when the tower does not state it."""
    value = h.kv.get(f"{h.arch}.vision.{key}", default)
    if value is None:
        raise LayoutRefused(refusal(h.arch, f"its vision tower states no {h.arch}.vision.{key}"))
    return value, kind


_GEMMA3_TOWER_KEYS = ("gemma3.vision.", "gemma3.mm.", "gemma3.rope.global.", "gemma3.rope.local.")


def _vision_tensor(name: str) -> bool:
    return name.startswith(("v.", "mm."))


def _gemma3(h: Header) -> list[Rewrite]:
    """Text GGUF without the tower, with the keys llama.cpp requires; and, when the tower is inside,
    a CLIP GGUF of it (``handle_gemma3`` and ``handle_gemma3_clip`` in Ollama's shim)."""
    kv = h.kv
    text_kv: dict[str, tuple[Any, GGUFValueType]] = {
        "gemma3.attention.layer_norm_rms_epsilon": (kv.get("gemma3.attention.layer_norm_rms_epsilon", 1e-6), _F32),
        "gemma3.rope.freq_base": (
            kv.get("gemma3.rope.freq_base", kv.get("gemma3.rope.global.freq_base", 1e6)),
            _F32,
        ),
        "gemma3.rope.freq_base_swa": (
            kv.get("gemma3.rope.freq_base_swa", kv.get("gemma3.rope.local.freq_base", 1e4)),
            _F32,
        ),
    }
    # 4B and up were trained at 16k and stretched to 128k by linear RoPE scaling x8 (their HF config).
    if (kv.get("gemma3.context_length") or 0) >= 131072 and not h.has("rope.scaling.type"):
        text_kv["gemma3.rope.scaling.type"] = ("linear", _STR)
        text_kv["gemma3.rope.scaling.factor"] = (8.0, _F32)
    text = Rewrite(
        role="model",
        arch="gemma3",
        keep_tensor=lambda name: not _vision_tensor(name),
        keep_key=lambda key: (
            not key.startswith(("gemma3.vision.", "gemma3.mm.", "gemma3.rope.global.", "gemma3.rope.local."))
        ),
        set_kv=text_kv,
        # Ollama keeps the image tokens (<image_soft_token>...) in the vocabulary, past the embedding's rows.
        vocab_rows=h.rows("token_embd.weight"),
    )
    if not h.any_tensor("v."):
        return [text]

    clip_kv = {
        **_clip_keys(h, "gemma3", "clip.use_gelu"),
        "clip.vision.feed_forward_length": _tower_key(h, "feed_forward_length", _U32),
        "clip.vision.image_size": _tower_key(h, "image_size", _U32),
        "clip.vision.image_mean": ([0.5, 0.5, 0.5], _ARRAY),
        "clip.vision.image_std": ([0.5, 0.5, 0.5], _ARRAY),
    }
    tokens = kv.get("gemma3.mm.tokens_per_image")
    n_patches = kv.get("gemma3.vision.image_size", 0) // max(1, kv.get("gemma3.vision.patch_size", 1))
    if tokens and n_patches:
        # clip.cpp pools each side by 4 unless told (256 tokens from 64x64 patches); a model that
        # says otherwise gets its own factor.
        side = round(tokens**0.5)
        if side * side == tokens and n_patches % side == 0 and n_patches // side != 4:
            clip_kv["clip.vision.projector.scale_factor"] = (n_patches // side, _U32)
    clip = _projector(_GEMMA3_CLIP_RENAMES, clip_kv, "v.patch_embd.weight", "v.position_embd.weight")
    return [text, clip]


# Ollama's names for Mistral 3's YaRN and attention-temperature keys -> llama.cpp's.
_MISTRAL3_KEYS = {
    "mistral3.rope.scaling.beta_fast": "mistral3.rope.scaling.yarn_beta_fast",
    "mistral3.rope.scaling.beta_slow": "mistral3.rope.scaling.yarn_beta_slow",
    "mistral3.rope.scaling.mscale_all_dim": "mistral3.rope.scaling.yarn_log_multiplier",
    "mistral3.rope.scaling_beta": "mistral3.attention.temperature_scale",
}


def _mistral3_text(h: Header) -> Rewrite:
    """A text-only Mistral 3 (``handle_mistral3``'s text side): its YaRN keys under llama.cpp's names,
    and the Tekken pre-tokenizer named. (With the Pixtral tower inside it is refused: not mapped.)"""
    fixes: dict[str, tuple[Any, GGUFValueType]] = {
        new: (h.kv[old], _F32) for old, new in _MISTRAL3_KEYS.items() if old in h.kv and new not in h.kv
    }
    if h.kv.get("tokenizer.ggml.pre") in (None, "", "default"):
        fixes["tokenizer.ggml.pre"] = ("tekken", _STR)
    return Rewrite(
        role="model",
        arch="mistral3",
        keep_tensor=lambda name: True,
        keep_key=lambda key: key not in _MISTRAL3_KEYS,
        set_kv=fixes,
    )


_EOT = 128009  # <|eot_id|>, where Llama 3 Instruct ends a turn


def _llama3_metadata_gap(h: Header) -> bool:
    """A Llama 3 converted before llama.cpp named its pre-tokenizer, or ending turns at
    <|end_of_text|> (``detect_ollama_llama3_metadata_gap``): its text would be split the wrong way."""
    kv = h.kv
    tokens = kv.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or len(tokens) <= _EOT or tokens[_EOT] != "<|eot_id|>":
        return False
    template = str(kv.get("tokenizer.chat_template") or "")
    llama3 = tokens[128006] == "<|start_header_id|>" or "<|start_header_id|>" in template or "<|eot_id|>" in template
    no_pre = kv.get("tokenizer.ggml.pre") in (None, "", "default")
    return llama3 and (no_pre or kv.get("tokenizer.ggml.eos_token_id") == 128001)


def _llama3_metadata(h: Header) -> Rewrite:
    """The pre-tokenizer named, and turns ending at <|eot_id|> (what Ollama's shim sets)."""
    kv = h.kv
    fixes: dict[str, tuple[Any, GGUFValueType]] = {}
    if kv.get("tokenizer.ggml.pre") in (None, "", "default"):
        fixes["tokenizer.ggml.pre"] = ("llama-bpe", _STR)
    for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"):
        if kv.get(key) in (None, 128001):
            fixes[key] = (_EOT, _U32)
    return Rewrite(role="model", arch="llama", keep_tensor=lambda name: True, set_kv=fixes)


_PATTERN = "gemma3.attention.sliding_window_pattern"


def _embeddinggemma(h: Header) -> Rewrite:
    """EmbeddingGemma as llama.cpp runs it, ``gemma-embedding`` (``handle_embeddinggemma`` in Ollama's
    shim): keys under the new prefix, the sentence-transformers dense layers and the final norm
    renamed, their widths stated; mean pooling unless the file says otherwise."""
    d0, d1 = h.shapes.get("dense.0.weight"), h.shapes.get("dense.1.weight")
    if not d0 or not d1 or len(d0) != 2 or len(d1) != 2:
        raise LayoutRefused(refusal("gemma3", "EmbeddingGemma without its two dense layers"))
    kv = h.kv
    return Rewrite(
        role="model",
        arch="gemma-embedding",
        keep_tensor=lambda name: True,
        exact={
            "dense.0.weight": "dense_2.weight",
            "dense.1.weight": "dense_3.weight",
            "norm.weight": "output_norm.weight",
        },
        # Ollama's shim drops the per-layer pattern Ollama wrote (llama.cpp then uses Gemma's every-6th
        # global layer); a single number, which llama.cpp reads, stays.
        keep_key=lambda key: (
            key != "gemma3.attention.causal" and not (key == _PATTERN and isinstance(kv.get(key), list))
        ),
        key_prefixes=("gemma3.", "gemma-embedding."),
        set_kv={
            "gemma-embedding.attention.layer_norm_rms_epsilon": (
                kv.get("gemma3.attention.layer_norm_rms_epsilon", 1e-6),
                _F32,
            ),
            "gemma-embedding.rope.freq_base_swa": (kv.get("gemma3.rope.freq_base_swa", 1e4), _F32),
            "gemma-embedding.pooling_type": (kv.get("gemma3.pooling_type") or 1, _U32),
            "gemma-embedding.dense_2_feat_in": (d0[0], _U32),
            "gemma-embedding.dense_2_feat_out": (d0[1], _U32),
            "gemma-embedding.dense_3_feat_in": (d1[0], _U32),
            "gemma-embedding.dense_3_feat_out": (d1[1], _U32),
        },
    )


_QWEN25VL_CLIP_RENAMES = (
    ("v.merger.ln_q.", "v.post_ln."),
    ("v.merger.mlp.0.", "mm.0."),
    ("v.merger.mlp.2.", "mm.2."),
    ("v.patch_embd_0.weight", "v.patch_embd.weight"),
    ("v.patch_embd_1.weight", "v.patch_embd.weight.1"),
)


def _qwen25vl(h: Header) -> list[Rewrite]:
    """Qwen2.5-VL as llama.cpp runs it (``handle_qwen25vl`` and its clip side in Ollama's shim): the
    text model as ``qwen2vl`` with its M-RoPE sections padded to four, and the tower inside as a
    ``qwen2.5vl_merger`` projector (merger and patch-embedding halves renamed)."""
    kv = h.kv
    sections = kv.get("qwen25vl.rope.mrope_section")
    if not isinstance(sections, list) or len(sections) < 3:
        raise LayoutRefused(refusal("qwen25vl", "no qwen25vl.rope.mrope_section for its M-RoPE positions"))
    text = Rewrite(
        role="model",
        arch="qwen2vl",
        keep_tensor=lambda name: not _vision_tensor(name),
        keep_key=lambda key: not key.startswith(("qwen25vl.vision.", "qwen25vl.rope.mrope_section")),
        key_prefixes=("qwen25vl.", "qwen2vl."),
        set_kv={"qwen2vl.rope.dimension_sections": ([*sections[:3], 0], _ARRAY)},
    )
    if not h.any_tensor("v."):
        return [text]

    full_attention = kv.get("qwen25vl.vision.fullatt_block_indexes") or [7]
    clip = _projector(
        _QWEN25VL_CLIP_RENAMES,
        {
            **_clip_keys(h, "qwen2.5vl_merger", "clip.use_silu"),
            "clip.vision.spatial_merge_size": _tower_key(h, "spatial_merge_size", _U32, 2),
            "clip.vision.window_size": _tower_key(h, "window_size", _U32, 112),
            "clip.vision.feed_forward_length": (h.rows("v.blk.0.ffn_up.weight") or 0, _U32),
            # Window attention everywhere but every n-th block (as llama.cpp's converter derives it).
            "clip.vision.n_wa_pattern": (int(full_attention[0]) + 1, _U32),
            "clip.vision.image_size": (560, _U32),  # Qwen2-VL's default; the image keeps its own size
            "clip.vision.image_mean": ([0.48145466, 0.4578275, 0.40821073], _ARRAY),
            "clip.vision.image_std": ([0.26862954, 0.26130258, 0.27577711], _ARRAY),
        },
        "v.patch_embd.weight",
        "v.patch_embd.weight.1",
    )
    return [text, clip]


def _llava_projector() -> Rewrite:
    """Older LLaVA projectors in Ollama's registry state no type; clip.cpp wants one (``mlp``)."""
    return Rewrite(
        role="projector",
        arch="clip",
        keep_tensor=lambda name: True,
        set_kv={"clip.projector_type": ("mlp", _STR)},
    )


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
    finally:
        writer.close()


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
    for key, (value, kind) in rw.set_kv.items():
        sub_type = _array_type(value[0]) if kind == _ARRAY else None
        writer.add_key_value(key, value, kind, sub_type=sub_type)


def _array_type(first: Any) -> GGUFValueType:
    """The element type of an array ``set_kv`` states, from its first element."""
    if isinstance(first, bool):
        return _BOOL
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
            f32 = GGMLQuantizationType.F32
            tensors.append(Tensor(name, f32, tuple(data.shape), np.dtype(np.float32), _as_f32(data)))
        else:
            tensors.append(Tensor.of(name, kind, data))
    return tensors


def _as_f32(data: np.ndarray) -> Callable[[], np.ndarray]:
    return lambda: np.asarray(data, dtype=np.float32)


_VOCAB_ARRAYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type")


# How much of a model blob a registry pull reads first to decide its layout before downloading
# it: a GGUF's metadata and tensor list (a 262k-token vocabulary's header is ~6 MB).
HEADER_PROBE_BYTES = 8 << 20
HEADER_PROBE_MIN_BLOB = 64 << 20  # a smaller model is downloaded and then checked: little is lost


def check_prefix(data: bytes) -> None:
    """Raise ``LayoutRefused`` if a GGUF's first bytes already show a layout cllm cannot run
    (nothing when they hold too little of the header to tell: decided after the download)."""
    try:
        info = gguf_info_of_prefix(data)
    except GGUFError:
        return
    plan(Header.of(info))


@dataclass(frozen=True)
class Adapted:
    """A model's layers with its Ollama-layout GGUFs replaced by what llama.cpp loads."""

    layers: list[Layer]
    replaced: list[str]  # digests of the blobs no longer needed (discard once the manifest is written)
    model: GGUFInfo  # the (new) model GGUF's header, for the config


def adapt_layers(
    store: ModelStore, claim: Claim, layers: list[Layer], report: Callable[[dict[str, Any]], None]
) -> Adapted | None:
    """Check every GGUF layer's layout; rewrite those Ollama's converter laid out differently (once,
    here, before the manifest). None when every one loads as it is; raises ``LayoutRefused``."""
    out: list[Layer] = []
    replaced: list[str] = []
    for layer in layers:
        found = _plan_for(store, layer)
        if found is None:
            out.append(layer)
            continue
        arch, rewrites = found
        report({"status": f"converting {arch} from Ollama's layout"})
        replaced.append(layer.digest)
        for rw in rewrites:
            fd, tmp = tempfile.mkstemp(prefix=".layout-", dir=store.blobs_dir)
            os.close(fd)
            try:
                rewrite(store.blob_path(layer.digest), Path(tmp), rw)
                out.append(claim.adopt_file(Path(tmp), mt.MODEL if rw.role == "model" else mt.PROJECTOR))
            except (OSError, ValueError) as exc:  # a full disk, a file whose tensors are not where it says
                raise LayoutRefused(f"converting {arch} from Ollama's layout failed: {exc}") from exc
            finally:
                Path(tmp).unlink(missing_ok=True)
    if not replaced:
        return None
    model = next(layer for layer in out if layer.media_type == mt.MODEL)
    return Adapted(out, replaced, gguf_info(store.blob_path(model.digest)))


def _plan_for(store: ModelStore, layer: Layer) -> tuple[str, list[Rewrite]] | None:
    if layer.media_type not in (mt.MODEL, mt.PROJECTOR):
        return None
    try:
        info = gguf_info(store.blob_path(layer.digest), verbose=True)
    except (GGUFError, OSError):
        return None  # not a GGUF: the loader's own checks say so
    rewrites = plan(Header.of(info))
    return None if rewrites is None else (info.architecture, rewrites)
