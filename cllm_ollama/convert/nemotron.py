"""Nemotron-H MoE's text map, and Nemotron 3 Nano Omni as Ollama's converter wrote it
(``nemotron_h_omni``), split into what llama.cpp runs.

Ollama's file (``convert/convert_nemotron_h.go``, ``nemotronHNanoVLModel``) is one GGUF: the
Nemotron-H text model (Mamba-2, attention and MLP or MoE blocks), a RADIO ViT (``v.*``) with its
projector (``mm.*``), and a Parakeet audio encoder (``a.*``, ``mm.a.*``). llama.cpp runs the text
model as ``nemotron_h`` or ``nemotron_h_moe`` and the vision tower as a ``nemotron_v2_vl`` CLIP
projector (``NemotronNanoV2VLModel`` in its ``conversion/nemotron.py``). The split is made once, at
pull or create, where Ollama's shim (``handle_nemotron_h_omni`` and its clip side in
``llama/compat``) redoes it in memory at every load. Unlike the shim (which sets
``clip.has_audio_encoder`` false), the Parakeet audio encoder is mapped too, into the same
projector as llama.cpp's converter writes it: a ``parakeet`` audio side beside the
``nemotron_v2_vl`` vision side, each type under its modality's key
(the audio side is ``parakeet.py``'s).
"""

from __future__ import annotations

import dataclasses
import math

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
    f32_shaped,
    fused_qkv,
    keep_all,
    projector,
    refusal,
    renaming,
    suffix_renames,
    tower_key,
)
from .parakeet import parakeet_keys, parakeet_name, parakeet_tensor

_U32 = GGUFValueType.UINT32
_STR = GGUFValueType.STRING
_ARRAY = GGUFValueType.ARRAY
_F32 = GGMLQuantizationType.F32
_F32_DTYPE = np.dtype(np.float32)

_ARCH = "nemotron_h_omni"
_TOWERS = ("v.", "a.", "mm.")
_AUDIO = ("a.", "mm.a.")
# Ollama's names -> clip.cpp's (``handle_nemotron_h_omni_clip``).
_EXACT = {
    "v.cls_embd": "v.class_embd",
    "v.position_embd": "v.position_embd.weight",
    "mm.norm.weight": "mm.model.mlp.0.weight",
    "mm.1.weight": "mm.model.mlp.1.weight",
    "mm.2.weight": "mm.model.mlp.3.weight",
}


def is_ollama_nemotron_h_moe(h: Header) -> bool:
    """Ollama's names for the latent FFN projections, or its multi-token-prediction head."""
    return h.any_tensor("blk.0.ffn_latent_in", "blk.1.ffn_latent_in", "mtp.")


def nemotron_h_moe(h: Header) -> Rewrite:
    """Nemotron-H MoE (``handle_nemotron_h_moe``): the latent FFN projections under llama.cpp's
    names with their width stated, and the multi-token-prediction head dropped."""
    set_kv: KV = {}
    latent = h.first_rows("ffn_latent_in.weight")
    if latent and not h.has("moe_latent_size"):
        set_kv["nemotron_h_moe.moe_latent_size"] = (latent, _U32)
    names = suffix_renames(((".ffn_latent_in", ".ffn_latent_down"), (".ffn_latent_out", ".ffn_latent_up")))
    return Rewrite(
        role="model",
        arch="nemotron_h_moe",
        keep_tensor=lambda name: not name.startswith("mtp."),
        set_kv=set_kv,
        tensors=renaming(names),
    )


def nemotron_h_omni(h: Header) -> list[Rewrite]:
    """The text model under llama.cpp's Nemotron-H architecture (with ``nemotron_h_moe``'s own
    fixes when it has experts), and the RADIO tower as a ``nemotron_v2_vl`` projector, with the
    Parakeet tower as its ``parakeet`` audio side when the file has one."""
    if not h.any_tensor("v."):
        why = "no vision tower (v.*) to split out; its audio tower alone is not mapped"
        raise LayoutRefused(refusal(_ARCH, why))
    kv = h.kv
    moe = bool(kv.get(f"{_ARCH}.expert_count") or kv.get(f"{_ARCH}.expert_used_count"))
    arch = "nemotron_h_moe" if moe else "nemotron_h"
    base = nemotron_h_moe(h) if moe else Rewrite(role="model", arch=arch, keep_tensor=keep_all)
    keep_tensor = base.keep_tensor
    text = dataclasses.replace(
        base,
        keep_tensor=lambda name: keep_tensor(name) and not name.startswith(_TOWERS),
        keep_key=lambda key: not key.startswith((f"{_ARCH}.vision.", f"{_ARCH}.audio.")),
        key_prefixes=(f"{_ARCH}.", f"{arch}."),
    )
    return [text, _projector_of(h)]


def _projector_of(h: Header) -> Rewrite:
    patch = int(tower_key(h, "patch_size", _U32)[0])
    side = int(tower_key(h, "image_size", _U32)[0]) // max(1, patch)
    n_embd = int(tower_key(h, "embedding_length", _U32)[0])
    positions = h.shapes.get("v.position_embd", [])
    if len(positions) < 2 or math.isqrt(positions[1]) ** 2 != positions[1] or positions[0] != n_embd:
        raise LayoutRefused(refusal(_ARCH, "its vision tower has no square position table (v.position_embd)"))
    n_in = int(h.kv.get(f"{_ARCH}.vision.num_channels") or 3)
    clip_kv: KV = {
        **clip_keys(h, "nemotron_v2_vl", "clip.use_gelu"),
        "clip.vision.feed_forward_length": tower_key(h, "feed_forward_length", _U32),
        "clip.vision.image_size": tower_key(h, "image_size", _U32),
        "clip.vision.projector.scale_factor": tower_key(h, "projector.scale_factor", _U32, 2),
        "clip.vision.image_mean": tower_key(h, "image_mean", _ARRAY, CLIP_MEAN),
        "clip.vision.image_std": tower_key(h, "image_std", _ARRAY, CLIP_STD),
    }
    hears = h.any_tensor(*_AUDIO)
    if hears:
        del clip_kv["clip.projector_type"]
        clip_kv |= {"clip.vision.projector_type": ("nemotron_v2_vl", _STR), **parakeet_keys(h)}
    clip = projector((), clip_kv, "v.class_embd")

    def tensors(ts: list[Tensor]) -> list[Tensor]:
        by_name = {t.name: t for t in ts}
        reshaped = {
            "v.patch_embd.weight": lambda t: _as_conv_kernel(t, n_in, patch),
            "v.position_embd.weight": lambda t: positions_resized(t, side, n_embd),
        }

        def made(t: Tensor) -> list[Tensor]:
            if t.name in reshaped:
                return [reshaped[t.name](t)]
            return [parakeet_tensor(t)] if t.name.startswith(_AUDIO) else fused_qkv(t, by_name)

        return [u for t in ts for u in made(t)]

    return dataclasses.replace(
        clip,
        keep_tensor=lambda name: name.startswith(_TOWERS) and (hears or not name.startswith(_AUDIO)),
        exact={**_EXACT, **{name: parakeet_name(name) for name in h.shapes if hears and name.startswith(_AUDIO)}},
        tensors=tensors,
    )


def _as_conv_kernel(t: Tensor, n_in: int, patch: int) -> Tensor:
    """RADIO's linear patch embedding ``[out, in*p*p]`` (channel-major rows) as the convolution
    kernel ``[out, in, p, p]`` llama.cpp's converter writes: the same numbers, in F32."""
    return f32_shaped(t, (t.shape[0], n_in, patch, patch))


def positions_resized(t: Tensor, side: int, n_embd: int) -> Tensor:
    """RADIO's position table, made at its largest grid, resized to the fixed image's grid as
    llama.cpp's converter and Ollama's shim do (bilinear, corners aligned: ``F.interpolate``, as
    RADIO's first code did; transformers' port does not align them), as ``[1, side*side, n]``."""
    source, kind = t.data, t.kind

    def resized() -> np.ndarray:
        grid = dequantize(source(), kind).astype(np.float32).reshape(-1, n_embd)
        src = math.isqrt(grid.shape[0])
        return _bilinear(grid.reshape(src, src, n_embd), side).reshape(1, side * side, n_embd)

    return Tensor(t.name, _F32, (1, side * side, n_embd), _F32_DTYPE, resized)


def _bilinear(grid: np.ndarray, side: int) -> np.ndarray:
    """``grid`` ``[s, s, n]`` resized to ``[side, side, n]``, bilinear with aligned corners (each
    output point at ``i * (s - 1) / (side - 1)``, as PyTorch computes it: columns, then rows)."""
    src = grid.shape[0]
    if src == side:
        return grid
    scale = (src - 1) / (side - 1) if side > 1 else 0.0
    at = np.arange(side) * scale
    lo = np.minimum(np.floor(at).astype(np.int64), src - 1)
    hi = np.minimum(lo + 1, src - 1)
    w = (at - lo).astype(np.float32)[:, None]
    cols = grid[:, lo] * (1 - w) + grid[:, hi] * w  # [s, side, n]
    return np.ascontiguousarray(cols[lo] * (1 - w)[:, None] + cols[hi] * w[:, None], dtype=np.float32)
