"""GLM-OCR as the files in Ollama's library hold it (``glmocr``), split into what llama.cpp runs.

Ollama's file (``convert/convert_glmocr.go``) is one GGUF: a GLM-4 text model whose Q and K rows
are already in the NeoX order ggml's M-RoPE rotates, and the GLM-4V vision tower (``v.*``) with its
merger (``mm.*``), both mostly under llama.cpp's names. llama.cpp runs the text model as ``glm4``
and the tower as a ``glm4v`` CLIP projector (``tools/mtmd/models/glm4v.cpp``). This maps them as
Ollama's own shim does at every load (``handle_glmocr`` and ``handle_glmocr_clip`` in
``llama/compat``), once, when the model is pulled or created:

- text: ``glmocr.*`` keys as ``glm4.*``; the three M-RoPE sections as llama.cpp's four; the rotary
  width, which Ollama's converter leaves out, as the whole head; GLM's ``chatglm-bpe``
  pre-tokenizer (some files say ``llama-bpe``); ``attn_out``, ``post_attn_norm`` and
  ``post_ffn_norm`` by llama.cpp's names; the FFN's gate and up fused into ``ffn_up``, gate first;
- tower: its keys as ``clip.vision.*``, the two frames' patch kernels ``patch_embd_0`` and
  ``patch_embd_1`` as ``v.patch_embd.weight`` and ``.weight.1`` in F32.
"""

from __future__ import annotations

import dataclasses
import re

from gguf import GGUFValueType

from .framework import (
    CLIP_MEAN,
    CLIP_STD,
    KV,
    Header,
    LayoutRefused,
    Rewrite,
    Tensor,
    clip_keys,
    projector,
    refusal,
    stacked,
    tower_key,
    triple,
    vision_tensor,
)

_U32 = GGUFValueType.UINT32
_F32 = GGUFValueType.FLOAT32
_STR = GGUFValueType.STRING
_ARRAY = GGUFValueType.ARRAY

_ARCH = "glmocr"
_TEXT_ARCH = "glm4"
_TEXT_RENAMES = (
    (".attn_out.", ".attn_output."),
    (".post_attn_norm.", ".post_attention_norm."),
    (".post_ffn_norm.", ".post_ffw_norm."),
)
# The text model's keys that are the tower's, or that llama.cpp's glm4 states otherwise.
_NOT_TEXT = tuple(
    f"{_ARCH}.{key}"
    for key in (
        "vision.",
        "image_token_id",
        "image_start_token_id",
        "image_end_token_id",
        "video_token_id",
        "video_start_token_id",
        "video_end_token_id",
        "rope.mrope_section",
        "rope.partial_rotary_factor",
    )
)
_PATCHES = {"v.patch_embd_0.weight": "v.patch_embd.weight", "v.patch_embd_1.weight": "v.patch_embd.weight.1"}
_GATE = re.compile(r"(blk\.\d+\.)ffn_gate\.weight")


def glmocr(h: Header) -> list[Rewrite]:
    """The text model as ``glm4`` and, where the file holds the tower, its ``glm4v`` projector."""
    kv = h.kv
    text_kv: KV = {"tokenizer.ggml.pre": ("chatglm-bpe", _STR)}
    sections = kv.get(f"{_ARCH}.rope.mrope_section")
    if isinstance(sections, list) and sections:  # padded to llama.cpp's four, as Ollama's TextKV pads them
        text_kv[f"{_TEXT_ARCH}.rope.dimension_sections"] = ([*(int(s) for s in sections[:4]), 0, 0, 0][:4], _ARRAY)
    if not h.has("rope.dimension_count"):
        text_kv[f"{_TEXT_ARCH}.rope.dimension_count"] = (h.head_size(), _U32)
    text = Rewrite(
        role="model",
        arch=_TEXT_ARCH,
        keep_tensor=lambda name: not vision_tensor(name),
        renames=_TEXT_RENAMES,
        keep_key=lambda key: not key.startswith(_NOT_TEXT),
        key_prefixes=(f"{_ARCH}.", f"{_TEXT_ARCH}."),
        set_kv=text_kv,
        tensors=_fused_ffn,
    )
    if not h.any_tensor("v."):
        return [text]
    return [text, _projector_of(h)]


def _fused_ffn(tensors: list[Tensor]) -> list[Tensor]:
    """Each block's ``ffn_gate`` and ``ffn_up`` as llama.cpp's one ``ffn_up``: the gate's rows,
    then up's (``ggml_swiglu`` takes the SiLU of the first half), at up's place."""
    by_name = {t.name: t for t in tensors}
    out = []
    for t in tensors:
        if (gate := _GATE.fullmatch(t.name)) and f"{gate.group(1)}ffn_up.weight" in by_name:
            continue  # written in its block's ffn_up
        paired = by_name.get(t.name.removesuffix("ffn_up.weight") + "ffn_gate.weight")
        out.append(stacked([paired, t], t.name) if t.name.endswith(".ffn_up.weight") and paired else t)
    return out


def _projector_of(h: Header) -> Rewrite:
    """The ``glm4v`` projector: the keys ``handle_glmocr_clip`` copies, under clip's names (the
    ViT's width from ``intermediate_size``, its output from ``out_hidden_size``), GLM-OCR's
    preprocessor's statistics (OpenAI CLIP's) where the file states none."""
    kv = h.kv
    width = kv.get(f"{_ARCH}.vision.out_hidden_size")
    if not width:
        raise LayoutRefused(refusal(_ARCH, "its vision tower states no output width (vision.out_hidden_size)"))
    clip_kv: KV = {
        **clip_keys(h, "glm4v", "clip.use_silu"),
        "clip.vision.feed_forward_length": tower_key(h, "intermediate_size", _U32),
        "clip.vision.attention.layer_norm_epsilon": tower_key(h, "attention.layer_norm_rms_epsilon", _F32, 1e-5),
        "clip.vision.image_size": tower_key(h, "image_size", _U32),
        "clip.vision.spatial_merge_size": tower_key(h, "spatial_merge_size", _U32, 2),
        "clip.vision.projection_dim": (width, _U32),
        "clip.vision.image_mean": (triple(kv.get(f"{_ARCH}.vision.image_mean"), CLIP_MEAN), _ARRAY),
        "clip.vision.image_std": (triple(kv.get(f"{_ARCH}.vision.image_std"), CLIP_STD), _ARRAY),
    }
    return dataclasses.replace(projector((), clip_kv, *_PATCHES.values()), exact=_PATCHES)
