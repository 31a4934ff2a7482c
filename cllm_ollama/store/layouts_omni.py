"""Nemotron 3 Nano Omni as Ollama's converter wrote it (``nemotron_h_omni``), split into what llama.cpp runs.

Ollama's file (``convert/convert_nemotron_h.go``, ``nemotronHNanoVLModel``) is one GGUF: the
Nemotron-H text model (Mamba-2, attention and MLP or MoE blocks), a RADIO ViT (``v.*``) with its
projector (``mm.*``), and a Parakeet audio encoder (``a.*``, ``mm.a.*``). llama.cpp runs the text
model as ``nemotron_h`` or ``nemotron_h_moe`` and the vision tower as a ``nemotron_v2_vl`` CLIP
projector (``NemotronNanoV2VLModel`` in its ``conversion/nemotron.py``). The split is made once, at
pull or create, where Ollama's shim (``handle_nemotron_h_omni`` and its clip side in
``llama/compat``) redoes it in memory at every load. Unlike the shim (which sets
``clip.has_audio_encoder`` false), the Parakeet audio encoder is mapped too, into the same
projector as llama.cpp's converter writes it: a ``parakeet`` audio side beside the
``nemotron_v2_vl`` vision side, each type under its modality's key.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType
from gguf.quants import dequantize

from .layouts import Header, LayoutRefused, Rewrite, Tensor, _clip_keys, _projector, _tower_key, refusal
from .layouts_text import _nemotron_h_moe
from .layouts_vision import _VIT_QKV, _in_f32, _stacked

_U32 = GGUFValueType.UINT32
_F32_KEY = GGUFValueType.FLOAT32
_STR = GGUFValueType.STRING
_BOOL = GGUFValueType.BOOL
_ARRAY = GGUFValueType.ARRAY
_F32 = GGMLQuantizationType.F32
_F32_DTYPE = np.dtype(np.float32)

_ARCH = "nemotron_h_omni"
_TOWERS = ("v.", "a.", "mm.")
_VISION = ("v.", "mm.")
_AUDIO = ("a.", "mm.a.")
# Ollama's names -> clip.cpp's (``handle_nemotron_h_omni_clip``).
_EXACT = {
    "v.cls_embd": "v.class_embd",
    "v.position_embd": "v.position_embd.weight",
    "mm.norm.weight": "mm.model.mlp.0.weight",
    "mm.1.weight": "mm.model.mlp.1.weight",
    "mm.2.weight": "mm.model.mlp.3.weight",
}
# OpenAI CLIP's pixel statistics: Ollama's converter's default, and Nemotron's.
_CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
_CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def plan_omni(h: Header) -> list[Rewrite] | None:
    """Nemotron Omni's split; None for any other file."""
    return nemotron_h_omni(h) if h.arch == _ARCH else None


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
    base = _nemotron_h_moe(h) if moe else Rewrite(role="model", arch=arch, keep_tensor=lambda name: True)
    keep_tensor = base.keep_tensor
    text = dataclasses.replace(
        base,
        keep_tensor=lambda name: keep_tensor(name) and not name.startswith(_TOWERS),
        keep_key=lambda key: not key.startswith((f"{_ARCH}.vision.", f"{_ARCH}.audio.")),
        key_prefixes=(f"{_ARCH}.", f"{arch}."),
    )
    return [text, _projector_of(h)]


def _projector_of(h: Header) -> Rewrite:
    patch = int(_tower_key(h, "patch_size", _U32)[0])
    side = int(_tower_key(h, "image_size", _U32)[0]) // max(1, patch)
    n_embd = int(_tower_key(h, "embedding_length", _U32)[0])
    positions = h.shapes.get("v.position_embd", [])
    if len(positions) < 2 or math.isqrt(positions[1]) ** 2 != positions[1] or positions[0] != n_embd:
        raise LayoutRefused(refusal(_ARCH, "its vision tower has no square position table (v.position_embd)"))
    n_in = int(h.kv.get(f"{_ARCH}.vision.num_channels") or 3)
    clip_kv: dict[str, tuple[Any, GGUFValueType]] = {
        **_clip_keys(h, "nemotron_v2_vl", "clip.use_gelu"),
        "clip.vision.feed_forward_length": _tower_key(h, "feed_forward_length", _U32),
        "clip.vision.image_size": _tower_key(h, "image_size", _U32),
        "clip.vision.projector.scale_factor": _tower_key(h, "projector.scale_factor", _U32, 2),
        "clip.vision.image_mean": _tower_key(h, "image_mean", _ARRAY, _CLIP_MEAN),
        "clip.vision.image_std": _tower_key(h, "image_std", _ARRAY, _CLIP_STD),
    }
    hears = h.any_tensor(*_AUDIO)
    if hears:
        del clip_kv["clip.projector_type"]
        clip_kv |= {"clip.vision.projector_type": ("nemotron_v2_vl", _STR), **_parakeet_keys(h)}
    clip = _projector((), clip_kv, "v.class_embd")

    def tensors(ts: list[Tensor]) -> list[Tensor]:
        by_name = {t.name: t for t in ts}
        reshaped = {
            "v.patch_embd.weight": lambda t: _as_conv_kernel(t, n_in, patch),
            "v.position_embd.weight": lambda t: _positions_resized(t, side, n_embd),
        }

        def made(t: Tensor) -> list[Tensor]:
            if t.name in reshaped:
                return [reshaped[t.name](t)]
            return [_parakeet_tensor(t)] if t.name.startswith(_AUDIO) else fused_qkv(t, by_name)

        return [u for t in ts for u in made(t)]

    return dataclasses.replace(
        clip,
        keep_tensor=lambda name: name.startswith(_TOWERS) and (hears or not name.startswith(_AUDIO)),
        exact={**_EXACT, **{name: _parakeet_name(name) for name in h.shapes if hears and name.startswith(_AUDIO)}},
        tensors=tensors,
    )


def fused_qkv(t: Tensor, by_name: dict[str, Tensor]) -> list[Tensor]:
    """``t`` as it is, unless it is a ViT block's Q, K or V: Q's place gets the block's fused
    ``attn_qkv`` (``by_name`` holds the three), K's and V's nothing."""
    qkv = _VIT_QKV.fullmatch(t.name)
    if qkv is None:
        return [t]
    block, which, part = qkv.groups()
    if which != "q":
        return []
    return [_stacked([by_name[f"{block}attn_{x}.{part}"] for x in "qkv"], f"{block}attn_qkv.{part}")]


def _as_conv_kernel(t: Tensor, n_in: int, patch: int) -> Tensor:
    """RADIO's linear patch embedding ``[out, in*p*p]`` (channel-major rows) as the convolution
    kernel ``[out, in, p, p]`` llama.cpp's converter writes: the same numbers, in F32."""
    return _f32_shaped(t, (t.shape[0], n_in, patch, patch))


def _f32_shaped(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``t``'s numbers in F32, as ``shape`` (the same count)."""
    source = _in_f32(t).data
    return Tensor(t.name, _F32, shape, _F32_DTYPE, lambda: np.asarray(source(), np.float32).reshape(shape))


# The subsampling's layers: Ollama's names, and their index in the Hugging Face ``nn.Sequential``.
_SUBSAMPLING = (("conv0", 0), ("dw1", 2), ("pw1", 3), ("dw2", 5), ("pw2", 6))
# Parakeet's names in Ollama's file (``convert_nemotron_h.go``'s replacements of the Hugging Face
# names) -> clip.cpp's (``tensor_mapping.py``'s for the same Hugging Face names): whole-name starts,
# then a block's leaf (longest first: ``ffn2_up`` before a bare ``ffn``).
_PARAKEET_STARTS = {
    "a.feature_extractor.fb": "a.mel_filters",
    "a.feature_extractor.window": "a.window",
    "a.subsampling.linear.": "a.pre_encode.out.",
    "mm.a.norm.": "mm.a.norm_pre.",
    **{f"a.subsampling.{old}.": f"a.conv1d.{i}." for old, i in _SUBSAMPLING},
}
_PARAKEET_MLP = re.compile(r"mm\.a\.(\d+)\.")
_PARAKEET_LEAVES = {
    "ffn1_up": "ffn_up",
    "ffn1_down": "ffn_down",
    "ffn1_norm": "ffn_norm",
    "ffn2_up": "ffn_up_1",
    "ffn2_down": "ffn_down_1",
    "ffn2_norm": "ffn_norm_1",
    "attn_norm": "ln1",
    "out_norm": "ln2",
    "conv_norm": "norm_conv",  # the norm before the convolution module
    "conv_bn.running_mean": "conv_norm_mean",
    "conv_bn.running_var": "conv_norm_var",
    "conv_bn": "conv_norm",  # the module's batch norm
    "attn_rel_k": "linear_pos",
    "attn_bias_u": "pos_bias_u",
    "attn_bias_v": "pos_bias_v",
}
_PARAKEET_BLOCK = re.compile(
    r"(a\.blk\.\d+\.)(" + "|".join(sorted(_PARAKEET_LEAVES, key=len, reverse=True)) + r")\b(.*)"
)
# A bias broadcast over a 2-D convolution's output: llama.cpp's converter writes it [1, C, 1, 1].
_CONV_BIAS = re.compile(r"a\.conv1d\.\d+\.bias|a\.blk\.\d+\.conv_pw[12]\.bias")


def _parakeet_name(name: str) -> str:
    """An audio tensor's name in clip.cpp's Parakeet."""
    for old, new in _PARAKEET_STARTS.items():
        if name.startswith(old):
            return new + name.removeprefix(old)
    if m := _PARAKEET_MLP.match(name):
        return f"mm.a.mlp.{m.group(1)}." + name[m.end() :]
    if m := _PARAKEET_BLOCK.fullmatch(name):
        return m.group(1) + _PARAKEET_LEAVES[m.group(2)] + m.group(3)
    return name


def _parakeet_tensor(t: Tensor) -> Tensor:
    """A (renamed) audio tensor as ``NemotronNanoV2VLModel`` writes it: convolution biases
    ``[1, C, 1, 1]``, the depthwise kernel Ollama squeezed to ``[n, k]`` as ``[1, 1, n, k]``, and
    in F32 what its ``tensor_force_quant`` forces (biases, norms, convolution kernels) and what
    clip.cpp reads as F32 vectors (the mel filterbank, the window); the rest as Ollama wrote it."""
    name = t.name
    if _CONV_BIAS.fullmatch(name):
        return _f32_shaped(t, (1, math.prod(t.shape), 1, 1))
    if ".conv_dw.weight" in name and len(t.shape) == 2:
        return _f32_shaped(t, (1, 1, *t.shape))
    forced = "bias" in name or "norm" in name or ("conv" in name and "weight" in name)
    return _in_f32(t) if forced or name in ("a.mel_filters", "a.window") else t


def _parakeet_keys(h: Header) -> dict[str, tuple[Any, GGUFValueType]]:
    """The audio side's keys as llama.cpp's converter writes them, from ``nemotron_h_omni.audio.*``;
    refused when one is missing, or when clip.cpp would abort on it (it builds only a factor-8
    subsampling and an odd depthwise kernel)."""

    def audio(key: str) -> Any:
        value = h.kv.get(f"{_ARCH}.audio.{key}")
        if value is None:
            raise LayoutRefused(refusal(_ARCH, f"its audio tower states no {_ARCH}.audio.{key}"))
        return value

    factor, kernel = audio("subsampling_factor"), audio("conv_kernel_size")
    if factor != 8 or kernel % 2 == 0:
        why = f"its audio tower's subsampling factor {factor} or kernel {kernel} (llama.cpp runs 8 and odd)"
        raise LayoutRefused(refusal(_ARCH, why))
    return {
        "clip.has_audio_encoder": (True, _BOOL),
        "clip.audio.projector_type": ("parakeet", _STR),
        "clip.audio.projection_dim": (h.kv.get(f"{_ARCH}.embedding_length"), _U32),
        **{
            f"clip.audio.{key}": (audio(key), _U32)
            for key in ("embedding_length", "feed_forward_length", "block_count", "attention.head_count")
        },
        "clip.audio.num_mel_bins": (audio("num_mel_bins"), _U32),
        "clip.audio.attention.layer_norm_epsilon": (
            h.kv.get(f"{_ARCH}.audio.attention.layer_norm_epsilon", 1e-5),
            _F32_KEY,
        ),
        "clip.audio.subsampling_factor": (factor, _U32),
        "clip.audio.conv_kernel_size": (kernel, _U32),
    }


def _positions_resized(t: Tensor, side: int, n_embd: int) -> Tensor:
    """The position table, made at RADIO's largest grid, resized to the fixed image's grid as
    llama.cpp's converter does (bilinear, corners aligned: ``F.interpolate``), as ``[1, side*side, n]``."""
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
