"""Ollama's single-file vision layouts whose map changes tensor data, not only names.

mistral-small3.1/3.2 (``mistral3`` with its Pixtral tower inside), Qwen3-VL (``qwen3vl`` and
``qwen3vlmoe``), Llama 4 (``llama4``), Gemma 4 (``gemma4``, a vision and an audio tower) and Qwen 3.5
(``qwen35``, ``qwen35moe``) were converted by Ollama for its Go engine as one GGUF. Each is split
once, when it is pulled or created, into the text GGUF and the CLIP projector that llama.cpp's own
converter writes for the same weights (``LlavaVisionModel``, ``Qwen3VLVisionModel``,
``Llama4VisionModel`` and ``Gemma4VisionAudioModel`` in its ``conversion/``), where Ollama's shim
(``llama/compat``) redoes the same in memory at every load: Pixtral's Q/K rows permuted for ggml's
RoPE and its [IMG_BREAK] embedding taken from the text model's, Qwen3-VL's (and Qwen 3.5's) Q/K/V
fused and its two-frame patch embedding split, Gemma 4's audio tensors renamed. The store never
loads a model: this reads headers and tensor bytes only.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

from .layouts import (
    Header,
    LayoutRefused,
    Rewrite,
    Tensor,
    _clip_keys,
    _mistral3_text,
    _projector,
    _tower_key,
    _vision_tensor,
    refusal,
)
from .layouts_text import _gemma4 as _gemma4_text
from .layouts_text import _qwen35 as _qwen35_text

_F32 = GGUFValueType.FLOAT32
_U32 = GGUFValueType.UINT32
_ARRAY = GGUFValueType.ARRAY
_STR = GGUFValueType.STRING
_BOOL = GGUFValueType.BOOL
_F32_TYPE = GGMLQuantizationType.F32
_KV = dict[str, tuple[Any, GGUFValueType]]

# OpenAI CLIP's pixel statistics, which Pixtral's image processor uses.
_CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
_CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
_HALF = [0.5, 0.5, 0.5]


def plan_vision(h: Header) -> list[Rewrite] | None:
    """The split of one of these files; None when ``h`` is none of them (raises ``LayoutRefused``
    for one that cannot be mapped)."""
    if h.arch == "mistral3" and h.any_tensor("v.", "mm."):
        return _mistral3(h)
    if h.arch in ("qwen3vl", "qwen3vlmoe") and not h.has("rope.dimension_sections"):
        return _qwen3vl(h)
    if h.arch == "llama4" and h.any_tensor("v.", "mm."):
        return _llama4(h)
    if h.arch == "gemma4" and h.any_tensor("v.", "a."):
        return _gemma4(h)
    if h.arch in ("qwen35", "qwen35moe") and h.any_tensor("v."):
        return [_qwen35_text(h), _qwen3vl_projector(h, [])]
    return None


def _without_tower(text: Rewrite, *key_prefixes: str) -> Rewrite:
    """A text rewrite that also leaves out the tower's tensors and keys."""
    keep_key = text.keep_key
    return dataclasses.replace(
        text,
        keep_tensor=lambda name: text.keep_tensor(name) and not _vision_tensor(name),
        keep_key=lambda key: keep_key(key) and not key.startswith(key_prefixes),
    )


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


def _mistral3(h: Header) -> list[Rewrite]:
    """Mistral Small 3.1/3.2: the text model as ``_mistral3_text`` maps it, and a ``pixtral``
    projector. Ollama left the tower's Q/K in Hugging Face's order (its repack skips ``v.*``);
    llama.cpp's converter permutes them for ggml's RoPE, and adds the [IMG_BREAK] token's
    embedding, which Pixtral puts after each row of an image."""
    kv = h.kv
    mapped = _mistral3_text(h)
    empty_scaling = "mistral3.rope.scaling.type" in kv and not kv["mistral3.rope.scaling.type"]
    text = _without_tower(
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
    n_head = int(_tower_key(h, "attention.head_count", _U32)[0])
    for name, shape in h.shapes.items():
        if _VIT_QK.fullmatch(name) and shape[-1] % (2 * n_head):
            raise LayoutRefused(refusal("mistral3", f"{name} does not split into {n_head} heads"))

    clip_kv: _KV = {
        **_clip_keys(h, "pixtral", "clip.use_silu"),
        # Pixtral's norm epsilon is not in its config (1e-5 in transformers' modeling_pixtral.py).
        "clip.vision.attention.layer_norm_epsilon": _tower_key(h, "attention.layer_norm_epsilon", _F32, 1e-5),
        "clip.vision.feed_forward_length": _tower_key(h, "feed_forward_length", _U32),
        "clip.vision.image_size": _tower_key(h, "image_size", _U32),
        "clip.vision.image_mean": (_CLIP_MEAN, _ARRAY),
        "clip.vision.image_std": (_CLIP_STD, _ARRAY),
    }
    if kv.get("mistral3.spatial_merge_size"):
        clip_kv["clip.vision.spatial_merge_size"] = (kv["mistral3.spatial_merge_size"], _U32)
    clip = _projector(_PIXTRAL_RENAMES, clip_kv, "v.patch_embd.weight")

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
    keep = clip.keep_tensor
    return [text, dataclasses.replace(clip, keep_tensor=lambda n: keep(n) or n == "token_embd.weight", tensors=tensors)]


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

    n_embd = t.shape[-1] if kind in (_F32_TYPE, GGMLQuantizationType.F16) else _row_width(t)
    return Tensor(name, _F32_TYPE, (n_embd,), np.dtype(np.float32), take)


def _row_width(t: Tensor) -> int:
    """Elements per row of a quantized tensor (its numpy shape counts bytes)."""
    block, size = GGML_QUANT_SIZES[t.kind]
    return t.shape[-1] // size * block


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
_VIT_QKV = re.compile(r"(v\.blk\.\d+\.)attn_([qkv])\.(weight|bias)")
_QWEN3VL_MROPE = [24, 20, 20, 0]  # every Qwen3-VL's sections (t, h, w) for its 128-wide heads


def _qwen3vl(h: Header) -> list[Rewrite]:
    """Qwen3-VL (dense or MoE): the text model with the two keys llama.cpp requires (M-RoPE
    sections, which Ollama's converter dropped, and the deepstack count), and a ``qwen3vl_merger``
    projector: Q/K/V fused into one ``attn_qkv``, the Conv3D patch embedding split into its two
    frames, the deepstack mergers named by the block they follow."""
    arch, kv = h.arch, h.kv
    sections = kv.get(f"{arch}.rope.mrope_section")
    if isinstance(sections, list) and len(sections) >= 3:
        mrope = [*sections[:3], 0]
    else:
        heads = kv.get(f"{arch}.attention.head_count") or 1
        head = kv.get(f"{arch}.attention.key_length") or (kv.get(f"{arch}.embedding_length") or 0) // heads
        if head != 128:
            why = f"no M-RoPE sections, and a head size of {head} where Qwen3-VL's [24, 20, 20] are for 128"
            raise LayoutRefused(refusal(arch, why))
        mrope = _QWEN3VL_MROPE
    deepstack = [int(i) for i in kv.get(f"{arch}.vision.deepstack_visual_indexes") or []]
    text_kv: _KV = {
        f"{arch}.rope.dimension_sections": (mrope, _ARRAY),
        f"{arch}.n_deepstack_layers": (len(deepstack), _U32),
    }
    experts = h.shapes.get("blk.0.ffn_gate_exps.weight")
    if experts and not h.has("expert_feed_forward_length"):
        # Ollama's converter does not state the experts' width; llama.cpp's does (it would guess it).
        text_kv[f"{arch}.expert_feed_forward_length"] = (experts[1], _U32)
    text = Rewrite(
        role="model",
        arch=arch,
        keep_tensor=lambda name: not _vision_tensor(name),
        keep_key=lambda key: not key.startswith((f"{arch}.vision.", f"{arch}.rope.mrope_section")),
        set_kv=text_kv,
    )
    if not h.any_tensor("v."):
        return [text]
    return [text, _qwen3vl_projector(h, deepstack)]


def _qwen3vl_projector(h: Header, deepstack: list[int]) -> Rewrite:
    """The ``qwen3vl_merger`` projector of a Qwen3-VL's or Qwen 3.5's tower in Ollama's layout (the
    same tower: llama.cpp's ``Qwen3VLVisionModel`` converts both; Qwen 3.5 has no deepstack)."""
    arch, kv = h.arch, h.kv
    n_blocks = int(_tower_key(h, "block_count", _U32)[0])
    n_in = int(kv.get(f"{arch}.vision.num_channels") or 3)
    patch = h.shapes.get("v.patch_embed.weight")
    positions = h.rows("v.pos_embed.weight")
    if not patch or len(patch) != 4 or patch[2] != 2 or patch[3] % n_in or not positions:
        raise LayoutRefused(refusal(arch, "its vision tower has no two-frame patch embedding or position table"))
    clip_kv: _KV = {
        **_clip_keys(h, "qwen3vl_merger", "clip.use_gelu"),
        # As llama.cpp's converter: the text model's norm epsilon.
        "clip.vision.attention.layer_norm_epsilon": (kv.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6), _F32),
        "clip.vision.feed_forward_length": (h.rows("v.blk.0.mlp.linear_fc1.weight") or 0, _U32),
        "clip.vision.image_size": (math.isqrt(positions) * int(_tower_key(h, "patch_size", _U32)[0]), _U32),
        "clip.vision.spatial_merge_size": _tower_key(h, "spatial_merge_size", _U32, 2),
        "clip.vision.image_mean": (_triple(kv.get(f"{arch}.vision.image_mean")), _ARRAY),
        "clip.vision.image_std": (_triple(kv.get(f"{arch}.vision.image_std")), _ARRAY),
        "clip.vision.is_deepstack_layers": ([i in deepstack for i in range(n_blocks)], _ARRAY),
    }
    clip = _projector(_QWEN3VL_RENAMES, clip_kv, "v.position_embd.weight")
    clip = dataclasses.replace(
        clip,
        exact={
            f"v.deepstack_merger.{i}.{old}.{part}": f"v.deepstack.{block}.{new}.{part}"
            for i, block in enumerate(deepstack)
            for old, new in (("norm", "norm"), ("linear_fc1", "fc1"), ("linear_fc2", "fc2"))
            for part in ("weight", "bias")
        },
    )

    def tensors(ts: list[Tensor]) -> list[Tensor]:
        by_name = {t.name: t for t in ts}
        out = []
        for t in ts:
            qkv = _VIT_QKV.fullmatch(t.name)
            if t.name == "v.patch_embed.weight":
                out += _temporal_halves(t, n_in)
            elif qkv is None:
                out.append(t)
            elif qkv.group(2) == "q":  # K and V are fused into the block's attn_qkv at its Q
                block, _, part = qkv.groups()
                out.append(_stacked([by_name[f"{block}attn_{x}.{part}"] for x in "qkv"], f"{block}attn_qkv.{part}"))
        return out

    return dataclasses.replace(clip, tensors=tensors)


def _triple(value: Any) -> list[float]:
    return [float(x) for x in value] if isinstance(value, list) and len(value) == 3 else _HALF


def _stacked(parts: list[Tensor], name: str) -> Tensor:
    """Projections stacked into one, rows after rows (a fused Q/K/V); in F32 when their types
    differ (Ollama's files can hold F16 Q and K beside a Q8_0 V)."""
    first = parts[0]
    if len({p.kind for p in parts}) == 1:
        shape = (sum(p.shape[0] for p in parts), *first.shape[1:])
        return Tensor(name, first.kind, shape, first.dtype, lambda: np.concatenate([p.data() for p in parts]))
    f32 = [_in_f32(p) for p in parts]
    shape = (sum(p.shape[0] for p in f32), *f32[0].shape[1:])
    return Tensor(name, _F32_TYPE, shape, np.dtype(np.float32), lambda: np.concatenate([p.data() for p in f32]))


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


def _llama4(h: Header) -> list[Rewrite]:
    """Llama 4: the text model as it is without the tower, and a ``llama4`` projector (its tower
    renamed; llama.cpp's converter changes no data, Ollama's neither)."""
    kv = h.kv
    # Without the tower, and without the keys Ollama's converter added that llama.cpp does not read.
    text = _without_tower(
        Rewrite(role="model", arch="llama4", keep_tensor=lambda name: True),
        "llama4.vision.",
        "llama4.attention.chunk_size",
        "llama4.use_qk_norm",
    )
    ratio = kv.get("llama4.vision.pixel_shuffle_ratio") or 0.5
    clip_kv: _KV = {
        **_clip_keys(h, "llama4", "clip.use_gelu"),
        "clip.vision.attention.layer_norm_epsilon": _tower_key(h, "layer_norm_epsilon", _F32, 1e-5),
        "clip.vision.feed_forward_length": _tower_key(h, "feed_forward_length", _U32),
        "clip.vision.image_size": _tower_key(h, "image_size", _U32),
        "clip.vision.projector.scale_factor": (round(1 / ratio), _U32),
        "clip.vision.image_mean": (_HALF, _ARRAY),
        "clip.vision.image_std": (_HALF, _ARRAY),
    }
    clip = _projector(_LLAMA4_RENAMES, clip_kv, "v.position_embd.weight")
    return [text, dataclasses.replace(clip, exact={"v.positional_embedding_vlm": "v.position_embd.weight"})]


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


def _gemma4(h: Header) -> list[Rewrite]:
    """Gemma 4: the text model as ``layouts_text`` maps it, and one projector for both towers as
    llama.cpp's converter writes it (``Gemma4VisionAudioModel``): a ``gemma4v`` vision side (Ollama
    already wrote clip.cpp's tensor names) and a ``gemma4a`` audio side (a few names differ), the
    position table in F32 and the patch embedding promoted as Ollama's shim does. Ollama's packed
    ``v.clamp_data`` (its Go engine's form of the per-linear clamps; clip.cpp reads the per-tensor
    ``.input_min``-style scalars, which Ollama's converter also writes) is left out, as the shim leaves it unread."""
    kv = h.kv
    text = _gemma4_text(h)
    n_embd = kv.get("gemma4.embedding_length")
    if not n_embd:
        raise LayoutRefused(refusal("gemma4", "no gemma4.embedding_length for its projector's output"))
    clip_kv: _KV = {}
    if h.any_tensor("v."):
        clip_kv |= {
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
        merge = kv.get("gemma4.vision.projector.scale_factor")
        if merge and merge != _GEMMA4_MERGE:
            clip_kv["clip.vision.projector.scale_factor"] = (merge, _U32)
    if h.any_tensor("a."):
        clip_kv |= {
            "clip.has_audio_encoder": (True, _BOOL),
            "clip.audio.projector_type": ("gemma4a", _STR),
            "clip.audio.projection_dim": (n_embd, _U32),
            **_gemma4_tower_keys(h, "audio", ()),
            "clip.audio.num_mel_bins": (kv.get("gemma4.audio.num_mel_bins", 128), _U32),  # Gemma 4's feature extractor
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


def _gemma4_tower_keys(h: Header, modality: str, extra: tuple[str, ...]) -> _KV:
    """A Gemma 4 tower's shape under clip's names (``gemma4.<modality>.*`` -> ``clip.<modality>.*``)."""
    keys: _KV = {}
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
    return [_in_f32(t) if t.name in ("v.position_embd.weight", "v.patch_embd.weight") else t for t in ts]


def _in_f32(t: Tensor) -> Tensor:
    """``t`` as F32 (dequantized from F16, BF16 or a quantized type)."""
    if t.kind == _F32_TYPE:
        return t
    width = t.shape[-1] if t.kind == GGMLQuantizationType.F16 else _row_width(t)
    shape = (*t.shape[:-1], width)
    source, kind = t.data, t.kind
    return Tensor(t.name, _F32_TYPE, shape, np.dtype(np.float32), lambda: dequantize(source(), kind).reshape(shape))
