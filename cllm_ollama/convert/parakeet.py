"""Nemotron Omni's Parakeet audio tower, mapped from Ollama's names and shapes
(``convert_nemotron_h.go``) to the ``parakeet`` audio side llama.cpp's ``NemotronNanoV2VLModel``
writes into the projector (clip.cpp's names, its convolution shapes, its F32 tensors, its keys)."""

from __future__ import annotations

import math
import re
from typing import Any

from gguf import GGUFValueType

from .framework import KV, Header, LayoutRefused, Tensor, f32_shaped, in_f32, refusal

_U32 = GGUFValueType.UINT32
_F32_KEY = GGUFValueType.FLOAT32
_STR = GGUFValueType.STRING
_BOOL = GGUFValueType.BOOL

# The subsampling's layers: Ollama's names, and their index in the Hugging Face ``nn.Sequential``.
SUBSAMPLING = (("conv0", 0), ("dw1", 2), ("pw1", 3), ("dw2", 5), ("pw2", 6))
# Parakeet's names in Ollama's file (``convert_nemotron_h.go``'s replacements of the Hugging Face
# names) -> clip.cpp's (``tensor_mapping.py``'s for the same Hugging Face names): whole-name starts,
# then a block's leaf (longest first: ``ffn2_up`` before a bare ``ffn``).
_PARAKEET_STARTS = {
    "a.feature_extractor.fb": "a.mel_filters",
    "a.feature_extractor.window": "a.window",
    "a.subsampling.linear.": "a.pre_encode.out.",
    "mm.a.norm.": "mm.a.norm_pre.",
    **{f"a.subsampling.{old}.": f"a.conv1d.{i}." for old, i in SUBSAMPLING},
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


def parakeet_name(name: str) -> str:
    """An audio tensor's name in clip.cpp's Parakeet."""
    for old, new in _PARAKEET_STARTS.items():
        if name.startswith(old):
            return new + name.removeprefix(old)
    if m := _PARAKEET_MLP.match(name):
        return f"mm.a.mlp.{m.group(1)}." + name[m.end() :]
    if m := _PARAKEET_BLOCK.fullmatch(name):
        return m.group(1) + _PARAKEET_LEAVES[m.group(2)] + m.group(3)
    return name


def parakeet_tensor(t: Tensor) -> Tensor:
    """A (renamed) audio tensor as ``NemotronNanoV2VLModel`` writes it: convolution biases
    ``[1, C, 1, 1]``, the depthwise kernel Ollama squeezed to ``[n, k]`` as ``[1, 1, n, k]``, and
    in F32 what its ``tensor_force_quant`` forces (biases, norms, convolution kernels) and what
    clip.cpp reads as F32 vectors (the mel filterbank, the window); the rest as Ollama wrote it."""
    name = t.name
    if _CONV_BIAS.fullmatch(name):
        return f32_shaped(t, (1, math.prod(t.shape), 1, 1))
    if ".conv_dw.weight" in name and len(t.shape) == 2:
        return f32_shaped(t, (1, 1, *t.shape))
    forced = "bias" in name or "norm" in name or ("conv" in name and "weight" in name)
    return in_f32(t) if forced or name in ("a.mel_filters", "a.window") else t


def parakeet_keys(h: Header) -> KV:
    """The audio side's keys as llama.cpp's converter writes them, from ``nemotron_h_omni.audio.*``;
    refused when one is missing, or when clip.cpp would abort on it (``parakeet_refusal``)."""

    def audio(key: str) -> Any:
        value = h.kv.get(f"{h.arch}.audio.{key}")
        if value is None:
            raise LayoutRefused(refusal(h.arch, f"its audio tower states no {h.arch}.audio.{key}"))
        return value

    settings = {key: audio(key) for key in PARAKEET_KEYS}
    why = parakeet_refusal(settings)
    if why is not None:
        raise LayoutRefused(refusal(h.arch, why))
    eps = h.kv.get(f"{h.arch}.audio.attention.layer_norm_epsilon", 1e-5)
    return parakeet_kv(settings, h.kv.get(f"{h.arch}.embedding_length"), eps)


# The audio tower's settings under Ollama's names (``nemotron_h_omni.audio.*``).
PARAKEET_KEYS = (
    "subsampling_factor",
    "conv_kernel_size",
    "embedding_length",
    "feed_forward_length",
    "block_count",
    "attention.head_count",
    "num_mel_bins",
)


def parakeet_refusal(settings: dict[str, Any]) -> str | None:
    """Why clip.cpp would abort on this tower (it builds only a factor-8 subsampling and an odd
    depthwise kernel), or None."""
    factor, kernel = settings["subsampling_factor"], settings["conv_kernel_size"]
    if factor != 8 or kernel % 2 == 0:
        return f"its audio tower's subsampling factor {factor} or kernel {kernel} (llama.cpp runs 8 and odd)"
    return None


def parakeet_kv(settings: dict[str, Any], projection_dim: Any, eps: Any) -> KV:
    """The projector's ``parakeet`` side's keys, from ``PARAKEET_KEYS``' settings."""
    return {
        "clip.has_audio_encoder": (True, _BOOL),
        "clip.audio.projector_type": ("parakeet", _STR),
        "clip.audio.projection_dim": (projection_dim, _U32),
        **{
            f"clip.audio.{key}": (settings[key], _U32)
            for key in ("embedding_length", "feed_forward_length", "block_count", "attention.head_count")
        },
        "clip.audio.num_mel_bins": (settings["num_mel_bins"], _U32),
        "clip.audio.attention.layer_norm_epsilon": (eps, _F32_KEY),
        "clip.audio.subsampling_factor": (settings["subsampling_factor"], _U32),
        "clip.audio.conv_kernel_size": (settings["conv_kernel_size"], _U32),
    }
