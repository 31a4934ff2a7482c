"""Mistral 3's maps: the text model's YaRN keys under llama.cpp's names (``handle_mistral3``), and
Mistral Small 3.1/3.2's Pixtral tower split into a ``pixtral`` projector as llama.cpp's
``LlavaVisionModel`` writes it: Q/K rows permuted for ggml's RoPE, the [IMG_BREAK] embedding
taken from the text model's."""

from __future__ import annotations

import dataclasses
import re

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
    keep_all,
    projector,
    refusal,
    row_width,
    tower_key,
    without_tower,
)

_F32 = GGUFValueType.FLOAT32
_U32 = GGUFValueType.UINT32
_STR = GGUFValueType.STRING
_ARRAY = GGUFValueType.ARRAY
_F32_TYPE = GGMLQuantizationType.F32

# Ollama's names for Mistral 3's YaRN and attention-temperature keys -> llama.cpp's.
_MISTRAL3_KEYS = {
    "mistral3.rope.scaling.beta_fast": "mistral3.rope.scaling.yarn_beta_fast",
    "mistral3.rope.scaling.beta_slow": "mistral3.rope.scaling.yarn_beta_slow",
    "mistral3.rope.scaling.mscale_all_dim": "mistral3.rope.scaling.yarn_log_multiplier",
    "mistral3.rope.scaling_beta": "mistral3.attention.temperature_scale",
}


def is_ollama_mistral3_text(h: Header) -> bool:
    """A text-only Mistral 3 with Ollama's names for its YaRN keys."""
    return not h.any_tensor("v.", "mm.") and bool(_MISTRAL3_KEYS.keys() & h.kv.keys())


def mistral3_text(h: Header) -> Rewrite:
    """A text-only Mistral 3 (``handle_mistral3``'s text side): its YaRN keys under llama.cpp's names,
    and the Tekken pre-tokenizer named."""
    fixes: KV = {new: (h.kv[old], _F32) for old, new in _MISTRAL3_KEYS.items() if old in h.kv and new not in h.kv}
    if h.kv.get("tokenizer.ggml.pre") in (None, "", "default"):
        fixes["tokenizer.ggml.pre"] = ("tekken", _STR)
    return Rewrite(
        role="model",
        arch="mistral3",
        keep_tensor=keep_all,
        keep_key=lambda key: key not in _MISTRAL3_KEYS,
        set_kv=fixes,
    )


def has_pixtral(h: Header) -> bool:
    """Mistral Small 3.1/3.2 with its Pixtral tower inside."""
    return h.any_tensor("v.", "mm.")


# Ollama's names for the Pixtral tower (convert_mistral.go) -> clip.cpp's (``kMistral3ClipRenames``).
_PIXTRAL_RENAMES = (
    ("v.patch_conv", "v.patch_embd"),
    ("v.encoder_norm", "v.pre_ln"),
    (".attn_output", ".attn_out"),
    (".attn_norm", ".ln1"),
    (".ffn_norm", ".ln2"),
    ("mm.linear_1", "mm.1"),
    ("mm.linear_2", "mm.2"),
    ("mm.patch_merger.merging_layer", "mm.patch_merger"),
    ("mm.norm", "mm.input_norm"),
)
_VIT_QK = re.compile(r"v\.blk\.\d+\.attn_[qk]\.(weight|bias)")
_IMG_BREAK = "[IMG_BREAK]"


def mistral3(h: Header) -> list[Rewrite]:
    """Mistral Small 3.1/3.2: the text model as ``mistral3_text`` maps it, and a ``pixtral``
    projector. Ollama left the tower's Q/K in Hugging Face's order (its repack skips ``v.*``);
    llama.cpp's converter permutes them for ggml's RoPE, and adds the [IMG_BREAK] token's
    embedding, which Pixtral puts after each row of an image."""
    kv = h.kv
    mapped = mistral3_text(h)
    empty_scaling = "mistral3.rope.scaling.type" in kv and not kv["mistral3.rope.scaling.type"]
    text = without_tower(
        dataclasses.replace(
            mapped,
            # llama.cpp aborts on an empty RoPE scaling type (Ollama writes one when there is none).
            keep_key=lambda key: mapped.keep_key(key) and not (empty_scaling and key == "mistral3.rope.scaling.type"),
        ),
        "mistral3.vision.",
        "mistral3.mm.",
        "mistral3.image_token_index",
        "mistral3.spatial_merge_size",
    )
    tokens = kv.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or _IMG_BREAK not in tokens or "token_embd.weight" not in h.shapes:
        why = "no [IMG_BREAK] token, whose embedding Pixtral puts between image rows"
        raise LayoutRefused(refusal("mistral3", why))
    img_break = tokens.index(_IMG_BREAK)
    n_head = int(tower_key(h, "attention.head_count", _U32)[0])
    for name, shape in h.shapes.items():
        if _VIT_QK.fullmatch(name) and shape[-1] % (2 * n_head):
            raise LayoutRefused(refusal("mistral3", f"{name} does not split into {n_head} heads"))

    def tensors(ts: list[Tensor]) -> list[Tensor]:
        out = []
        for t in ts:
            if t.name == "token_embd.weight":
                out.append(_embedding_row(t, img_break, "v.token_embd.img_break"))
            elif _VIT_QK.fullmatch(t.name):
                out.append(_rope_permuted(t, n_head))
            else:
                out.append(t)
        return out

    # The text embedding is read too: its [IMG_BREAK] row.
    clip = _pixtral_projector(h)
    keep = clip.keep_tensor
    return [text, dataclasses.replace(clip, keep_tensor=lambda n: keep(n) or n == "token_embd.weight", tensors=tensors)]


def _pixtral_projector(h: Header) -> Rewrite:
    """The Pixtral tower's keys and names (its data's changes are ``mistral3``'s)."""
    clip_kv: KV = {
        **clip_keys(h, "pixtral", "clip.use_silu"),
        # Pixtral's norm epsilon is not in its config (1e-5 in transformers' modeling_pixtral.py).
        "clip.vision.attention.layer_norm_epsilon": tower_key(h, "attention.layer_norm_epsilon", _F32, 1e-5),
        "clip.vision.feed_forward_length": tower_key(h, "feed_forward_length", _U32),
        "clip.vision.image_size": tower_key(h, "image_size", _U32),
        "clip.vision.image_mean": (CLIP_MEAN, _ARRAY),  # Pixtral's image processor's
        "clip.vision.image_std": (CLIP_STD, _ARRAY),
    }
    if h.kv.get("mistral3.spatial_merge_size"):
        clip_kv["clip.vision.spatial_merge_size"] = (h.kv["mistral3.spatial_merge_size"], _U32)
    return projector(_PIXTRAL_RENAMES, clip_kv, "v.patch_embd.weight")


def _rope_permuted(t: Tensor, n_head: int) -> Tensor:
    """A Q or K projection's rows in the order ggml's normal RoPE pairs them: each head's two
    halves interleaved (``LlamaModel.permute`` in llama.cpp's converter). Whole rows move, so any
    type, quantized too, keeps its bytes."""
    rows, source = t.shape[0], t.data

    def permuted() -> np.ndarray:
        data = source()
        heads = data.reshape(n_head, 2, rows // n_head // 2, *data.shape[1:])
        return np.ascontiguousarray(heads.swapaxes(1, 2).reshape(data.shape))

    return Tensor(t.name, t.kind, t.shape, t.dtype, permuted)


def _embedding_row(t: Tensor, row: int, name: str) -> Tensor:
    """One token's row of an embedding matrix, dequantized to F32."""
    source, kind = t.data, t.kind

    def take() -> np.ndarray:
        return dequantize(source()[row : row + 1], kind).reshape(-1).astype(np.float32)

    n_embd = t.shape[-1] if kind in (_F32_TYPE, GGMLQuantizationType.F16) else row_width(t)
    return Tensor(name, _F32_TYPE, (n_embd,), np.dtype(np.float32), take)
