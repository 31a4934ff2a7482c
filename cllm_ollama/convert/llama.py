"""Llama's maps: a Llama 3 whose tokenizer metadata Ollama's shim fixes
(``detect_ollama_llama3_metadata_gap``), Llama 4 with its tower split into a ``llama4`` projector,
and older LLaVA projectors that state no type."""

from __future__ import annotations

import dataclasses

from gguf import GGUFValueType

from .framework import KV, Header, Rewrite, clip_keys, keep_all, projector, tower_key, without_tower

_F32 = GGUFValueType.FLOAT32
_U32 = GGUFValueType.UINT32
_STR = GGUFValueType.STRING
_ARRAY = GGUFValueType.ARRAY
_HALF = [0.5, 0.5, 0.5]

_EOT = 128009  # <|eot_id|>, where Llama 3 Instruct ends a turn


def llama3_metadata_gap(h: Header) -> bool:
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


def llama3_metadata(h: Header) -> Rewrite:
    """The pre-tokenizer named, and turns ending at <|eot_id|> (what Ollama's shim sets)."""
    kv = h.kv
    fixes: KV = {}
    if kv.get("tokenizer.ggml.pre") in (None, "", "default"):
        fixes["tokenizer.ggml.pre"] = ("llama-bpe", _STR)
    for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"):
        if kv.get(key) in (None, 128001):
            fixes[key] = (_EOT, _U32)
    return Rewrite(role="model", arch="llama", keep_tensor=keep_all, set_kv=fixes)


def has_llama4_tower(h: Header) -> bool:
    return h.any_tensor("v.", "mm.")


# Ollama's names for the Llama 4 tower (convert_llama4.go) -> clip.cpp's (``kLlama4ClipRenames``);
# the adapter's MLP before the blocks' so that ``.mlp.fc1`` there stays the projector's.
_LLAMA4_RENAMES = (
    ("v.vision_adapter.mlp.fc1", "mm.model.mlp.1"),
    ("v.vision_adapter.mlp.fc2", "mm.model.mlp.2"),
    ("mm.linear_1", "mm.model.fc"),
    ("v.class_embedding", "v.class_embd"),
    ("v.layernorm_post", "v.post_ln"),
    ("v.layernorm_pre", "v.pre_ln"),
    ("v.patch_embedding", "v.patch_embd"),
    (".attn_output", ".attn_out"),
    (".attn_norm", ".ln1"),
    (".ffn_norm", ".ln2"),
    (".mlp.fc1", ".ffn_up"),
    (".mlp.fc2", ".ffn_down"),
)


def llama4(h: Header) -> list[Rewrite]:
    """Llama 4: the text model as it is without the tower, and a ``llama4`` projector (its tower
    renamed; llama.cpp's converter changes no data, Ollama's neither)."""
    # Without the tower, and without the keys Ollama's converter added that llama.cpp does not read.
    text = without_tower(
        Rewrite(role="model", arch="llama4", keep_tensor=keep_all),
        "llama4.vision.",
        "llama4.attention.chunk_size",
        "llama4.use_qk_norm",
    )
    ratio = h.kv.get("llama4.vision.pixel_shuffle_ratio") or 0.5
    clip_kv: KV = {
        **clip_keys(h, "llama4", "clip.use_gelu"),
        "clip.vision.attention.layer_norm_epsilon": tower_key(h, "layer_norm_epsilon", _F32, 1e-5),
        "clip.vision.feed_forward_length": tower_key(h, "feed_forward_length", _U32),
        "clip.vision.image_size": tower_key(h, "image_size", _U32),
        "clip.vision.projector.scale_factor": (round(1 / ratio), _U32),
        "clip.vision.image_mean": (_HALF, _ARRAY),
        "clip.vision.image_std": (_HALF, _ARRAY),
    }
    clip = projector(_LLAMA4_RENAMES, clip_kv, "v.position_embd.weight")
    return [text, dataclasses.replace(clip, exact={"v.positional_embedding_vlm": "v.position_embd.weight"})]


def _projector_types(h: Header) -> list[str]:
    """The projector types a CLIP GGUF states: one for all, or one per modality (Gemma 4's has both)."""
    keys = ("clip.projector_type", "clip.vision.projector_type", "clip.audio.projector_type")
    return [h.kv[key] for key in keys if h.kv.get(key)]


def is_untyped_llava(h: Header) -> bool:
    """A CLIP projector with ``mm.`` tensors and no projector type."""
    return not _projector_types(h) and h.any_tensor("mm.")


def llava_projector(h: Header) -> Rewrite:
    """Older LLaVA projectors in Ollama's registry state no type; clip.cpp wants one (``mlp``)."""
    return Rewrite(
        role="projector",
        arch="clip",
        keep_tensor=keep_all,
        set_kv={"clip.projector_type": ("mlp", _STR)},
    )
