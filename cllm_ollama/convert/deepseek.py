"""DeepSeek-OCR as Ollama's converter wrote it (``deepseekocr``), split into what llama.cpp runs.

Ollama's file (``convert/convert_deepseekocr.go``) is one GGUF: the DeepSeek-V2-style MoE text
model, a SAM-B encoder (``s.*``), a CLIP-L encoder (``v.*``) and the projector (``mm.*``). llama.cpp
runs the text model as ``deepseek2-ocr`` and the towers as a ``deepseekocr`` CLIP projector
(``DeepseekOCRVisionModel`` in its ``conversion/deepseek.py``, ``tools/mtmd/models/deepseekocr.cpp``).
The split is made once, when the model is pulled or created, as Ollama's shim
(``handle_deepseekocr`` and ``handle_deepseekocr_clip`` in ``llama/compat``) redoes it in memory at
every load; where the two differ, this follows llama.cpp's converter (its F32 tensors, its keys).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gguf import GGUFValueType

from .framework import Header, LayoutRefused, Rewrite, Tensor, projector, refusal, tower_key

_F32 = GGUFValueType.FLOAT32
_U32 = GGUFValueType.UINT32
_BOOL = GGUFValueType.BOOL
_STR = GGUFValueType.STRING
_ARRAY = GGUFValueType.ARRAY

_ARCH = "deepseekocr"
_TEXT_ARCH = "deepseek2-ocr"
_TOWERS = ("s.", "v.", "mm.")

# Ollama's names for the CLIP encoder and projector -> clip.cpp's (``kDeepseekocrClipRenames``).
_CLIP_RENAMES = (
    (".self_attn.out_proj", ".attn_out"),
    (".self_attn.qkv_proj", ".attn_qkv"),
    (".layer_norm1", ".ln1"),
    (".layer_norm2", ".ln2"),
    (".mlp.fc1", ".ffn_up"),
    (".mlp.fc2", ".ffn_down"),
    ("v.pre_layrnorm", "v.pre_ln"),  # the spelling of the published weights
    ("mm.layers", "mm.model.fc"),
    ("mm.image_newline", "v.image_newline"),
    ("mm.view_seperator", "v.view_seperator"),  # also upstream's spelling
)
# Ollama's names for the SAM blocks' leaves -> clip.cpp's, once ``s.`` is ``v.sam.``.
_SAM_RENAMES = (
    (".attn.proj", ".attn.out"),
    (".attn.rel_pos_h", ".attn.pos_h.weight"),
    (".attn.rel_pos_w", ".attn.pos_w.weight"),
    (".norm1", ".pre_ln"),
    (".norm2", ".post_ln"),
)
# What llama.cpp's converter keeps in F32 whatever the output type (``tensor_force_quant``: the
# CLIP embeddings, SAM's position table and relative positions, its neck); Ollama wrote them F16.
_F32_PARTS = ("v.class_embd", "v.patch_embd.", "v.position_embd.", "v.sam.pos_embd.", ".attn.pos_", ".neck.", ".net_")
_VIEW_SEPARATOR = "v.view_seperator"
# DeepSeek-OCR's preprocessor: 256 tokens per 1024-pixel view, 2 to 9 tiles of 640 pixels.
_TOKENS_PER_SIDE = 16


def deepseekocr(h: Header) -> list[Rewrite]:
    """The text model as ``deepseek2-ocr`` with the keys llama.cpp requires, and the SAM and CLIP
    towers with the projector as one ``deepseekocr`` CLIP GGUF."""
    kv = h.kv
    lead = int(kv.get(f"{_ARCH}.leading_dense_block_count") or 0)
    down = h.shapes.get(f"blk.{lead}.ffn_down_exps.weight")  # ggml [n_ff_exp, n_embd, n_expert]
    shared = h.shapes.get(f"blk.{lead}.ffn_down_shexp.weight")  # ggml [n_ff_exp * n_shared, n_embd]
    if not down or not shared or not down[0] or shared[0] % down[0]:
        why = f"no blk.{lead}.ffn_down_exps and ffn_down_shexp to take the experts' width and shared count from"
        raise LayoutRefused(refusal(_ARCH, why))
    text = Rewrite(
        role="model",
        arch=_TEXT_ARCH,
        keep_tensor=lambda name: not name.startswith(_TOWERS),
        keep_key=lambda key: not key.startswith((f"{_ARCH}.vision.", f"{_ARCH}.sam.")),
        key_prefixes=(f"{_ARCH}.", f"{_TEXT_ARCH}."),
        set_kv={
            # As llama.cpp's converter defaults them (DeepSeek-OCR's config states neither);
            # its graph asserts a RoPE base of 10000.
            f"{_TEXT_ARCH}.attention.layer_norm_rms_epsilon": (
                kv.get(f"{_ARCH}.attention.layer_norm_rms_epsilon", 1e-6),
                _F32,
            ),
            f"{_TEXT_ARCH}.rope.freq_base": (kv.get(f"{_ARCH}.rope.freq_base", 10000.0), _F32),
            f"{_TEXT_ARCH}.expert_feed_forward_length": (down[0], _U32),
            f"{_TEXT_ARCH}.expert_shared_count": (shared[0] // down[0], _U32),
        },
    )
    if not h.any_tensor("v.", "s."):
        return [text]
    return [text, _projector_of(h)]


def _projector_of(h: Header) -> Rewrite:
    kv = h.kv
    image_size = tower_key(h, "image_size", _U32)
    patch_size = tower_key(h, "patch_size", _U32)
    heads = tower_key(h, "head_count", _U32)
    clip_kv: dict[str, tuple[Any, GGUFValueType]] = {
        "clip.has_vision_encoder": (True, _BOOL),
        "clip.use_gelu": (True, _BOOL),
        "clip.projector_type": ("deepseekocr", _STR),
        "clip.vision.block_count": tower_key(h, "block_count", _U32),
        "clip.vision.embedding_length": tower_key(h, "embedding_length", _U32),
        "clip.vision.attention.head_count": heads,
        # llama.cpp's converter states heads x 4 (clip.cpp reads the FFN's width from its tensors).
        "clip.vision.feed_forward_length": (heads[0] * 4, _U32),
        "clip.vision.image_size": image_size,
        "clip.vision.patch_size": patch_size,
        "clip.vision.projection_dim": (kv.get(f"{_ARCH}.embedding_length"), _U32),
        "clip.vision.attention.layer_norm_epsilon": (1e-6, _F32),
        "clip.vision.image_mean": ([0.5, 0.5, 0.5], _ARRAY),
        "clip.vision.image_std": ([0.5, 0.5, 0.5], _ARRAY),
        "clip.vision.window_size": (14, _U32),
        "clip.vision.preproc_min_tiles": (2, _U32),
        "clip.vision.preproc_max_tiles": (9, _U32),
        "clip.vision.sam.block_count": _sam_key(h, "block_count"),
        "clip.vision.sam.embedding_length": _sam_key(h, "embedding_length"),
        "clip.vision.sam.head_count": _sam_key(h, "head_count"),
    }
    scale = image_size[0] // max(1, patch_size[0]) // _TOKENS_PER_SIDE
    if scale > 0 and scale != 4:  # llama.cpp's converter states only a factor other than clip.cpp's 4
        clip_kv["clip.vision.projector.scale_factor"] = (scale, _U32)
    clip = projector(_CLIP_RENAMES, clip_kv)
    sam = {name: _sam_name(name) for name in h.shapes if name.startswith("s.")}
    mapped = [sam.get(name) or clip.tensor_name(name) for name in h.shapes if name.startswith(_TOWERS)]
    return dataclasses.replace(
        clip,
        keep_tensor=lambda name: name.startswith(_TOWERS),
        exact=sam,
        to_f32=frozenset(name for name in mapped if any(part in name for part in _F32_PARTS)),
        tensors=_separator_as_row,
    )


def _sam_key(h: Header, key: str) -> tuple[Any, GGUFValueType]:
    value = h.kv.get(f"{_ARCH}.sam.{key}")
    if value is None:
        raise LayoutRefused(refusal(_ARCH, f"its SAM encoder states no {_ARCH}.sam.{key}"))
    return value, _U32


def _sam_name(name: str) -> str:
    """``s.*`` (only at the start: ``mm.layers`` holds an ``s.`` too) as clip.cpp's ``v.sam.*``."""
    if name == "s.position_embd":
        return "v.sam.pos_embd.weight"
    name = "v.sam." + name.removeprefix("s.")
    for old, new in _SAM_RENAMES:
        name = name.replace(old, new)
    return name


def _separator_as_row(tensors: list[Tensor]) -> list[Tensor]:
    """The view separator as the one-row matrix llama.cpp's converter writes (``unsqueeze(0)``)."""
    return [_as_row(t) if t.name == _VIEW_SEPARATOR and len(t.shape) == 1 else t for t in tensors]


def _as_row(t: Tensor) -> Tensor:
    source = t.data
    return Tensor(t.name, t.kind, (1, *t.shape), t.dtype, lambda: source().reshape(1, -1))
