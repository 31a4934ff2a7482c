"""Tiny GGUFs laid out as Ollama's own converter writes them (``convert/`` in ollama/ollama): one
file with the vision tower inside, keys and tensor names llama.cpp does not accept as they are.
``cllm_ollama.convert`` maps them at pull or create; these are what its tests pull and create.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from .core_ggufs import write_gemma3, write_qwen2vl, write_vision
from .gguf_base import (
    TINY,
    TINY_VISION,
    Tensors,
    Vocab,
    add_tokenizer,
    copy_fields,
    finish,
    synthetic_vocab,
    vit_block,
)

# clip.cpp's projector tensor names -> the SigLIP names Ollama's converter writes (convert_gemma3.go).
_OLLAMA_GEMMA3_NAMES = (
    ("v.patch_embd", "v.patch_embedding"),
    ("v.position_embd", "v.position_embedding"),
    ("v.post_ln", "v.post_layernorm"),
    (".ln1", ".layer_norm1"),
    (".ln2", ".layer_norm2"),
    (".attn_out.", ".attn_output."),
    (".ffn_up", ".mlp.fc1"),
    (".ffn_down", ".mlp.fc2"),
    ("mm.input_projection", "mm.mm_input_projection"),
    ("mm.soft_emb_norm", "mm.mm_soft_emb_norm"),
)


def write_ollama_gemma3_vision(path: Path, *, seed: int = 0) -> Path:
    """``write_vision``'s gemma3 and projector as one GGUF laid out as Ollama's converter writes
    a Gemma 3 that sees: the vision tower inside (``v.*``/``mm.*`` under SigLIP names, patch
    embedding in F16), its hyperparameters as ``gemma3.vision.*`` and ``gemma3.mm.*`` keys, the
    RoPE bases as ``gemma3.rope.local.freq_base``, no RMS-norm epsilon, and an image token left in
    the vocabulary past the embedding's rows. llama.cpp cannot load it as it is."""
    with tempfile.TemporaryDirectory() as tmp:
        text_path, clip_path = write_vision(Path(tmp), kind="gemma3", seed=seed)
        text, clip = gguf.GGUFReader(text_path), gguf.GGUFReader(clip_path)
        w = gguf.GGUFWriter(str(path), "gemma3")

        def image_token(name: str, value: Any) -> Any:
            if name in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type"):
                return [*value, "<image_soft_token>" if name.endswith("tokens") else 3]
            return value

        dropped = ("gemma3.attention.layer_norm_rms_epsilon", "gemma3.rope.freq_base_swa")
        copy_fields(text, w, skip=dropped, value=image_token)
        w.add_float32("gemma3.rope.local.freq_base", 1e4)
        v = TINY_VISION
        for key, value in (
            ("block_count", 1),
            ("embedding_length", v.n_embd),
            ("feed_forward_length", v.n_ff),
            ("image_size", v.image_size),
            ("patch_size", v.patch_size),
            ("num_channels", 3),
            ("attention.head_count", v.n_head),
        ):
            w.add_uint32(f"gemma3.vision.{key}", value)
        w.add_float32("gemma3.vision.attention.layer_norm_epsilon", 1e-6)
        w.add_uint32("gemma3.mm.tokens_per_image", (v.image_size // v.patch_size // v.merge) ** 2)
        for t in text.tensors:
            w.add_tensor(t.name, np.array(t.data))
        for t in clip.tensors:
            name = t.name
            for ours, theirs in _OLLAMA_GEMMA3_NAMES:
                name = name.replace(ours, theirs)
            data = np.array(t.data)
            w.add_tensor(name, data.astype(np.float16) if name == "v.patch_embedding.weight" else data)
        finish(w)
    return path


def write_ollama_qwen25vl_vision(path: Path, *, seed: int = 0) -> Path:
    """A tiny Qwen2.5-VL as one GGUF laid out as Ollama's converter writes it (convert_qwen25vl.go):
    architecture ``qwen25vl`` (``write_qwen2vl``'s text model, its keys under ``qwen25vl.`` and its
    M-RoPE sections as a three-element ``rope.mrope_section``), and the vision tower inside: two
    RMS-normed SwiGLU blocks (the first with window attention), the Conv3D patch embedding split into
    ``v.patch_embd_0``/``_1`` (F16), and the merger as ``v.merger.*``. llama.cpp cannot load it as it is."""
    v = TINY_VISION
    with tempfile.TemporaryDirectory() as tmp:
        text = gguf.GGUFReader(write_qwen2vl(Path(tmp) / "text.gguf", seed=seed))
        t = Tensors(
            gguf.GGUFWriter(str(path), "qwen25vl"), np.random.default_rng(seed + 1), 0.2, gguf.GGMLQuantizationType.F32
        )
        w = t.w
        ours = ("qwen2vl.rope.dimension_sections",)
        copy_fields(text, w, skip=ours, key=lambda name: name.replace("qwen2vl.", "qwen25vl.", 1))
        w.add_array("qwen25vl.rope.mrope_section", [2, 3, 3])
        for key, value in (
            ("block_count", 2),
            ("embedding_length", v.n_embd),
            ("attention.head_count", v.n_head),
            ("num_channels", 3),
            ("patch_size", v.patch_size),
            ("spatial_merge_size", v.merge),
            ("window_size", 112),
            ("temporal_patch_size", 2),
        ):
            w.add_uint32(f"qwen25vl.vision.{key}", value)
        w.add_float32("qwen25vl.vision.attention.layer_norm_epsilon", 1e-6)
        w.add_array("qwen25vl.vision.fullatt_block_indexes", [1])
        for tensor in text.tensors:
            w.add_tensor(tensor.name, np.array(tensor.data))
        for half in ("v.patch_embd_0.weight", "v.patch_embd_1.weight"):
            w.add_tensor(
                half, (t.rng.standard_normal((v.n_embd, 3, v.patch_size, v.patch_size)) * 0.2).astype(np.float16)
            )
        vit_block(t, replace(v, n_layer=2), gated=True, norm_bias=False, post_ln=False)
        merged = v.merge * v.merge * v.n_embd
        t.norm("v.merger.ln_q.weight", v.n_embd)
        t.matrix("v.merger.mlp.0.weight", merged, merged)
        t.f32("v.merger.mlp.0.bias", np.zeros(merged))
        t.matrix("v.merger.mlp.2.weight", TINY.n_embd, merged)
        t.f32("v.merger.mlp.2.bias", np.zeros(TINY.n_embd))
        finish(w)
    return path


def write_ollama_embeddinggemma(path: Path, *, seed: int = 0) -> Path:
    """A tiny EmbeddingGemma as Ollama's older converter wrote it: architecture ``gemma3`` with the
    sentence-transformers head as ``dense.0``/``dense.1`` (n_embd -> 2 n_embd -> n_embd), the final
    norm as ``norm.weight``, and ``gemma3.pooling_type`` 1 (mean). llama.cpp cannot load it as it is."""
    with tempfile.TemporaryDirectory() as tmp:
        text = gguf.GGUFReader(write_gemma3(Path(tmp) / "text.gguf", seed=seed))
        t = Tensors(
            gguf.GGUFWriter(str(path), "gemma3"), np.random.default_rng(seed + 2), 0.2, gguf.GGMLQuantizationType.F32
        )
        w = t.w
        copy_fields(text, w)
        w.add_uint32("gemma3.pooling_type", 1)
        w.add_bool("gemma3.attention.causal", False)
        for tensor in text.tensors:
            if tensor.name == "output.weight":
                continue  # tied to the embeddings, as in EmbeddingGemma
            name = "norm.weight" if tensor.name == "output_norm.weight" else tensor.name
            w.add_tensor(name, np.array(tensor.data))
        t.matrix("dense.0.weight", 2 * TINY.n_embd, TINY.n_embd)
        t.matrix("dense.1.weight", TINY.n_embd, 2 * TINY.n_embd)
        finish(w)
    return path


def write_ollama_gemma3_text(path: Path, *, seed: int = 0) -> Path:
    """``write_gemma3`` as Ollama's converter writes a text-only Gemma 3 (1B, 270M): the local RoPE
    base as ``gemma3.rope.local.freq_base`` (llama.cpp reads ``rope.freq_base_swa``) and the
    sliding-window pattern as one bool per layer."""
    with tempfile.TemporaryDirectory() as tmp:
        text = gguf.GGUFReader(write_gemma3(Path(tmp) / "text.gguf", seed=seed))
        w = gguf.GGUFWriter(str(path), "gemma3")
        renamed = {"gemma3.rope.freq_base_swa": "gemma3.rope.local.freq_base"}
        pattern = ("gemma3.attention.sliding_window_pattern",)
        copy_fields(text, w, skip=pattern, key=lambda name: renamed.get(name, name))
        w.add_array("gemma3.attention.sliding_window_pattern", [True, False])  # write_gemma3's pattern 2
        for t in text.tensors:
            w.add_tensor(t.name, np.array(t.data))
        finish(w)
    return path


# --- text models: llama.cpp's layout and Ollama's, from the same weights ---------------------------

_MXFP4 = gguf.GGMLQuantizationType.MXFP4
_F32 = gguf.GGMLQuantizationType.F32


@dataclass(frozen=True)
class MoeShape:
    """A tiny gpt-oss: ``Shape``'s attention, and experts of MXFP4 rows (widths a multiple of 32)."""

    n_expert: int = 4
    n_expert_used: int = 2
    n_ff_exp: int = 64
    sliding_window: int = 16


TINY_MOE = MoeShape()

_Weight = tuple[np.ndarray, gguf.GGMLQuantizationType]
_Weights = dict[str, _Weight]


class _Draw:
    """The text models' weights, drawn from one seed: F32 normals, ones for norms, MXFP4 experts."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def normal(self, *shape: int, std: float = 0.5) -> _Weight:
        return (self.rng.standard_normal(shape, dtype=np.float32) * std).astype(np.float32), _F32

    def ones(self, n: int) -> _Weight:
        return np.ones(n, dtype=np.float32), _F32

    def mxfp4(self, *shape: int) -> _Weight:
        return gguf.quants.quantize(self.rng.standard_normal(shape, dtype=np.float32) * 0.5, _MXFP4), _MXFP4


def _gptoss_weights(seed: int) -> _Weights:
    """A tiny gpt-oss's tensors as llama.cpp's converter names and lays them out: separate Q/K/V with
    biases, attention sinks, a routed MoE whose gate, up and down experts are MXFP4 with biases."""
    s, m = TINY, TINY_MOE
    d = _Draw(seed)
    normal, ones, mxfp4 = d.normal, d.ones, d.mxfp4
    n_vocab = len(synthetic_vocab().tokens)
    out = {
        "token_embd.weight": normal(n_vocab, s.n_embd),
        "output_norm.weight": ones(s.n_embd),
        "output.weight": normal(n_vocab, s.n_embd),
    }
    q, kv = s.n_head * s.head_dim, s.n_head_kv * s.head_dim
    for i in range(s.n_layer):
        p = f"blk.{i}."
        out |= {
            p + "attn_norm.weight": ones(s.n_embd),
            p + "attn_q.weight": normal(q, s.n_embd),
            p + "attn_q.bias": normal(q, std=0.1),
            p + "attn_k.weight": normal(kv, s.n_embd),
            p + "attn_k.bias": normal(kv, std=0.1),
            p + "attn_v.weight": normal(kv, s.n_embd),
            p + "attn_v.bias": normal(kv, std=0.1),
            p + "attn_output.weight": normal(s.n_embd, q),
            p + "attn_output.bias": normal(s.n_embd, std=0.1),
            p + "attn_sinks.weight": normal(s.n_head),
            p + "post_attention_norm.weight": ones(s.n_embd),
            p + "ffn_gate_inp.weight": normal(m.n_expert, s.n_embd),
            p + "ffn_gate_inp.bias": normal(m.n_expert, std=0.1),
            p + "ffn_gate_exps.weight": mxfp4(m.n_expert, m.n_ff_exp, s.n_embd),
            p + "ffn_gate_exps.bias": normal(m.n_expert, m.n_ff_exp, std=0.1),
            p + "ffn_up_exps.weight": mxfp4(m.n_expert, m.n_ff_exp, s.n_embd),
            p + "ffn_up_exps.bias": normal(m.n_expert, m.n_ff_exp, std=0.1),
            p + "ffn_down_exps.weight": mxfp4(m.n_expert, s.n_embd, m.n_ff_exp),
            p + "ffn_down_exps.bias": normal(m.n_expert, s.n_embd, std=0.1),
        }
    return out


def _gptoss_keys(prefix: str) -> dict[str, Any]:
    s, m = TINY, TINY_MOE
    return {
        f"{prefix}.context_length": 131072,
        f"{prefix}.block_count": s.n_layer,
        f"{prefix}.embedding_length": s.n_embd,
        f"{prefix}.feed_forward_length": m.n_ff_exp,
        f"{prefix}.expert_count": m.n_expert,
        f"{prefix}.expert_used_count": m.n_expert_used,
        f"{prefix}.attention.head_count": s.n_head,
        f"{prefix}.attention.head_count_kv": s.n_head_kv,
        f"{prefix}.attention.key_length": s.head_dim,
        f"{prefix}.attention.value_length": s.head_dim,
        f"{prefix}.attention.layer_norm_rms_epsilon": 1e-5,
        f"{prefix}.attention.sliding_window": m.sliding_window,
        f"{prefix}.rope.freq_base": 150000.0,
        f"{prefix}.rope.scaling.factor": 32.0,
        f"{prefix}.rope.scaling.original_context_length": 4096,
    }


def _write_text(
    path: Path, arch: str, keys: dict[str, Any], tensors: _Weights, *, pre: str, vocab: Vocab | None = None
) -> Path:
    """A loadable GGUF of ``arch``: ``write_qwen3``'s tokenizer (or ``vocab``), its pre-tokenizer named ``pre``."""
    return write_layout(path, Layout(arch, {"general.name": "tiny", **keys}, tensors), pre=pre, vocab=vocab)


def write_gptoss(path: Path, *, seed: int = 0, f16: bool = False) -> Path:
    """A tiny gpt-oss as llama.cpp's converter writes one (``conversion/gpt_oss.py``): architecture
    ``gpt-oss``, the experts' width and YaRN stated, the GPT-4o pre-tokenizer. llama.cpp loads it.
    ``f16``: every weight but the MXFP4 experts a value F16 holds, the matrices stored as F16 (but
    the router's and the experts' biases, F32 as llama.cpp computes with them): what a checkpoint in
    F16 converts to."""
    keys = _gptoss_keys("gpt-oss")
    keys |= {"gpt-oss.expert_feed_forward_length": TINY_MOE.n_ff_exp, "gpt-oss.rope.scaling.type": "yarn"}
    weights = _gptoss_weights(seed)
    if f16:
        weights = {name: _f16_held(name, *weight) for name, weight in weights.items()}
    return _write_text(path, "gpt-oss", keys, weights, pre="gpt-4o")


# Matrices llama.cpp's converter keeps in F32: a router's, gpt-oss's experts' biases, a convolution.
_F32_KEPT = ("ffn_gate_inp.weight", "_exps.bias", "shortconv.conv.weight")


def _f16_held(name: str, data: np.ndarray, kind: gguf.GGMLQuantizationType) -> _Weight:
    """A weight as an F16 checkpoint converts: values F16 holds, matrices stored as F16 (but those
    llama.cpp keeps in F32); a quantized one as it is."""
    if kind != _F32:
        return data, kind
    held = data.astype(np.float16)
    if data.ndim == 1 or name.endswith(_F32_KEPT) or name.endswith("norm.weight"):
        return held.astype(np.float32), _F32
    return held, gguf.GGMLQuantizationType.F16


# Ollama's converter's names for gpt-oss tensors (convert_gptoss.go before the architecture was
# renamed "gpt-oss"), as (llama.cpp's, Ollama's) name endings.
_OLLAMA_GPTOSS_NAMES = (
    (".attn_output.", ".attn_out."),
    (".attn_sinks.weight", ".attn_sinks"),
    (".post_attention_norm.", ".ffn_norm."),
)


def write_ollama_gptoss(path: Path, *, seed: int = 0, fused: bool = True) -> Path:
    """``write_gptoss``'s weights as Ollama's converter wrote gpt-oss (``gptoss``, its keys under
    ``gptoss.``, no expert width nor YaRN type, a default pre-tokenizer, ``attn_out``, ``ffn_norm``,
    ``attn_sinks`` without its suffix). ``fused`` (converted August to October 2025 from Hugging
    Face's checkpoint): each block's gate and up experts as one ``ffn_gate_up_exps``, their rows
    interleaved (gate, up, gate, ...), the MXFP4 ones named without ``.weight``; otherwise split, as
    Ollama's converter has written them since. llama.cpp cannot load it as it is."""
    out: _Weights = {}
    weights = _gptoss_weights(seed)
    for name, value in weights.items():
        if fused and ".ffn_up_exps." in name:
            continue
        if fused and ".ffn_gate_exps." in name:
            (gate, kind), (up, _) = value, weights[name.replace("gate", "up")]
            both = np.empty((gate.shape[0], 2 * gate.shape[1], *gate.shape[2:]), dtype=gate.dtype)
            both[:, 0::2], both[:, 1::2] = gate, up
            name = name.replace(".ffn_gate_exps.", ".ffn_gate_up_exps.")
            value = (both, kind)
        if fused and value[1] == _MXFP4 and name.endswith(".weight"):
            name = name.removesuffix(".weight")
        for ours, theirs in _OLLAMA_GPTOSS_NAMES:
            name = name.replace(ours, theirs)
        out[name] = value
    return _write_text(path, "gptoss", _gptoss_keys("gptoss"), out, pre="default")


def _attention(d: _Draw, p: str) -> _Weights:
    """A block's Q, K, V and output projections (``TINY``'s heads), drawn in that order."""
    s = TINY
    q, kv = s.n_head * s.head_dim, s.n_head_kv * s.head_dim
    return {
        p + "attn_q.weight": d.normal(q, s.n_embd),
        p + "attn_k.weight": d.normal(kv, s.n_embd),
        p + "attn_v.weight": d.normal(kv, s.n_embd),
        p + "attn_output.weight": d.normal(s.n_embd, q),
    }


def _olmo2_weights(seed: int) -> _Weights:
    """OLMo 2/3's tensors: Q and K normed across all heads, norms after attention and FFN only."""
    s = TINY
    d = _Draw(seed)
    normal, ones = d.normal, d.ones

    n_vocab = len(synthetic_vocab().tokens)
    out = {"token_embd.weight": normal(n_vocab, s.n_embd), "output_norm.weight": ones(s.n_embd)}
    out["output.weight"] = normal(n_vocab, s.n_embd)
    q, kv = s.n_head * s.head_dim, s.n_head_kv * s.head_dim
    for i in range(s.n_layer):
        p = f"blk.{i}."
        out |= {
            **_attention(d, p),
            p + "attn_q_norm.weight": ones(q),
            p + "attn_k_norm.weight": ones(kv),
            p + "post_attention_norm.weight": ones(s.n_embd),
            p + "ffn_gate.weight": normal(s.n_ff, s.n_embd),
            p + "ffn_up.weight": normal(s.n_ff, s.n_embd),
            p + "ffn_down.weight": normal(s.n_embd, s.n_ff),
            p + "post_ffw_norm.weight": ones(s.n_embd),
        }
    return out


def _command_r_weights(seed: int) -> _Weights:
    """A tiny Command R's tensors: one layer norm before attention and the FFN side by side, no
    output of its own (nor Q and K norms, which llama.cpp gives only a model of 64 layers or more)."""
    s = TINY
    d = _Draw(seed)
    normal, ones = d.normal, d.ones
    n_vocab = len(synthetic_vocab().tokens)
    out = {"token_embd.weight": normal(n_vocab, s.n_embd), "output_norm.weight": ones(s.n_embd)}
    for i in range(s.n_layer):
        p = f"blk.{i}."
        out |= {
            p + "attn_norm.weight": ones(s.n_embd),
            **_attention(d, p),
            p + "ffn_gate.weight": normal(s.n_ff, s.n_embd),
            p + "ffn_up.weight": normal(s.n_ff, s.n_embd),
            p + "ffn_down.weight": normal(s.n_embd, s.n_ff),
        }
    return out


def write_command_r(path: Path, *, seed: int = 0, f16: bool = False) -> Path:
    """A tiny Command R (Cohere's ``command-r``), its logits scaled by 1/16, its pre-tokenizer
    splitting every digit. ``f16`` as ``write_gptoss``'s."""
    s = TINY
    keys = {
        "command-r.context_length": s.context_length,
        "command-r.block_count": s.n_layer,
        "command-r.embedding_length": s.n_embd,
        "command-r.feed_forward_length": s.n_ff,
        "command-r.attention.head_count": s.n_head,
        "command-r.attention.head_count_kv": s.n_head_kv,
        "command-r.attention.layer_norm_epsilon": 1e-5,
        "command-r.rope.freq_base": 1e4,
        "command-r.logit_scale": 0.0625,
    }
    weights = _command_r_weights(seed)
    if f16:
        weights = {name: _f16_held(name, *weight) for name, weight in weights.items()}
    return _write_text(path, "command-r", keys, weights, pre="command-r")


def _olmo_keys(prefix: str) -> dict[str, Any]:
    s = TINY
    return {
        f"{prefix}.context_length": s.context_length,
        f"{prefix}.block_count": s.n_layer,
        f"{prefix}.embedding_length": s.n_embd,
        f"{prefix}.feed_forward_length": s.n_ff,
        f"{prefix}.attention.head_count": s.n_head,
        f"{prefix}.attention.head_count_kv": s.n_head_kv,
        f"{prefix}.attention.layer_norm_rms_epsilon": 1e-6,
        f"{prefix}.attention.sliding_window": 16,
        f"{prefix}.rope.freq_base": 5e5,
    }


def write_olmo2(path: Path, *, seed: int = 0, f16: bool = False, window: int = 16) -> Path:
    """A tiny OLMo 3 as llama.cpp runs it: architecture ``olmo2`` with a sliding window of
    ``window`` tokens. ``f16`` as ``write_gptoss``'s."""
    weights = _olmo2_weights(seed)
    if f16:
        weights = {name: _f16_held(name, *weight) for name, weight in weights.items()}
    keys = _olmo_keys("olmo2") | {"olmo2.attention.sliding_window": window}
    return _write_text(path, "olmo2", keys, weights, pre="qwen2")


def write_ollama_olmo3(path: Path, *, seed: int = 0) -> Path:
    """``write_olmo2``'s weights as Ollama's converter writes OLMo 3: architecture ``olmo3`` (which
    llama.cpp does not name) and its keys under ``olmo3.``."""
    return _write_text(path, "olmo3", _olmo_keys("olmo3"), _olmo2_weights(seed), pre="qwen2")


def _lfm2_weights(seed: int, norm: str, n_vocab: int | None = None) -> _Weights:
    """A tiny LFM2: block 0 a short convolution, block 1 attention (Q/K normed per head), both
    with a SwiGLU FFN; embeddings (``n_vocab`` rows: the synthetic vocabulary's by default) tied to
    the output; the final norm named ``norm``."""
    s = TINY
    d = _Draw(seed)
    normal, ones = d.normal, d.ones

    n_vocab, kv = n_vocab or len(synthetic_vocab().tokens), s.n_head_kv * s.head_dim
    out = {"token_embd.weight": normal(n_vocab, s.n_embd), norm: ones(s.n_embd)}
    for i in range(2):
        p = f"blk.{i}."
        out |= {
            p + "attn_norm.weight": ones(s.n_embd),
            p + "ffn_norm.weight": ones(s.n_embd),
            p + "ffn_gate.weight": normal(s.n_ff, s.n_embd),
            p + "ffn_up.weight": normal(s.n_ff, s.n_embd),
            p + "ffn_down.weight": normal(s.n_embd, s.n_ff),
        }
    out |= {
        "blk.0.shortconv.conv.weight": normal(s.n_embd, 3),
        "blk.0.shortconv.in_proj.weight": normal(3 * s.n_embd, s.n_embd),
        "blk.0.shortconv.out_proj.weight": normal(s.n_embd, s.n_embd),
        "blk.1.attn_q_norm.weight": ones(s.head_dim),
        "blk.1.attn_k_norm.weight": ones(s.head_dim),
        "blk.1.attn_q.weight": normal(s.n_embd, s.n_embd),
        "blk.1.attn_k.weight": normal(kv, s.n_embd),
        "blk.1.attn_v.weight": normal(kv, s.n_embd),
        "blk.1.attn_output.weight": normal(s.n_embd, s.n_embd),
    }
    return out


def _lfm2_keys(n_ff: int) -> dict[str, Any]:
    s = TINY
    return {
        "lfm2.context_length": s.context_length,
        "lfm2.block_count": 2,
        "lfm2.embedding_length": s.n_embd,
        "lfm2.feed_forward_length": n_ff,
        "lfm2.attention.head_count": s.n_head,
        "lfm2.attention.head_count_kv": [0, s.n_head_kv],
        "lfm2.attention.layer_norm_rms_epsilon": 1e-5,
        "lfm2.rope.freq_base": 1e6,
        "lfm2.shortconv.l_cache": 3,
    }


def write_lfm2(path: Path, *, seed: int = 0, f16: bool = False, vocab: Vocab | None = None) -> Path:
    """A tiny LFM2 as llama.cpp's converter writes one (a hybrid model: a convolution's state and
    an attention layer's KV cache). llama.cpp loads it. ``f16`` as ``write_gptoss``'s; ``vocab``:
    another vocabulary than the synthetic one (LFM2-VL's, with its picture marks)."""
    weights = _lfm2_weights(seed, "token_embd_norm.weight", len(vocab.tokens) if vocab is not None else None)
    if f16:
        weights = {name: _f16_held(name, *weight) for name, weight in weights.items()}
    return _write_text(path, "lfm2", _lfm2_keys(TINY.n_ff), weights, pre="lfm2", vocab=vocab)


# The tiny LFM2 mixture's experts: how many, how many a token uses, how wide each is.
LFM2MOE_EXPERTS = (4, 2, 32)


def write_lfm2moe(path: Path, *, seed: int = 0, f16: bool = False) -> Path:
    """A tiny LFM2 mixture (``lfm2moe``): ``write_lfm2``'s blocks, the first keeping its dense FFN,
    the second's a mixture of ``LFM2MOE_EXPERTS`` chosen by sigmoid scores plus a bias. llama.cpp
    loads it. ``f16`` as ``write_gptoss``'s."""
    s, (n_expert, n_used, width) = TINY, LFM2MOE_EXPERTS
    d = _Draw(seed + 1)
    weights = _lfm2_weights(seed, "token_embd_norm.weight")
    for part in ("gate", "up", "down"):
        del weights[f"blk.1.ffn_{part}.weight"]
    weights |= {
        "blk.1.ffn_gate_inp.weight": d.normal(n_expert, s.n_embd),
        "blk.1.exp_probs_b.bias": d.normal(n_expert, std=0.3),
        "blk.1.ffn_gate_exps.weight": d.normal(n_expert, width, s.n_embd),
        "blk.1.ffn_up_exps.weight": d.normal(n_expert, width, s.n_embd),
        "blk.1.ffn_down_exps.weight": d.normal(n_expert, s.n_embd, width),
    }
    if f16:
        weights = {name: _f16_held(name, *weight) for name, weight in weights.items()}
    keys = {k.replace("lfm2.", "lfm2moe.", 1): v for k, v in _lfm2_keys(TINY.n_ff).items()} | {
        "lfm2moe.expert_count": n_expert,
        "lfm2moe.expert_used_count": n_used,
        "lfm2moe.expert_feed_forward_length": width,
        "lfm2moe.leading_dense_block_count": 1,
        "lfm2moe.expert_gating_func": 2,
    }
    return _write_text(path, "lfm2moe", keys, weights, pre="lfm2")


def write_ollama_lfm2(path: Path, *, seed: int = 0) -> Path:
    """``write_lfm2``'s weights as Ollama's converter wrote LFM2: the final norm as ``output_norm``,
    a default pre-tokenizer, and an FFN width its tensors do not have (as some published files
    state). llama.cpp cannot load it as it is."""
    keys = _lfm2_keys(2 * TINY.n_ff)
    return _write_text(path, "lfm2", keys, _lfm2_weights(seed, "output_norm.weight"), pre="default")


class U32s(list[int]):
    """An array key stored as UINT32 (``_write_layout`` stores other integer arrays as INT32)."""


@dataclass(frozen=True)
class Layout:
    """A GGUF's architecture, keys (typed by their Python values) and tensors."""

    arch: str
    keys: dict[str, Any]
    tensors: _Weights


def _value_types(value: Any) -> tuple[gguf.GGUFValueType, gguf.GGUFValueType | None]:
    v = gguf.GGUFValueType
    if isinstance(value, U32s):
        return v.ARRAY, v.UINT32
    if isinstance(value, list):
        first = value[0]
        return v.ARRAY, v.STRING if isinstance(first, str) else v.FLOAT32 if isinstance(first, float) else v.INT32
    if isinstance(value, bool):
        return v.BOOL, None
    return (v.UINT32 if isinstance(value, int) else v.FLOAT32 if isinstance(value, float) else v.STRING), None


def write_layout(path: Path, layout: Layout, *, pre: str | None = None, vocab: Vocab | None = None) -> Path:
    """``layout`` as a GGUF; with ``pre``, also ``write_qwen3``'s tokenizer (or ``vocab``), that
    pre-tokenizer named."""
    w = gguf.GGUFWriter(str(path), layout.arch)
    for key, value in layout.keys.items():
        kind, sub_type = _value_types(value)
        w.add_key_value(key, list(value) if isinstance(value, U32s) else value, kind, sub_type=sub_type)
    if pre is not None:
        add_tokenizer(w, vocab or synthetic_vocab(), None, pre=pre)
    for name, (data, qtype) in layout.tensors.items():
        w.add_tensor(name, data, raw_dtype=None if qtype in (_F32, gguf.GGMLQuantizationType.F16) else qtype)
    finish(w)
    return path


def _renamed(tensors: _Weights, *pairs: tuple[str, str]) -> _Weights:
    out = {}
    for name, value in tensors.items():
        for old, new in pairs:
            name = name.replace(old, new)
        out[name] = value
    return out


def _twin_gemma3n(seed: int) -> tuple[Layout, Layout]:
    """Ollama keeps Gemma 3n's image and audio markers in the vocabulary and token embeddings."""
    t = _Draw(seed).normal
    tokens = ["<pad>", "<eos>", "<bos>", "<0x41>", "<unused0>", "a", "b", "c"]
    keys = {"gemma3n.block_count": 1, "tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens}
    embd, extra = t(10, 4), ["<image_soft_token>", "<audio_soft_token>"]
    ours = Layout(
        "gemma3n",
        {**keys, "tokenizer.ggml.scores": [0.0] * 8, "tokenizer.ggml.token_type": [3, 3, 3, 6, 1, 1, 1, 1]}
        | {"tokenizer.ggml.eos_token_ids": [1, 106]},
        {"token_embd.weight": (embd[0][:8], embd[1]), "per_layer_token_embd.weight": t(8, 6), "blk.0.x.weight": t(4)},
    )
    theirs = Layout(
        "gemma3n",
        {**keys, "tokenizer.ggml.tokens": tokens + extra, "tokenizer.ggml.scores": [0.0] * 10}
        | {"tokenizer.ggml.token_type": [3, 3, 3, 1, 4, 1, 1, 1, 3, 3], "tokenizer.ggml.eos_token_ids": [1]},
        {**ours.tensors, "token_embd.weight": embd},
    )
    return ours, theirs


def _twin_gemma4(seed: int) -> tuple[Layout, Layout]:
    """Ollama's Gemma 4 text model: the experts' scale under its own name, an SPM model name, a stray
    tower tensor. (With its towers inside it is split: ``ollama_vision_ggufs.write_ollama_gemma4``.)"""
    t = _Draw(seed).normal
    text = {"token_embd.weight": t(8, 4)}
    text |= {"blk.0.ffn_gate_exps.weight": t(2, 3, 4), "blk.0.ffn_up_exps.weight": t(2, 3, 4)}
    scale = t(2)
    ours = Layout(
        "gemma4",
        {"gemma4.block_count": 1, "tokenizer.ggml.model": "gemma4"},
        {**text, "blk.0.ffn_down_exps.scale": scale},
    )
    theirs = Layout(
        "gemma4",
        {"gemma4.block_count": 1, "tokenizer.ggml.model": "llama", "gemma4.vision.block_count": 1}
        | {"gemma4.audio.block_count": 1},
        {**text, "blk.0.ffn_gate_inp.per_expert_scale": scale, "model.vision_tower.x.weight": t(4)},
    )
    return ours, theirs


def _twin_qwen35(arch: str, seed: int) -> tuple[Layout, Layout]:
    """Ollama's older Qwen 3.5: per-layer KV heads, three M-RoPE sections, ``ssm_dt``, the
    multi-token-prediction head inside, and its marker keys. (With its vision tower inside it is
    split: ``ollama_vision_ggufs.write_ollama_qwen35_vision``.)"""
    t = _Draw(seed).normal
    keys: dict[str, Any] = {f"{arch}.block_count": 2, f"{arch}.full_attention_interval": 2}
    text = {"blk.0.ssm_a": t(4), "blk.1.attn_q.weight": t(4, 4), "token_embd.weight": t(8, 4)}
    dt = t(4)
    ours = Layout(
        arch,
        keys | {f"{arch}.attention.head_count_kv": 2, f"{arch}.rope.dimension_sections": [11, 11, 10, 0]},
        {**text, "blk.0.ssm_dt.bias": dt},
    )
    marks: dict[str, Any] = {
        f"{arch}.attention.head_count_kv": U32s([0, 2]),
        f"{arch}.rope.dimension_sections": [11, 11, 10],
        f"{arch}.rope.mrope_section": [11, 11, 10],
        f"{arch}.rope.mrope_interleaved": True,
        f"{arch}.ssm.v_head_reordered": True,
        f"{arch}.image_token_id": 7,
        f"{arch}.vision.block_count": 1,
    }
    if arch == "qwen35moe":
        marks[f"{arch}.feed_forward_length"] = 16
    extra = {"mtp.fc.weight": t(4, 8), "mtp.layers.0.attn_q.weight": t(4, 4)}
    theirs = Layout(arch, keys | marks, {**text, "blk.0.ssm_dt": dt, **extra})
    return ours, theirs


def _twin_qwen3next(seed: int) -> tuple[Layout, Layout]:
    t = _Draw(seed).normal
    text, dt = {"blk.1.attn_q.weight": t(4, 4)}, t(4)
    keys = {"qwen3next.block_count": 2}
    ours = Layout("qwen3next", keys | {"qwen3next.attention.head_count_kv": 2}, {**text, "blk.0.ssm_dt.bias": dt})
    theirs = Layout(
        "qwen3next", keys | {"qwen3next.attention.head_count_kv": U32s([0, 2])}, {**text, "blk.0.ssm_dt": dt}
    )
    return ours, theirs


def _twin_laguna(seed: int) -> tuple[Layout, Layout]:
    t = _Draw(seed).normal
    text, gate = {"blk.0.attn_q.weight": t(4, 4)}, t(4, 4)
    ours = Layout(
        "laguna",
        {"laguna.block_count": 1, "laguna.rope.dimension_count_swa": 8, "laguna.rope.freq_base_swa": 1e4},
        {**text, "blk.0.attn_gate.weight": gate},
    )
    theirs = Layout(
        "laguna",
        {"laguna.block_count": 1, "laguna.rope.swa.dimension_count": 8, "laguna.rope.swa.freq_base": 1e4},
        {**text, "blk.0.attn_g.weight": gate},
    )
    return ours, theirs


def _twin_nemotron_h_moe(seed: int) -> tuple[Layout, Layout]:
    t = _Draw(seed).normal
    latent = {"blk.1.ffn_latent_down.weight": t(3, 4), "blk.1.ffn_latent_up.weight": t(4, 3), "blk.0.x.weight": t(4)}
    ours = Layout("nemotron_h_moe", {"nemotron_h_moe.block_count": 2, "nemotron_h_moe.moe_latent_size": 3}, latent)
    theirs = Layout(
        "nemotron_h_moe",
        {"nemotron_h_moe.block_count": 2},
        {
            **_renamed(latent, (".ffn_latent_down", ".ffn_latent_in"), (".ffn_latent_up", ".ffn_latent_out")),
            "mtp.layers.0.mixer.experts.0.up_proj.weight": t(4, 4),
        },
    )
    return ours, theirs


def _twin_glm4moelite(seed: int) -> tuple[Layout, Layout]:
    """GLM-4.7 Flash: Ollama's per-head MLA lengths; llama.cpp's deepseek2 wants the absorbed ones."""
    t = _Draw(seed).normal
    tensors = {"blk.0.attn_kv_a_mqa.weight": t(8, 4), "blk.0.attn_k_b.weight": t(2, 4, 4)}
    same = {"block_count": 1, "attention.kv_lora_rank": 512, "rope.dimension_count": 64}
    eos = {"tokenizer.ggml.eos_token_ids": [10, 11, 12]}
    ours = Layout(
        "deepseek2",
        {f"deepseek2.{k}": v for k, v in same.items()}
        | {
            "deepseek2.attention.head_count_kv": 1,
            "deepseek2.attention.key_length": 576,
            "deepseek2.attention.value_length": 512,
            "deepseek2.attention.key_length_mla": 256,
            "deepseek2.attention.value_length_mla": 256,
            "deepseek2.expert_group_count": 1,
            "deepseek2.expert_group_used_count": 1,
            "tokenizer.ggml.pre": "glm4",
            "tokenizer.ggml.eot_token_id": 11,
            "tokenizer.ggml.eom_token_id": 12,
        }
        | eos,
        tensors,
    )
    theirs = Layout(
        "glm4moelite",
        {f"glm4moelite.{k}": v for k, v in same.items()}
        | {
            "glm4moelite.attention.head_count_kv": 20,
            "glm4moelite.attention.key_length": 256,
            "glm4moelite.attention.value_length": 256,
            "glm4moelite.attention.key_length_mla": 576,
            "glm4moelite.attention.value_length_mla": 512,
            "tokenizer.ggml.pre": "default",
        }
        | eos,
        tensors,
    )
    return ours, theirs


# Each text architecture Ollama's converter writes differently: the same weights in llama.cpp's
# layout and in Ollama's, at the level of keys and tensors (not loadable models; ``write_gptoss``
# and ``write_olmo2`` are).
TEXT_TWINS: dict[str, Callable[[int], tuple[Layout, Layout]]] = {
    "gemma3n": _twin_gemma3n,
    "gemma4": _twin_gemma4,
    "qwen35": lambda seed: _twin_qwen35("qwen35", seed),
    "qwen35moe": lambda seed: _twin_qwen35("qwen35moe", seed),
    "qwen3next": _twin_qwen3next,
    "laguna": _twin_laguna,
    "nemotron_h_moe": _twin_nemotron_h_moe,
    "glm4moelite": _twin_glm4moelite,
}


def write_text_twins(kind: str, folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/llama.gguf`` (llama.cpp's layout) and ``folder/ollama.gguf`` (Ollama's) of ``kind``."""
    folder.mkdir(parents=True, exist_ok=True)
    ours, theirs = TEXT_TWINS[kind](seed)
    return write_layout(folder / "llama.gguf", ours), write_layout(folder / "ollama.gguf", theirs)
