"""Gemma's maps: Gemma 3 (its SigLIP tower split out), EmbeddingGemma, Gemma 3n, and Gemma 4 (its
text model, and its vision and audio towers as one projector), each as Ollama's llama-server shim
(``handle_gemma3``, ``handle_embeddinggemma``, ``handle_gemma3n``, ``handle_gemma4`` and their clip
sides) remaps it in memory at every load."""

from __future__ import annotations

import re
from typing import Any

from gguf import GGUFValueType

from .framework import (
    KV,
    Header,
    LayoutRefused,
    Rewrite,
    Tensor,
    clip_keys,
    in_f32,
    keep_all,
    projector,
    refusal,
    renaming,
    suffix_renames,
    tower_key,
    vision_tensor,
)

_F32 = GGUFValueType.FLOAT32
_U32 = GGUFValueType.UINT32
_STR = GGUFValueType.STRING
_BOOL = GGUFValueType.BOOL
_ARRAY = GGUFValueType.ARRAY

# --- gemma3 ----------------------------------------------------------------------------------------


def is_embeddinggemma(h: Header) -> bool:
    """EmbeddingGemma: a gemma3 with sentence-transformers' dense layers."""
    return "dense.0.weight" in h.shapes


def is_ollama_gemma3(h: Header) -> bool:
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


def gemma3(h: Header) -> list[Rewrite]:
    """Text GGUF without the tower, with the keys llama.cpp requires; and, when the tower is inside,
    a CLIP GGUF of it (``handle_gemma3`` and ``handle_gemma3_clip`` in Ollama's shim)."""
    kv = h.kv
    text_kv: KV = {
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
        keep_tensor=lambda name: not vision_tensor(name),
        keep_key=lambda key: (
            not key.startswith(("gemma3.vision.", "gemma3.mm.", "gemma3.rope.global.", "gemma3.rope.local."))
        ),
        set_kv=text_kv,
        # Ollama keeps the image tokens (<image_soft_token>...) in the vocabulary, past the embedding's rows.
        vocab_rows=h.rows("token_embd.weight"),
    )
    if not h.any_tensor("v."):
        return [text]
    return [text, _gemma3_projector(h)]


def _gemma3_projector(h: Header) -> Rewrite:
    """The SigLIP tower inside a gemma3 file, as the ``gemma3`` CLIP projector."""
    kv = h.kv
    clip_kv = {
        **clip_keys(h, "gemma3", "clip.use_gelu"),
        "clip.vision.feed_forward_length": tower_key(h, "feed_forward_length", _U32),
        "clip.vision.image_size": tower_key(h, "image_size", _U32),
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
    return projector(_GEMMA3_CLIP_RENAMES, clip_kv, "v.patch_embd.weight", "v.position_embd.weight")


_PATTERN = "gemma3.attention.sliding_window_pattern"


def embeddinggemma(h: Header) -> Rewrite:
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
        keep_tensor=keep_all,
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


# --- gemma3n ---------------------------------------------------------------------------------------

_GEMMA3N_EOT = 106  # <end_of_turn>


def is_ollama_gemma3n(h: Header) -> bool:
    """Ollama's multimodal vocabulary: token embeddings longer than the per-layer ones."""
    return h.rows("token_embd.weight") != h.rows("per_layer_token_embd.weight")


def gemma3n(h: Header) -> Rewrite:
    """Gemma 3n (``handle_gemma3n``): Ollama keeps the multimodal vocabulary (image and audio
    markers past the text vocabulary) in the token embeddings and tokenizer; llama.cpp's text
    model wants them as long as the per-layer embeddings. Both are cut, byte and ``<unused>``
    tokens typed as SentencePiece's, and turns end at <end_of_turn>."""
    n_vocab = h.rows("per_layer_token_embd.weight")
    if not n_vocab:
        raise LayoutRefused(refusal("gemma3n", "no per_layer_token_embd.weight"))
    kv = h.kv
    set_kv: KV = {"tokenizer.ggml.model": ("llama", _STR)}
    tokens, types = kv.get("tokenizer.ggml.tokens"), kv.get("tokenizer.ggml.token_type")
    if isinstance(tokens, list) and isinstance(types, list):
        fixed = [
            6 if re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", tok) else 1 if tok.startswith("<unused") else int(kind)
            for tok, kind in zip(tokens[:n_vocab], types[:n_vocab], strict=False)
        ]
        set_kv["tokenizer.ggml.token_type"] = (fixed, _ARRAY)
    eos = kv.get("tokenizer.ggml.eos_token_ids")
    ids = [int(i) for i in eos] if isinstance(eos, list) else [1]
    set_kv["tokenizer.ggml.eos_token_ids"] = ([*ids, _GEMMA3N_EOT] if _GEMMA3N_EOT not in ids else ids, _ARRAY)

    def cut(tensors: list[Tensor]) -> list[Tensor]:
        return [t.take(slice(0, n_vocab), t.name) if t.name == "token_embd.weight" else t for t in tensors]

    return Rewrite(role="model", arch="gemma3n", keep_tensor=keep_all, set_kv=set_kv, vocab_rows=n_vocab, tensors=cut)


# --- gemma4 ----------------------------------------------------------------------------------------

_GEMMA4_TOWERS = ("a.", "v.", "mm.", "model.vision_tower.")


def has_gemma4_towers(h: Header) -> bool:
    """A Gemma 4 with its vision or audio tower inside (split out by ``gemma4``)."""
    return h.any_tensor("v.", "a.")


def is_ollama_gemma4(h: Header) -> bool:
    """Ollama's Gemma 4 text model: a tower's tensors, or its tokenizer named ``llama``."""
    return h.any_tensor(*_GEMMA4_TOWERS) or h.kv.get("tokenizer.ggml.model") == "llama"


def gemma4_text(h: Header) -> Rewrite:
    """Gemma 4's text model (``handle_gemma4``): without the audio and vision towers (which
    ``gemma4`` splits into a projector), its BPE tokenizer named ``gemma4`` rather than ``llama``
    (else its control tokens come out as text), and the experts' per-expert scale under
    llama.cpp's name. (Ollama's shim also fuses the experts' gate and up for speed; llama.cpp loads
    them split.)"""
    set_kv: KV = {}
    if h.kv.get("tokenizer.ggml.model") == "llama":
        set_kv["tokenizer.ggml.model"] = ("gemma4", _STR)
    return Rewrite(
        role="model",
        arch="gemma4",
        keep_tensor=lambda name: not name.startswith(_GEMMA4_TOWERS),
        keep_key=lambda key: not key.startswith(("gemma4.vision.", "gemma4.audio.")),
        set_kv=set_kv,
        tensors=renaming(suffix_renames(((".ffn_gate_inp.per_expert_scale", ".ffn_down_exps.scale"),))),
    )


# Ollama's names for Gemma 4's audio tower (convert_gemma4.go) -> llama.cpp's (``handle_gemma4_clip``
# in Ollama's shim): the SSCP's projection and the encoder's output projection under other names,
# and in each block the norms around attention and the relative-position projection.
_GEMMA4_AUDIO_NAMES = {
    "a.pre_encode.out.weight": "a.input_projection.weight",
    "a.pre_encode.out.bias": "a.input_projection.bias",
    "mm.a.fc.weight": "a.pre_encode.out.weight",
    "mm.a.fc.bias": "a.pre_encode.out.bias",
}
_GEMMA4_AUDIO_BLOCK = re.compile(r"(a\.blk\.\d+\.)(ln1|ln2|layer_pre_norm|linear_pos)(\..+)")
_GEMMA4_AUDIO_LEAVES = {
    "ln1": "attn_pre_norm",
    "ln2": "attn_post_norm",
    "layer_pre_norm": "ln2",
    "linear_pos": "attn_k_rel",
}
_GEMMA4_MERGE = 3  # clip.cpp's pooling kernel for gemma4v unless told


def gemma4(h: Header) -> list[Rewrite]:
    """Gemma 4: the text model as ``gemma4_text`` maps it, and one projector for both towers as
    llama.cpp's converter writes it (``Gemma4VisionAudioModel``): a ``gemma4v`` vision side (Ollama
    already wrote clip.cpp's tensor names) and a ``gemma4a`` audio side (a few names differ), the
    position table in F32 and the patch embedding promoted as Ollama's shim does. Ollama's packed
    ``v.clamp_data`` (its Go engine's form of the per-linear clamps; clip.cpp reads the per-tensor
    ``.input_min``-style scalars, which Ollama's converter also writes) is left out, as the shim leaves it unread."""
    text = gemma4_text(h)
    n_embd = h.kv.get("gemma4.embedding_length")
    if not n_embd:
        raise LayoutRefused(refusal("gemma4", "no gemma4.embedding_length for its projector's output"))
    clip_kv: KV = {}
    if h.any_tensor("v."):
        clip_kv |= _gemma4_vision_keys(h, n_embd)
    if h.any_tensor("a."):
        clip_kv |= {
            "clip.has_audio_encoder": (True, _BOOL),
            "clip.audio.projector_type": ("gemma4a", _STR),
            "clip.audio.projection_dim": (n_embd, _U32),
            **_gemma4_tower_keys(h, "audio", ()),
            # Gemma 4's feature extractor
            "clip.audio.num_mel_bins": (h.kv.get("gemma4.audio.num_mel_bins", 128), _U32),
        }
    clip = Rewrite(
        role="projector",
        arch="clip",
        keep_tensor=lambda name: name.startswith(("v.", "a.", "mm.")) and name != "v.clamp_data",
        exact={**_GEMMA4_AUDIO_NAMES, **_gemma4_audio_blocks(h)},
        keep_key=lambda key: key.startswith("general.") and key != "general.file_type",
        set_kv=clip_kv,
        tensors=_gemma4_tensors,
    )
    return [text, clip]


def _gemma4_vision_keys(h: Header, n_embd: Any) -> KV:
    """The ``gemma4v`` side's keys."""
    clip_kv: KV = {
        "clip.has_vision_encoder": (True, _BOOL),
        "clip.vision.projector_type": ("gemma4v", _STR),
        "clip.vision.projection_dim": (n_embd, _U32),
        # Unused by gemma4v (an image keeps its own size), stated as llama.cpp's converter does.
        "clip.vision.image_size": (224, _U32),
        **_gemma4_tower_keys(h, "vision", ("patch_size",)),
        # The tower standardizes its output itself (v.std_bias, v.std_scale).
        "clip.vision.image_mean": ([0.0, 0.0, 0.0], _ARRAY),
        "clip.vision.image_std": ([1.0, 1.0, 1.0], _ARRAY),
    }
    merge = h.kv.get("gemma4.vision.projector.scale_factor")
    if merge and merge != _GEMMA4_MERGE:
        clip_kv["clip.vision.projector.scale_factor"] = (merge, _U32)
    return clip_kv


def _gemma4_tower_keys(h: Header, modality: str, extra: tuple[str, ...]) -> KV:
    """A Gemma 4 tower's shape under clip's names (``gemma4.<modality>.*`` -> ``clip.<modality>.*``)."""
    keys: KV = {}
    for key in ("embedding_length", "feed_forward_length", "block_count", "attention.head_count", *extra):
        value = h.kv.get(f"gemma4.{modality}.{key}")
        if value is None:
            raise LayoutRefused(refusal("gemma4", f"its {modality} tower states no gemma4.{modality}.{key}"))
        keys[f"clip.{modality}.{key}"] = (value, _U32)
    eps = h.kv.get(f"gemma4.{modality}.attention.layer_norm_epsilon", 1e-6)
    keys[f"clip.{modality}.attention.layer_norm_epsilon"] = (eps, _F32)
    return keys


def _gemma4_audio_blocks(h: Header) -> dict[str, str]:
    out = {}
    for name in h.shapes:
        if m := _GEMMA4_AUDIO_BLOCK.fullmatch(name):
            out[name] = m.group(1) + _GEMMA4_AUDIO_LEAVES[m.group(2)] + m.group(3)
    return out


def _gemma4_tensors(ts: list[Tensor]) -> list[Tensor]:
    """The position table and patch embedding in F32 (llama.cpp's converter forces the first;
    Ollama's shim promotes the second, which every backend's convolution takes)."""
    return [in_f32(t) if t.name in ("v.position_embd.weight", "v.patch_embd.weight") else t for t in ts]
