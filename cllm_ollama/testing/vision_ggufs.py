"""Tiny random-weight models that see, in llama.cpp's layout (a text GGUF and its projector, as
its converter writes them), for the families whose Ollama layout ``cllm_ollama.convert`` maps:
Mistral 3 with a Pixtral projector, Qwen3-VL with a deepstack merger, and Llama 4. ``ollama_ggufs.py``
writes the same weights laid out as Ollama's converter wrote them; mapped, they must be these.

Tensors that Ollama's files hold in F16 get values F16 represents exactly, so that the mapped
files can equal these bit for bit.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import gguf
import numpy as np

from .gguf_base import (
    TINY,
    TINY_VISION,
    Shape,
    Tensors,
    VisionShape,
    Vocab,
    add_tokenizer,
    attention_block,
    attention_header,
    f16_exact,
    finish,
    llama_block,
    llama_body,
    moe_ffn,
    projector_header,
    synthetic_vocab,
    vit_block,
    with_tokens,
)

_F32 = gguf.GGMLQuantizationType.F32
IMAGE_TOKENS = ("[IMG]", "[IMG_BREAK]", "[IMG_END]")  # Pixtral's, in its vocabulary
PIXTRAL_MEAN_STD = ([0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711])
# Qwen3-VL's M-RoPE sections are for 128-wide heads (Ollama's files do not state them).
QWEN3VL = Shape(n_layer=2, n_embd=64, n_head=2, n_head_kv=1, head_dim=128, n_ff=128)
QWEN3VL_VISION = dataclasses.replace(TINY_VISION, n_layer=2)
DEEPSTACK = [0]  # the ViT blocks whose output a deepstack merger adds to the text model's input


def pixtral_vocab() -> Vocab:
    """``synthetic_vocab`` with Pixtral's image tokens after its specials (padded again to 32)."""
    return with_tokens(synthetic_vocab(), IMAGE_TOKENS)


def write_mistral3(path: Path, *, shape: Shape = TINY, seed: int = 0) -> Path:
    """A tiny Mistral 3 text model (Llama blocks, no QK norms) with Pixtral's image tokens."""
    t = Tensors(gguf.GGUFWriter(str(path), "mistral3"), np.random.default_rng(seed), 0.5, _F32)
    w, s = t.w, shape
    attention_header(w, s, "tiny-mistral3", _F32)
    w.add_layer_norm_rms_eps(1e-5)
    llama_body(t, s, pixtral_vocab())
    return path


def write_pixtral_projector(
    path: Path, text: Path, *, seed: int = 0, f16: bool = False, shape: VisionShape = TINY_VISION
) -> Path:
    """A Pixtral projector as llama.cpp's converter writes Mistral Small 3.1's: a SwiGLU ViT with
    RMS norms and 2-D RoPE (its Q/K rows permuted for ggml's RoPE), a 2x2 patch merger, and the
    text model's [IMG_BREAK] embedding row, which ends each row of an image. ``f16``: typed as the
    converter writes one from an F16 checkpoint (matrices F16), without the ViT's zero biases,
    which Pixtral has not: the twin of such a checkpoint. ``shape``: its size (Pixtral's positions
    are rotary, so a larger ``image_size`` only lets pictures be larger)."""
    v = shape
    n_embd_text = TINY.n_embd
    t = projector_header(path, v, "pixtral", n_embd_text, seed, activation="silu", eps=1e-5, mean_std=PIXTRAL_MEAN_STD)
    if f16:
        t = dataclasses.replace(t, qtype=gguf.GGMLQuantizationType.F16)
    w = t.w
    w.add_vision_spatial_merge_size(v.merge)
    t.f32("v.patch_embd.weight", f16_exact(t, (v.n_embd, 3, v.patch_size, v.patch_size)))
    t.norm("v.pre_ln.weight", v.n_embd)
    vit_block(t, v, gated=True, norm_bias=False, post_ln=False, biases=not f16)
    t.norm("mm.input_norm.weight", v.n_embd)
    t.matrix("mm.patch_merger.weight", v.n_embd, v.n_embd * v.merge * v.merge)
    t.matrix("mm.1.weight", n_embd_text, v.n_embd)
    t.matrix("mm.2.weight", n_embd_text, n_embd_text)
    reader = gguf.GGUFReader(text)
    embd = next(x for x in reader.tensors if x.name == "token_embd.weight")
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    t.f32("v.token_embd.img_break", np.array(embd.data[tokens.index("[IMG_BREAK]")]))
    finish(w)
    return path


def write_mistral3_vision(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/text.gguf`` (``write_mistral3``) and ``folder/mmproj.gguf``, its Pixtral projector."""
    folder.mkdir(parents=True, exist_ok=True)
    text = write_mistral3(folder / "text.gguf", seed=seed)
    return text, write_pixtral_projector(folder / "mmproj.gguf", text, seed=seed)


def write_qwen3vl(
    path: Path,
    *,
    shape: Shape = QWEN3VL,
    seed: int = 0,
    qtype: gguf.GGMLQuantizationType = _F32,
    experts: tuple[int, int, int] | None = None,
) -> Path:
    """A tiny Qwen3-VL text model: Qwen3 blocks, interleaved M-RoPE, and an input as wide as the
    projector's output (its embedding and one deepstack feature per merger); matrices in ``qtype``.
    ``experts``: Qwen3-VL-MoE's (``qwen3vlmoe``): routed experts, how many a token uses, their width."""
    arch = "qwen3vlmoe" if experts is not None else "qwen3vl"
    t = Tensors(gguf.GGUFWriter(str(path), arch), np.random.default_rng(seed), 0.5, qtype)
    w, s = t.w, shape
    attention_header(w, s, f"tiny-{arch}", qtype)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_dimension_sections([24, 20, 20, 0])
    w.add_uint32(f"{arch}.n_deepstack_layers", len(DEEPSTACK))
    if experts is not None:
        w.add_expert_count(experts[0])
        w.add_expert_used_count(experts[1])
        w.add_expert_feed_forward_length(experts[2])
    vocab = synthetic_vocab()
    add_tokenizer(w, vocab, None)
    t.matrix("token_embd.weight", len(vocab.tokens), s.n_embd)
    t.norm("output_norm.weight", s.n_embd)
    for i in range(s.n_layer):
        attention_block(t, s, f"blk.{i}.", post_norms=False, ffn=experts is None)
        if experts is not None:
            moe_ffn(t, f"blk.{i}.", experts[0], experts[2], s.n_embd)
    finish(w)
    return path


def write_qwen3vl_projector(
    path: Path,
    *,
    n_embd_text: int = QWEN3VL.n_embd,
    seed: int = 0,
    deepstack: list[int] = DEEPSTACK,
    f16: bool = False,
    shape: VisionShape = QWEN3VL_VISION,
) -> Path:
    """A Qwen3-VL projector (``qwen3vl_merger``) as llama.cpp's converter writes one: a LayerNorm
    GELU ViT with fused Q/K/V and a learned position table, the two frames' patch kernels, the
    2x2 merger, and a deepstack merger after each block in ``deepstack`` (Qwen 3.5's has none).
    ``f16``: matrices in F16, as from an F16 checkpoint; ``shape``: its size (a larger
    ``image_size`` a larger position table)."""
    v = shape
    t = projector_header(path, v, "qwen3vl_merger", n_embd_text, seed)
    if f16:
        t = dataclasses.replace(t, qtype=gguf.GGMLQuantizationType.F16)
    w = t.w
    w.add_vision_spatial_merge_size(v.merge)
    w.add_vision_is_deepstack_layers([i in deepstack for i in range(v.n_layer)])
    n, merged = v.n_embd, v.n_embd * v.merge * v.merge
    for name in ("v.patch_embd.weight", "v.patch_embd.weight.1"):
        t.f32(name, f16_exact(t, (n, 3, v.patch_size, v.patch_size)))
    t.f32("v.patch_embd.bias", f16_exact(t, (n,), 0.1))
    t.f32("v.position_embd.weight", f16_exact(t, (v.n_patches, n)))

    def linear(name: str, rows: int, cols: int) -> None:
        t.matrix(f"{name}.weight", rows, cols)
        t.f32(f"{name}.bias", t.rng.standard_normal(rows) * 0.1)

    for i in range(v.n_layer):
        p = f"v.blk.{i}."
        for norm in ("ln1", "ln2"):
            t.norm(f"{p}{norm}.weight", n)
            t.f32(f"{p}{norm}.bias", np.zeros(n))
        linear(p + "attn_qkv", 3 * n, n)
        linear(p + "attn_out", n, n)
        linear(p + "ffn_up", v.n_ff, n)
        linear(p + "ffn_down", n, v.n_ff)
    t.norm("v.post_ln.weight", n)
    t.f32("v.post_ln.bias", np.zeros(n))
    linear("mm.0", merged, merged)
    linear("mm.2", n_embd_text, merged)
    for block in deepstack:
        t.norm(f"v.deepstack.{block}.norm.weight", merged)
        t.f32(f"v.deepstack.{block}.norm.bias", np.zeros(merged))
        linear(f"v.deepstack.{block}.fc1", merged, merged)
        linear(f"v.deepstack.{block}.fc2", n_embd_text, merged)
    finish(w)
    return path


QWEN25VL_VISION = dataclasses.replace(TINY_VISION, n_layer=2)  # a window-attention block, then a whole one


def write_qwen2vl_projector(
    path: Path, *, n_embd_text: int = TINY.n_embd, seed: int = 0, shape: VisionShape = QWEN25VL_VISION
) -> Path:
    """A Qwen2-VL projector (``qwen2vl_merger``) as llama.cpp's converter writes one from an F16
    checkpoint: a LayerNorm ViT whose FFN's quick GELU no key states (libmtmd's default), Q, K and
    V apart, every projection and norm biased, the two frames' patch kernels, the 2x2 merger."""
    v = shape
    t = projector_header(path, v, "qwen2vl_merger", n_embd_text, seed, activation=None)
    t = dataclasses.replace(t, qtype=gguf.GGMLQuantizationType.F16)
    _qwen_vit(t, v, n_embd_text, gated=False, norm_bias=True)
    return path


def write_qwen25vl_projector(
    path: Path,
    *,
    n_embd_text: int = TINY.n_embd,
    seed: int = 0,
    f16: bool = False,
    shape: VisionShape = QWEN25VL_VISION,
) -> Path:
    """A Qwen2.5-VL projector (``qwen2.5vl_merger``) as llama.cpp's converter writes one: an
    RMS-normed SwiGLU ViT (Q, K and V apart, every projection biased) whose every second block
    attends to the whole picture and the others to windows (``n_wa_pattern``), the two frames'
    patch kernels (no bias), and the 2x2 merger. ``f16``: matrices in F16, as from an F16
    checkpoint."""
    v = shape
    t = projector_header(path, v, "qwen2.5vl_merger", n_embd_text, seed, activation="silu")
    if f16:
        t = dataclasses.replace(t, qtype=gguf.GGMLQuantizationType.F16)
    t.w.add_vision_n_wa_pattern(2)
    _qwen_vit(t, v, n_embd_text, gated=True, norm_bias=False)
    return path


def _qwen_vit(t: Tensors, v: VisionShape, n_embd_text: int, *, gated: bool, norm_bias: bool) -> None:
    """Qwen 2 and 2.5's ViT (the patch kernels of two frames, Q, K and V apart) and merger, every
    projection biased, its norms LayerNorms (``norm_bias``) or RMS norms, its FFN ``gated`` or not;
    the file finished."""
    n, merged = v.n_embd, v.n_embd * v.merge * v.merge
    for name in ("v.patch_embd.weight", "v.patch_embd.weight.1"):
        t.f32(name, f16_exact(t, (n, 3, v.patch_size, v.patch_size)))

    def linear(name: str, rows: int, cols: int) -> None:
        t.matrix(f"{name}.weight", rows, cols)
        t.f32(f"{name}.bias", t.rng.standard_normal(rows) * 0.1)

    def norm(name: str) -> None:
        t.f32(f"{name}.weight", 1 + t.rng.standard_normal(n) * 0.1)
        if norm_bias:
            t.f32(f"{name}.bias", t.rng.standard_normal(n) * 0.1)

    for i in range(v.n_layer):
        p = f"v.blk.{i}."
        norm(p + "ln1")
        norm(p + "ln2")
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            linear(p + name, n, n)
        if gated:
            linear(p + "ffn_gate", v.n_ff, n)
        linear(p + "ffn_up", v.n_ff, n)
        linear(p + "ffn_down", n, v.n_ff)
    norm("v.post_ln")
    linear("mm.0", merged, merged)
    linear("mm.2", n_embd_text, merged)
    finish(t.w)


def write_qwen3vl_vision(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/text.gguf`` (``write_qwen3vl``) and ``folder/mmproj.gguf``, its projector."""
    folder.mkdir(parents=True, exist_ok=True)
    text = write_qwen3vl(folder / "text.gguf", seed=seed)
    return text, write_qwen3vl_projector(folder / "mmproj.gguf", seed=seed)


N_EXPERT = 4  # the tiny Llama 4's routed experts (one used per token, beside a shared one)
# Four blocks: llama.cpp gives Llama 4 three chunked-attention blocks to one global, and cannot
# run a model whose blocks are all chunked (its global KV cache would be empty).
LLAMA4 = dataclasses.replace(TINY, n_layer=4)


def write_llama4(path: Path, *, shape: Shape = LLAMA4, seed: int = 0, f16: bool = False) -> Path:
    """A tiny Llama 4 text model: dense blocks and mixture-of-experts blocks in turn (routed and
    shared experts, ``interleave_moe_layer_step`` 2), chunked attention; its matrices in F16 with
    ``f16`` (as a checkpoint's converted: the router's in F32), else F32."""
    matrices = gguf.GGMLQuantizationType.F16 if f16 else _F32
    t = Tensors(gguf.GGUFWriter(str(path), "llama4"), np.random.default_rng(seed), 0.5, matrices)
    w, s = t.w, shape
    attention_header(w, s, "tiny-llama4", _F32)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_expert_count(N_EXPERT)
    w.add_expert_used_count(1)
    n_ff_exp = s.n_ff // 2  # an expert's width (the shared one's too), not the dense layers'
    w.add_expert_feed_forward_length(n_ff_exp)
    w.add_interleave_moe_layer_step(2)
    vocab = synthetic_vocab()
    add_tokenizer(w, vocab, None)
    t.matrix("token_embd.weight", len(vocab.tokens), s.n_embd)
    t.norm("output_norm.weight", s.n_embd)
    for i in range(s.n_layer):
        p = f"blk.{i}."
        moe = (i + 1) % 2 == 0
        llama_block(t, s, p, ffn=not moe)
        if not moe:
            continue
        if f16:  # a converter keeps the router in F32
            t.f32(p + "ffn_gate_inp.weight", f16_exact(t, (N_EXPERT, s.n_embd), 0.5))
        else:
            t.matrix(p + "ffn_gate_inp.weight", N_EXPERT, s.n_embd)
        for name, rows, cols in (
            ("gate", n_ff_exp, s.n_embd),
            ("up", n_ff_exp, s.n_embd),
            ("down", s.n_embd, n_ff_exp),
        ):
            experts = f16_exact(t, (N_EXPERT, rows, cols), 0.5)
            w.add_tensor(f"{p}ffn_{name}_exps.weight", experts.astype(np.float16) if f16 else experts)
            t.matrix(f"{p}ffn_{name}_shexp.weight", rows, cols)
    finish(w)
    return path


# A Llama 4 tower transformers builds too: its FFN as wide as the pixel shuffle's output, which its
# adapter's first layer takes (``Llama4VisionMLP2`` reads the tower's ``intermediate_size``).
LLAMA4_VISION = dataclasses.replace(TINY_VISION, n_ff=TINY_VISION.n_embd * TINY_VISION.merge**2)


def write_llama4_projector(
    path: Path, *, n_embd_text: int = TINY.n_embd, seed: int = 0, shape: VisionShape = TINY_VISION, f16: bool = False
) -> Path:
    """A Llama 4 projector as llama.cpp's converter writes one: a LayerNorm GELU ViT over
    unfolded patches with a class token, a learned position table and 2-D RoPE, a pixel shuffle
    by 2, the adapter's two-layer MLP and the projection into the text model; with ``f16`` (as a
    checkpoint's converted), its matrices in F16 but the patch embedding, and its norms varied."""
    v = shape
    t = projector_header(path, v, "llama4", n_embd_text, seed, eps=1e-5)
    if f16:
        t.qtype = gguf.GGMLQuantizationType.F16
    t.w.add_vision_projector_scale_factor(v.merge)
    n = v.n_embd
    if f16:
        t.f32("v.patch_embd.weight", f16_exact(t, (n, 3 * v.patch_size * v.patch_size)))
    else:
        t.matrix("v.patch_embd.weight", n, 3 * v.patch_size * v.patch_size)
    t.f32("v.class_embd", t.rng.standard_normal(n) * 0.2)
    t.f32("v.position_embd.weight", f16_exact(t, (v.n_patches + 1, n)))
    t.norm("v.pre_ln.weight", n)
    t.f32("v.pre_ln.bias", np.zeros(n))
    vit_block(t, v)
    t.matrix("mm.model.mlp.1.weight", n_embd_text, n * v.merge * v.merge)
    t.matrix("mm.model.mlp.2.weight", n_embd_text, n_embd_text)
    t.matrix("mm.model.fc.weight", n_embd_text, n_embd_text)
    finish(t.w)
    return path


def write_llama4_vision(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/text.gguf`` (``write_llama4``) and ``folder/mmproj.gguf``, its projector."""
    folder.mkdir(parents=True, exist_ok=True)
    text = write_llama4(folder / "text.gguf", seed=seed)
    return text, write_llama4_projector(folder / "mmproj.gguf", seed=seed)
