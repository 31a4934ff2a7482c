"""A tiny random-weight DeepSeek-OCR in both layouts: llama.cpp's (a ``deepseek2-ocr`` text GGUF and
its ``deepseekocr`` projector, as its converter writes them) and Ollama's (one ``deepseekocr`` GGUF
with the SAM and CLIP towers inside, as ``convert_deepseekocr.go`` writes it), from the same weights.
``convert/deepseek.py`` maps the second into the first.

The projector is a real, if tiny, SAM + CLIP pair as libmtmd's ``deepseekocr`` graph reads it: clip.cpp
fixes the view at 1024 pixels in 16-pixel patches (64 x 64), SAM's neck and two stride-2
convolutions make that 16 x 16 tokens, each row ended by a newline and the view by a separator
(273 image tokens). SAM needs three blocks: its third attends globally (clip.cpp's fixed
``{2, 5, 8, 11}``), the first two in 14 x 14 windows.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import gguf
import numpy as np

from .gguf_base import (
    Shape,
    Tensors,
    add_tokenizer,
    copy_fields,
    f16_exact,
    finish,
    llama_block,
    model_header,
    synthetic_vocab,
)

_F32 = gguf.GGMLQuantizationType.F32
OCR = Shape(n_layer=2, n_embd=64, n_head=4, n_head_kv=4, head_dim=16, n_ff=128, context_length=8192)
N_EXPERT, N_EXPERT_USED, N_EXPERT_SHARED, N_FF_EXP = 4, 2, 2, 32


@dataclasses.dataclass(frozen=True)
class OcrVision:
    """The towers' widths: SAM's (``sam_*``), its neck's and CLIP's (as wide as SAM's output)."""

    sam_embd: int = 16
    sam_heads: int = 1
    sam_layers: int = 3
    sam_patch: int = 16
    sam_grid: int = 64  # 1024 / 16
    window: int = 14
    neck: int = 16
    clip_embd: int = 32
    clip_heads: int = 2
    clip_ff: int = 64
    clip_layers: int = 1
    clip_image_size: int = 224  # CLIP-L/14's: stated, though clip.cpp fixes DeepSeek-OCR's view
    clip_patch: int = 14


OCR_VISION = OcrVision()


def write_deepseekocr_text(path: Path, *, shape: Shape = OCR, seed: int = 0) -> Path:
    """A tiny ``deepseek2-ocr``: a dense first block, then mixture-of-experts blocks with shared
    experts; multi-head attention (DeepSeek-OCR's decoder has no MLA), NeoX RoPE at base 10000."""
    t = Tensors(gguf.GGUFWriter(str(path), "deepseek2-ocr"), np.random.default_rng(seed), 0.5, _F32)
    w, s = t.w, shape
    model_header(w, s, "tiny-deepseek-ocr", _F32)
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    w.add_head_count_kv(s.n_head_kv)
    w.add_leading_dense_block_count(1)
    w.add_expert_count(N_EXPERT)
    w.add_expert_used_count(N_EXPERT_USED)
    # What Ollama's file leaves out, and the map states again:
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_feed_forward_length(N_FF_EXP)
    w.add_expert_shared_count(N_EXPERT_SHARED)
    vocab = synthetic_vocab()
    add_tokenizer(w, vocab, None)
    t.matrix("token_embd.weight", len(vocab.tokens), s.n_embd)
    t.norm("output_norm.weight", s.n_embd)
    for i in range(s.n_layer):
        p = f"blk.{i}."
        llama_block(t, s, p, ffn=i == 0)
        if i == 0:
            continue
        t.matrix(p + "ffn_gate_inp.weight", N_EXPERT, s.n_embd)
        for name, rows, cols in (("gate", N_FF_EXP, s.n_embd), ("up", N_FF_EXP, s.n_embd)):
            w.add_tensor(f"{p}ffn_{name}_exps.weight", f16_exact(t, (N_EXPERT, rows, cols), 0.5))
        w.add_tensor(f"{p}ffn_down_exps.weight", f16_exact(t, (N_EXPERT, s.n_embd, N_FF_EXP), 0.5))
        shared = N_FF_EXP * N_EXPERT_SHARED
        t.matrix(p + "ffn_gate_shexp.weight", shared, s.n_embd)
        t.matrix(p + "ffn_up_shexp.weight", shared, s.n_embd)
        t.matrix(p + "ffn_down_shexp.weight", s.n_embd, shared)
    finish(w)
    return path


def biased_linear(t: Tensors, name: str, rows: int, cols: int) -> None:
    t.matrix(f"{name}.weight", rows, cols)
    t.f32(f"{name}.bias", t.rng.standard_normal(rows) * 0.1)


def layer_norm(t: Tensors, name: str, n: int) -> None:
    """A LayerNorm's weight and bias, distinct per norm, so that a map mistaking one for another shows."""
    t.f32(f"{name}.weight", 1 + t.rng.standard_normal(n) * 0.1)
    t.f32(f"{name}.bias", t.rng.standard_normal(n) * 0.1)


def vit_blocks(t: Tensors, n_layer: int, n: int, n_ff: int) -> None:
    """CLIP-style ViT blocks as clip.cpp names them: LayerNorms, fused Q/K/V, biased projections."""
    for i in range(n_layer):
        p = f"v.blk.{i}."
        layer_norm(t, p + "ln1", n)
        biased_linear(t, p + "attn_qkv", 3 * n, n)
        biased_linear(t, p + "attn_out", n, n)
        layer_norm(t, p + "ln2", n)
        biased_linear(t, p + "ffn_up", n_ff, n)
        biased_linear(t, p + "ffn_down", n, n_ff)


def _sam_tower(t: Tensors, v: OcrVision) -> None:
    """SAM's blocks, neck and the two convolutions after it, as llama.cpp's converter writes them."""
    n, d_head = v.sam_embd, v.sam_embd // v.sam_heads
    t.f32("v.sam.patch_embd.weight", t.rng.standard_normal((n, 3, v.sam_patch, v.sam_patch)) * 0.05)
    t.f32("v.sam.patch_embd.bias", np.zeros(n))
    t.f32("v.sam.pos_embd.weight", f16_exact(t, (1, v.sam_grid, v.sam_grid, n), 0.1))
    for i in range(v.sam_layers):
        p = f"v.sam.blk.{i}."
        layer_norm(t, p + "pre_ln", n)
        biased_linear(t, p + "attn.qkv", 3 * n, n)
        biased_linear(t, p + "attn.out", n, n)
        span = 2 * (v.sam_grid if i == 2 else v.window) - 1  # block 2 attends globally
        t.f32(p + "attn.pos_h.weight", f16_exact(t, (span, d_head), 0.1))
        t.f32(p + "attn.pos_w.weight", f16_exact(t, (span, d_head), 0.1))
        layer_norm(t, p + "post_ln", n)
        biased_linear(t, p + "mlp.lin1", 4 * n, n)
        biased_linear(t, p + "mlp.lin2", n, 4 * n)
    t.f32("v.sam.neck.0.weight", f16_exact(t, (v.neck, n, 1, 1)))
    layer_norm(t, "v.sam.neck.1", v.neck)
    t.f32("v.sam.neck.2.weight", f16_exact(t, (v.neck, v.neck, 3, 3)))
    layer_norm(t, "v.sam.neck.3", v.neck)
    t.f32("v.sam.net_2.weight", f16_exact(t, (2 * v.neck, v.neck, 3, 3)))
    t.f32("v.sam.net_3.weight", f16_exact(t, (v.clip_embd, 2 * v.neck, 3, 3)))


def write_deepseekocr_projector(
    path: Path, *, n_embd_text: int = OCR.n_embd, v: OcrVision = OCR_VISION, seed: int = 0
) -> Path:
    """The ``deepseekocr`` projector as llama.cpp's converter writes one: SAM (``v.sam.*``, its
    position table, relative positions and neck in F32), CLIP (``v.*``, fused Q/K/V, a class token),
    the linear projection of both (``mm.model.fc``), the newline and view-separator embeddings."""
    w = gguf.GGUFWriter(str(path), "clip")
    t = Tensors(w, np.random.default_rng(seed), 0.2, _F32)
    w.add_name("tiny-deepseekocr-mmproj")
    w.add_clip_has_vision_encoder(True)
    w.add_clip_projector_type("deepseekocr")
    w.add_vision_image_size(v.clip_image_size)
    w.add_vision_patch_size(v.clip_patch)
    w.add_vision_embedding_length(v.clip_embd)
    w.add_vision_feed_forward_length(v.clip_heads * 4)  # as llama.cpp's converter states it
    w.add_vision_block_count(v.clip_layers)
    w.add_vision_head_count(v.clip_heads)
    w.add_vision_projection_dim(n_embd_text)
    w.add_vision_image_mean([0.5, 0.5, 0.5])
    w.add_vision_image_std([0.5, 0.5, 0.5])
    w.add_vision_attention_layernorm_eps(1e-6)
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.projector.scale_factor", v.clip_image_size // v.clip_patch // 16)
    w.add_uint32("clip.vision.window_size", v.window)
    w.add_uint32("clip.vision.preproc_min_tiles", 2)
    w.add_uint32("clip.vision.preproc_max_tiles", 9)
    w.add_uint32("clip.vision.sam.block_count", v.sam_layers)
    w.add_uint32("clip.vision.sam.embedding_length", v.sam_embd)
    w.add_uint32("clip.vision.sam.head_count", v.sam_heads)

    _sam_tower(t, v)

    c = v.clip_embd
    t.f32("v.class_embd", f16_exact(t, (c,)))
    t.f32("v.patch_embd.weight", f16_exact(t, (c, 3, v.clip_patch, v.clip_patch)))
    t.f32("v.position_embd.weight", f16_exact(t, ((v.sam_grid // 4) ** 2 + 1, c)))
    layer_norm(t, "v.pre_ln", c)
    vit_blocks(t, v.clip_layers, c, v.clip_ff)
    biased_linear(t, "mm.model.fc", n_embd_text, 2 * c)
    t.f32("v.image_newline", t.rng.standard_normal(n_embd_text) * 0.2)
    t.f32("v.view_seperator", t.rng.standard_normal((1, n_embd_text)) * 0.2)
    finish(w)
    return path


def write_deepseekocr_vision(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/text.gguf`` and ``folder/mmproj.gguf``: DeepSeek-OCR in llama.cpp's layout."""
    folder.mkdir(parents=True, exist_ok=True)
    text = write_deepseekocr_text(folder / "text.gguf", seed=seed)
    return text, write_deepseekocr_projector(folder / "mmproj.gguf", seed=seed)


# clip.cpp's names -> Ollama's (convert_deepseekocr.go's replacements of the Hugging Face names).
_OLLAMA_CLIP_NAMES = (
    (".attn_out", ".self_attn.out_proj"),
    (".attn_qkv", ".self_attn.qkv_proj"),
    (".ln1", ".layer_norm1"),
    (".ln2", ".layer_norm2"),
    (".ffn_up", ".mlp.fc1"),
    (".ffn_down", ".mlp.fc2"),
    ("v.pre_ln", "v.pre_layrnorm"),
    ("mm.model.fc", "mm.layers"),
    ("v.image_newline", "mm.image_newline"),
    ("v.view_seperator", "mm.view_seperator"),
)
_OLLAMA_SAM_NAMES = (
    ("v.sam.pos_embd.weight", "s.position_embd"),
    ("v.sam.", "s."),
    (".attn.out", ".attn.proj"),
    (".attn.pos_h.weight", ".attn.rel_pos_h"),
    (".attn.pos_w.weight", ".attn.rel_pos_w"),
    (".pre_ln", ".norm1"),
    (".post_ln", ".norm2"),
)
# Matrices llama.cpp's converter forces to F32 that Ollama's (from F16/BF16 weights) leaves F16.
_OLLAMA_F16 = ("v.class_embd", "v.patch_embd.", "v.position_embd.", "v.sam.pos_embd.", ".attn.pos_", ".neck.", ".net_")
# Keys Ollama's converter does not write for DeepSeek-OCR's text model.
_NOT_IN_OLLAMA = (
    "rope.freq_base",
    "attention.layer_norm_rms_epsilon",
    "expert_feed_forward_length",
    "expert_shared_count",
)


def _ollama_name(name: str) -> str:
    names = _OLLAMA_SAM_NAMES if name.startswith("v.sam.") else _OLLAMA_CLIP_NAMES
    for ours, theirs in names:
        name = name.replace(ours, theirs)
    return name


def write_ollama_deepseekocr(path: Path, *, seed: int = 0) -> Path:
    """``write_deepseekocr_vision``'s model as one GGUF laid out as Ollama's converter writes
    DeepSeek-OCR: architecture ``deepseekocr`` without the keys llama.cpp requires (RMS epsilon,
    RoPE base, the experts' width and shared count), the towers' hyperparameters as
    ``deepseekocr.vision.*`` and ``deepseekocr.sam.*``, SAM under ``s.*`` and CLIP under Hugging
    Face's leaf names, the embeddings, relative positions and neck in F16, the view separator a
    vector. llama.cpp cannot load it as it is."""
    v = OCR_VISION
    with tempfile.TemporaryDirectory() as tmp:
        text_path, clip_path = write_deepseekocr_vision(Path(tmp), seed=seed)
        text, clip = gguf.GGUFReader(text_path), gguf.GGUFReader(clip_path)
        w = gguf.GGUFWriter(str(path), "deepseekocr")
        skip = tuple(f"deepseek2-ocr.{key}" for key in _NOT_IN_OLLAMA)
        copy_fields(text, w, skip=skip, key=lambda k: k.replace("deepseek2-ocr.", "deepseekocr.", 1))
        for key, value in (
            ("vision.block_count", v.clip_layers),
            ("vision.embedding_length", v.clip_embd),
            ("vision.head_count", v.clip_heads),
            ("vision.image_size", v.clip_image_size),
            ("vision.patch_size", v.clip_patch),
            ("sam.block_count", v.sam_layers),
            ("sam.embedding_length", v.sam_embd),
            ("sam.head_count", v.sam_heads),
        ):
            w.add_uint32(f"deepseekocr.{key}", value)
        w.add_array("deepseekocr.sam.global_attention_indexes", [2, 5, 8, 11])
        for t in text.tensors:
            w.add_tensor(t.name, np.array(t.data))
        for t in clip.tensors:
            data = np.array(t.data)
            if t.name == "v.view_seperator":
                data = data.reshape(-1)
            elif data.ndim > 1 and any(part in t.name for part in _OLLAMA_F16):
                data = data.astype(np.float16)
            w.add_tensor(_ollama_name(t.name), data)
        finish(w)
    return path
