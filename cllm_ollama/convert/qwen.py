"""Qwen's maps: Qwen2.5-VL, Qwen3-VL (dense and MoE), Qwen 3.5 (dense and MoE, with the same
tower as Qwen3-VL) and Qwen3-Next, as Ollama's shim (``handle_qwen25vl``, ``handle_qwen3vl``,
``apply_qwen35_text_fixes``, ``handle_qwen3next`` and their clip sides) remaps them at every load:
M-RoPE sections padded to four, KV-head counts as one number, ``ssm_dt`` named, and the towers as
``qwen2.5vl_merger`` or ``qwen3vl_merger`` projectors (Q/K/V fused, the two-frame patch embedding
split), as llama.cpp's ``Qwen3VLVisionModel`` writes them."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType
from gguf.quants import dequantize

from .framework import (
    CLIP_MEAN,
    CLIP_STD,
    KV,
    Header,
    LayoutRefused,
    Rewrite,
    Tensor,
    clip_keys,
    fused_qkv,
    keep_all,
    projector,
    refusal,
    suffix_renames,
    tower_key,
    triple,
    vision_tensor,
)

_F32 = GGUFValueType.FLOAT32
_U32 = GGUFValueType.UINT32
_ARRAY = GGUFValueType.ARRAY
_F32_TYPE = GGMLQuantizationType.F32
_HALF = [0.5, 0.5, 0.5]

# --- qwen25vl --------------------------------------------------------------------------------------

_QWEN25VL_CLIP_RENAMES = (
    ("v.merger.ln_q.", "v.post_ln."),
    ("v.merger.mlp.0.", "mm.0."),
    ("v.merger.mlp.2.", "mm.2."),
    ("v.patch_embd_0.weight", "v.patch_embd.weight"),
    ("v.patch_embd_1.weight", "v.patch_embd.weight.1"),
)


def qwen25vl(h: Header) -> list[Rewrite]:
    """Qwen2.5-VL as llama.cpp runs it (``handle_qwen25vl`` and its clip side in Ollama's shim): the
    text model as ``qwen2vl`` with its M-RoPE sections padded to four, and the tower inside as a
    ``qwen2.5vl_merger`` projector (merger and patch-embedding halves renamed)."""
    sections = h.kv.get("qwen25vl.rope.mrope_section")
    if not isinstance(sections, list) or len(sections) < 3:
        raise LayoutRefused(refusal("qwen25vl", "no qwen25vl.rope.mrope_section for its M-RoPE positions"))
    text = Rewrite(
        role="model",
        arch="qwen2vl",
        keep_tensor=lambda name: not vision_tensor(name),
        keep_key=lambda key: not key.startswith(("qwen25vl.vision.", "qwen25vl.rope.mrope_section")),
        key_prefixes=("qwen25vl.", "qwen2vl."),
        set_kv={"qwen2vl.rope.dimension_sections": ([*sections[:3], 0], _ARRAY)},
    )
    if not h.any_tensor("v."):
        return [text]
    return [text, _qwen25vl_projector(h)]


def _qwen25vl_projector(h: Header) -> Rewrite:
    full_attention = h.kv.get("qwen25vl.vision.fullatt_block_indexes") or [7]
    return projector(
        _QWEN25VL_CLIP_RENAMES,
        {
            **clip_keys(h, "qwen2.5vl_merger", "clip.use_silu"),
            "clip.vision.spatial_merge_size": tower_key(h, "spatial_merge_size", _U32, 2),
            "clip.vision.window_size": tower_key(h, "window_size", _U32, 112),
            "clip.vision.feed_forward_length": (h.rows("v.blk.0.ffn_up.weight") or 0, _U32),
            # Window attention everywhere but every n-th block (as llama.cpp's converter derives it).
            "clip.vision.n_wa_pattern": (int(full_attention[0]) + 1, _U32),
            "clip.vision.image_size": (560, _U32),  # Qwen2-VL's default; the image keeps its own size
            "clip.vision.image_mean": (CLIP_MEAN, _ARRAY),
            "clip.vision.image_std": (CLIP_STD, _ARRAY),
        },
        "v.patch_embd.weight",
        "v.patch_embd.weight.1",
    )


# --- qwen3vl ---------------------------------------------------------------------------------------

# Ollama's names for the Qwen3-VL tower (its first convert_qwen3vl.go) -> llama.cpp's.
_QWEN3VL_RENAMES = (
    ("v.merger.norm.", "v.post_ln."),
    ("v.merger.linear_fc1.", "mm.0."),
    ("v.merger.linear_fc2.", "mm.2."),
    ("v.patch_embed.bias", "v.patch_embd.bias"),
    ("v.pos_embed.weight", "v.position_embd.weight"),
    (".norm1.", ".ln1."),
    (".norm2.", ".ln2."),
    (".mlp.linear_fc1.", ".ffn_up."),
    (".mlp.linear_fc2.", ".ffn_down."),
)
_QWEN3VL_MROPE = [24, 20, 20, 0]  # every Qwen3-VL's sections (t, h, w) for its 128-wide heads


def is_ollama_qwen3vl(h: Header) -> bool:
    """Ollama's converter dropped the M-RoPE sections llama.cpp's states."""
    return not h.has("rope.dimension_sections")


def qwen3vl(h: Header) -> list[Rewrite]:
    """Qwen3-VL (dense or MoE): the text model with the two keys llama.cpp requires (M-RoPE
    sections, which Ollama's converter dropped, and the deepstack count), and a ``qwen3vl_merger``
    projector: Q/K/V fused into one ``attn_qkv``, the Conv3D patch embedding split into its two
    frames, the deepstack mergers named by the block they follow."""
    arch, kv = h.arch, h.kv
    deepstack = [int(i) for i in kv.get(f"{arch}.vision.deepstack_visual_indexes") or []]
    text_kv: KV = {
        f"{arch}.rope.dimension_sections": (_qwen3vl_mrope(h), _ARRAY),
        f"{arch}.n_deepstack_layers": (len(deepstack), _U32),
    }
    experts = h.shapes.get("blk.0.ffn_gate_exps.weight")
    if experts and not h.has("expert_feed_forward_length"):
        # Ollama's converter does not state the experts' width; llama.cpp's does (it would guess it).
        text_kv[f"{arch}.expert_feed_forward_length"] = (experts[1], _U32)
    text = Rewrite(
        role="model",
        arch=arch,
        keep_tensor=lambda name: not vision_tensor(name),
        keep_key=lambda key: not key.startswith((f"{arch}.vision.", f"{arch}.rope.mrope_section")),
        set_kv=text_kv,
    )
    if not h.any_tensor("v."):
        return [text]
    return [text, qwen3vl_projector(h, deepstack)]


def _qwen3vl_mrope(h: Header) -> list[int]:
    """The M-RoPE sections the file states (padded to four), or Qwen3-VL's for 128-wide heads."""
    arch, kv = h.arch, h.kv
    sections = kv.get(f"{arch}.rope.mrope_section")
    if isinstance(sections, list) and len(sections) >= 3:
        return [*sections[:3], 0]
    head = h.head_size()
    if head != 128:
        why = f"no M-RoPE sections, and a head size of {head} where Qwen3-VL's [24, 20, 20] are for 128"
        raise LayoutRefused(refusal(arch, why))
    return _QWEN3VL_MROPE


def qwen3vl_projector(h: Header, deepstack: list[int]) -> Rewrite:
    """The ``qwen3vl_merger`` projector of a Qwen3-VL's or Qwen 3.5's tower in Ollama's layout (the
    same tower: llama.cpp's ``Qwen3VLVisionModel`` converts both; Qwen 3.5 has no deepstack)."""
    arch, kv = h.arch, h.kv
    n_blocks = int(tower_key(h, "block_count", _U32)[0])
    n_in = int(kv.get(f"{arch}.vision.num_channels") or 3)
    patch = h.shapes.get("v.patch_embed.weight")
    positions = h.rows("v.pos_embed.weight")
    if not patch or len(patch) != 4 or patch[2] != 2 or patch[3] % n_in or not positions:
        raise LayoutRefused(refusal(arch, "its vision tower has no two-frame patch embedding or position table"))
    clip_kv: KV = {
        **clip_keys(h, "qwen3vl_merger", "clip.use_gelu"),
        # As llama.cpp's converter: the text model's norm epsilon.
        "clip.vision.attention.layer_norm_epsilon": (kv.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6), _F32),
        "clip.vision.feed_forward_length": (h.rows("v.blk.0.mlp.linear_fc1.weight") or 0, _U32),
        "clip.vision.image_size": (math.isqrt(positions) * int(tower_key(h, "patch_size", _U32)[0]), _U32),
        "clip.vision.spatial_merge_size": tower_key(h, "spatial_merge_size", _U32, 2),
        "clip.vision.image_mean": (triple(kv.get(f"{arch}.vision.image_mean"), _HALF), _ARRAY),
        "clip.vision.image_std": (triple(kv.get(f"{arch}.vision.image_std"), _HALF), _ARRAY),
        "clip.vision.is_deepstack_layers": ([i in deepstack for i in range(n_blocks)], _ARRAY),
    }

    def tensors(ts: list[Tensor]) -> list[Tensor]:
        by_name = {t.name: t for t in ts}
        out = []
        for t in ts:  # K and V are fused into the block's attn_qkv at its Q
            out += _temporal_halves(t, n_in) if t.name == "v.patch_embed.weight" else fused_qkv(t, by_name)
        return out

    return dataclasses.replace(
        projector(_QWEN3VL_RENAMES, clip_kv, "v.position_embd.weight"),
        exact={
            f"v.deepstack_merger.{i}.{old}.{part}": f"v.deepstack.{block}.{new}.{part}"
            for i, block in enumerate(deepstack)
            for old, new in (("norm", "norm"), ("linear_fc1", "fc1"), ("linear_fc2", "fc2"))
            for part in ("weight", "bias")
        },
        tensors=tensors,
    )


def _temporal_halves(t: Tensor, n_in: int) -> list[Tensor]:
    """Qwen's Conv3D patch embedding over two frames, stored by Ollama as ggml ``[pw, ph, 2,
    out*in]``, as the two Conv2D kernels ``[pw, ph, in, out]`` llama.cpp's converter writes (F32)."""
    packed, frames, ph, pw = t.shape
    shape = (packed // n_in, n_in, ph, pw)
    source, kind = t.data, t.kind

    def frame(i: int) -> np.ndarray:
        data = dequantize(source(), kind).reshape(packed, frames, ph, pw)
        return np.ascontiguousarray(data[:, i].reshape(shape), dtype=np.float32)

    f32 = np.dtype(np.float32)
    return [
        Tensor("v.patch_embd.weight", _F32_TYPE, shape, f32, lambda: frame(0)),
        Tensor("v.patch_embd.weight.1", _F32_TYPE, shape, f32, lambda: frame(1)),
    ]


# --- qwen35, qwen3next -----------------------------------------------------------------------------

_SSM_DT = suffix_renames(((".ssm_dt", ".ssm_dt.bias"),))


def _ssm_dt(tensors: list[Tensor]) -> list[Tensor]:
    """``blk.N.ssm_dt`` is llama.cpp's ``blk.N.ssm_dt.bias`` (same shape)."""
    return [t.renamed(_SSM_DT(t.name)) if t.name.endswith(".ssm_dt") else t for t in tensors]


def _max_of(value: Any, fallback: int) -> int:
    """A per-layer array collapsed to its largest entry (llama.cpp reads one number)."""
    if isinstance(value, list):
        return max((int(v) for v in value), default=0) or fallback
    return int(value)


# The keys Ollama's converter now leaves out of a Qwen 3.5 text model (``TextKV`` in its
# convert_qwen3next.go): the tower's, and markers llama.cpp does not read.
_QWEN35_TOWER_KEYS = (
    "vision.",
    "image_token_id",
    "vision_start_token_id",
    "vision_end_token_id",
    "mrope_sections",
    "rope.mrope_section",
    "rope.mrope_interleaved",
    "ssm.v_head_reordered",
)


def has_qwen35_tower(h: Header) -> bool:
    """A Qwen 3.5 with its vision tower inside (split out by ``qwen35_vision``)."""
    return h.any_tensor("v.")


def is_ollama_qwen35(h: Header) -> bool:
    """Ollama's Qwen 3.5 markers: its tower's or reordering keys, interleaved M-RoPE, an MTP head or
    tower tensors, or (MoE) a dense FFN width, which llama.cpp's qwen35moe does not state."""
    return (
        any(h.has(k) for k in ("vision.block_count", "image_token_id", "ssm.v_head_reordered"))
        or (h.arch == "qwen35moe" and h.has("feed_forward_length"))
        or h.has("rope.mrope_interleaved")
        or h.any_tensor("mtp.", "v.")
    )


def qwen35_text(h: Header) -> Rewrite:
    """Qwen 3.5 dense and MoE (``apply_qwen35_text_fixes``): the KV-head count as one number, the
    M-RoPE sections padded to four, ``ssm_dt`` named, without the vision tower (``qwen35_vision``
    splits it into a projector) and the multi-token-prediction head (cllm does not draft with MTP)."""
    kv = h.kv
    set_kv: KV = {}
    heads = kv.get(f"{h.arch}.attention.head_count_kv")
    if isinstance(heads, list):
        set_kv[f"{h.arch}.attention.head_count_kv"] = (_max_of(heads, 2), _U32)
    # llama.cpp requires four M-RoPE sections; older files state three, or only ``rope.mrope_section``.
    named = kv.get(f"{h.arch}.rope.dimension_sections")
    sections = named if named is not None else kv.get(f"{h.arch}.rope.mrope_section")
    if isinstance(sections, list) and (len(sections) == 3 or named is None):
        set_kv[f"{h.arch}.rope.dimension_sections"] = ([*(int(s) for s in sections[:4]), 0, 0, 0][:4], _ARRAY)
    return Rewrite(
        role="model",
        arch=h.arch,
        keep_tensor=lambda name: not name.startswith(("v.", "mm.", "mtp.")),
        # A llama.cpp qwen35moe states its experts' width only (Ollama's marker: a dense FFN width).
        keep_key=lambda key: (
            not key.startswith(tuple(f"{h.arch}.{k}" for k in _QWEN35_TOWER_KEYS))
            and key != "qwen35moe.feed_forward_length"
        ),
        set_kv=set_kv,
        tensors=_ssm_dt,
    )


def qwen35_vision(h: Header) -> list[Rewrite]:
    """Qwen 3.5 with its tower: the text model, and the tower as Qwen3-VL's (no deepstack)."""
    return [qwen35_text(h), qwen3vl_projector(h, [])]


def is_ollama_qwen3next(h: Header) -> bool:
    return h.any_tensor_ending(".ssm_dt")


def qwen3next(h: Header) -> Rewrite:
    """Qwen3-Next (``handle_qwen3next``): ``ssm_dt`` named, the KV-head count as one number."""
    heads = h.kv.get("qwen3next.attention.head_count_kv")
    set_kv: KV = {}
    if isinstance(heads, list) and _max_of(heads, 0):
        set_kv["qwen3next.attention.head_count_kv"] = (_max_of(heads, 0), _U32)
    return Rewrite(role="model", arch="qwen3next", keep_tensor=keep_all, set_kv=set_kv, tensors=_ssm_dt)
