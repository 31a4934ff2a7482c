"""Tiny random-weight GLM-4 text models (GLM-4-0414, GLM-Z1) in llama.cpp's layout (``glm4``), in
F16 as converted from a checkpoint: Q, K and V with biases, half of each head rotating, norms after
attention and after the FFN, the FFN's gate and up in one tensor, GLM's vocabulary and template.
``hf_folders.write_hf_glm4`` exports them as the checkpoints they convert from.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import gguf
import numpy as np

from .deepseek2_ggufs import GLM_SPECIALS, GLM_TEMPLATE
from .gguf_base import (
    TINY,
    Tensors,
    VisionShape,
    add_tokenizer,
    copy_fields,
    f16_exact,
    finish,
    projector_header,
    synthetic_vocab,
    with_tokens,
)
from .vision_ggufs import PIXTRAL_MEAN_STD

_F16 = gguf.GGMLQuantizationType.F16
N_LAYER, N_HEAD, N_HEAD_KV, HEAD_DIM, N_FF = 2, 4, 2, 16, 96


# GLM-OCR's text model: heads wider than its width over their count (as the release's 128 of
# 1536 / 16), M-RoPE over the whole head, in sections of its pairs for time, height and width.
OCR_HEAD_DIM = 32
OCR_SECTIONS = (4, 6, 6)
# The markers libmtmd writes around a glm4v projector's image (GLM-OCR's vocabulary holds them).
OCR_IMAGE_TOKENS = ("<|begin_of_image|>", "<|end_of_image|>", "<|image|>")
# GLM-4.1V's text model: half of each head rotating (its 4 pairs here), in M-RoPE sections.
V_SECTIONS = (2, 1, 1)


def write_glm4(path: Path, *, seed: int = 0, ocr: bool = False, sees: bool = False) -> Path:
    """A tiny GLM-4 in F16 (biases and norms F32, of values F16 holds, so that the checkpoint
    exported from it converts back to it exactly). ``ocr``: GLM-OCR's text model as Ollama's
    files run in llama.cpp (``llama/compat`` ``handle_glmocr``): no Q, K and V biases, wider
    heads, M-RoPE sections over the whole head (Q and K rows already in NeoX order), GLM's
    ``chatglm-bpe`` pre-tokenizer, the image markers in the vocabulary. ``sees``: GLM-4.1V's text
    model as llama.cpp's converter writes it: GLM-4's, half of each head rotating in M-RoPE
    sections (Q and K rows in NeoX order), the image markers in the vocabulary."""
    t = Tensors(gguf.GGUFWriter(str(path), "glm4"), np.random.default_rng(seed), 0.25, _F16)
    w, n_embd, head_dim = t.w, TINY.n_embd, OCR_HEAD_DIM if ocr else HEAD_DIM
    w.add_name("tiny-glm-ocr" if ocr else "tiny-glm4v" if sees else "tiny-glm4")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(4096)
    w.add_embedding_length(n_embd)
    w.add_block_count(N_LAYER)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_feed_forward_length(N_FF)
    w.add_rope_freq_base(1e4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    if ocr:
        w.add_rope_dimension_count(head_dim)
        w.add_rope_dimension_sections([*OCR_SECTIONS, 0])
    else:
        w.add_rope_dimension_count(HEAD_DIM // 2)
    if sees:
        w.add_rope_dimension_sections([*V_SECTIONS, 0])
    vocab = with_tokens(synthetic_vocab(), GLM_SPECIALS + (OCR_IMAGE_TOKENS if ocr or sees else ()))
    ids = {text: i for i, text in enumerate(vocab.tokens)}
    add_tokenizer(w, vocab, GLM_TEMPLATE, pre="chatglm-bpe" if ocr else "glm4")
    w.add_eot_token_id(ids["<|user|>"])
    w.add_eom_token_id(ids["<|observation|>"])

    n_vocab = len(vocab.tokens)
    t.matrix("token_embd.weight", n_vocab, n_embd, std=1.0)
    t.varied_norm("output_norm.weight", n_embd)
    t.matrix("output.weight", n_vocab, n_embd)
    for i in range(N_LAYER):
        p = f"blk.{i}."
        t.varied_norm(p + "attn_norm.weight", n_embd)
        for name, rows in (
            ("attn_q", N_HEAD * head_dim),
            ("attn_k", N_HEAD_KV * head_dim),
            ("attn_v", N_HEAD_KV * head_dim),
        ):
            t.matrix(p + name + ".weight", rows, n_embd)
            if not ocr:
                t.f32(p + name + ".bias", f16_exact(t, (rows,), 0.3))
        t.matrix(p + "attn_output.weight", n_embd, N_HEAD * head_dim)
        t.varied_norm(p + "post_attention_norm.weight", n_embd)
        t.varied_norm(p + "ffn_norm.weight", n_embd)
        t.matrix(p + "ffn_up.weight", 2 * N_FF, n_embd)  # the gate's rows, then up's
        t.matrix(p + "ffn_down.weight", n_embd, N_FF)
        t.varied_norm(p + "post_ffw_norm.weight", n_embd)
    finish(w)
    return path


# GLM-OCR's ViT in small: 32-pixel images in 8-pixel patches (libmtmd scales a picture up to the
# glm4v minimum of 8 tokens), heads of 16 (libmtmd rotates them in quarters).
OCR_VISION = VisionShape(image_size=32, patch_size=8, n_embd=32, n_head=2, n_ff=64, merge=2, n_layer=2)
OCR_MERGER_FF = 3 * TINY.n_embd  # the projector's SwiGLU width: the text model's, per colour channel
OCR_MEAN_STD = PIXTRAL_MEAN_STD  # OpenAI CLIP's, as GLM-OCR's preprocessor states them


# GLM-4.1V's ViT in small: its learned position table 8x8 patches, so that a 64-pixel picture,
# within libmtmd's least of 8 tokens, reads it as it is; ``n_ff`` its merger's width (its
# ``intermediate_size``), its blocks' FFN as wide as the text model (``out_hidden_size``), as the release's.
V_VISION = dataclasses.replace(OCR_VISION, image_size=64, n_ff=96)


def write_glmocr_projector(path: Path, *, seed: int = 0, ocr: bool = True) -> Path:
    """GLM-OCR's ``glm4v`` projector as libmtmd loads it (``tools/mtmd/models/glm4v.cpp``): the
    two frames' patch kernels with a bias, RMS-normed SwiGLU blocks with fused Q/K/V and per-head
    Q and K norms (their linears with biases, as the release's), the post norm, the 2x2 merging
    convolution, the projection with its LayerNorm, and the SwiGLU out to the text model's width;
    the kernels F32, the matrices F16. ``ocr`` off: GLM-4.1V's, the tower GLM-OCR's is made from:
    a norm after the patches and a learned position table, no biases or Q and K norms, the last
    SwiGLU as wide as the tower's."""
    v, n_text = OCR_VISION if ocr else V_VISION, TINY.n_embd
    merger_ff, block_ff = (OCR_MERGER_FF, v.n_ff) if ocr else (v.n_ff, n_text)
    t = projector_header(path, v, "glm4v", n_text, seed, activation="silu", eps=1e-5, mean_std=OCR_MEAN_STD)
    t = dataclasses.replace(t, qtype=_F16)  # as from the release's BF16, or an F16 export of it
    t.w.add_vision_spatial_merge_size(v.merge)
    n, d_head = v.n_embd, v.n_embd // v.n_head
    for name in ("v.patch_embd.weight", "v.patch_embd.weight.1"):
        t.f32(name, f16_exact(t, (n, 3, v.patch_size, v.patch_size)))
    t.f32("v.patch_embd.bias", t.rng.standard_normal(n) * 0.1)
    if not ocr:
        t.varied_norm("v.norm_embd.weight", n)
        t.f32("v.position_embd.weight", f16_exact(t, (v.n_patches, n)))
    for i in range(v.n_layer):
        p = f"v.blk.{i}."
        t.varied_norm(p + "ln1.weight", n)
        for name, rows, columns in (
            ("attn_qkv", 3 * n, n),
            ("attn_out", n, n),
            ("ffn_gate", block_ff, n),
            ("ffn_up", block_ff, n),
            ("ffn_down", n, block_ff),
        ):
            t.matrix(p + name + ".weight", rows, columns)
            if ocr:
                t.f32(p + name + ".bias", f16_exact(t, (rows,), 0.1))
        if ocr:
            t.varied_norm(p + "attn_q_norm.weight", d_head)
            t.varied_norm(p + "attn_k_norm.weight", d_head)
        t.varied_norm(p + "ln2.weight", n)
    t.varied_norm("v.post_ln.weight", n)
    t.f32("mm.patch_merger.weight", f16_exact(t, (n_text, n, v.merge, v.merge)))
    t.f32("mm.patch_merger.bias", t.rng.standard_normal(n_text) * 0.1)
    t.matrix("mm.model.fc.weight", n_text, n_text)
    t.varied_norm("mm.post_norm.weight", n_text)
    t.f32("mm.post_norm.bias", t.rng.standard_normal(n_text) * 0.1)
    t.matrix("mm.gate.weight", merger_ff, n_text)
    t.matrix("mm.up.weight", merger_ff, n_text)
    t.matrix("mm.down.weight", n_text, merger_ff)
    finish(t.w)
    return path


def write_glm4v_vision(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/text.gguf`` and ``folder/mmproj.gguf``: GLM-4.1V as llama.cpp's converter writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    text = write_glm4(folder / "text.gguf", seed=seed, sees=True)
    return text, write_glmocr_projector(folder / "mmproj.gguf", seed=seed, ocr=False)


def write_glmocr_vision(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/text.gguf`` and ``folder/mmproj.gguf``: GLM-OCR as llama.cpp runs Ollama's files."""
    folder.mkdir(parents=True, exist_ok=True)
    text = write_glm4(folder / "text.gguf", seed=seed, ocr=True)
    return text, write_glmocr_projector(folder / "mmproj.gguf", seed=seed)


# llama.cpp's names -> those of the files in Ollama's library (``handle_glmocr`` renames them back).
_OLLAMA_TEXT_NAMES = (
    (".attn_output.", ".attn_out."),
    (".post_attention_norm.", ".post_attn_norm."),
    (".post_ffw_norm.", ".post_ffn_norm."),
)
_OLLAMA_PATCHES = {"v.patch_embd.weight": "v.patch_embd_0.weight", "v.patch_embd.weight.1": "v.patch_embd_1.weight"}


def write_ollama_glmocr(path: Path, *, seed: int = 0, current: bool = False) -> Path:
    """``write_glmocr_vision``'s model as one GGUF laid out as the GLM-OCR files in Ollama's library
    (``convert/convert_glmocr.go``, and the names ``llama/compat`` finds in them): architecture
    ``glmocr``, the M-RoPE sections as a three-number ``rope.mrope_section`` and no rotary width,
    the FFN's gate and up apart, ``attn_out``, ``post_attn_norm`` and ``post_ffn_norm``, a
    ``llama-bpe`` pre-tokenizer (some files have it), the tower's keys as ``glmocr.vision.*`` and
    its patch kernels in F16 as ``patch_embd_0`` and ``patch_embd_1``. llama.cpp cannot load it.
    ``current``: the text model's tensors as Ollama's converter writes them today (llama.cpp's
    names, gate and up fused as ``ffn_up``), as the shim also takes them."""
    v = OCR_VISION
    with tempfile.TemporaryDirectory() as tmp:
        text_path, clip_path = write_glmocr_vision(Path(tmp), seed=seed)
        text, clip = gguf.GGUFReader(text_path), gguf.GGUFReader(clip_path)
        w = gguf.GGUFWriter(str(path), "glmocr")
        skip = ("glm4.rope.dimension_sections", "glm4.rope.dimension_count", "tokenizer.ggml.pre")
        copy_fields(text, w, skip=skip, key=lambda k: k.replace("glm4.", "glmocr.", 1))
        w.add_tokenizer_pre("llama-bpe")
        w.add_array("glmocr.rope.mrope_section", list(OCR_SECTIONS))
        w.add_float32("glmocr.rope.partial_rotary_factor", 1.0)
        for key, value in (
            ("block_count", v.n_layer),
            ("embedding_length", v.n_embd),
            ("attention.head_count", v.n_head),
            ("image_size", v.image_size),
            ("patch_size", v.patch_size),
            ("spatial_merge_size", v.merge),
            ("temporal_patch_size", 2),
            ("out_hidden_size", TINY.n_embd),
            ("intermediate_size", v.n_ff),
        ):
            w.add_uint32(f"glmocr.vision.{key}", value)
        w.add_float32("glmocr.vision.attention.layer_norm_rms_epsilon", 1e-5)
        w.add_array("glmocr.vision.image_mean", OCR_MEAN_STD[0])
        w.add_array("glmocr.vision.image_std", OCR_MEAN_STD[1])
        tokens = text.fields["tokenizer.ggml.tokens"].contents()
        keys = ("image_start_token_id", "image_end_token_id", "image_token_id")
        for key, token in zip(keys, OCR_IMAGE_TOKENS, strict=True):
            w.add_uint32(f"glmocr.{key}", tokens.index(token))
        for t in text.tensors:
            data, name = np.array(t.data), t.name
            if name.endswith(".ffn_up.weight") and not current:  # llama.cpp's fused gate-then-up, apart
                half = data.shape[0] // 2
                w.add_tensor(name.replace(".ffn_up.", ".ffn_gate."), data[:half])
                data = data[half:]
            for ours, theirs in () if current else _OLLAMA_TEXT_NAMES:
                name = name.replace(ours, theirs)
            w.add_tensor(name, data)
        for t in clip.tensors:
            data = np.array(t.data)
            if t.name in _OLLAMA_PATCHES:
                w.add_tensor(_OLLAMA_PATCHES[t.name], data.astype(np.float16))
            else:
                w.add_tensor(t.name, data)
        finish(w)
    return path
