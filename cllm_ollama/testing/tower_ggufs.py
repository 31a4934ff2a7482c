"""Tiny random-weight Gemma 4 and Qwen 3.5 files in llama.cpp's layout, for the towers that
``cllm_ollama.convert`` splits out of Ollama's one-file layout (``ollama_vision_ggufs.py`` writes
the same weights that way; mapped, they must be these).

Gemma 4: a loadable text model and one projector with both of its towers, as llama.cpp's
``Gemma4VisionAudioModel`` writes it: a ``gemma4v`` ViT (RMS norms, gated FFN, a learned 2-D
position table, 3x3 pooling, standardization) and a ``gemma4a`` Conformer (a two-convolution
subsampler, half-step FFNs, chunked attention with relative positions, a depthwise convolution).
Qwen 3.5: a loadable hybrid of linear (gated delta net) and full attention, and its tower is
Qwen3-VL's (a ``qwen3vl_merger`` projector without deepstack).
LFM2-VL: SigLIP2 and its projector (``lfm2``: 2x2 patches unshuffled, a layer norm, a GELU MLP).
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from .gguf_base import (
    TINY,
    Tensors,
    VisionShape,
    Vocab,
    add_tokenizer,
    attention_block,
    attention_header,
    f16_exact,
    finish,
    moe_ffn,
    projector_header,
    synthetic_vocab,
    vit_block,
    with_tokens,
)
from .vision_ggufs import write_qwen3vl_projector

_F32 = gguf.GGMLQuantizationType.F32
# Gemma 4's ViT: 3x3 patches pooled into a token; libmtmd sizes an image to 70..1120 tokens.
GEMMA4_VISION = VisionShape(image_size=224, patch_size=8, n_embd=32, n_head=2, n_ff=64, merge=3)
GEMMA4_POSITIONS = 128  # the position table's rows per axis (patches per side an image may have)
GEMMA4_AUDIO = VisionShape(n_embd=32, n_head=2, n_ff=128)  # a Conformer block's width, heads, FFN (4x)
# The subsampler's two convolutions: the first as wide as the mel bins, as in the releases (128,
# 32), which transformers' projection after them assumes.
GEMMA4_AUDIO_CHANNELS = (128, 4)
GEMMA4_AUDIO_OUT = 48  # the encoder's output projection, before the embedder
GEMMA4_MELS = 128
GEMMA4_CONV_KERNEL = 5
CLAMPED = ("attn_q",)  # the linears whose clamp scalars the tiny towers carry (in their first block)


# LFM2-VL's SigLIP2: a position table of 8x8 patches, which libmtmd resizes to each picture (a
# 128-pixel one, 16x16 patches, is the fewest tokens libmtmd's lfm2 keeps: 64).
LFM2_VISION = VisionShape(image_size=64, patch_size=8, n_embd=32, n_head=2, n_ff=64, merge=2)
LFM2_PROJECTOR_HIDDEN = 48


def lfm2_vl_vocab() -> Vocab:
    """The synthetic vocabulary with LFM2-VL's picture marks (a picture's start and end, a large
    one's tiles and thumbnail), which libmtmd looks up."""
    marks = ["<|image_start|>", "<|image_end|>", "<|img_thumbnail|>"]
    marks += [f"<|img_row_{r}_col_{c}|>" for r in range(1, 4) for c in range(1, 4)]
    return with_tokens(synthetic_vocab(), marks)


def write_lfm2_projector(path: Path, *, n_embd_text: int = TINY.n_embd, layernorm: bool = True, seed: int = 0) -> Path:
    """LFM2-VL's projector as llama.cpp's ``LFM2VLModel`` writes it (``lfm2``): SigLIP2's patch
    kernel and position table in F32, matrices in F16, biases and norms F32 (of values F16 holds,
    so that the checkpoint exported from it converts back to it exactly); without ``layernorm``,
    LFM2.5-VL's, whose projector has no layer norm."""
    v = LFM2_VISION
    t = projector_header(path, v, "lfm2", n_embd_text, seed)
    t = Tensors(t.w, t.rng, 0.2, gguf.GGMLQuantizationType.F16)
    t.w.add_vision_projector_scale_factor(v.merge)
    t.f32("v.patch_embd.weight", f16_exact(t, (v.n_embd, 3, v.patch_size, v.patch_size)))
    t.f32("v.patch_embd.bias", f16_exact(t, (v.n_embd,), 0.1))
    t.f32("v.position_embd.weight", f16_exact(t, (v.n_patches, v.n_embd)))
    vit_block(t, v)
    merged = v.n_embd * v.merge * v.merge
    if layernorm:
        t.f32("mm.input_norm.weight", 1.0 + f16_exact(t, (merged,), 0.1))
        t.f32("mm.input_norm.bias", f16_exact(t, (merged,), 0.1))
    t.matrix("mm.1.weight", LFM2_PROJECTOR_HIDDEN, merged)
    t.f32("mm.1.bias", f16_exact(t, (LFM2_PROJECTOR_HIDDEN,), 0.1))
    t.matrix("mm.2.weight", n_embd_text, LFM2_PROJECTOR_HIDDEN)
    t.f32("mm.2.bias", f16_exact(t, (n_embd_text,), 0.1))
    finish(t.w)
    return path


def write_gemma4(path: Path, *, seed: int = 0) -> Path:
    """A tiny Gemma 4 text model: a sliding-window block then a global one (proportional RoPE
    through ``rope_freqs``), QK norms, post norms and a per-layer output scale."""
    t = Tensors(gguf.GGUFWriter(str(path), "gemma4"), np.random.default_rng(seed), 0.5, _F32)
    w, s = t.w, TINY
    attention_header(w, s, "tiny-gemma4", _F32)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base_swa(1e4)
    w.add_sliding_window(16)
    w.add_array("gemma4.attention.sliding_window_pattern", [i % 2 == 0 for i in range(s.n_layer)])
    w.add_uint32("gemma4.attention.key_length_swa", s.head_dim)
    w.add_uint32("gemma4.attention.value_length_swa", s.head_dim)
    w.add_uint32("gemma4.embedding_length_per_layer_input", 0)
    vocab = synthetic_vocab()
    add_tokenizer(w, vocab, None)
    # As write_gemma3: small input embeddings (Gemma scales them by sqrt(n_embd)) and an untied output.
    t.matrix("token_embd.weight", len(vocab.tokens), s.n_embd, std=0.5 / np.sqrt(s.n_embd))
    t.matrix("output.weight", len(vocab.tokens), s.n_embd)
    t.norm("output_norm.weight", s.n_embd)
    t.f32("rope_freqs.weight", np.where(np.arange(s.head_dim // 2) < s.head_dim // 8, 1.0, 1e30))
    for i in range(s.n_layer):
        attention_block(t, s, f"blk.{i}.", post_norms=True)
        t.f32(f"blk.{i}.layer_output_scale.weight", np.array([0.8]))
    finish(w)
    return path


def _clamps(t: Tensors, prefix: str) -> None:
    """Clamp scalars (Gemma 4's clippable linears) on ``prefix``'s first block, wide enough to
    leave random activations alone only in part."""
    for leaf in CLAMPED:
        for end, value in (("input_min", -4.0), ("input_max", 4.0), ("output_min", -8.0), ("output_max", 8.0)):
            t.f32(f"{prefix}.blk.0.{leaf}.{end}", np.array([value]))


def write_gemma4_projector(
    path: Path, *, n_embd_text: int = TINY.n_embd, audio: bool = True, seed: int = 0, f16: bool = False
) -> Path:
    """The projector llama.cpp's converter writes for Gemma 4: a ``gemma4v`` vision side and (with
    ``audio``) a ``gemma4a`` audio side in one file. ``f16``: its matrices F16 and the rest of
    values F16 holds, without the blocks' output scales (which transformers' tower has not): the
    twin of a checkpoint's tower."""
    v = GEMMA4_VISION
    t = projector_header(path, v, "gemma4v", n_embd_text, seed, mean_std=([0.0] * 3, [1.0] * 3))
    if f16:
        t = _VariedNorms(t.w, t.rng, t.weight_std, gguf.GGMLQuantizationType.F16)
    w = t.w
    # llama.cpp's converter states the projector per modality and no activation (clip.cpp's default).
    del w.kv_data[0]["clip.projector_type"], w.kv_data[0]["clip.use_gelu"]
    w.add_string("clip.vision.projector_type", "gemma4v")
    n, head = v.n_embd, v.n_embd // v.n_head
    t.f32("v.patch_embd.weight", f16_exact(t, (n, 3, v.patch_size, v.patch_size)))
    t.f32("v.position_embd.weight", f16_exact(t, (2, GEMMA4_POSITIONS, n)))
    for i in range(v.n_layer):
        p = f"v.blk.{i}."
        for leaf in ("attn_q", "attn_k", "attn_v", "attn_out"):
            t.matrix(f"{p}{leaf}.weight", n, n)
        t.norm(p + "attn_q_norm.weight", head)
        t.norm(p + "attn_k_norm.weight", head)
        for norm in ("ln1", "ln2", "attn_post_norm", "ffn_post_norm"):
            t.norm(f"{p}{norm}.weight", n)
        t.matrix(p + "ffn_gate.weight", v.n_ff, n)
        t.matrix(p + "ffn_up.weight", v.n_ff, n)
        t.matrix(p + "ffn_down.weight", n, v.n_ff)
        if not f16:
            t.f32(p + "out_scale.weight", np.array([0.9]))
    _clamps(t, "v")
    t.f32("v.std_bias", f16_exact(t, (n,), 0.1))
    t.f32("v.std_scale", 1 + f16_exact(t, (n,), 0.1))
    t.matrix("mm.input_projection.weight", n_embd_text, n)
    if audio:
        _gemma4_audio(t, n_embd_text, f16)
    finish(w)
    return path


class _VariedNorms(Tensors):
    """Norms not all ones, so that a checkpoint's norm converted into another's place shows."""

    def norm(self, name: str, n: int) -> None:
        self.varied_norm(name, n)


def _gemma4_audio(t: Tensors, n_embd_text: int, f16: bool) -> None:
    """The ``gemma4a`` side: its keys and tensors under llama.cpp's names (``f16``: the F32
    convolutions of values F16 holds, as converted from an F16 checkpoint)."""

    def weights(shape: tuple[int, ...], std: float) -> np.ndarray:
        return f16_exact(t, shape, std) if f16 else t.rng.standard_normal(shape) * std

    a, w = GEMMA4_AUDIO, t.w
    w.add_clip_has_audio_encoder(True)
    w.add_string("clip.audio.projector_type", "gemma4a")
    w.add_audio_projection_dim(n_embd_text)
    w.add_audio_embedding_length(a.n_embd)
    w.add_audio_feed_forward_length(a.n_ff)
    w.add_audio_block_count(a.n_layer)
    w.add_audio_head_count(a.n_head)
    w.add_audio_attention_layernorm_eps(1e-6)
    w.add_audio_num_mel_bins(GEMMA4_MELS)
    c0, c1 = GEMMA4_AUDIO_CHANNELS
    for i, (c_in, c_out) in enumerate(((1, c0), (c0, c1))):
        t.f32(f"a.conv1d.{i}.weight", weights((c_out, c_in, 3, 3), 0.3))
        t.norm(f"a.conv1d.{i}.norm.weight", c_out)
    n, head = a.n_embd, a.n_embd // a.n_head
    t.matrix("a.input_projection.weight", n, c1 * GEMMA4_MELS // 4)
    for i in range(a.n_layer):
        p = f"a.blk.{i}."
        for half in ("", "_1"):
            t.norm(f"{p}ffn_norm{half}.weight", n)
            t.matrix(f"{p}ffn_up{half}.weight", a.n_ff, n)
            t.matrix(f"{p}ffn_down{half}.weight", n, a.n_ff)
            t.norm(f"{p}ffn_post_norm{half}.weight", n)
        for leaf in ("attn_q", "attn_k", "attn_v", "attn_out", "attn_k_rel"):
            t.matrix(f"{p}{leaf}.weight", n, n)
        t.f32(p + "per_dim_scale.weight", np.logaddexp(0, weights((head,), 1.0)))
        for norm in ("attn_pre_norm", "attn_post_norm", "conv_norm", "norm_conv", "ln2"):
            t.norm(f"{p}{norm}.weight", n)
        t.matrix(p + "conv_pw1.weight", 2 * n, n)
        t.f32(p + "conv_dw.weight", weights((n, GEMMA4_CONV_KERNEL), 0.3))
        t.matrix(p + "conv_pw2.weight", n, n)
    _clamps(t, "a")
    t.matrix("a.pre_encode.out.weight", GEMMA4_AUDIO_OUT, n)
    t.f32("a.pre_encode.out.bias", weights((GEMMA4_AUDIO_OUT,), 0.1))
    t.matrix("mm.a.input_projection.weight", n_embd_text, GEMMA4_AUDIO_OUT)


def write_gemma4_vision(folder: Path, *, audio: bool = True, seed: int = 0) -> tuple[Path, Path]:
    """``folder/text.gguf`` (``write_gemma4``) and ``folder/mmproj.gguf``, its projector (both
    towers unless ``audio`` is false)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = write_gemma4(folder / "text.gguf", seed=seed)
    return text, write_gemma4_projector(folder / "mmproj.gguf", audio=audio, seed=seed)


QWEN35_SSM = {"conv_kernel": 4, "state_size": 16, "group_count": 1, "time_step_rank": 2, "inner_size": 32}


def write_qwen35_text(
    path: Path,
    arch: str = "qwen35",
    *,
    seed: int = 0,
    qtype: gguf.GGMLQuantizationType = _F32,
    ssm: dict[str, int] = QWEN35_SSM,
    rotary: tuple[int, list[int]] = (TINY.head_dim, [2, 3, 3, 0]),
    experts: tuple[int, int, int] | None = None,
) -> Path:
    """A tiny Qwen 3.5 text model: a linear-attention (gated delta net) block, then a full-attention
    one with a gated query and QK norms, interleaved M-RoPE. Under ``qwen35moe`` the same keys and
    tensors (what the map sees is the same; llama.cpp would want experts to run it). ``qtype``:
    its matrices'; ``ssm``: its delta net's sizes (more value heads than key heads: their order
    matters); ``rotary``: the dimensions of a head that rotate, and their M-RoPE sections;
    ``experts`` (``qwen35moe``): routed experts, how many a token uses and their width (the shared
    expert's too) in place of the dense FFN, as llama.cpp runs them. ``qwen3next``: Qwen3-Next, a
    Qwen 3.5 mixture without M-RoPE whose delta net's Q, K, V and gate come from one projection
    (``ssm_in``, per key head) and its beta and alpha from another (``ssm_ba``)."""
    t = Tensors(gguf.GGUFWriter(str(path), arch), np.random.default_rng(seed), 0.5, qtype)
    w, s = t.w, TINY
    attention_header(w, s, "tiny-qwen35", qtype)
    w.kv_data[0][f"{arch}.rope.dimension_count"].value = rotary[0]
    w.add_layer_norm_rms_eps(1e-6)
    if arch != "qwen3next":
        w.add_rope_dimension_sections(rotary[1])  # t, y, x over the rotating pairs
    w.add_uint32(f"{arch}.full_attention_interval", 2)
    if arch == "qwen35moe":  # llama.cpp's states only its experts' width (Ollama's a dense one too)
        del w.kv_data[0]["qwen35moe.feed_forward_length"]
    for key, value in ssm.items():
        w.add_uint32(f"{arch}.ssm.{key}", value)
    if experts is not None:
        for key, value in zip(
            ("expert_count", "expert_used_count", "expert_feed_forward_length", "expert_shared_feed_forward_length"),
            (*experts, experts[2]),
            strict=True,
        ):
            w.add_uint32(f"{arch}.{key}", value)
    vocab = synthetic_vocab()
    add_tokenizer(w, vocab, None)
    t.matrix("token_embd.weight", len(vocab.tokens), s.n_embd)
    t.norm("output_norm.weight", s.n_embd)
    head, n_v = ssm["state_size"], ssm["time_step_rank"]
    key_dim, value_dim = head * ssm["group_count"], head * n_v
    for i in range(s.n_layer):
        p = f"blk.{i}."
        t.norm(p + "attn_norm.weight", s.n_embd)
        t.norm(p + "post_attention_norm.weight", s.n_embd)
        if i % 2 == 0 and arch == "qwen3next":  # per key head: its Q, K, V heads and gates
            t.matrix(p + "ssm_in.weight", 2 * key_dim + 2 * value_dim, s.n_embd)
        elif i % 2 == 0:
            t.matrix(p + "attn_qkv.weight", 2 * key_dim + value_dim, s.n_embd)
            t.matrix(p + "attn_gate.weight", value_dim, s.n_embd)
        if i % 2 == 0:  # linear attention
            conv = t.rng.standard_normal((2 * key_dim + value_dim, 4)) * 0.5
            t.f32(p + "ssm_conv1d.weight", conv.astype(np.float16) if qtype != _F32 else conv)  # as a checkpoint's
            t.f32(p + "ssm_dt.bias", t.rng.standard_normal(n_v) * 0.5)
            t.f32(p + "ssm_a", -np.exp(t.rng.standard_normal(n_v) * 0.5))
            if arch == "qwen3next":
                t.matrix(p + "ssm_ba.weight", 2 * n_v, s.n_embd)
            else:
                t.matrix(p + "ssm_beta.weight", n_v, s.n_embd)
                t.matrix(p + "ssm_alpha.weight", n_v, s.n_embd)
            t.norm(p + "ssm_norm.weight", head)
            t.matrix(p + "ssm_out.weight", s.n_embd, value_dim)
        else:  # full attention, its query twice as wide (the second half gates the output)
            t.matrix(p + "attn_q.weight", 2 * s.n_head * s.head_dim, s.n_embd)
            t.matrix(p + "attn_k.weight", s.n_head_kv * s.head_dim, s.n_embd)
            t.matrix(p + "attn_v.weight", s.n_head_kv * s.head_dim, s.n_embd)
            t.matrix(p + "attn_output.weight", s.n_embd, s.n_head * s.head_dim)
            t.norm(p + "attn_q_norm.weight", s.head_dim)
            t.norm(p + "attn_k_norm.weight", s.head_dim)
        if experts is not None:
            _qwen35_experts(t, p, *experts)
            continue
        t.matrix(p + "ffn_gate.weight", s.n_ff, s.n_embd)
        t.matrix(p + "ffn_up.weight", s.n_ff, s.n_embd)
        t.matrix(p + "ffn_down.weight", s.n_embd, s.n_ff)
    finish(w)
    return path


def _qwen35_experts(t: Tensors, p: str, n_expert: int, n_used: int, n_ff: int) -> None:
    """A Qwen 3.5 mixture's FFN: the router and the shared expert's gate in F32 (of values F16
    holds, as converted from an F16 checkpoint), the routed experts stacked, the shared expert."""
    del n_used
    n_embd = TINY.n_embd
    moe_ffn(t, p, n_expert, n_ff, n_embd, router_std=0.2)
    t.f32(p + "ffn_gate_inp_shexp.weight", f16_exact(t, (n_embd,)))
    t.matrix(p + "ffn_gate_shexp.weight", n_ff, n_embd)
    t.matrix(p + "ffn_up_shexp.weight", n_ff, n_embd)
    t.matrix(p + "ffn_down_shexp.weight", n_embd, n_ff)


def write_qwen35_vision(folder: Path, arch: str = "qwen35", *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/text.gguf`` (``write_qwen35_text``) and ``folder/mmproj.gguf``, a ``qwen3vl_merger``
    projector without deepstack, as llama.cpp's converter writes Qwen 3.5's."""
    folder.mkdir(parents=True, exist_ok=True)
    text = write_qwen35_text(folder / "text.gguf", arch, seed=seed)
    clip = write_qwen3vl_projector(folder / "mmproj.gguf", n_embd_text=TINY.n_embd, seed=seed, deepstack=[])
    return text, clip
