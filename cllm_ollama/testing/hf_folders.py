"""Tiny Hugging Face checkpoints (``config.json``, safetensors, ``tokenizer.json``) for the folder
import (``convert/hf``), written from a tiny GGUF: the GGUF is then the converted folder's twin,
whose greedy answers the converted model must give word for word.

This is the converter run backwards, written apart from it: Hugging Face's tensor names, Q and K
rows of a ``llama`` in halves per head, the vocabulary split into the BPE vocabulary and added tokens
(unused ones left out, as checkpoints leave their padding rows untokenized).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from ..convert.hf import safetensors
from . import (
    core_ggufs,
    deepseek2_ggufs,
    gemma3n_ggufs,
    gemma4_ggufs,
    glm4_ggufs,
    laguna_ggufs,
    nemotron_h_ggufs,
    ollama_ggufs,
    omni_ggufs,
    tower_ggufs,
    vision_ggufs,
)
from .gguf_base import (
    TINY,
    Tensors,
    VisionShape,
    add_tokenizer,
    attention_block,
    attention_header,
    copy_fields,
    f16_exact,
    finish,
    llama_block,
    llama_body,
    model_header,
    moe_ffn,
    synthetic_vocab,
    unpadded_vocab,
)

_FLOATS = (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16)
_ARCHITECTURES = {
    "qwen3": "Qwen3ForCausalLM",
    "qwen3moe": "Qwen3MoeForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "llama": "LlamaForCausalLM",
    "gemma3": "Gemma3ForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "phi3": "Phi3ForCausalLM",
    "qwen2vl": "Qwen2_5_VLForConditionalGeneration",
    "qwen3vl": "Qwen3VLForConditionalGeneration",
    "qwen35": "Qwen3_5ForCausalLM",
    "qwen35moe": "Qwen3_5MoeForCausalLM",
    "qwen3vlmoe": "Qwen3VLMoeForConditionalGeneration",
    "qwen3next": "Qwen3NextForCausalLM",
    "gpt-oss": "GptOssForCausalLM",
    "gemma-embedding": "Gemma3TextModel",
    "lfm2": "Lfm2ForCausalLM",
    "olmo2": "Olmo3ForCausalLM",
    "mistral3": "Ministral3ForCausalLM",
    "command-r": "CohereForCausalLM",
    "gemma": "GemmaForCausalLM",
    "lfm2moe": "Lfm2MoeForCausalLM",
    "gemma4": "Gemma4ForCausalLM",
    "gemma3n": "Gemma3nForCausalLM",
    "glm4": "Glm4ForCausalLM",
    "deepseek2": "DeepseekV3ForCausalLM",  # or GLM-4.7-Flash's, by its vocabulary (_deepseek2_config)
    "laguna": "LagunaForCausalLM",
    "nemotron_h": "NemotronHForCausalLM",
    "nemotron_h_moe": "NemotronHForCausalLM",
    "llama4": "Llama4ForCausalLM",  # its text model's; write_hf_llama4 puts it in a model that sees
}
_GEMMAS = (
    "gemma",
    "gemma2",
    "gemma3",
    "gemma-embedding",
    "qwen35",
    "qwen35moe",
    "qwen3next",
)  # norms stored with llama.cpp's +1 (but Qwen 3.5's ssm_norm)
# transformers' model_type where it is not llama.cpp's architecture name.
_MODEL_TYPES = {
    "qwen3moe": "qwen3_moe",
    "gemma3": "gemma3_text",
    "qwen2vl": "qwen2_5_vl_text",
    "qwen3vl": "qwen3_vl_text",
    "qwen35": "qwen3_5_text",
    "qwen35moe": "qwen3_5_moe_text",
    "qwen3vlmoe": "qwen3_vl_moe_text",
    "qwen3next": "qwen3_next",
    "gpt-oss": "gpt_oss",
    "gemma-embedding": "gemma3_text",
    "olmo2": "olmo3",
    "mistral3": "ministral3",
    "command-r": "cohere",
    "lfm2moe": "lfm2_moe",
    "gemma4": "gemma4_text",
    "gemma3n": "gemma3n_text",
    "nemotron_h_moe": "nemotron_h",
    "llama4": "llama4_text",
}
# tokenizer.json's split patterns of llama.cpp's pre-tokenizers (Qwen 2's, Llama 3's).
_WORDS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
_REST = r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_CASED = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"
_CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
SPLIT_PATTERNS: dict[str, str | tuple[str, ...]] = {
    "qwen2": _WORDS + r"\p{N}" + _REST,
    "llama-bpe": _WORDS + r"\p{N}{1,3}" + _REST,
    "glm4": _WORDS + r"\p{N}{1,3}" + _REST,  # Llama 3's, as GLM's tokenizer.json states it
    "chatglm-bpe": _WORDS + r"\p{N}{1,3}" + _REST,  # GLM-OCR's: the same
    "deepseek-v3": (  # three splits in turn, as llama-vocab.cpp quotes DeepSeek V3's
        r"\p{N}{1,3}",
        "[一-龥぀-ゟ゠-ヿ]+",
        r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
        r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    "lfm2": _WORDS + r"\p{N}{1,3}" + _REST,  # Llama 3's, as llama.cpp runs it
    "pixtral": _WORDS + r"\p{N}{1,3}" + _REST,  # Llama 3's too (Nemotron-H's, as llama.cpp names it)
    "gpt-4o": (  # o200k's (gpt-oss)
        _CASED
        + r"*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
        + _CONTRACTIONS
        + "|"
        + _CASED
        + r"+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
        + _CONTRACTIONS
        + "|"
        + r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    ),
}
_PARTS = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "ffn_gate_inp": "mlp.gate",
}
_EXPERTS = {"ffn_gate_exps": "gate_proj", "ffn_up_exps": "up_proj", "ffn_down_exps": "down_proj"}
# Mixtral's names for them (a llama with experts), and for its router.
_MIXTRAL_EXPERTS = {"ffn_gate_exps": "w1", "ffn_up_exps": "w3", "ffn_down_exps": "w2"}
_GEMMA_PARTS = _PARTS | {
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}
# Gemma 4's: its per-layer embeddings' gate, projection and norm, and beside the dense FFN a
# mixture's router, norms before it and after both.
_GEMMA4_PARTS = _GEMMA_PARTS | {
    "inp_gate": "per_layer_input_gate",
    "proj": "per_layer_projection",
    "post_norm": "post_per_layer_input_norm",
    "ffn_gate_inp": "router.proj",
    "pre_ffw_norm_2": "pre_feedforward_layernorm_2",
    "post_ffw_norm_1": "post_feedforward_layernorm_1",
    "post_ffw_norm_2": "post_feedforward_layernorm_2",
}
# Gemma 3n's: per-layer embeddings' as Gemma 4's, its AltUp streams' router and coefficients and
# LAuReL's low-rank residual; the AltUp correction's scale is no module's weight.
_GEMMA3N_PARTS = _GEMMA_PARTS | {
    "inp_gate": "per_layer_input_gate",
    "proj": "per_layer_projection",
    "post_norm": "post_per_layer_input_norm",
    "altup_correct_coef": "altup.correction_coefs",
    "altup_predict_coef": "altup.prediction_coefs",
    "altup_router": "altup.modality_router",
    "altup_router_norm": "altup.router_norm",
    "laurel_l": "laurel.linear_left",
    "laurel_r": "laurel.linear_right",
    "laurel_post_norm": "laurel.post_laurel_norm",
}
_GEMMA3N_STACKS = {
    "altup_proj.weight": "model.altup_projections",
    "altup_unembd_proj.weight": "model.altup_unembed_projections",
}
# ... and its parameters that are no module's weight: the layer's output scale, the router's scales.
# Nemotron-H's, under its releases' ``backbone.``: each layer's norm and one mixer; its parameters
# (no module's weight or bias) by llama.cpp's name.
_NEMOTRON_H_PARTS = {
    "attn_norm": "norm",
    "ssm_in": "mixer.in_proj",
    "ssm_conv1d": "mixer.conv1d",
    "ssm_norm": "mixer.norm",
    "ssm_out": "mixer.out_proj",
    "attn_q": "mixer.q_proj",
    "attn_k": "mixer.k_proj",
    "attn_v": "mixer.v_proj",
    "attn_output": "mixer.o_proj",
    "ffn_up": "mixer.up_proj",
    "ffn_down": "mixer.down_proj",
    "ffn_gate_inp": "mixer.gate",
    "ffn_up_shexp": "mixer.shared_experts.up_proj",
    "ffn_down_shexp": "mixer.shared_experts.down_proj",
    "ffn_latent_down": "mixer.fc1_latent_proj",
    "ffn_latent_up": "mixer.fc2_latent_proj",
}
_NEMOTRON_H_PARAMS = {
    "ssm_a": "mixer.A_log",
    "ssm_d": "mixer.D",
    "ssm_dt.bias": "mixer.dt_bias",
    "exp_probs_b.bias": "mixer.gate.e_score_correction_bias",
}
_NEMOTRON_H_GLOBAL = {
    "token_embd.weight": "backbone.embeddings.weight",
    "output_norm.weight": "backbone.norm_f.weight",
    "output.weight": "lm_head.weight",
}
_GEMMA4_PARAMS = {
    "layer_output_scale.weight": "layer_scalar",
    "ffn_gate_inp.scale": "router.scale",
    "ffn_down_exps.scale": "router.per_expert_scale",
}
# Qwen 3.5's: a gated delta net's (its A and dt bias are no module's weight or bias), and the
# norm after either kind of attention.
_QWEN35_PARTS = _PARTS | {
    "post_attention_norm": "post_attention_layernorm",
    "attn_qkv": "linear_attn.in_proj_qkv",
    "attn_gate": "linear_attn.in_proj_z",
    "ssm_alpha": "linear_attn.in_proj_a",
    "ssm_beta": "linear_attn.in_proj_b",
    "ssm_conv1d": "linear_attn.conv1d",
    "ssm_norm": "linear_attn.norm",
    "ssm_out": "linear_attn.out_proj",
}
_QWEN35_PARAMS = {"ssm_a": "linear_attn.A_log", "ssm_dt.bias": "linear_attn.dt_bias"}
# Qwen3-Next's delta net's fused projections (per key head: Q, K, V heads and gates; betas and alphas).
_QWEN3NEXT_PARTS = {"ssm_in": "linear_attn.in_proj_qkvz", "ssm_ba": "linear_attn.in_proj_ba"}
_QWEN35_SHARED = {
    "ffn_gate_inp": "mlp.gate",
    "ffn_gate_shexp": "mlp.shared_expert.gate_proj",
    "ffn_up_shexp": "mlp.shared_expert.up_proj",
    "ffn_down_shexp": "mlp.shared_expert.down_proj",
    "ffn_gate_inp_shexp": "mlp.shared_expert_gate",
}
# gpt-oss's: its norm before the FFN, its router; its attention sinks, no module's weight.
_GPTOSS_PARTS = _PARTS | {"post_attention_norm": "post_attention_layernorm", "ffn_gate_inp": "mlp.router"}
# LFM2's: a block's norm before its operator (attention or a short convolution), its SwiGLU FFN.
# DeepSeek V3's and GLM-4.7-Flash's latent attention and shared experts (``kv_b_proj`` is put
# together from llama.cpp's ``attn_k_b`` and ``attn_v_b`` apart).
_DEEPSEEK2_PARTS = _PARTS | {
    "attn_q_a": "self_attn.q_a_proj",
    "attn_q_a_norm": "self_attn.q_a_layernorm",
    "attn_q_b": "self_attn.q_b_proj",
    "attn_kv_a_mqa": "self_attn.kv_a_proj_with_mqa",
    "attn_kv_a_norm": "self_attn.kv_a_layernorm",
    "ffn_gate_shexp": "mlp.shared_experts.gate_proj",
    "ffn_up_shexp": "mlp.shared_experts.up_proj",
    "ffn_down_shexp": "mlp.shared_experts.down_proj",
}
# Laguna's, as its releases name them: its attention's output gate, the shared expert.
_LAGUNA_PARTS = _PARTS | {
    "attn_gate": "self_attn.g_proj",
    "ffn_gate_shexp": "mlp.shared_expert.gate_proj",
    "ffn_up_shexp": "mlp.shared_expert.up_proj",
    "ffn_down_shexp": "mlp.shared_expert.down_proj",
}
_LFM2_PARTS = _PARTS | {
    "attn_norm": "operator_norm",
    "ffn_norm": "ffn_norm",
    "ffn_gate": "feed_forward.w1",
    "ffn_up": "feed_forward.w3",
    "ffn_down": "feed_forward.w2",
    "attn_output": "self_attn.out_proj",
    "attn_q_norm": "self_attn.q_layernorm",
    "attn_k_norm": "self_attn.k_layernorm",
    "shortconv.conv": "conv.conv",
    "shortconv.in_proj": "conv.in_proj",
    "shortconv.out_proj": "conv.out_proj",
    "ffn_gate_inp": "feed_forward.gate",
}
# OLMo 2's and 3's: norms after attention and the FFN only.
_OLMO_PARTS = _PARTS | {
    "post_attention_norm": "post_attention_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}
# Phi-3's fused projections: Q, K and V in one matrix, the FFN's gate and up in another.
_PHI3_PARTS = _PARTS | {"attn_qkv": "self_attn.qkv_proj", "ffn_up": "mlp.gate_up_proj"}
# GLM-4's: norms before and after attention and the FFN, the FFN's gate and up in one projection.
_GLM4_PARTS = _PARTS | {
    "post_attention_norm": "post_self_attn_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_up": "mlp.gate_up_proj",
    "post_ffw_norm": "post_mlp_layernorm",
}
# Llama 4's: its FFN, dense or a mixture (the router, the shared expert), under ``feed_forward``.
_LLAMA4_PARTS = _PARTS | {
    "ffn_gate": "feed_forward.gate_proj",
    "ffn_up": "feed_forward.up_proj",
    "ffn_down": "feed_forward.down_proj",
    "ffn_gate_inp": "feed_forward.router",
    "ffn_gate_shexp": "feed_forward.shared_expert.gate_proj",
    "ffn_up_shexp": "feed_forward.shared_expert.up_proj",
    "ffn_down_shexp": "feed_forward.shared_expert.down_proj",
}
_GLOBAL = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
    "per_layer_token_embd": "model.embed_tokens_per_layer",  # Gemma 4's per-layer embeddings
    "per_layer_model_proj": "model.per_layer_model_projection",
    "per_layer_proj_norm": "model.per_layer_projection_norm",
}
# Text the tiny SentencePiece tokenizers learn from.
_CORPUS = """The capital of France is Paris, and the capital of Italy is Rome.
def add(a, b): return a + b  # numbers, lists and strings are all values in Python.
Questions and answers: what is the sea? It is water, and it is salty.
Größe, naïve café, 日本語 and emoji 🙂 are bytes the tokenizer falls back to.
[INST] Hello, who are you? [/INST] I am a small model that answers in one step."""


def _exported(folder: Path, twin: str, write: Callable[[Path], Path], name: str | None = None) -> tuple[Path, Path]:
    """``folder/hf-<name>/`` (``name`` defaulting to ``twin``), the checkpoint exported from the
    GGUF ``write`` puts at ``folder/<twin>.gguf``, and that GGUF."""
    folder.mkdir(parents=True, exist_ok=True)
    path = write(folder / f"{twin}.gguf")
    return export(path, folder / f"hf-{name or twin}"), path


def write_hf_qwen3(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-qwen3/``, a Qwen3 checkpoint in F16, and ``folder/qwen3.gguf``, its twin."""
    return _exported(
        folder, "qwen3", lambda p: core_ggufs.write_qwen3(p, qtype=gguf.GGMLQuantizationType.F16, seed=seed)
    )


def write_hf_llama(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-llama/``, a Llama checkpoint in F16, and ``folder/llama.gguf``, its twin."""
    return _exported(folder, "llama", lambda p: write_llama(p, seed=seed))


def write_hf_ministral3(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-ministral3/``, a Ministral 3 checkpoint (``Ministral3ForCausalLM``: a Llama with
    Ministral's YaRN and query temperature, ``write_llama``'s; F16), and ``folder/mistral3.gguf``,
    its twin."""
    return _exported(folder, "mistral3", lambda p: write_llama(p, seed=seed, arch="mistral3"), "ministral3")


def write_hf_qwen3moe(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-qwen3moe/``, a Qwen3 mixture of experts (each expert's tensors apart, as
    transformers 4 saves them), and ``folder/qwen3moe.gguf``, its twin."""
    return _exported(folder, "qwen3moe", lambda p: write_qwen3moe(p, seed=seed))


# BERT's tensors by Hugging Face's names (sentence-transformers' BertModel), and its special tokens.
_BERT_GLOBAL = {
    "token_embd": "embeddings.word_embeddings",
    "position_embd": "embeddings.position_embeddings",
    "token_types": "embeddings.token_type_embeddings",
    "token_embd_norm": "embeddings.LayerNorm",
}
_BERT_PARTS = {
    "attn_q": "attention.self.query",
    "attn_k": "attention.self.key",
    "attn_v": "attention.self.value",
    "attn_output": "attention.output.dense",
    "attn_output_norm": "attention.output.LayerNorm",
    "ffn_up": "intermediate.dense",
    "ffn_down": "output.dense",
    "layer_output_norm": "output.LayerNorm",
}
_BERT_SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Nomic BERT's (nomic-embed-text, as its own code names them): its embedding's norm, each layer's
# fused Q/K/V, its SwiGLU's value (fc11), gate (fc12) and output (fc2), and its norms after both.
_NOMIC_GLOBAL = _BERT_GLOBAL | {"token_embd_norm": "emb_ln"}
_NOMIC_PARTS = {
    "attn_qkv": "attn.Wqkv",
    "attn_output": "attn.out_proj",
    "attn_output_norm": "norm1",
    "ffn_up": "mlp.fc11",
    "ffn_gate": "mlp.fc12",
    "ffn_down": "mlp.fc2",
    "layer_output_norm": "norm2",
}
NOMIC_ROPE_BASE = 1000.0


def write_hf_bert(folder: Path, *, seed: int = 0, nomic: bool = False) -> tuple[Path, Path]:
    """``folder/hf-bert/``, a sentence-transformers embedding model (``BertModel``, a WordPiece
    ``tokenizer.json``, mean pooling in ``1_Pooling/config.json``), and ``folder/bert.gguf``, its
    twin: llama.cpp's ``bert`` with the vocabulary in its phantom-space form. ``nomic``:
    ``folder/hf-nomic-bert/``, a Nomic BERT (nomic-embed-text's ``NomicBertModel``: rotary
    positions, fused Q/K/V, a SwiGLU FFN, no biases but its norms', its own names and settings),
    and ``folder/nomic-bert.gguf``, llama.cpp's ``nomic-bert``."""
    folder.mkdir(parents=True, exist_ok=True)
    words = sorted({w for w in "".join(c if c.isalnum() else " " for c in _CORPUS.lower()).split() if w.isascii()})
    chars = sorted({c for c in _CORPUS.lower() if c.isascii() and not c.isspace()})
    vocab = [*_BERT_SPECIAL, *chars, *(f"##{c}" for c in chars if c.isalnum()), *(w for w in words if w not in chars)]
    arch = "nomic-bert" if nomic else "bert"
    twin = folder / f"{arch}.gguf"
    t = Tensors(gguf.GGUFWriter(str(twin), arch), np.random.default_rng(seed), 0.5, gguf.GGMLQuantizationType.F16)
    w, s, n_ctx = t.w, TINY, 128
    model_header(w, dataclasses.replace(s, context_length=n_ctx), f"tiny-{arch}", gguf.GGMLQuantizationType.F16)
    if nomic:
        w.add_rope_freq_base(NOMIC_ROPE_BASE)
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    w.add_head_count_kv(s.n_head)
    w.add_layer_norm_eps(1e-12)
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType.MEAN)
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("default")
    control = [v in _BERT_SPECIAL for v in vocab]
    w.add_token_list(
        [v if c else (v[2:] if v.startswith("##") else "\u2581" + v) for v, c in zip(vocab, control, strict=True)]
    )
    w.add_token_types([gguf.TokenType.CONTROL if c else gguf.TokenType.NORMAL for c in control])
    w.add_token_type_count(2)
    for key, token in (("bos", "[CLS]"), ("eos", "[SEP]"), ("unk", "[UNK]"), ("sep", "[SEP]"), ("pad", "[PAD]")):
        getattr(w, f"add_{key}_token_id")(vocab.index(token))
    w.add_uint32("tokenizer.ggml.cls_token_id", vocab.index("[CLS]"))
    w.add_mask_token_id(vocab.index("[MASK]"))
    tensors: dict[str, np.ndarray] = {}

    def matrix(name: str, rows: int, cols: int, f32: bool = False) -> None:
        data = f16_exact(t, (rows, cols), 0.5 / np.sqrt(cols) if f32 else 0.5)
        w.add_tensor(name, data if f32 else data.astype(np.float16))
        tensors[name] = data

    def vector(name: str, n: int, value: float | None = None) -> None:
        data = np.full(n, value, np.float32) if value is not None else f16_exact(t, (n,), 0.1)
        w.add_tensor(name, data)
        tensors[name] = data

    matrix("token_embd.weight", len(vocab), s.n_embd)
    if not nomic:  # Nomic BERT's positions rotate
        matrix("position_embd.weight", n_ctx, s.n_embd, f32=True)  # F32, as llama.cpp adds them
    matrix("token_types.weight", 2, s.n_embd, f32=True)
    vector("token_embd_norm.weight", s.n_embd, 1.0)
    vector("token_embd_norm.bias", s.n_embd)
    layer_matrices: tuple[tuple[str, int, int], ...]
    if nomic:  # fused Q/K/V and a SwiGLU, without biases
        layer_matrices = (
            ("attn_qkv", 3 * s.n_embd, s.n_embd),
            ("attn_output", s.n_embd, s.n_embd),
            ("ffn_up", s.n_ff, s.n_embd),
            ("ffn_gate", s.n_ff, s.n_embd),
            ("ffn_down", s.n_embd, s.n_ff),
        )
    else:
        layer_matrices = (
            ("attn_q", s.n_embd, s.n_embd),
            ("attn_k", s.n_embd, s.n_embd),
            ("attn_v", s.n_embd, s.n_embd),
            ("attn_output", s.n_embd, s.n_embd),
            ("ffn_up", s.n_ff, s.n_embd),
            ("ffn_down", s.n_embd, s.n_ff),
        )
    for i in range(s.n_layer):
        p = f"blk.{i}."
        for name, rows, cols in layer_matrices:
            matrix(f"{p}{name}.weight", rows, cols)
            if not nomic:
                vector(f"{p}{name}.bias", rows)
        for norm in ("attn_output_norm", "layer_output_norm"):
            vector(f"{p}{norm}.weight", s.n_embd, 1.0)
            vector(f"{p}{norm}.bias", s.n_embd)
    finish(w)
    hf = folder / f"hf-{arch}"
    (hf / "1_Pooling").mkdir(parents=True, exist_ok=True)
    named = {}
    globals_, parts, layers = (
        (_NOMIC_GLOBAL, _NOMIC_PARTS, "encoder.layers") if nomic else (_BERT_GLOBAL, _BERT_PARTS, "encoder.layer")
    )
    for name, data in tensors.items():
        stem, _, suffix = name.rpartition(".")
        if stem in globals_:
            named[f"{globals_[stem]}.{suffix}"] = data
        else:
            _, layer, part = stem.split(".", 2)
            named[f"{layers}.{layer}.{parts[part]}.{suffix}"] = data
    if not nomic:
        named["embeddings.position_ids"] = np.arange(n_ctx, dtype=np.int64)[None]  # a buffer checkpoints carry
    write_safetensors(
        hf / "model.safetensors",
        {n: ("I64", v) if v.dtype == np.int64 else _typed(v, "F16") for n, v in named.items()},
    )
    config: dict[str, Any] = {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "hidden_size": s.n_embd,
        "num_hidden_layers": s.n_layer,
        "num_attention_heads": s.n_head,
        "intermediate_size": s.n_ff,
        "hidden_act": "gelu",
        "max_position_embeddings": n_ctx,
        "type_vocab_size": 2,
        "vocab_size": len(vocab),
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
    }
    if nomic:
        config = _nomic_config(config)
    _write_json(hf / "config.json", config)
    specials = [{"id": vocab.index(x), "content": x, "special": True} for x in _BERT_SPECIAL]
    sequence = [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]
    _write_json(
        hf / "tokenizer.json",
        {
            "version": "1.0",
            "added_tokens": [
                x | {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False} for x in specials
            ],
            "normalizer": {
                "type": "BertNormalizer",
                "clean_text": True,
                "handle_chinese_chars": True,
                "strip_accents": None,
                "lowercase": True,
            },
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [*sequence, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                "pair": [
                    *sequence,
                    {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                    {"Sequence": {"id": "B", "type_id": 1}},
                    {"SpecialToken": {"id": "[SEP]", "type_id": 1}},
                ],
                "special_tokens": {x: {"id": x, "ids": [vocab.index(x)], "tokens": [x]} for x in ("[CLS]", "[SEP]")},
            },
            "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
            "model": {
                "type": "WordPiece",
                "unk_token": "[UNK]",
                "continuing_subword_prefix": "##",
                "max_input_chars_per_word": 100,
                "vocab": {v: i for i, v in enumerate(vocab)},
            },
        },
    )
    _write_json(
        hf / "tokenizer_config.json",
        {
            "do_lower_case": True,
            "unk_token": "[UNK]",
            "sep_token": "[SEP]",
            "pad_token": "[PAD]",
            "cls_token": "[CLS]",
            "mask_token": "[MASK]",
            "tokenizer_class": "BertTokenizer",
            "model_max_length": n_ctx,
        },
    )
    _write_json(
        hf / "modules.json",
        [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ],
    )
    _write_json(
        hf / "1_Pooling" / "config.json",
        {"word_embedding_dimension": s.n_embd, "pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False},
    )
    return hf, twin


def _nomic_config(bert: dict[str, Any]) -> dict[str, Any]:
    """A Nomic BERT's config.json as nomic-embed-text's states it (its own code's names: n_embd,
    n_inner, rotary_emb_base...), with transformers' own names beside them (its native
    ``nomic_bert`` reads those)."""
    return {
        **bert,
        "architectures": ["NomicBertModel"],
        "model_type": "nomic_bert",
        "hidden_act": "silu",
        "rope_theta": NOMIC_ROPE_BASE,
        "n_embd": bert["hidden_size"],
        "n_layer": bert["num_hidden_layers"],
        "n_head": bert["num_attention_heads"],
        "n_inner": bert["intermediate_size"],
        "n_positions": bert["max_position_embeddings"],
        "max_trained_positions": bert["max_position_embeddings"],
        "layer_norm_epsilon": bert["layer_norm_eps"],
        "rotary_emb_base": NOMIC_ROPE_BASE,
        "rotary_emb_fraction": 1.0,
        "rotary_emb_interleaved": False,
        "rotary_emb_scale_base": None,
        "activation_function": "swiglu",
        "causal": False,
        "prenorm": False,
        "qkv_proj_bias": False,
        "mlp_fc1_bias": False,
        "mlp_fc2_bias": False,
    }


def write_hf_mixtral(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-mixtral/``, a Mixtral checkpoint (a Llama whose FFNs are experts, each its own
    w1, w3 and w2), and ``folder/mixtral.gguf``, its twin."""
    return _exported(folder, "mixtral", lambda p: write_mixtral(p, seed=seed))


def write_mixtral(path: Path, *, n_expert: int = 4, n_used: int = 2, seed: int = 0) -> Path:
    """A tiny Mixtral in F16: llama.cpp's ``llama`` with ``n_expert`` experts (``n_ff`` wide) per
    layer, ``n_used`` a token."""
    qtype = gguf.GGMLQuantizationType.F16
    t = Tensors(gguf.GGUFWriter(str(path), "llama"), np.random.default_rng(seed), 0.5, qtype)
    s, w = TINY, t.w
    attention_header(w, s, "tiny-mixtral", qtype)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_expert_count(n_expert)
    w.add_expert_used_count(n_used)
    vocab = synthetic_vocab()
    add_tokenizer(w, vocab, None)
    t.matrix("token_embd.weight", len(vocab.tokens), s.n_embd)
    t.norm("output_norm.weight", s.n_embd)
    t.matrix("output.weight", len(vocab.tokens), s.n_embd)
    for i in range(s.n_layer):
        p = f"blk.{i}."
        llama_block(t, s, p, ffn=False)
        moe_ffn(t, p, n_expert, s.n_ff)
    finish(w)
    return path


def write_qwen3moe(path: Path, *, n_expert: int = 4, n_used: int = 2, n_ff_exp: int = 32, seed: int = 0) -> Path:
    """A tiny Qwen3 mixture of experts in F16: every layer's FFN ``n_expert`` experts, ``n_used`` a token."""
    qtype = gguf.GGMLQuantizationType.F16
    t = Tensors(gguf.GGUFWriter(str(path), "qwen3moe"), np.random.default_rng(seed), 0.5, qtype)
    s, w = TINY, t.w
    attention_header(w, s, "tiny-qwen3moe", qtype)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(n_expert)
    w.add_expert_used_count(n_used)
    w.add_expert_feed_forward_length(n_ff_exp)
    vocab = synthetic_vocab()
    add_tokenizer(w, vocab, None)
    t.matrix("token_embd.weight", len(vocab.tokens), s.n_embd)
    t.norm("output_norm.weight", s.n_embd)
    for i in range(s.n_layer):
        p = f"blk.{i}."
        llama_block(t, s, p, ffn=False)
        t.norm(p + "attn_q_norm.weight", s.head_dim)
        t.norm(p + "attn_k_norm.weight", s.head_dim)
        moe_ffn(t, p, n_expert, n_ff_exp)
    finish(w)
    return path


def write_llama(path: Path, *, seed: int = 0, output: bool = False, arch: str = "llama") -> Path:
    """A tiny Llama in F16 (Qwen's tokenizer, which any architecture may have); ``output``: with an
    output matrix of its own, not tied to the token embedding. ``arch`` "mistral3": a Ministral 3,
    its YaRN scaled as transformers scales it (log multiplier 1) from a trained context of 4 tokens,
    beyond which its queries are tempered by position (0.1), so that a short prompt has both."""
    qtype = gguf.GGMLQuantizationType.F16
    t = Tensors(gguf.GGUFWriter(str(path), arch), np.random.default_rng(seed), 0.5, qtype)
    attention_header(t.w, TINY, f"tiny-{arch}", qtype)
    t.w.add_layer_norm_rms_eps(1e-5)
    if arch == "mistral3":
        t.w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        t.w.add_rope_scaling_factor(16.0)
        t.w.add_rope_scaling_orig_ctx_len(MINISTRAL3_TRAINED)
        t.w.add_rope_scaling_yarn_beta_fast(32.0)
        t.w.add_rope_scaling_yarn_beta_slow(1.0)
        t.w.add_float32("mistral3.rope.scaling.yarn_log_multiplier", 1.0)
        t.w.add_float32("mistral3.attention.temperature_scale", 0.1)
    llama_body(t, TINY, synthetic_vocab(), output=output)
    return path


MINISTRAL3_TRAINED = 4  # the tiny Ministral 3's trained context, in tokens


# What a LoRA may adapt in llama.cpp: the token embedding, the output and every projection.
_PROJECTIONS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
LORA_PARTS = ("token_embd", "output", *_PROJECTIONS)
# The bases ``write_hf_lora`` writes, and what their adapters adapt (a mixture: its attention and router).
LORA_BASES = {
    "llama": (lambda path, seed: write_llama(path, seed=seed, output=True), LORA_PARTS),
    "qwen3": (lambda path, seed: core_ggufs.write_qwen3(path, seed=seed), _PROJECTIONS),
    "gemma3": (lambda path, seed: core_ggufs.write_gemma3(path, seed=seed), _PROJECTIONS),
    "qwen3moe": (lambda path, seed: write_qwen3moe(path, seed=seed), (*_PROJECTIONS[:4], "ffn_gate_inp")),
    "gemma2": (lambda path, seed: write_gemma2(path, seed=seed), _PROJECTIONS),
    "phi3": (lambda path, seed: write_phi3(path, seed=seed), ("attn_qkv", "attn_output", "ffn_up", "ffn_down")),
}


def write_hf_lora(folder: Path, *, base: str = "llama", seed: int = 0) -> tuple[Path, Path, Path]:
    """``folder/hf-lora/``, a PEFT LoRA adapter (``adapter_model.safetensors``, ``adapter_config.json``)
    for ``folder/base.gguf``, a tiny model of the ``base`` architecture (``LORA_BASES``; a Llama
    with an output of its own, whose Q and K rows the converter reorders, adapted everywhere), and
    ``folder/adapter.gguf``, its twin."""
    folder.mkdir(parents=True, exist_ok=True)
    write_base, parts = LORA_BASES[base]
    base_path = write_base(folder / "base.gguf", seed)
    twin = core_ggufs.write_lora_for(base_path, folder / "adapter.gguf", parts, seed=seed)
    return export_lora(twin, base_path, folder / "hf-lora"), base_path, twin


def export_lora(
    adapter: Path,
    base: Path,
    folder: Path,
    *,
    mlx: bool = False,
    rslora: bool = False,
    alpha_pattern: dict[str, float] | None = None,
    dtype: str = "F32",
) -> Path:
    """``folder``: the safetensors adapter the LoRA GGUF at ``adapter`` (for ``base``) was converted
    from, as PEFT saves one, or MLX-LM (``mlx``: ``adapters.safetensors``, A and B transposed, a bare
    ``scale``). ``rslora``: PEFT's rank-stabilized scaling, its alpha chosen to scale as the GGUF's;
    ``alpha_pattern``: per-module alphas (module regex -> alpha), the matched B's rescaled to keep
    the GGUF's updates. ``dtype``: A's and B's type (F32, F16 or BF16)."""
    reader = gguf.GGUFReader(adapter)
    alpha = float(reader.fields["adapter.lora.alpha"].contents())
    base_kv = _fields(base)
    arch = str(base_kv["general.architecture"])
    heads = {
        "attn_q": int(base_kv[f"{arch}.attention.head_count"]),
        "attn_k": int(base_kv[f"{arch}.attention.head_count_kv"]),
    }
    data = {
        t.name: np.asarray(t.data, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])
        for t in reader.tensors
    }
    tensors: dict[str, np.ndarray] = {}
    rank = 0
    for name in sorted({n.rpartition(".")[0] for n in data}):
        a, b = data[name + ".lora_a"], data[name + ".lora_b"]
        module = _hf_name(name, arch).removesuffix(".weight")
        part = name.split(".")[2] if name.startswith("blk.") else ""
        if arch == "llama" and part in heads:  # rows in halves, as Hugging Face keeps them
            b = _halves(b, heads[part])
        for key, pattern_alpha in (alpha_pattern or {}).items():
            if re.fullmatch(rf"(.*\.)?(?:{key})", module):
                b = b * np.float32(alpha / pattern_alpha)
        if name == "token_embd.weight":
            a = a.T
        rank = a.shape[0]
        if mlx:
            tensors[f"{module}.lora_a"], tensors[f"{module}.lora_b"] = a.T, b.T
        elif name == "token_embd.weight":
            tensors[f"base_model.model.{module}.lora_embedding_A"] = a
            tensors[f"base_model.model.{module}.lora_embedding_B"] = b
        else:
            tensors[f"base_model.model.{module}.lora_A.weight"] = a
            tensors[f"base_model.model.{module}.lora_B.weight"] = b
    folder.mkdir(parents=True, exist_ok=True)
    weights = "adapters.safetensors" if mlx else "adapter_model.safetensors"
    write_safetensors(folder / weights, {n: _typed(np.ascontiguousarray(v), dtype) for n, v in tensors.items()})
    config: dict[str, Any]
    if mlx:
        config = {
            "fine_tune_type": "lora",
            "num_layers": -1,
            "lora_parameters": {"rank": rank, "scale": alpha / rank, "dropout": 0.0},
        }
    else:
        config = {
            "peft_type": "LORA",
            "base_model_name_or_path": str(base),
            "r": rank,
            "lora_alpha": alpha / math.sqrt(rank) if rslora else alpha,
            "use_rslora": rslora,
            "alpha_pattern": alpha_pattern or {},
            "target_modules": sorted({m.split(".")[-1] for m in (n.rpartition(".lora_")[0] for n in tensors)}),
            "task_type": "CAUSAL_LM",
        }
    _write_json(folder / "adapter_config.json", config)
    return folder


def write_hf_gemma3(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-gemma3/``, a Gemma 3 checkpoint in F16 (its norms without llama.cpp's +1), and
    ``folder/gemma3.gguf``, its twin."""
    f16 = gguf.GGMLQuantizationType.F16
    return _exported(
        folder, "gemma3", lambda p: core_ggufs.write_gemma3(p, vocab=unpadded_vocab(), qtype=f16, seed=seed)
    )


def write_hf_embeddinggemma(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-embeddinggemma/``, an EmbeddingGemma as sentence-transformers saves one
    (``Gemma3TextModel``: ``write_hf_gemma3``'s layers attending both ways, mean pooling, two Dense
    projections n_embd -> 2 n_embd -> n_embd; F16), and ``folder/embeddinggemma.gguf``, its twin:
    llama.cpp's ``gemma-embedding`` with ``dense_2`` and ``dense_3``."""
    folder.mkdir(parents=True, exist_ok=True)
    text = core_ggufs.write_gemma3(
        folder / "text.gguf", vocab=unpadded_vocab(), qtype=gguf.GGMLQuantizationType.F16, seed=seed
    )
    reader = gguf.GGUFReader(text)
    twin = folder / "embeddinggemma.gguf"
    t = Tensors(
        gguf.GGUFWriter(str(twin), "gemma-embedding"),
        np.random.default_rng(seed + 1),
        0.2,
        gguf.GGMLQuantizationType.F16,
    )
    n = TINY.n_embd
    # Gemma 3's keys under the new architecture; no chat template: an embedding model does not chat.
    copy_fields(
        reader, t.w, skip=("tokenizer.chat_template",), key=lambda name: name.replace("gemma3.", "gemma-embedding.", 1)
    )
    t.w.add_pooling_type(gguf.PoolingType.MEAN)
    for key, value in (
        ("dense_2_feat_in", n),
        ("dense_2_feat_out", 2 * n),
        ("dense_3_feat_in", 2 * n),
        ("dense_3_feat_out", n),
    ):
        t.w.add_uint32(f"gemma-embedding.{key}", value)
    for tensor in reader.tensors:
        if tensor.name != "output.weight":  # the embedding's, as in EmbeddingGemma
            t.w.add_tensor(tensor.name, np.array(tensor.data))
    t.w.add_tensor("dense_2.weight", f16_exact(t, (2 * n, n)).astype(np.float16))
    t.w.add_tensor("dense_3.weight", f16_exact(t, (n, 2 * n)).astype(np.float16))
    finish(t.w)
    text.unlink()
    return export(twin, folder / "hf-embeddinggemma"), twin


def write_hf_gemma3_vision(
    folder: Path, *, prefix: str = "model.language_model.", seed: int = 0
) -> tuple[Path, Path, Path]:
    """``folder/hf-gemma3-vision/``, a Gemma 3 that sees (``Gemma3ForConditionalGeneration``: the
    text model under ``prefix``, a SigLIP tower and Gemma's projector, all F16), and its twins
    ``folder/text.gguf`` and ``folder/mmproj.gguf``."""
    folder.mkdir(parents=True, exist_ok=True)
    f16 = gguf.GGMLQuantizationType.F16
    text = core_ggufs.write_gemma3(folder / "text.gguf", vocab=unpadded_vocab(), qtype=f16, seed=seed)
    mmproj = core_ggufs.write_gemma3_projector(folder / "mmproj.gguf", f16=True, seed=seed)
    return export(text, folder / "hf-gemma3-vision", sees=prefix, tower=mmproj), text, mmproj


def write_hf_mistral3_vision(folder: Path, *, seed: int = 0, image_size: int = 32) -> tuple[Path, Path, Path]:
    """``folder/hf-mistral3-vision/``, a Mistral 3 that sees (``Mistral3ForConditionalGeneration``:
    a Llama text model with Pixtral's image tokens, a Pixtral tower, its projector, all F16), and its
    twins ``folder/text.gguf`` and ``folder/mmproj.gguf``. ``image_size``: the largest side a picture
    keeps (libmtmd enlarges one to at least 8 tokens, 48 pixels with the defaults)."""
    folder.mkdir(parents=True, exist_ok=True)
    f16 = gguf.GGMLQuantizationType.F16
    t = Tensors(gguf.GGUFWriter(str(folder / "text.gguf"), "llama"), np.random.default_rng(seed), 0.5, f16)
    attention_header(t.w, TINY, "tiny-mistral3", f16)
    t.w.add_layer_norm_rms_eps(1e-5)
    llama_body(t, TINY, vision_ggufs.pixtral_vocab(), output=True)
    text = folder / "text.gguf"
    shape = dataclasses.replace(vision_ggufs.TINY_VISION, image_size=image_size)
    mmproj = vision_ggufs.write_pixtral_projector(folder / "mmproj.gguf", text, seed=seed, f16=True, shape=shape)
    return export(text, folder / "hf-mistral3-vision", sees="language_model.model.", tower=mmproj), text, mmproj


def write_hf_qwen2vl_vision(
    folder: Path, *, prefix: str = "model.", seed: int = 0, shape: VisionShape = vision_ggufs.QWEN25VL_VISION
) -> tuple[Path, Path, Path]:
    """``folder/hf-qwen2vl-vision/``, a Qwen2-VL (``Qwen2VLForConditionalGeneration``: the text model
    of ``write_hf_qwen25vl_vision``, a LayerNorm tower with quick GELU and its merger, all F16), and
    its twins ``folder/text.gguf`` and ``folder/mmproj.gguf``; ``prefix`` as there."""
    folder.mkdir(parents=True, exist_ok=True)
    text = _write_qwen2vl_text(folder / "text.gguf", seed)
    mmproj = vision_ggufs.write_qwen2vl_projector(folder / "mmproj.gguf", seed=seed, shape=shape)
    return export(text, folder / "hf-qwen2vl-vision", sees=prefix, tower=mmproj), text, mmproj


def write_hf_qwen25vl_vision(
    folder: Path, *, prefix: str = "model.", seed: int = 0, shape: VisionShape = vision_ggufs.QWEN25VL_VISION
) -> tuple[Path, Path, Path]:
    """``folder/hf-qwen25vl-vision/``, a Qwen2.5-VL (``Qwen2_5_VLForConditionalGeneration``: a Qwen 2
    text model with M-RoPE and biased Q/K/V, its tower and merger, all F16), and its twins
    ``folder/text.gguf`` and ``folder/mmproj.gguf``. ``prefix``: where the text model is, ``model.``
    as the Qwen releases and transformers 5 save it (the tower under ``visual.``), or
    ``model.language_model.`` as transformers 4.52-4.57 did (the tower under ``model.visual.``)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = _write_qwen2vl_text(folder / "text.gguf", seed)
    mmproj = vision_ggufs.write_qwen25vl_projector(folder / "mmproj.gguf", seed=seed, f16=True, shape=shape)
    return export(text, folder / "hf-qwen25vl-vision", sees=prefix, tower=mmproj), text, mmproj


def _write_qwen2vl_text(path: Path, seed: int) -> Path:
    """Qwen2-VL's and Qwen2.5-VL's text model (``qwen2vl``): Qwen 2 blocks with biased Q, K and V,
    M-RoPE, an output of its own; in F16."""
    f16 = gguf.GGMLQuantizationType.F16
    t = Tensors(gguf.GGUFWriter(str(path), "qwen2vl"), np.random.default_rng(seed), 0.5, f16)
    attention_header(t.w, TINY, "tiny-qwen2vl", f16)
    t.w.add_layer_norm_rms_eps(1e-6)
    t.w.add_rope_dimension_sections([2, 3, 3, 0])  # t, y, x: a head's 8 pairs, as Qwen2.5-VL's [16, 24, 24] of 64
    vocab = synthetic_vocab()
    add_tokenizer(t.w, vocab, None)
    t.matrix("token_embd.weight", len(vocab.tokens), TINY.n_embd)
    t.norm("output_norm.weight", TINY.n_embd)
    t.matrix("output.weight", len(vocab.tokens), TINY.n_embd)
    for i in range(TINY.n_layer):
        llama_block(t, TINY, f"blk.{i}.")
        for part, heads in (("attn_q", TINY.n_head), ("attn_k", TINY.n_head_kv), ("attn_v", TINY.n_head_kv)):
            t.f32(f"blk.{i}.{part}.bias", t.rng.standard_normal(heads * TINY.head_dim) * 0.1)
    finish(t.w)
    return path


def write_hf_qwen3vl_vision(
    folder: Path,
    *,
    prefix: str = "model.language_model.",
    seed: int = 0,
    shape: VisionShape = vision_ggufs.QWEN3VL_VISION,
    moe: bool = False,
) -> tuple[Path, Path, Path]:
    """``folder/hf-qwen3vl-vision/``, a Qwen3-VL (``Qwen3VLForConditionalGeneration``: a Qwen3 text
    model with interleaved M-RoPE, its tower with a learned position table and a deepstack merger,
    all F16), and its twins ``folder/text.gguf`` and ``folder/mmproj.gguf``; ``prefix`` as
    ``write_hf_qwen25vl_vision``'s (transformers 5 saves Qwen3-VL under ``model.language_model.``).
    ``moe``: a Qwen3-VL-MoE (``Qwen3VLMoeForConditionalGeneration``), a layer's experts in one
    ``gate_up_proj`` and one ``down_proj``, as transformers 5 saves them."""
    folder.mkdir(parents=True, exist_ok=True)
    f16 = gguf.GGMLQuantizationType.F16
    text = vision_ggufs.write_qwen3vl(
        folder / "text.gguf", seed=seed, qtype=f16, experts=QWEN3VL_EXPERTS if moe else None
    )
    mmproj = vision_ggufs.write_qwen3vl_projector(folder / "mmproj.gguf", seed=seed, f16=True, shape=shape)
    return export(text, folder / "hf-qwen3vl-vision", sees=prefix, tower=mmproj), text, mmproj


# The tiny Qwen 3.5's delta net: two key heads of two value heads each, whose order llama.cpp keeps
# otherwise than transformers; half of a full-attention head's 16 dimensions rotate (a quarter in
# the releases), their 4 pairs in M-RoPE sections for t, y and x.
QWEN35_SSM = {"conv_kernel": 4, "state_size": 16, "group_count": 2, "time_step_rank": 4, "inner_size": 64}
QWEN35_ROTARY = (8, [2, 1, 1, 0])


def write_hf_qwen35(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-qwen35/``, a Qwen 3.5 text model (``Qwen3_5ForCausalLM``: gated delta nets and a
    full-attention layer, F16), and ``folder/qwen35.gguf``, its twin."""
    return _exported(folder, "qwen35", lambda p: _write_qwen35_twin(p, seed, moe=False))


QWEN35_EXPERTS = (4, 2, 32)  # routed experts, used per token, width (the shared expert's too)
# Qwen3-VL-MoE's, narrower than half the hidden size, so that a fused tensor's orientation shows.
QWEN3VL_EXPERTS = (4, 2, 16)


def write_hf_qwen35moe(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-qwen35moe/``, a Qwen 3.5 mixture of experts (``Qwen3_5MoeForCausalLM``: the delta
    nets and attention of ``write_hf_qwen35``, routed experts each apart, as transformers 5.24 saves
    a Qwen 3.5 mixture, and a gated shared expert; F16), and ``folder/qwen35moe.gguf``, its twin."""
    return _exported(folder, "qwen35moe", lambda p: _write_qwen35_twin(p, seed, moe=True))


def _write_qwen35_twin(path: Path, seed: int, *, moe: bool, arch: str | None = None) -> Path:
    """The tiny Qwen 3.5 (``moe``: its mixture of experts; ``arch``: another delta net's, Qwen3-Next's)
    the Hugging Face folders are exported from."""
    return tower_ggufs.write_qwen35_text(
        path,
        arch or ("qwen35moe" if moe else "qwen35"),
        seed=seed,
        qtype=gguf.GGMLQuantizationType.F16,
        ssm=QWEN35_SSM,
        rotary=QWEN35_ROTARY,
        experts=QWEN35_EXPERTS if moe else None,
    )


def write_hf_qwen3next(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-qwen3next/``, a Qwen3-Next (``Qwen3NextForCausalLM``: ``write_hf_qwen35moe``'s delta
    net with its projections fused per key head, its value heads grouped, no M-RoPE; F16), and
    ``folder/qwen3next.gguf``, its twin."""
    return _exported(folder, "qwen3next", lambda p: _write_qwen35_twin(p, seed, moe=True, arch="qwen3next"))


def write_hf_qwen35_vision(
    folder: Path,
    *,
    prefix: str = "model.language_model.",
    seed: int = 0,
    shape: VisionShape = vision_ggufs.QWEN3VL_VISION,
    moe: bool = False,
) -> tuple[Path, Path, Path]:
    """``folder/hf-qwen35-vision/``, a Qwen 3.5 that sees (``Qwen3_5ForConditionalGeneration``:
    ``write_hf_qwen35``'s text model under ``prefix``, as the releases have it, and Qwen3-VL's tower
    without deepstack, all F16; ``moe``: ``Qwen3_5MoeForConditionalGeneration``, with
    ``write_hf_qwen35moe``'s), and its twins ``folder/text.gguf`` and ``folder/mmproj.gguf``."""
    folder.mkdir(parents=True, exist_ok=True)
    text = _write_qwen35_twin(folder / "text.gguf", seed, moe=moe)
    mmproj = vision_ggufs.write_qwen3vl_projector(
        folder / "mmproj.gguf", seed=seed, f16=True, shape=shape, deepstack=[]
    )
    return export(text, folder / "hf-qwen35-vision", sees=prefix, tower=mmproj), text, mmproj


def write_hf_gemma2(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-gemma2/``, a Gemma 2 checkpoint in F16, and ``folder/gemma2.gguf``, its twin."""
    return _exported(folder, "gemma2", lambda p: write_gemma2(p, seed=seed))


def write_hf_gemma(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-gemma/``, a Gemma (1) checkpoint in F16, and ``folder/gemma.gguf``, its twin."""
    return _exported(folder, "gemma", lambda p: write_gemma(p, seed=seed))


def write_gemma(path: Path, *, seed: int = 0) -> Path:
    """A tiny Gemma (1) in F16: a Llama's blocks, GeGLU (llama.cpp's gemma), its output the token
    embedding, norms of ones as llama.cpp stores them (with Gemma's +1 added)."""
    qtype = gguf.GGMLQuantizationType.F16
    t = Tensors(gguf.GGUFWriter(str(path), "gemma"), np.random.default_rng(seed), 0.5, qtype)
    w, s = t.w, TINY
    attention_header(w, s, "tiny-gemma", qtype)
    w.add_layer_norm_rms_eps(1e-6)
    vocab = unpadded_vocab()
    add_tokenizer(w, vocab, None)
    t.matrix("token_embd.weight", len(vocab.tokens), s.n_embd, std=0.5 / np.sqrt(s.n_embd))  # as write_gemma2's
    t.norm("output_norm.weight", s.n_embd)
    for i in range(s.n_layer):
        llama_block(t, s, f"blk.{i}.")
    finish(w)
    return path


def write_gemma2(path: Path, *, seed: int = 0) -> Path:
    """A tiny Gemma 2 in F16: softcapped attention scores and logits, every other layer's attention
    in a 16-token window, its output the token embedding (Gemma 2's always is), norms of ones as
    llama.cpp stores them (with Gemma's +1 added)."""
    qtype = gguf.GGMLQuantizationType.F16
    t = Tensors(gguf.GGUFWriter(str(path), "gemma2"), np.random.default_rng(seed), 0.5, qtype)
    w, s = t.w, TINY
    attention_header(w, s, "tiny-gemma2", qtype)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_sliding_window(16)
    w.add_attn_logit_softcapping(50.0)
    w.add_final_logit_softcapping(30.0)
    vocab = unpadded_vocab()
    add_tokenizer(w, vocab, None)
    # Scaled down, as write_gemma3's: Gemma multiplies the embeddings by sqrt(n_embd), and the
    # blocks' normed outputs would otherwise barely move the residual stream from the token's own.
    t.matrix("token_embd.weight", len(vocab.tokens), s.n_embd, std=0.5 / np.sqrt(s.n_embd))
    t.norm("output_norm.weight", s.n_embd)
    for i in range(s.n_layer):
        attention_block(t, s, f"blk.{i}.", post_norms=True, qk_norms=False)
    finish(w)
    return path


def write_hf_phi3(folder: Path, *, seed: int = 0, longrope: bool = False) -> tuple[Path, Path]:
    """``folder/hf-phi3/``, a Phi-3 checkpoint in F16 (fused QKV and gate-up projections), and
    ``folder/phi3.gguf``, its twin; ``longrope``: with Phi-3.5's long-context rope factors."""
    return _exported(folder, "phi3", lambda p: write_phi3(p, seed=seed, longrope=longrope))


def write_phi3(path: Path, *, seed: int = 0, longrope: bool = False) -> Path:
    """A tiny Phi-3 in F16: Q, K and V in one matrix, the FFN's gate and up in one (``2 * n_ff``
    rows), rotary embeddings on three quarters of each head (Phi-4-mini's partial rotary factor);
    ``longrope``: long and short rope factors for a context 4x the trained one (Phi-3.5's)."""
    qtype = gguf.GGMLQuantizationType.F16
    t = Tensors(gguf.GGUFWriter(str(path), "phi3"), np.random.default_rng(seed), 0.5, qtype)
    w, s = t.w, TINY
    model_header(w, s, "tiny-phi", qtype)  # not "phi3": llama.cpp would want Phi-3's tokens
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    w.add_head_count_kv(s.n_head_kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(s.head_dim * 3 // 4)
    w.add_rope_freq_base(10000.0)
    w.add_rope_scaling_orig_ctx_len(s.context_length // 4 if longrope else s.context_length)
    w.add_sliding_window(0)
    if longrope:
        w.add_rope_scaling_attn_factors(float(np.sqrt(1 + np.log(4) / np.log(s.context_length // 4))))
    vocab = synthetic_vocab()
    add_tokenizer(w, vocab, None)
    if longrope:
        n = s.head_dim * 3 // 8
        t.f32("rope_factors_long.weight", np.linspace(1.0, 4.0, n))
        t.f32("rope_factors_short.weight", np.linspace(1.0, 1.5, n))
    t.matrix("token_embd.weight", len(vocab.tokens), s.n_embd)
    t.norm("output_norm.weight", s.n_embd)
    t.matrix("output.weight", len(vocab.tokens), s.n_embd)
    gqa = s.n_head_kv * s.head_dim
    for i in range(s.n_layer):
        p = f"blk.{i}."
        t.norm(p + "attn_norm.weight", s.n_embd)
        t.matrix(p + "attn_qkv.weight", s.n_embd + 2 * gqa, s.n_embd)
        t.matrix(p + "attn_output.weight", s.n_embd, s.n_embd)
        t.norm(p + "ffn_norm.weight", s.n_embd)
        t.matrix(p + "ffn_up.weight", 2 * s.n_ff, s.n_embd)
        t.matrix(p + "ffn_down.weight", s.n_embd, s.n_ff)
    finish(w)
    return path


def write_hf_mistral(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-mistral/``, a Mistral checkpoint whose tokenizer is SentencePiece's
    ``tokenizer.model`` (trained here on a few lines, with byte fallback), and
    ``folder/mistral.gguf``, its twin, whose vocabulary the sentencepiece package read from it."""
    folder.mkdir(parents=True, exist_ok=True)
    proto = train_sentencepiece()
    twin = write_sentencepiece_llama(folder / "mistral.gguf", proto, seed=seed)
    return export(twin, folder / "hf-mistral", sentencepiece=proto), twin


def train_sentencepiece(size: int = 400, *, space_prefix: bool = True) -> bytes:
    """A byte-fallback BPE ``tokenizer.model`` as Llama 2's and Mistral's (``<unk>``, ``<s>``,
    ``</s>`` at 0, 1, 2; ``[INST]`` and ``[/INST]`` control tokens; no normalization; a ``▁`` put
    before the text unless not ``space_prefix``, as Gemma's). Needs the sentencepiece package."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_CORPUS.splitlines() * 4),
        model_writer=model,
        vocab_size=size,
        model_type="bpe",
        byte_fallback=True,
        character_coverage=1.0,
        hard_vocab_limit=False,
        control_symbols=["[INST]", "[/INST]"],
        # As Llama 2's and Mistral's: text kept as it is (llama.cpp applies no normalization either).
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=space_prefix,
        minloglevel=2,
    )
    return model.getvalue()


def write_sentencepiece_llama(path: Path, proto: bytes, *, seed: int = 0) -> Path:
    """A tiny Llama in F16 whose vocabulary is the SentencePiece model ``proto``, as llama.cpp's
    converter writes one: pieces, scores and types as the sentencepiece package reads them."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_proto=proto)
    tokens, scores, types = [], [], []
    for i in range(sp.vocab_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        kind = gguf.TokenType.NORMAL
        if sp.is_unknown(i):
            kind = gguf.TokenType.UNKNOWN
        elif sp.is_control(i):
            kind = gguf.TokenType.CONTROL
        elif sp.is_byte(i):
            kind = gguf.TokenType.BYTE
        types.append(int(kind))
    qtype = gguf.GGMLQuantizationType.F16
    t = Tensors(gguf.GGUFWriter(str(path), "llama"), np.random.default_rng(seed), 0.5, qtype)
    attention_header(t.w, TINY, "tiny-mistral", qtype)
    t.w.add_layer_norm_rms_eps(1e-5)
    t.w.add_tokenizer_model("llama")
    t.w.add_tokenizer_pre("default")
    t.w.add_token_list(tokens)
    t.w.add_token_scores(scores)
    t.w.add_token_types(types)
    t.w.add_unk_token_id(sp.unk_id())
    t.w.add_bos_token_id(sp.bos_id())
    t.w.add_eos_token_id(sp.eos_id())
    t.w.add_add_bos_token(True)
    t.w.add_add_eos_token(False)
    t.w.add_chat_template(MISTRAL_TEMPLATE)
    t.matrix("token_embd.weight", len(tokens), TINY.n_embd)
    t.norm("output_norm.weight", TINY.n_embd)
    t.matrix("output.weight", len(tokens), TINY.n_embd)
    for i in range(TINY.n_layer):
        llama_block(t, TINY, f"blk.{i}.")
    finish(t.w)
    return path


MISTRAL_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}[INST] {{ m['content'] }} [/INST]"
    "{% else %}{{ m['content'] }}{{ eos_token }}{% endif %}{% endfor %}"
)


def export(
    path: Path,
    folder: Path,
    *,
    dtype: str = "F16",
    shards: int = 1,
    template_file: bool = False,
    sentencepiece: bytes | None = None,
    sees: str | None = None,
    tower: Path | None = None,
    dequantized: bool = False,
) -> Path:
    """``folder``: the checkpoint the GGUF at ``path`` was converted from (quantized tensors
    dequantized, but gpt-oss's MXFP4 experts, kept as its releases keep them unless ``dequantized``).

    ``dtype``: its matrices' type (F16, BF16 or F32; vectors F32 as in most checkpoints); ``shards``:
    safetensors files it is split into; ``template_file``: the chat template in
    ``chat_template.jinja`` rather than ``tokenizer_config.json``; ``sentencepiece``: the
    ``tokenizer.model`` a SentencePiece vocabulary came from (else one is written from the GGUF's
    pieces; a ``llama`` with one is declared a ``MistralForCausalLM``). A ``llama``'s Q and K rows
    are put back in halves, Gemma's norms have llama.cpp's +1 taken off. ``sees``: a model that sees
    (``Gemma3ForConditionalGeneration``, a ``llama`` as ``Mistral3ForConditionalGeneration``), its
    text model's tensors under this prefix
    (``language_model.model.`` before transformers 4.52, ``model.language_model.`` since) beside a
    vision tower's, its settings under ``text_config``: the tower of the projector GGUF ``tower``
    (Gemma 3's: SigLIP's names, the projector's norm without Gemma's +1), else a stand-in."""
    reader = gguf.GGUFReader(path)
    kv = _fields(path)
    arch = str(kv["general.architecture"])
    heads, heads_kv = max(_per_layer(kv[f"{arch}.attention.head_count"])), _kv_heads(kv, arch)
    folder.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, np.ndarray] = {}
    rope: dict[str, list[float]] = {}  # Phi-3's long-context factors: config.json's, not tensors
    rotating = 1.0  # of a Gemma 4's full-attention head's pairs
    latent: dict[str, np.ndarray] = {}  # deepseek2's attn_k_b and attn_v_b, put together after
    for t in reader.tensors:
        if arch == "gpt-oss" and "_exps." in t.name:
            _gptoss_experts(tensors, t, dequantized)
            continue
        values = t.data if t.tensor_type in _FLOATS else gguf.quants.dequantize(t.data, t.tensor_type)
        data = np.asarray(values, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])
        if t.name == "rope_freqs.weight" and arch == "gemma4":  # its proportional rotation: config.json's
            rotating = float(np.mean(data == 1.0))
            continue
        if t.name.startswith("rope_factors_"):
            rope[t.name.split("_")[2].split(".")[0] + "_factor"] = data.tolist()
            continue
        part = t.name.split(".")[2] if t.name.startswith("blk.") else ""
        if arch in ("llama", "mistral3") and part in ("attn_q", "attn_k"):
            data = _halves(data, heads if part == "attn_q" else heads_kv)
        if arch == "glm4" and f"{arch}.rope.dimension_sections" in kv and part in ("attn_q", "attn_k"):
            data = _pairs(data, heads if part == "attn_q" else heads_kv, int(kv["glm4.rope.dimension_count"]))
        if arch in _GEMMAS and t.name.endswith("norm.weight") and not t.name.endswith("ssm_norm.weight"):
            data = data - 1
        if arch in ("qwen35", "qwen35moe", "qwen3next") and t.name.startswith("blk.") and part not in _EXPERTS:
            name, data = _qwen35_back(t.name, data, kv, arch)
            tensors[name] = data
            continue
        if arch in ("nemotron_h", "nemotron_h_moe"):
            tensors |= _nemotron_h_back(t.name, data)
            continue
        if arch == "gemma3n":
            tensors |= _gemma3n_back(t.name, data)
            continue
        if arch == "deepseek2" and part in ("attn_k_b", "attn_v_b"):
            latent[t.name] = data
            continue
        glm = arch == "deepseek2" and kv["tokenizer.ggml.pre"] == "glm4"
        if (arch in ("qwen3vlmoe", "gemma4", "llama4") or glm) and t.name.endswith(
            "_exps.weight"
        ):  # a layer's in one tensor, as transformers 5 saves them (Llama 4's transposed, after)
            within = {"gemma4": "experts", "llama4": "feed_forward.experts"}.get(arch, "mlp.experts")
            stem = f"model.layers.{t.name.split('.')[1]}.{within}"
            if part == "ffn_down_exps":
                tensors[f"{stem}.down_proj"] = data
            else:  # gate's rows, then up's, per expert
                fused = tensors.setdefault(f"{stem}.gate_up_proj", np.zeros((data.shape[0], 0, data.shape[2])))
                halves = (data, fused) if part == "ffn_gate_exps" else (fused, data)
                tensors[f"{stem}.gate_up_proj"] = np.concatenate(halves, axis=1)
            continue
        if part in _EXPERTS and t.name.endswith(".weight"):  # one tensor per expert
            layer = t.name.split(".")[1]
            for e, rows in enumerate(data):
                if arch == "llama":  # Mixtral's
                    tensors[f"model.layers.{layer}.block_sparse_moe.experts.{e}.{_MIXTRAL_EXPERTS[part]}.weight"] = rows
                elif arch == "lfm2moe":  # Mixtral's names, in LFM2's feed_forward
                    tensors[f"model.layers.{layer}.feed_forward.experts.{e}.{_MIXTRAL_EXPERTS[part]}.weight"] = rows
                else:
                    tensors[f"model.layers.{layer}.mlp.experts.{e}.{_EXPERTS[part]}.weight"] = rows
            continue
        if arch == "llama" and part == "ffn_gate_inp":
            tensors[f"model.layers.{t.name.split('.')[1]}.block_sparse_moe.gate.weight"] = data
            continue
        if arch in ("lfm2", "lfm2moe") and part == "shortconv":  # a Conv1d's (channels, 1, kernel)
            data = data[:, None, :] if t.name.endswith("conv.weight") else data
        tensors[_hf_name(t.name, arch)] = data
    if arch == "llama4":  # its experts (in, out), as Llama4TextExperts multiplies by them
        tensors |= {n: w.swapaxes(1, 2) for n, w in tensors.items() if ".feed_forward.experts." in n}
    if arch == "gemma-embedding":  # sentence-transformers' layout: the layers bare, the head in modules
        tensors = _sentence_modules(folder, tensors)
    for name, keys in latent.items():  # each head's K rows (k_b transposed), then its V rows
        if name.endswith("attn_k_b.weight"):
            values = latent[name.replace("attn_k_b", "attn_v_b")]
            rows = np.concatenate([keys.swapaxes(1, 2), values], axis=1)
            tensors[f"model.layers.{name.split('.')[1]}.self_attn.kv_b_proj.weight"] = rows.reshape(-1, rows.shape[2])
    config = _config(kv, arch) | {"tie_word_embeddings": "lm_head.weight" not in tensors}
    if arch == "gemma4":
        config |= _gemma4_config(kv, tensors, rotating)
    if rope:
        config["rope_scaling"] = {"type": "longrope", **rope}
        config["max_position_embeddings"] = int(kv[f"{arch}.context_length"])
    if sees is not None:
        tensors, config = _seeing(tensors, config, sees, tower)
        if config["model_type"] in ("glm_ocr", "glm4v"):  # its picture's markers, by the ids of this vocabulary
            tokens = list(kv["tokenizer.ggml.tokens"])
            names = ("image_start_token_id", "image_end_token_id", "image_token_id")
            config |= {k: tokens.index(t) for k, t in zip(names, glm4_ggufs.OCR_IMAGE_TOKENS, strict=True)}
        if tower is not None:
            _write_json(folder / "preprocessor_config.json", _processor(tower))
    _write_safetensors(folder, tensors, dtype, shards)
    if kv["tokenizer.ggml.model"] == "llama":  # SentencePiece's
        if arch == "llama":
            config["architectures"] = ["MistralForCausalLM"]
        model = sentencepiece if sentencepiece is not None else sentencepiece_model(kv)
        (folder / "tokenizer.model").write_bytes(model)
    elif kv["tokenizer.ggml.model"] == "gemma4":
        _write_gemma4_tokenizer(folder, kv)
    else:
        _write_tokenizer(folder, kv)
    _write_settings(folder, kv, template_file)
    _write_json(folder / "config.json", config)
    return folder


def _seeing(
    tensors: dict[str, np.ndarray], config: dict[str, Any], prefix: str, tower: Path | None
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The text model's tensors and settings as a Gemma 3 or a Mistral 3 that sees holds them, with
    the tower of the projector GGUF ``tower`` (or a stand-in); or a Qwen-VL (``_qwen_seeing``)."""
    if config["model_type"] in (
        "qwen2_5_vl_text",
        "qwen3_vl_text",
        "qwen3_vl_moe_text",
        "qwen3_5_text",
        "qwen3_5_moe_text",
    ):
        assert tower is not None, "a Qwen-VL is exported with its tower"
        return _qwen_seeing(tensors, config, prefix, tower)
    if config["model_type"] == "glm4":
        assert tower is not None, "a GLM-OCR is exported with its tower"
        return _glmv_seeing(tensors, config, prefix, tower)
    if config["model_type"] == "gemma4_text":
        assert tower is not None, "a Gemma 4 is exported with its tower"
        return _gemma4_seeing(tensors, config, prefix, tower)
    if config["model_type"] == "lfm2":
        assert tower is not None, "an LFM2-VL is exported with its tower"
        return _lfm2_seeing(tensors, config, prefix, tower)
    head = "language_model." if prefix.startswith("language_model.") else ""  # where lm_head goes
    moved = {(prefix + n.removeprefix("model.") if n.startswith("model.") else head + n): v for n, v in tensors.items()}
    tower_root = "model." if prefix.startswith("model.") else ""
    if tower is None:
        moved[tower_root + "vision_tower.vision_model.embeddings.patch_embedding.weight"] = np.zeros((8, 3, 2, 2))
        moved[tower_root + "multi_modal_projector.mm_input_projection_weight"] = np.zeros((8, 64))
        vision: dict[str, Any] = {"hidden_size": 8, "patch_size": 2}
    else:
        vision = _tower(tower, moved, tower_root)
    seeing = "Mistral3" if config["model_type"] == "llama" else "Gemma3"
    text_type = "mistral" if seeing == "Mistral3" else "gemma3_text"  # as transformers names the text model
    text = {k: v for k, v in config.items() if k != "architectures"} | {"model_type": text_type}
    wrapped: dict[str, Any] = {
        "architectures": [f"{seeing}ForConditionalGeneration"],
        "model_type": seeing.lower(),
        "text_config": text,
        "vision_config": vision,
        "tie_word_embeddings": config["tie_word_embeddings"],  # transformers reads it here, not in text_config
    }
    if tower is not None and seeing == "Gemma3":
        wrapped["mm_tokens_per_image"] = _processor(tower)["image_seq_length"]
    elif tower is not None:
        wrapped |= {
            "spatial_merge_size": int(_fields(tower)["clip.vision.spatial_merge_size"]),
            "multimodal_projector_bias": False,
            "projector_hidden_act": "gelu",
            "vision_feature_layer": -1,
        }
    return moved, wrapped


# A Gemma 3 projector's tensors by Hugging Face's names (SigLIP's, under vision_tower.vision_model.).
_TOWER_GLOBAL = {
    "v.patch_embd": "embeddings.patch_embedding",
    "v.position_embd": "embeddings.position_embedding",
    "v.post_ln": "post_layernorm",
}
_TOWER_PARTS = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_out": "self_attn.out_proj",
    "ln1": "layer_norm1",
    "ln2": "layer_norm2",
    "ffn_up": "mlp.fc1",
    "ffn_down": "mlp.fc2",
}


_PIXTRAL_PARTS = {
    "attn_q": "attention.q_proj",
    "attn_k": "attention.k_proj",
    "attn_v": "attention.v_proj",
    "attn_out": "attention.o_proj",
    "ln1": "attention_norm",
    "ln2": "ffn_norm",
    "ffn_gate": "feed_forward.gate_proj",
    "ffn_up": "feed_forward.up_proj",
    "ffn_down": "feed_forward.down_proj",
}
_PIXTRAL_GLOBAL = {
    "v.patch_embd.weight": "vision_tower.patch_conv.weight",
    "v.pre_ln.weight": "vision_tower.ln_pre.weight",
    "mm.input_norm.weight": "multi_modal_projector.norm.weight",
    "mm.patch_merger.weight": "multi_modal_projector.patch_merger.merging_layer.weight",
    "mm.1.weight": "multi_modal_projector.linear_1.weight",
    "mm.2.weight": "multi_modal_projector.linear_2.weight",
}


def _pixtral_tower(path: Path, tensors: dict[str, np.ndarray], root: str) -> dict[str, Any]:
    """A Pixtral projector GGUF's tensors added by Mistral 3's names (Q and K rows back in halves;
    the [IMG_BREAK] row is the text model's own); its vision_config."""
    kv = _fields(path)
    heads = int(kv["clip.vision.attention.head_count"])
    for t in gguf.GGUFReader(path).tensors:
        data = np.asarray(t.data, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])
        if t.name in _PIXTRAL_GLOBAL:
            tensors[root + _PIXTRAL_GLOBAL[t.name]] = data
        elif t.name.startswith("v.blk."):
            _, _, layer, part, suffix = t.name.split(".")
            if part in ("attn_q", "attn_k"):
                data = _halves(data, heads) if data.ndim == 2 else _halves(data[:, None], heads)[:, 0]
            tensors[f"{root}vision_tower.transformer.layers.{layer}.{_PIXTRAL_PARTS[part]}.{suffix}"] = data
    n_embd = int(kv["clip.vision.embedding_length"])
    return {
        "model_type": "pixtral",
        "hidden_size": n_embd,
        "intermediate_size": int(kv["clip.vision.feed_forward_length"]),
        "num_hidden_layers": int(kv["clip.vision.block_count"]),
        "num_attention_heads": heads,
        "head_dim": n_embd // heads,
        "image_size": int(kv["clip.vision.image_size"]),
        "patch_size": int(kv["clip.vision.patch_size"]),
        "hidden_act": "silu" if kv.get("clip.use_silu") else "gelu",
        "rope_theta": 10000.0,
    }


# A Gemma 4 projector's block tensors by Hugging Face's names (its linears' weights under ``.linear``).
_GEMMA4_TOWER_PARTS = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_out": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ln1": "input_layernorm",
    "attn_post_norm": "post_attention_layernorm",
    "ln2": "pre_feedforward_layernorm",
    "ffn_post_norm": "post_feedforward_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_GEMMA4_LINEARS = ("attn_q", "attn_k", "attn_v", "attn_out", "ffn_gate", "ffn_up", "ffn_down")
_UNCLAMPED = {"input_min": -np.inf, "input_max": np.inf, "output_min": -np.inf, "output_max": np.inf}
# Its audio tower's (a Conformer's) by Hugging Face's names: outside the blocks, then a block's
# (its clamped linears' weights under ``.linear``), llama.cpp's conv_norm and norm_conv swapped.
_GEMMA4_AUDIO_GLOBAL = {
    "a.conv1d.0.weight": "subsample_conv_projection.layer0.conv.weight",
    "a.conv1d.0.norm.weight": "subsample_conv_projection.layer0.norm.weight",
    "a.conv1d.1.weight": "subsample_conv_projection.layer1.conv.weight",
    "a.conv1d.1.norm.weight": "subsample_conv_projection.layer1.norm.weight",
    "a.input_projection.weight": "subsample_conv_projection.input_proj_linear.weight",
    "a.pre_encode.out.weight": "output_proj.weight",
    "a.pre_encode.out.bias": "output_proj.bias",
}
_GEMMA4_AUDIO_PARTS = {
    "ffn_norm": "feed_forward1.pre_layer_norm",
    "ffn_up": "feed_forward1.ffw_layer_1",
    "ffn_down": "feed_forward1.ffw_layer_2",
    "ffn_post_norm": "feed_forward1.post_layer_norm",
    "ffn_norm_1": "feed_forward2.pre_layer_norm",
    "ffn_up_1": "feed_forward2.ffw_layer_1",
    "ffn_down_1": "feed_forward2.ffw_layer_2",
    "ffn_post_norm_1": "feed_forward2.post_layer_norm",
    "attn_pre_norm": "norm_pre_attn",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_out": "self_attn.post",
    "attn_k_rel": "self_attn.relative_k_proj",
    "attn_post_norm": "norm_post_attn",
    "conv_norm": "lconv1d.pre_layer_norm",
    "conv_pw1": "lconv1d.linear_start",
    "conv_dw": "lconv1d.depthwise_conv1d",
    "norm_conv": "lconv1d.conv_norm",
    "conv_pw2": "lconv1d.linear_end",
    "ln2": "norm_out",
}
_GEMMA4_AUDIO_LINEARS = (
    "ffn_up",
    "ffn_down",
    "ffn_up_1",
    "ffn_down_1",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_out",
    "conv_pw1",
    "conv_pw2",
)


def _lfm2_seeing(
    tensors: dict[str, np.ndarray], config: dict[str, Any], prefix: str, tower: Path
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """An LFM2-VL (``Lfm2VlForConditionalGeneration``): the text model under ``prefix``, SigLIP2
    under ``model.vision_tower.vision_model.`` (its patch kernel as the linear over each patch's
    rows, columns and channels NaFlex keeps), the projector's layer norm and MLP."""
    moved = {(prefix + n.removeprefix("model.") if n.startswith("model.") else n): v for n, v in tensors.items()}
    root = "model.vision_tower.vision_model."
    for t in gguf.GGUFReader(tower).tensors:
        data = np.asarray(t.data, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])
        stem, _, suffix = t.name.rpartition(".")
        if stem.startswith("mm."):
            part = {"mm.input_norm": "layer_norm", "mm.1": "linear_1", "mm.2": "linear_2"}[stem]
            moved[f"model.multi_modal_projector.{part}.{suffix}"] = data
        elif stem in _TOWER_GLOBAL:
            if t.name == "v.patch_embd.weight":  # (width, 3, p, p) -> a linear over (p, p, 3)
                data = data.transpose(0, 2, 3, 1).reshape(data.shape[0], -1)
            moved[f"{root}{_TOWER_GLOBAL[stem]}.{suffix}"] = data
        else:
            _, _, layer, part = stem.split(".")
            moved[f"{root}encoder.layers.{layer}.{_TOWER_PARTS[part]}.{suffix}"] = data
    kv = _fields(tower)
    n_embd = int(kv["clip.vision.embedding_length"])
    vision = {
        "model_type": "siglip2_vision_model",
        "hidden_size": n_embd,
        "intermediate_size": int(kv["clip.vision.feed_forward_length"]),
        "num_hidden_layers": int(kv["clip.vision.block_count"]),
        "num_attention_heads": int(kv["clip.vision.attention.head_count"]),
        "num_patches": moved[f"{root}embeddings.position_embedding.weight"].shape[0],
        "patch_size": int(kv["clip.vision.patch_size"]),
        "layer_norm_eps": float(kv["clip.vision.attention.layer_norm_epsilon"]),
        "vision_use_head": False,
    }
    text = {k: v for k, v in config.items() if k != "architectures"}
    wrapped = {
        "architectures": ["Lfm2VlForConditionalGeneration"],
        "model_type": "lfm2_vl",
        "text_config": text,
        "vision_config": vision,
        "downsample_factor": int(kv["clip.vision.projector.scale_factor"]),
        "projector_hidden_size": moved["model.multi_modal_projector.linear_1.weight"].shape[0],
        "projector_hidden_act": "gelu",
        "projector_bias": True,
        "projector_use_layernorm": "model.multi_modal_projector.layer_norm.weight" in moved,
        "vision_feature_layer": -1,
        "image_token_id": len(moved[prefix + "embed_tokens.weight"]) - 1,
        "tie_word_embeddings": config["tie_word_embeddings"],
    }
    return moved, wrapped


def _gemma4_seeing(
    tensors: dict[str, np.ndarray], config: dict[str, Any], prefix: str, tower: Path
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """A Gemma 4 text model's tensors and settings as ``Gemma4ForConditionalGeneration`` holds them,
    beside the vision tower of the projector GGUF ``tower`` (its linears clamped, as the releases'
    are: each clamp the twin lacks infinite, transformers' default)."""
    moved = {prefix + n.removeprefix("model."): v for n, v in tensors.items()}
    kv = _fields(tower)
    audio = _gemma4_audio_tower(tower, moved) if kv.get("clip.has_audio_encoder") else None
    heads, n_embd = int(kv["clip.vision.attention.head_count"]), int(kv["clip.vision.embedding_length"])
    patch = int(kv["clip.vision.patch_size"])
    for t in gguf.GGUFReader(tower).tensors:
        data = np.asarray(t.data, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])
        if t.name.startswith(("a.", "mm.a.")):  # the audio tower's (``_gemma4_audio_tower``)
            continue
        if t.name == "v.patch_embd.weight":  # a kernel, as a linear over a patch's rows, columns, channels
            kernel = data.transpose(0, 2, 3, 1).reshape(n_embd, -1)
            moved["model.vision_tower.patch_embedder.input_proj.weight"] = kernel
        elif t.name == "v.position_embd.weight":
            moved["model.vision_tower.patch_embedder.position_embedding_table"] = data
        elif t.name in ("v.std_bias", "v.std_scale"):
            moved[f"model.vision_tower.{t.name[2:]}"] = data
        elif t.name == "mm.input_projection.weight":
            moved["model.embed_vision.embedding_projection.weight"] = data
        else:
            _, _, layer, part, suffix = t.name.split(".")
            stem = f"model.vision_tower.encoder.layers.{layer}.{_GEMMA4_TOWER_PARTS[part]}"
            moved[f"{stem}.linear.weight" if part in _GEMMA4_LINEARS and suffix == "weight" else f"{stem}.{suffix}"] = (
                data.reshape(()) if suffix in _UNCLAMPED else data
            )
    blocks = range(int(kv["clip.vision.block_count"]))
    linears = [
        f"model.vision_tower.encoder.layers.{i}.{_GEMMA4_TOWER_PARTS[p]}" for i in blocks for p in _GEMMA4_LINEARS
    ]
    _unclamped(moved, linears)
    vision = {
        "model_type": "gemma4_vision",
        "hidden_size": n_embd,
        "intermediate_size": int(kv["clip.vision.feed_forward_length"]),
        "num_hidden_layers": int(kv["clip.vision.block_count"]),
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "head_dim": n_embd // heads,
        "patch_size": patch,
        "position_embedding_size": int(moved["model.vision_tower.patch_embedder.position_embedding_table"].shape[1]),
        "pooling_kernel_size": int(kv.get("clip.vision.projector.scale_factor", 3)),
        "use_clipped_linears": True,
        "standardize": "v.std_bias" in {t.name for t in gguf.GGUFReader(tower).tensors},
        "rms_norm_eps": float(kv["clip.vision.attention.layer_norm_epsilon"]),
        "hidden_activation": "gelu_pytorch_tanh",
    }
    text = {k: v for k, v in config.items() if k != "architectures"}
    wrapped = {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "text_config": text,
        "vision_config": vision,
        "audio_config": audio,
        "tie_word_embeddings": config["tie_word_embeddings"],
    }
    return moved, wrapped


def _unclamped(moved: dict[str, np.ndarray], linears: list[str]) -> None:
    """Each of Gemma 4's clipped ``linears`` given the clamps its twin lacks: infinite, which clamp
    nothing (transformers' defaults)."""
    for linear in linears:
        for suffix, bound in _UNCLAMPED.items():
            moved.setdefault(f"{linear}.{suffix}", np.array(bound, dtype=np.float32))


def _gemma4_audio_tower(tower: Path, moved: dict[str, np.ndarray]) -> dict[str, Any]:
    """The projector GGUF ``tower``'s audio side added to ``moved`` by Hugging Face's names (the
    depthwise kernel with its Conv1d's unit axis, the per-dimension scale before llama.cpp's
    softplus, each clamp the twin lacks infinite); its audio_config."""
    kv = _fields(tower)
    for t in gguf.GGUFReader(tower).tensors:
        if not t.name.startswith(("a.", "mm.a.")):
            continue
        data = np.asarray(t.data, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])
        if t.name == "mm.a.input_projection.weight":
            moved["model.embed_audio.embedding_projection.weight"] = data
            continue
        if t.name in _GEMMA4_AUDIO_GLOBAL:
            moved[f"model.audio_tower.{_GEMMA4_AUDIO_GLOBAL[t.name]}"] = data
            continue
        _, _, layer, part, suffix = t.name.split(".")
        stem = f"model.audio_tower.layers.{layer}"
        if part == "per_dim_scale":  # softplus undone: transformers applies it itself
            moved[f"{stem}.self_attn.per_dim_scale"] = np.log(np.expm1(data))
        elif part in _GEMMA4_AUDIO_LINEARS and suffix == "weight":
            moved[f"{stem}.{_GEMMA4_AUDIO_PARTS[part]}.linear.weight"] = data
        else:
            value = data[:, None, :] if part == "conv_dw" else data.reshape(()) if suffix in _UNCLAMPED else data
            moved[f"{stem}.{_GEMMA4_AUDIO_PARTS[part]}.{suffix}"] = value
    blocks = range(int(kv["clip.audio.block_count"]))
    _unclamped(
        moved, [f"model.audio_tower.layers.{i}.{_GEMMA4_AUDIO_PARTS[p]}" for i in blocks for p in _GEMMA4_AUDIO_LINEARS]
    )
    conv = "model.audio_tower.subsample_conv_projection.layer{}.conv.weight"
    return {
        "model_type": "gemma4_audio",
        "hidden_size": int(kv["clip.audio.embedding_length"]),
        "num_hidden_layers": int(kv["clip.audio.block_count"]),
        "num_attention_heads": int(kv["clip.audio.attention.head_count"]),
        "subsampling_conv_channels": [int(moved[conv.format(i)].shape[0]) for i in (0, 1)],
        "conv_kernel_size": int(moved["model.audio_tower.layers.0.lconv1d.depthwise_conv1d.weight"].shape[2]),
        "output_proj_dims": int(moved["model.audio_tower.output_proj.weight"].shape[0]),
        "use_clipped_linears": True,
        "rms_norm_eps": float(kv["clip.audio.attention.layer_norm_epsilon"]),
    }


def _tower(path: Path, tensors: dict[str, np.ndarray], root: str) -> dict[str, Any]:
    """The projector GGUF's tensors added to ``tensors`` by Hugging Face's names; its vision_config."""
    if _fields(path)["clip.projector_type"] == "pixtral":
        return _pixtral_tower(path, tensors, root)
    for t in gguf.GGUFReader(path).tensors:
        data = np.asarray(t.data, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])
        stem, _, suffix = t.name.rpartition(".")
        if stem == "mm.input_projection":
            tensors[root + "multi_modal_projector.mm_input_projection_weight"] = data
        elif stem == "mm.soft_emb_norm":
            tensors[root + "multi_modal_projector.mm_soft_emb_norm.weight"] = data - 1
        elif stem in _TOWER_GLOBAL:
            tensors[f"{root}vision_tower.vision_model.{_TOWER_GLOBAL[stem]}.{suffix}"] = data
        else:
            _, _, layer, part = stem.split(".")
            tensors[f"{root}vision_tower.vision_model.encoder.layers.{layer}.{_TOWER_PARTS[part]}.{suffix}"] = data
    kv = _fields(path)
    return {
        "model_type": "siglip_vision_model",
        "hidden_size": int(kv["clip.vision.embedding_length"]),
        "intermediate_size": int(kv["clip.vision.feed_forward_length"]),
        "num_hidden_layers": int(kv["clip.vision.block_count"]),
        "num_attention_heads": int(kv["clip.vision.attention.head_count"]),
        "image_size": int(kv["clip.vision.image_size"]),
        "patch_size": int(kv["clip.vision.patch_size"]),
        "layer_norm_eps": float(kv["clip.vision.attention.layer_norm_epsilon"]),
        "vision_use_head": False,
    }


# A Qwen-VL by its projector's type: its architecture and model_type, and its FFN's names (Qwen
# 2.5's gated, Qwen 2's and 3's not).
_QWEN_VL = {
    "qwen2vl_merger": ("Qwen2VLForConditionalGeneration", "qwen2_vl"),
    "qwen2.5vl_merger": ("Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl"),
    "qwen3vl_merger": ("Qwen3VLForConditionalGeneration", "qwen3_vl"),
}
_QWEN_BLOCK = {"attn_qkv": "attn.qkv", "attn_out": "attn.proj", "ln1": "norm1", "ln2": "norm2"}
_QWEN_FFN = {
    "qwen2vl_merger": {"ffn_up": "mlp.fc1", "ffn_down": "mlp.fc2"},
    "qwen2.5vl_merger": {"ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"},
    "qwen3vl_merger": {"ffn_up": "mlp.linear_fc1", "ffn_down": "mlp.linear_fc2"},
}
_DEEPSTACK_PARTS = {"norm": "norm", "fc1": "linear_fc1", "fc2": "linear_fc2"}


def _qwen_seeing(
    tensors: dict[str, np.ndarray], config: dict[str, Any], prefix: str, tower: Path
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """A Qwen-VL's tensors (the text model's under ``prefix``; the tower's under ``visual.``, or
    ``model.visual.`` where the text model is under ``model.language_model.``) and settings: a
    Qwen2.5-VL's text settings at the top, as the Qwen releases have them, where its text model
    is under ``model.``; else under ``text_config``."""
    moved = {(prefix + n.removeprefix("model.") if n.startswith("model.") else n): v for n, v in tensors.items()}
    root = "model.visual." if prefix == "model.language_model." else "visual."
    vision = _qwen_tower(tower, moved, root)
    architecture, seeing = _QWEN_VL[_fields(tower)["clip.projector_type"]]
    if config["model_type"] == "qwen3_vl_moe_text":
        architecture, seeing = config["architectures"][0], "qwen3_vl_moe"
    if config["model_type"].startswith("qwen3_5"):  # Qwen3-VL's tower without deepstack
        seeing = config["model_type"].removesuffix("_text")
        architecture = config["architectures"][0].replace("ForCausalLM", "ForConditionalGeneration")
        vision["model_type"] = seeing
    wrapped: dict[str, Any] = {"architectures": [architecture], "model_type": seeing, "vision_config": vision}
    if seeing in ("qwen2_vl", "qwen2_5_vl") and prefix == "model.":
        return moved, config | wrapped | {"rope_scaling": {"type": "mrope", **config["rope_scaling"]}}
    text = {k: v for k, v in config.items() if k not in ("architectures", "tie_word_embeddings")}
    text["model_type"] = f"{seeing}_text"
    return moved, wrapped | {"text_config": text, "tie_word_embeddings": config["tie_word_embeddings"]}


def _projector_tensors(path: Path) -> dict[str, np.ndarray]:
    """The projector GGUF's tensors by name, in F32, numpy's way round."""
    return {
        t.name: np.asarray(t.data, np.float32).reshape([int(d) for d in reversed(t.shape)])
        for t in gguf.GGUFReader(path).tensors
    }


def _conv3d(read: dict[str, np.ndarray]) -> np.ndarray:
    """The two frames' patch kernels taken out of ``read`` as the checkpoint's one Conv3D kernel."""
    return np.stack([read.pop("v.patch_embd.weight"), read.pop("v.patch_embd.weight.1")], axis=2)


def _qwen_tower(path: Path, tensors: dict[str, np.ndarray], root: str) -> dict[str, Any]:
    """A Qwen-VL projector GGUF's tensors added under ``root`` by Hugging Face's names (the two
    frames' kernels as one Conv3D, Qwen 2.5's Q, K and V fused); its vision_config."""
    kv = _fields(path)
    kind = str(kv["clip.projector_type"])
    qwen3 = kind == "qwen3vl_merger"
    deepstack = [i for i, on in enumerate(kv.get("clip.vision.is_deepstack_layers", [])) if on]
    blocks = _QWEN_BLOCK | _QWEN_FFN[kind]
    merger = {"v.post_ln": "norm" if qwen3 else "ln_q", "mm.0": "linear_fc1" if qwen3 else "mlp.0"}
    merger["mm.2"] = "linear_fc2" if qwen3 else "mlp.2"
    read = _projector_tensors(path)
    tensors[root + "patch_embed.proj.weight"] = _conv3d(read)
    for name, data in read.items():
        stem, _, suffix = name.rpartition(".")
        if stem == "v.patch_embd":
            tensors[f"{root}patch_embed.proj.{suffix}"] = data
        elif stem == "v.position_embd":
            tensors[f"{root}pos_embed.{suffix}"] = data
        elif stem in merger:
            tensors[f"{root}merger.{merger[stem]}.{suffix}"] = data
        elif stem.startswith("v.deepstack."):
            _, _, block, part = stem.split(".")
            tensors[f"{root}deepstack_merger_list.{deepstack.index(int(block))}.{_DEEPSTACK_PARTS[part]}.{suffix}"] = (
                data
            )
        elif stem.endswith(("attn_q", "attn_k", "attn_v")):
            continue  # fused below
        else:
            _, _, layer, part = stem.split(".")
            tensors[f"{root}blocks.{layer}.{blocks[part]}.{suffix}"] = data
    n_layer = int(kv["clip.vision.block_count"])
    for i in range(n_layer):
        for suffix in ("weight", "bias") if f"v.blk.{i}.attn_q.weight" in read else ():
            parts = [read[f"v.blk.{i}.attn_{x}.{suffix}"] for x in "qkv"]
            tensors[f"{root}blocks.{i}.attn.qkv.{suffix}"] = np.concatenate(parts)
    n_embd, patch = int(kv["clip.vision.embedding_length"]), int(kv["clip.vision.patch_size"])
    n_ff = int(kv["clip.vision.feed_forward_length"])
    if kind == "qwen2vl_merger":  # its width is embed_dim; hidden_size is the merger's output
        return {
            "model_type": "qwen2_vl",
            "depth": n_layer,
            "embed_dim": n_embd,
            "hidden_size": int(kv["clip.vision.projection_dim"]),
            "mlp_ratio": n_ff // n_embd,
            "num_heads": int(kv["clip.vision.attention.head_count"]),
            "patch_size": patch,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "in_channels": 3,
            "hidden_act": "quick_gelu",
            "image_size": int(kv["clip.vision.image_size"]),
        }
    vision: dict[str, Any] = {
        "model_type": _QWEN_VL[kind][1],
        "depth": n_layer,
        "hidden_size": n_embd,
        "intermediate_size": n_ff,
        "num_heads": int(kv["clip.vision.attention.head_count"]),
        "out_hidden_size": int(kv["clip.vision.projection_dim"]),
        "patch_size": patch,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "in_channels": 3,
    }
    if qwen3:
        side = int(kv["clip.vision.image_size"]) // patch
        return vision | {
            "hidden_act": "gelu_pytorch_tanh",
            "num_position_embeddings": side * side,
            "deepstack_visual_indexes": deepstack,
        }
    period = int(kv["clip.vision.n_wa_pattern"])
    return vision | {
        "hidden_act": "silu",
        "image_size": int(kv["clip.vision.image_size"]),
        "window_size": 112,
        "fullatt_block_indexes": list(range(period - 1, n_layer, period)),
    }


# GLM-OCR's tower by Hugging Face's names: outside its blocks, and a block's (``model.visual.``).
_GLMV_TOWER = {
    "v.patch_embd": "patch_embed.proj",
    "v.norm_embd": "post_conv_layernorm",  # GLM-4.1V's
    "v.position_embd": "embeddings.position_embedding",
    "v.post_ln": "post_layernorm",
    "mm.patch_merger": "downsample",
    "mm.model.fc": "merger.proj",
    "mm.post_norm": "merger.post_projection_norm",
    "mm.gate": "merger.gate_proj",
    "mm.up": "merger.up_proj",
    "mm.down": "merger.down_proj",
}
_GLMOCR_BLOCK = {
    "attn_qkv": "attn.qkv",
    "attn_out": "attn.proj",
    "attn_q_norm": "attn.q_norm",
    "attn_k_norm": "attn.k_norm",
    "ln1": "norm1",
    "ln2": "norm2",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def _glmv_seeing(
    tensors: dict[str, np.ndarray], config: dict[str, Any], prefix: str, tower: Path
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """GLM-OCR as its release keeps it: the text model under ``prefix`` with a multi-token-prediction
    layer after its last (which converters leave out), the tower and merger under ``model.visual.``
    (the two frames' kernels as one Conv3D), its M-RoPE in ``rope_parameters`` (``export`` adds its
    picture's token ids); or GLM-4.1V, told by its tower's position table, without that layer."""
    moved = {(prefix + n.removeprefix("model.") if n.startswith("model.") else n): v for n, v in tensors.items()}
    kv = _fields(tower)
    read = _projector_tensors(tower)
    ocr = "v.position_embd.weight" not in read
    n_layer, n_embd = config["num_hidden_layers"], config["hidden_size"]
    mtp = f"{prefix}layers.{n_layer}."
    if ocr:
        moved |= {mtp + "eh_proj.weight": np.zeros((n_embd, 2 * n_embd)), mtp + "enorm.weight": np.ones(n_embd)}
    moved["model.visual.patch_embed.proj.weight"] = _conv3d(read)
    for name, data in read.items():
        stem, _, suffix = name.rpartition(".")
        if stem in _GLMV_TOWER:
            moved[f"model.visual.{_GLMV_TOWER[stem]}.{suffix}"] = data
        else:
            _, _, layer, part = stem.split(".")
            moved[f"model.visual.blocks.{layer}.{_GLMOCR_BLOCK[part]}.{suffix}"] = data
    outer = ("architectures", "tie_word_embeddings", "rope_theta", "partial_rotary_factor")
    text = {k: v for k, v in config.items() if k not in outer}
    seeing = "glm_ocr" if ocr else "glm4v"
    text |= {"model_type": f"{seeing}_text"} | ({"num_nextn_predict_layers": 1} if ocr else {})
    vision = {
        "model_type": f"{seeing}_vision",
        "depth": int(kv["clip.vision.block_count"]),
        "hidden_size": int(kv["clip.vision.embedding_length"]),
        "num_heads": int(kv["clip.vision.attention.head_count"]),
        "intermediate_size": int(kv["clip.vision.feed_forward_length"]),
        "out_hidden_size": int(kv["clip.vision.projection_dim"]),
        "image_size": int(kv["clip.vision.image_size"]),
        "patch_size": int(kv["clip.vision.patch_size"]),
        "spatial_merge_size": int(kv["clip.vision.spatial_merge_size"]),
        "temporal_patch_size": 2,
        "in_channels": 3,
        "hidden_act": "silu",
        "attention_bias": ocr,
        "rms_norm_eps": float(kv["clip.vision.attention.layer_norm_epsilon"]),
    }
    wrapped = {
        "architectures": ["GlmOcrForConditionalGeneration" if ocr else "Glm4vForConditionalGeneration"],
        "model_type": seeing,
        "text_config": text,
        "vision_config": vision,
        "tie_word_embeddings": config["tie_word_embeddings"],
    }
    return moved, wrapped


def _processor(path: Path) -> dict[str, Any]:
    """``preprocessor_config.json``: the pixel statistics and image tokens of the projector at ``path``."""
    kv = _fields(path)
    if kv.get("clip.projector_type") == "glm4v":  # GLM-OCR's, as its release states it
        patch = int(kv["clip.vision.patch_size"])
        return {
            "image_processor_type": "Glm46VImageProcessor",
            "size": {"shortest_edge": 8 * (2 * patch) ** 2, "longest_edge": 4096 * (2 * patch) ** 2},
            "patch_size": patch,
            "temporal_patch_size": 2,
            "merge_size": 2,
            "image_mean": [float(x) for x in kv["clip.vision.image_mean"]],
            "image_std": [float(x) for x in kv["clip.vision.image_std"]],
        }
    if kv.get("clip.vision.projector_type") == "gemma4v":  # its pixels scaled by the model, not the processor
        return {
            "image_processor_type": "Gemma4ImageProcessor",
            "do_normalize": False,
            "image_mean": [0.0, 0.0, 0.0],
            "image_std": [1.0, 1.0, 1.0],
            "patch_size": int(kv["clip.vision.patch_size"]),
            "pooling_kernel_size": int(kv.get("clip.vision.projector.scale_factor", 3)),
            "max_soft_tokens": 280,
        }
    if str(kv["clip.projector_type"]).startswith("qwen"):
        patch = int(kv["clip.vision.patch_size"])
        return {
            "image_processor_type": "Qwen2VLImageProcessor",
            "image_mean": [float(x) for x in kv["clip.vision.image_mean"]],
            "image_std": [float(x) for x in kv["clip.vision.image_std"]],
            "patch_size": patch,
            "merge_size": 2,
            "temporal_patch_size": 2,
            "min_pixels": 8 * (2 * patch) ** 2,
            "max_pixels": 4096 * (2 * patch) ** 2,
        }
    if kv["clip.projector_type"] == "lfm2":  # LFM2-VL's, as its releases state it
        return {
            "image_processor_type": "Lfm2VlImageProcessorFast",
            "do_normalize": True,
            "image_mean": [float(x) for x in kv["clip.vision.image_mean"]],
            "image_std": [float(x) for x in kv["clip.vision.image_std"]],
            "encoder_patch_size": int(kv["clip.vision.patch_size"]),
            "downsample_factor": int(kv["clip.vision.projector.scale_factor"]),
            "min_image_tokens": 64,
            "max_image_tokens": 256,
            "do_image_splitting": True,
        }
    if kv["clip.projector_type"] == "pixtral":
        side = int(kv["clip.vision.image_size"])
        return {
            "image_processor_type": "PixtralImageProcessor",
            "image_mean": [float(x) for x in kv["clip.vision.image_mean"]],
            "image_std": [float(x) for x in kv["clip.vision.image_std"]],
            "patch_size": {"height": int(kv["clip.vision.patch_size"]), "width": int(kv["clip.vision.patch_size"])},
            "size": {"longest_edge": side},
        }
    per_side = int(kv["clip.vision.image_size"]) // int(kv["clip.vision.patch_size"])
    per_side //= int(kv.get("clip.vision.projector.scale_factor", 4))
    return {
        "image_processor_type": "Gemma3ImageProcessor",
        "image_mean": [float(x) for x in kv["clip.vision.image_mean"]],
        "image_std": [float(x) for x in kv["clip.vision.image_std"]],
        "image_seq_length": per_side * per_side,
        "size": {"height": int(kv["clip.vision.image_size"]), "width": int(kv["clip.vision.image_size"])},
    }


def _fields(path: Path) -> dict[str, Any]:
    return {f.name: f.contents() for f in gguf.GGUFReader(path).fields.values() if not f.name.startswith("GGUF.")}


def sentencepiece_model(kv: dict[str, Any]) -> bytes:
    """The ``tokenizer.model`` of a GGUF's SentencePiece vocabulary: a ``ModelProto`` of its
    pieces (text, score, type), written as protobuf's wire format lays them out."""

    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
            n >>= 7
            if not n:
                return bytes(out)

    def field(number: int, payload: bytes) -> bytes:
        return varint(number << 3 | 2) + varint(len(payload)) + payload

    proto = bytearray()
    for text, score, kind in zip(
        kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.scores"], kv["tokenizer.ggml.token_type"], strict=True
    ):
        piece = field(1, text.encode()) + varint(2 << 3 | 5) + struct.pack("<f", score) + varint(3 << 3) + varint(kind)
        proto += field(1, piece)
    return bytes(proto)


def _qwen35_back(name: str, data: np.ndarray, kv: dict[str, Any], arch: str) -> tuple[str, np.ndarray]:
    """A Qwen 3.5 block tensor as transformers saves it: ``A_log`` for ``-exp(A_log)``, the
    convolution with its unit axis, the delta net's value heads grouped by key head again."""
    _, layer, part = name.split(".", 2)
    if part == "ssm_a":
        data = np.log(-data)
    n_k, n_v = int(kv[f"{arch}.ssm.group_count"]), int(kv[f"{arch}.ssm.time_step_rank"])
    width = int(kv[f"{arch}.ssm.state_size"])

    def grouped(size: int) -> np.ndarray:  # where each grouped head's rows are in llama.cpp's tiled order
        if arch == "qwen3next":  # which keeps them grouped, as transformers does
            return np.arange(n_v * size)
        return np.arange(n_v * size).reshape(n_v // n_k, n_k, size).swapaxes(0, 1).reshape(-1)

    keys = 2 * width * n_k
    if part in ("attn_qkv.weight", "ssm_conv1d.weight"):
        data = data[np.concatenate([np.arange(keys), keys + grouped(width)])]
    elif part == "attn_gate.weight":
        data = data[grouped(width)]
    elif part in ("ssm_alpha.weight", "ssm_beta.weight", "ssm_a", "ssm_dt.bias"):
        data = data[grouped(1)]
    elif part == "ssm_out.weight":
        data = data[:, grouped(width)]
    if part == "ssm_conv1d.weight":
        data = data[:, None, :]
    if part == "ffn_gate_inp_shexp.weight":
        data = data[None, :]  # a Linear of one output
    if part in _QWEN35_PARAMS:
        return f"model.layers.{layer}.{_QWEN35_PARAMS[part]}", data
    stem, _, suffix = part.rpartition(".")
    return f"model.layers.{layer}.{(_QWEN35_PARTS | _QWEN35_SHARED | _QWEN3NEXT_PARTS)[stem]}.{suffix}", data


def _gptoss_experts(tensors: dict[str, np.ndarray], t: Any, dequantized: bool) -> None:
    """A gpt-oss expert tensor of the twin as transformers keeps it, in ``tensors``: a layer's gate
    and up in one ``gate_up_proj``, their outputs interleaved (gate's even, up's odd), as MXFP4
    ``_blocks`` and ``_scales`` (the releases), or ``dequantized``: ``(experts, in, out)``; biases alike."""
    _, layer, part, suffix = t.name.split(".")
    stem = f"model.layers.{layer}.mlp.experts." + ("down_proj" if part == "ffn_down_exps" else "gate_up_proj")
    shape = [int(d) for d in reversed(t.shape)]
    pieces: dict[str, np.ndarray]
    if suffix == "bias":
        pieces = {f"{stem}_bias": np.asarray(t.data, dtype=np.float32).reshape(shape)}
    elif dequantized:
        values = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape)
        pieces = {stem: np.ascontiguousarray(values.swapaxes(1, 2))}
    else:
        blocks, scales = _checkpoint_mxfp4(np.asarray(t.data))
        pieces = {f"{stem}_blocks": blocks, f"{stem}_scales": scales}
    for name, data in pieces.items():
        axis = 2 if name == stem else 1  # the outputs' axis
        if part == "ffn_down_exps":
            tensors[name] = data
            continue
        wide = list(data.shape)
        wide[axis] *= 2
        fused = tensors.setdefault(name, np.zeros(wide, dtype=data.dtype))
        index: list[Any] = [slice(None)] * data.ndim
        index[axis] = slice(0 if part == "ffn_gate_exps" else 1, None, 2)
        fused[tuple(index)] = data


def _checkpoint_mxfp4(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ggml's MXFP4 rows (``(..., n * 17)`` bytes: each block's exponent, then value ``i`` in byte
    ``i``'s low nibble and ``i + 16`` in its high one) as a checkpoint's blocks (``(..., n, 16)``:
    value ``2i`` low and ``2i + 1`` high in byte ``i``) and scales (``(..., n)``)."""
    blocks = rows.reshape(*rows.shape[:-1], -1, 17)
    low, high = blocks[..., 1:] & 0x0F, blocks[..., 1:] >> 4
    values = np.concatenate([low, high], axis=-1)  # the block's 32 values in order
    packed = values[..., 0::2] | (values[..., 1::2] << 4)
    return np.ascontiguousarray(packed, dtype=np.uint8), np.ascontiguousarray(blocks[..., 0])


def _sentence_modules(folder: Path, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """EmbeddingGemma as sentence-transformers saves it: its transformer's tensors without ``model.``,
    then mean pooling (``1_Pooling``), two Dense projections without bias or activation
    (``2_Dense``, ``3_Dense``: llama.cpp's ``dense_2`` and ``dense_3``) and a normalization."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
        {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"},
        {"idx": 4, "name": "4", "path": "4_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    _write_json(folder / "modules.json", modules)
    (folder / "1_Pooling").mkdir(exist_ok=True)
    width = tensors["model.embed_tokens.weight"].shape[1]
    pooling = {"word_embedding_dimension": width, "pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False}
    _write_json(folder / "1_Pooling" / "config.json", pooling)
    for path in ("2_Dense", "3_Dense"):
        weight = tensors.pop(f"{path[0]}_Dense.weight")
        (folder / path).mkdir(exist_ok=True)
        config = {
            "in_features": weight.shape[1],
            "out_features": weight.shape[0],
            "bias": False,
            "activation_function": "torch.nn.modules.linear.Identity",
        }
        _write_json(folder / path / "config.json", config)
        write_safetensors(folder / path / "model.safetensors", {"linear.weight": _typed(weight, "F16")})
    tensors.pop("lm_head.weight", None)
    return {name.removeprefix("model."): data for name, data in tensors.items()}


def _per_layer(value: Any) -> list[int]:
    """A key stated once or per layer, as a list."""
    return [int(v) for v in value] if isinstance(value, list) else [int(value)]


def _gemma4_config(kv: dict[str, Any], tensors: dict[str, np.ndarray], rotating: float) -> dict[str, Any]:
    """Gemma 4's settings as its releases state them: each kind of layer's heads (the full-attention
    ones' as ``global_head_dim`` and ``num_global_key_value_heads``, keys their values where those
    layers have no ``v_proj``), its proportional rotation (``rotating``: the share of a head's pairs
    that turn), per-layer embeddings, shared KV and mixture."""
    sliding = [bool(s) for s in kv["gemma4.attention.sliding_window_pattern"]]
    heads = _per_layer(kv["gemma4.attention.head_count_kv"])
    heads = heads if len(heads) == len(sliding) else heads * len(sliding)
    full = sliding.index(False)
    ffn = _per_layer(kv["gemma4.feed_forward_length"])
    head_full = int(kv["gemma4.attention.key_length"])
    n_expert = int(kv.get("gemma4.expert_count", 0))
    config: dict[str, Any] = {
        "head_dim": int(kv["gemma4.attention.key_length_swa"]),
        "global_head_dim": head_full,
        "num_key_value_heads": heads[sliding.index(True)] if True in sliding else heads[full],
        "num_global_key_value_heads": heads[full],
        "attention_k_eq_v": f"model.layers.{full}.self_attn.v_proj.weight" not in tensors,
        "layer_types": ["sliding_attention" if s else "full_attention" for s in sliding],
        "sliding_window": int(kv["gemma4.attention.sliding_window"]),
        "num_kv_shared_layers": int(kv["gemma4.attention.shared_kv_layers"]),
        "use_double_wide_mlp": len(set(ffn)) > 1,
        "hidden_size_per_layer_input": int(kv["gemma4.embedding_length_per_layer_input"]),
        "vocab_size_per_layer_input": len(kv["tokenizer.ggml.tokens"]),
        "final_logit_softcapping": float(kv["gemma4.final_logit_softcapping"]),
        "hidden_activation": "gelu_pytorch_tanh",
        # A picture's tokens attend to each other both ways in all but E2B and E4B (as libmtmd has it).
        "use_bidirectional_attention": None if int(kv["gemma4.embedding_length"]) in (1536, 2560) else "vision",
        "attention_bias": False,
        "enable_moe_block": bool(n_expert),
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": float(kv["gemma4.rope.freq_base_swa"])},
            "full_attention": {
                "rope_type": "proportional",
                "partial_rotary_factor": rotating,
                "rope_theta": float(kv["gemma4.rope.freq_base"]),
            },
        },
    }
    if n_expert:
        config |= {
            "num_experts": n_expert,
            "top_k_experts": int(kv["gemma4.expert_used_count"]),
            "moe_intermediate_size": int(kv["gemma4.expert_feed_forward_length"]),
        }
    return config


def _kv_heads(kv: dict[str, Any], arch: str) -> int:
    """The KV heads of the attention layers (LFM2 states 0 for its convolutions')."""
    heads = kv[f"{arch}.attention.head_count_kv"]
    return max(int(h) for h in heads) if isinstance(heads, list) else int(heads)


# Each architecture's block names where they are not _PARTS.
_BLOCK_PARTS = {
    "gemma2": _GEMMA_PARTS,
    "gemma3": _GEMMA_PARTS,
    "gemma-embedding": _GEMMA_PARTS,
    "phi3": _PHI3_PARTS,
    "gpt-oss": _GPTOSS_PARTS,
    "lfm2": _LFM2_PARTS,
    "lfm2moe": _LFM2_PARTS,
    "olmo2": _OLMO_PARTS,
    "gemma4": _GEMMA4_PARTS,
    "deepseek2": _DEEPSEEK2_PARTS,
    "laguna": _LAGUNA_PARTS,
    "glm4": _GLM4_PARTS,
    "llama4": _LLAMA4_PARTS,
}


def _hf_name(name: str, arch: str) -> str:
    stem, _, suffix = name.rpartition(".")
    if arch in ("lfm2", "lfm2moe") and stem == "token_embd_norm":  # its final norm
        return f"model.embedding_norm.{suffix}"
    if stem.startswith("dense_"):  # EmbeddingGemma's head, which _sentence_modules takes out
        return f"{stem[-1]}_Dense.{suffix}"
    if stem in _GLOBAL:
        return f"{_GLOBAL[stem]}.{suffix}"
    _, layer, part = stem.split(".", 2)
    if name.endswith("attn_sinks.weight"):  # gpt-oss's, no module's weight
        return f"model.layers.{layer}.self_attn.sinks"
    if name.endswith("exp_probs_b.bias") and arch == "deepseek2":  # the router's bias, a buffer
        return f"model.layers.{layer}.mlp.gate.e_score_correction_bias"
    if name.endswith("exp_probs_b.bias") and arch == "laguna":  # where Laguna's releases keep it
        return f"model.layers.{layer}.mlp.experts.e_score_correction_bias"
    if name.endswith("exp_probs_b.bias"):  # LFM2's expert bias, a buffer
        return f"model.layers.{layer}.feed_forward.expert_bias"
    if arch == "gemma4" and f"{part}.{suffix}" in _GEMMA4_PARAMS:
        return f"model.layers.{layer}.{_GEMMA4_PARAMS[f'{part}.{suffix}']}"
    return f"model.layers.{layer}.{_BLOCK_PARTS.get(arch, _PARTS)[part]}.{suffix}"


def _halves(rows: np.ndarray, heads: int) -> np.ndarray:
    """Each head's rows from neighbouring pairs ``[a0, b0, a1, b1...]`` back to halves ``[a..., b...]``."""
    n = rows.shape[0] // heads
    return np.concatenate([np.concatenate([h[0::2], h[1::2]]) for h in np.split(rows, heads)]).reshape(heads * n, -1)


def _pairs(rows: np.ndarray, heads: int, rotary: int) -> np.ndarray:
    """Each head's first ``rotary`` rows from halves ``[a..., b...]`` back to neighbouring pairs
    ``[a0, b0, a1, b1...]`` (GLM-OCR's, which llama.cpp's M-RoPE reads in halves), the rest as they are."""
    per_head = rows.reshape(heads, rows.shape[0] // heads, -1).copy()
    half = rotary // 2
    rotating = per_head[:, :rotary].copy()
    per_head[:, 0:rotary:2], per_head[:, 1:rotary:2] = rotating[:, :half], rotating[:, half:]
    return per_head.reshape(rows.shape)


def _config(kv: dict[str, Any], arch: str) -> dict[str, Any]:
    n_embd, heads = int(kv[f"{arch}.embedding_length"]), max(_per_layer(kv[f"{arch}.attention.head_count"]))
    config: dict[str, Any] = {
        "architectures": [_ARCHITECTURES[arch]],
        "model_type": _MODEL_TYPES.get(arch, arch),
        "hidden_size": n_embd,
        "vocab_size": len(kv["tokenizer.ggml.tokens"]),
        "num_hidden_layers": int(kv[f"{arch}.block_count"]),
        "intermediate_size": min(_per_layer(kv.get(f"{arch}.feed_forward_length", 0))) or None,
        "num_attention_heads": heads,
        "num_key_value_heads": _kv_heads(kv, arch),
        "max_position_embeddings": int(kv[f"{arch}.context_length"]),
        "rope_theta": float(kv[f"{arch}.rope.freq_base"]),
        "rms_norm_eps": float(kv.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)),
        "bos_token_id": int(kv["tokenizer.ggml.bos_token_id"]),
        "eos_token_id": int(kv["tokenizer.ggml.eos_token_id"]),
        "torch_dtype": "float16",
    }
    head_dim = kv.get(f"{arch}.attention.key_length")
    if head_dim is not None:  # as checkpoints state it (transformers' Qwen3 default is not hidden / heads)
        config["head_dim"] = int(head_dim)
    if "tokenizer.ggml.padding_token_id" in kv:  # else transformers' default (Phi-3's 32000) may not exist here
        config["pad_token_id"] = int(kv["tokenizer.ggml.padding_token_id"])
    if arch == "qwen3moe":
        config |= {
            "num_experts": int(kv["qwen3moe.expert_count"]),
            "num_experts_per_tok": int(kv["qwen3moe.expert_used_count"]),
            "moe_intermediate_size": int(kv["qwen3moe.expert_feed_forward_length"]),
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "norm_topk_prob": True,
        }
    if arch == "llama" and "llama.expert_count" in kv:
        config |= {
            "architectures": ["MixtralForCausalLM"],
            "model_type": "mixtral",
            "num_local_experts": int(kv["llama.expert_count"]),
            "num_experts_per_tok": int(kv["llama.expert_used_count"]),
        }
    if arch == "phi3":
        rotary = int(kv["phi3.rope.dimension_count"])
        original = int(kv["phi3.rope.scaling.original_context_length"])
        config |= {"partial_rotary_factor": rotary / (n_embd // heads), "original_max_position_embeddings": original}
        config["sliding_window"] = None
    if arch == "gemma2":
        config |= {
            "sliding_window": int(kv["gemma2.attention.sliding_window"]),
            "attn_logit_softcapping": float(kv["gemma2.attn_logit_softcapping"]),
            "final_logit_softcapping": float(kv["gemma2.final_logit_softcapping"]),
            "query_pre_attn_scalar": int(kv["gemma2.attention.key_length"]),
        }
    if arch in ("qwen2vl", "qwen3vl", "qwen3vlmoe"):
        sections = [int(n) for n in kv[f"{arch}.rope.dimension_sections"][:3]]
        config["rope_scaling"] = {"rope_type": "default", "mrope_section": sections}
        if arch != "qwen2vl":
            config["rope_scaling"]["mrope_interleaved"] = True
    if arch == "qwen3vlmoe":
        config |= {
            "num_experts": int(kv["qwen3vlmoe.expert_count"]),
            "num_experts_per_tok": int(kv["qwen3vlmoe.expert_used_count"]),
            "moe_intermediate_size": int(kv["qwen3vlmoe.expert_feed_forward_length"]),
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
        }
    if arch in ("qwen35", "qwen35moe", "qwen3next"):  # transformers 5's rope_parameters, as the releases state them
        head_dim, interval = int(kv[f"{arch}.attention.key_length"]), int(kv[f"{arch}.full_attention_interval"])
        config["rope_parameters"] = {
            "rope_type": "default",
            "rope_theta": float(kv[f"{arch}.rope.freq_base"]),
            "partial_rotary_factor": int(kv[f"{arch}.rope.dimension_count"]) / head_dim,
        }
        if arch != "qwen3next":  # Qwen 3.5's M-RoPE
            config["rope_parameters"] |= {
                "mrope_section": [int(n) for n in kv[f"{arch}.rope.dimension_sections"][:3]],
                "mrope_interleaved": True,
            }
        config |= {
            "linear_conv_kernel_dim": int(kv[f"{arch}.ssm.conv_kernel"]),
            "linear_key_head_dim": int(kv[f"{arch}.ssm.state_size"]),
            "linear_value_head_dim": int(kv[f"{arch}.ssm.state_size"]),
            "linear_num_key_heads": int(kv[f"{arch}.ssm.group_count"]),
            "linear_num_value_heads": int(kv[f"{arch}.ssm.time_step_rank"]),
            "full_attention_interval": interval,
            "layer_types": [
                "full_attention" if (i + 1) % interval == 0 else "linear_attention"
                for i in range(int(kv[f"{arch}.block_count"]))
            ],
        }
    if arch in ("qwen35moe", "qwen3next"):
        config |= {
            "num_experts": int(kv[f"{arch}.expert_count"]),
            "num_experts_per_tok": int(kv[f"{arch}.expert_used_count"]),
            "moe_intermediate_size": int(kv[f"{arch}.expert_feed_forward_length"]),
            "shared_expert_intermediate_size": int(kv[f"{arch}.expert_shared_feed_forward_length"]),
        }
    if arch == "qwen3next":  # every layer a mixture (transformers' default makes none dense)
        config |= {"decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True}
    if arch == "gpt-oss":
        config |= _gptoss_config(kv)
    if arch == "gemma":
        config["hidden_act"] = "gelu_pytorch_tanh"
    if arch == "command-r":
        config |= {
            "layer_norm_eps": float(kv["command-r.attention.layer_norm_epsilon"]),
            "logit_scale": float(kv["command-r.logit_scale"]),
            "use_qk_norm": False,
        }
    if arch == "mistral3":  # transformers 5's rope_parameters, as the Ministral 3 releases state them
        config["rope_parameters"] = {
            "rope_type": "yarn",
            "rope_theta": float(kv["mistral3.rope.freq_base"]),
            "factor": float(kv["mistral3.rope.scaling.factor"]),
            "original_max_position_embeddings": int(kv["mistral3.rope.scaling.original_context_length"]),
            "beta_fast": float(kv["mistral3.rope.scaling.yarn_beta_fast"]),
            "beta_slow": float(kv["mistral3.rope.scaling.yarn_beta_slow"]),
            "mscale": 1.0,
            "mscale_all_dim": float(kv["mistral3.rope.scaling.yarn_log_multiplier"]),
            "llama_4_scaling_beta": float(kv["mistral3.attention.temperature_scale"]),
        }
    if arch == "olmo2":  # OLMo 3's window, on both tiny layers (llama.cpp's default puts it on 3 of 4)
        config |= {
            "sliding_window": int(kv["olmo2.attention.sliding_window"]),
            "layer_types": ["sliding_attention"] * int(kv["olmo2.block_count"]),
        }
    if arch == "lfm2moe":
        kv_heads = kv["lfm2moe.attention.head_count_kv"]
        config |= {
            "layer_types": ["conv" if int(h) == 0 else "full_attention" for h in kv_heads],
            "conv_L_cache": int(kv["lfm2moe.shortconv.l_cache"]),
            "norm_eps": float(kv["lfm2moe.attention.layer_norm_rms_epsilon"]),
            "num_experts": int(kv["lfm2moe.expert_count"]),
            "num_experts_per_tok": int(kv["lfm2moe.expert_used_count"]),
            "moe_intermediate_size": int(kv["lfm2moe.expert_feed_forward_length"]),
            "num_dense_layers": int(kv["lfm2moe.leading_dense_block_count"]),
            "use_expert_bias": True,
            "norm_topk_prob": True,
            "routed_scaling_factor": 1.0,
        }
    if arch == "lfm2":  # its FFN's width stated as transformers derives it: 2/3 of 192, rounded up to 64s
        kv_heads = kv["lfm2.attention.head_count_kv"]
        n_ff = int(kv["lfm2.feed_forward_length"])
        assert n_ff % 64 == 0, "the tiny LFM2's FFN width must be a multiple of 64"
        config |= {
            "layer_types": ["conv" if int(h) == 0 else "full_attention" for h in kv_heads],
            "conv_L_cache": int(kv["lfm2.shortconv.l_cache"]),
            "conv_bias": False,
            "norm_eps": float(kv["lfm2.attention.layer_norm_rms_epsilon"]),
            "intermediate_size": n_ff * 3 // 2,
            "block_auto_adjust_ff_dim": True,
            "block_ffn_dim_multiplier": 1.0,
            "block_multiple_of": 64,
        }
    if arch in ("gemma3", "gemma-embedding"):
        config |= {
            "query_pre_attn_scalar": int(kv[f"{arch}.attention.key_length"]),
            "sliding_window": int(kv[f"{arch}.attention.sliding_window"]),
            "sliding_window_pattern": int(kv.get(f"{arch}.attention.sliding_window_pattern", 6)),
            "rope_local_base_freq": float(kv.get(f"{arch}.rope.freq_base_swa", 10000.0)),
        }
    if arch == "gemma-embedding":  # the window as saved: transformers halves it (it reaches both ways)
        config["use_bidirectional_attention"] = True
    if arch in ("nemotron_h", "nemotron_h_moe"):
        config |= _nemotron_h_config(kv)
    if arch == "laguna":
        config |= _laguna_config(kv)
    if arch == "gemma3n":
        config |= _gemma3n_config(kv)
    if arch == "glm4":  # half of each head rotating, Q, K and V with biases (GLM-OCR: all of it, none)
        rotating = int(kv["glm4.rope.dimension_count"]) / int(kv["glm4.attention.key_length"])
        ocr = kv.get("glm4.rope.dimension_sections")
        biased = kv["tokenizer.ggml.pre"] != "chatglm-bpe"  # GLM-OCR's (its own pre-tokenizer) has none
        config |= {"partial_rotary_factor": rotating, "attention_bias": biased, "hidden_act": "silu"}
        if ocr is not None:  # GLM-OCR's M-RoPE, as its release states it
            config["rope_parameters"] = {
                "rope_type": "default",
                "mrope_section": [int(n) for n in ocr[:3]],
                "partial_rotary_factor": rotating,
                "rope_theta": config["rope_theta"],
            }
    if arch == "llama4":  # its widths, experts and the layers they are on, as its releases state them
        step, n_layer = int(kv["llama4.interleave_moe_layer_step"]), int(kv["llama4.block_count"])
        config |= {
            "intermediate_size": int(kv["llama4.expert_feed_forward_length"]),
            "intermediate_size_mlp": int(kv["llama4.feed_forward_length"]),
            "num_local_experts": int(kv["llama4.expert_count"]),
            "num_experts_per_tok": int(kv["llama4.expert_used_count"]),
            "interleave_moe_layer_step": step,
            "moe_layers": list(range(step - 1, n_layer, step)),
            "no_rope_layers": [int((i + 1) % 4 != 0) for i in range(n_layer)],
            "use_qk_norm": True,
            "attention_chunk_size": 8192,
            "attn_temperature_tuning": True,
            "floor_scale": 8192,
            "attn_scale": 0.1,
            "hidden_act": "silu",
            "attention_bias": False,
        }
    if arch == "deepseek2":  # no head_dim: GLM's would name the rotary width
        del config["head_dim"]
        config |= _deepseek2_config(kv)
    return config


def _laguna_config(kv: dict[str, Any]) -> dict[str, Any]:
    """Laguna's settings as its releases state them: each layer's heads and kind, its rotation per
    kind of layer (the full layers' YaRN), its gate per head, its mixture."""
    a, n = "laguna", int(kv["laguna.block_count"])
    sliding = [bool(x) for x in kv["laguna.attention.sliding_window_pattern"]]
    head_dim, dense = int(kv["laguna.attention.key_length"]), int(kv["laguna.leading_dense_block_count"])
    return {
        "num_attention_heads_per_layer": [int(h) for h in kv["laguna.attention.head_count"]],
        "layer_types": ["sliding_attention" if s else "full_attention" for s in sliding],
        "mlp_layer_types": ["dense"] * dense + ["sparse"] * (n - dense),
        "sliding_window": int(kv["laguna.attention.sliding_window"]),
        "gating": True,
        "num_experts": int(kv[f"{a}.expert_count"]),
        "num_experts_per_tok": int(kv[f"{a}.expert_used_count"]),
        "moe_intermediate_size": int(kv[f"{a}.expert_feed_forward_length"]),
        "shared_expert_intermediate_size": int(kv[f"{a}.expert_shared_feed_forward_length"]),
        "moe_routed_scaling_factor": float(kv[f"{a}.expert_weights_scale"]),
        "moe_router_logit_softcapping": 0.0,
        "rope_parameters": {
            "full_attention": {
                "rope_type": "yarn",
                "rope_theta": float(kv["laguna.rope.freq_base"]),
                "partial_rotary_factor": int(kv["laguna.rope.dimension_count"]) / head_dim,
                "factor": float(kv["laguna.rope.scaling.factor"]),
                "original_max_position_embeddings": int(kv["laguna.rope.scaling.original_context_length"]),
            },
            "sliding_attention": {
                "rope_type": "default",
                "rope_theta": float(kv["laguna.rope.freq_base_swa"]),
                "partial_rotary_factor": int(kv["laguna.rope.dimension_count_swa"]) / head_dim,
            },
        },
    }


def write_hf_laguna(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-laguna/``, a Laguna checkpoint as its releases keep it (``LagunaForCausalLM``,
    ``laguna_ggufs``'s parts; each expert apart, the shared expert and the router's bias by the
    releases' names; F16), and ``folder/laguna.gguf``, its twin."""
    return _exported(folder, "laguna", lambda p: laguna_ggufs.write_laguna(p, seed=seed))


def write_hf_glm4(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-glm4/``, a GLM-4-0414 checkpoint (``Glm4ForCausalLM``, ``glm4_ggufs``'s parts;
    F16), and ``folder/glm4.gguf``, its twin."""
    return _exported(folder, "glm4", lambda p: glm4_ggufs.write_glm4(p, seed=seed))


def write_hf_glmocr(folder: Path, *, seed: int = 0) -> tuple[Path, Path, Path]:
    """``folder/hf-glmocr/``, a GLM-OCR (``GlmOcrForConditionalGeneration``, as transformers 5 saves
    it: the text model under ``model.language_model.`` with a multi-token-prediction layer, the
    tower under ``model.visual.``; F16), and its twins ``folder/text.gguf`` and ``folder/mmproj.gguf``
    (``glm4_ggufs.write_glmocr_vision``: what llama.cpp runs Ollama's files as)."""
    text, mmproj = glm4_ggufs.write_glmocr_vision(folder, seed=seed)
    return export(text, folder / "hf-glmocr", sees="model.language_model.", tower=mmproj), text, mmproj


def write_hf_glm4v(folder: Path, *, seed: int = 0) -> tuple[Path, Path, Path]:
    """``folder/hf-glm4v/``, a GLM-4.1V (``Glm4vForConditionalGeneration``, as transformers 5 saves
    it; F16), and its twins ``folder/text.gguf`` and ``folder/mmproj.gguf`` (``glm4_ggufs.write_glm4v_vision``)."""
    text, mmproj = glm4_ggufs.write_glm4v_vision(folder, seed=seed)
    return export(text, folder / "hf-glm4v", sees="model.language_model.", tower=mmproj), text, mmproj


# llama.cpp's names for a Llama 4 tower's tensors -> its release's (under ``vision_model.``, the
# projection under ``multi_modal_projector.``); a block's parts after ``model.layers.N.``.
_LLAMA4_TOWER = {
    "v.patch_embd.weight": "vision_model.patch_embedding.linear.weight",
    "v.class_embd": "vision_model.class_embedding",
    "v.position_embd.weight": "vision_model.positional_embedding_vlm",
    "v.pre_ln.weight": "vision_model.layernorm_pre.weight",
    "v.pre_ln.bias": "vision_model.layernorm_pre.bias",
    "v.post_ln.weight": "vision_model.layernorm_post.weight",
    "v.post_ln.bias": "vision_model.layernorm_post.bias",
    "mm.model.mlp.1.weight": "vision_model.vision_adapter.mlp.fc1.weight",
    "mm.model.mlp.2.weight": "vision_model.vision_adapter.mlp.fc2.weight",
    "mm.model.fc.weight": "multi_modal_projector.linear_1.weight",
}
_LLAMA4_TOWER_PARTS = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_out": "self_attn.o_proj",
    "ln1": "input_layernorm",
    "ln2": "post_attention_layernorm",
    "ffn_up": "mlp.fc1",
    "ffn_down": "mlp.fc2",
}


def write_hf_llama4_text(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-llama4/``, a Llama 4's text model alone (``Llama4ForCausalLM``, as a tower-less
    fine-tune is saved; F16), and ``folder/llama4.gguf``, its twin."""
    return _exported(folder, "llama4", lambda path: vision_ggufs.write_llama4(path, seed=seed, f16=True))


def write_hf_llama4(folder: Path, *, seed: int = 0) -> tuple[Path, Path, Path]:
    """``folder/hf-llama4/``, a Llama 4 as its releases keep it (``Llama4ForConditionalGeneration``;
    F16): the text model under ``language_model.`` (its experts a layer's in one transposed tensor
    per projection), the tower under ``vision_model.`` and its projection under
    ``multi_modal_projector.``, their settings under ``text_config`` and ``vision_config``. Its twins
    ``folder/text.gguf`` and ``folder/mmproj.gguf`` are llama.cpp's files of the same model."""
    folder.mkdir(parents=True, exist_ok=True)
    v = vision_ggufs.LLAMA4_VISION
    text = vision_ggufs.write_llama4(folder / "text.gguf", seed=seed, f16=True)
    mmproj = vision_ggufs.write_llama4_projector(folder / "mmproj.gguf", seed=seed, shape=v, f16=True)
    hf = export(text, folder / "hf-llama4")
    weights = hf / "model.safetensors"
    tensors = {f"language_model.{name}": value for name, value in read_safetensors(weights).items()}
    for t in gguf.GGUFReader(mmproj).tensors:
        data = np.array(t.data).reshape([int(d) for d in reversed(t.shape)])
        if t.name.startswith("v.blk."):
            _, _, layer, part, suffix = t.name.split(".")
            name = f"vision_model.model.layers.{layer}.{_LLAMA4_TOWER_PARTS[part]}.{suffix}"
        else:
            name = _LLAMA4_TOWER[t.name]
        tensors[name] = ("F16" if data.dtype == np.float16 else "F32", data)
    write_safetensors(weights, tensors)
    text_config = json.loads((hf / "config.json").read_text())
    n_embd_text = text_config["hidden_size"]
    config = {
        "architectures": ["Llama4ForConditionalGeneration"],
        "model_type": "llama4",
        "text_config": {k: v for k, v in text_config.items() if k != "architectures"},
        "vision_config": {
            "model_type": "llama4_vision_model",
            "hidden_size": v.n_embd,
            "intermediate_size": v.n_ff,
            "num_hidden_layers": v.n_layer,
            "num_attention_heads": v.n_head,
            "image_size": v.image_size,
            "patch_size": v.patch_size,
            "num_channels": 3,
            "norm_eps": 1e-5,
            "pixel_shuffle_ratio": 1 / v.merge,
            "projector_input_dim": n_embd_text,
            "projector_output_dim": n_embd_text,
            "vision_output_dim": n_embd_text,
            "rope_theta": 10000,
            "hidden_act": "gelu",
            "vision_feature_layer": -1,
            "vision_feature_select_strategy": "default",
        },
        "tie_word_embeddings": text_config["tie_word_embeddings"],
    }
    _write_json(hf / "config.json", config)
    _write_json(hf / "preprocessor_config.json", {"image_mean": [0.5] * 3, "image_std": [0.5] * 3})
    return hf, text, mmproj


def write_hf_gemma3n(
    folder: Path, *, seed: int = 0, sees: bool = False, transformers_5: bool = False
) -> tuple[Path, Path]:
    """``folder/hf-gemma3n/``, a Gemma 3n checkpoint (``gemma3n_ggufs``'s parts; F16): a
    ``Gemma3nForCausalLM``, or with ``sees`` a ``Gemma3nForConditionalGeneration`` as the releases
    are (the text model under ``model.language_model.``, stand-ins for its vision and audio towers
    and their projections); with ``transformers_5``, saved without the K, V and K norm of the layers
    that reuse KV, as transformers 5 saves them. And ``folder/gemma3n.gguf``, its twin."""
    written = _exported(folder, "gemma3n", lambda p: gemma3n_ggufs.write_gemma3n(p, seed=seed))
    hf = written[0]
    if not (sees or transformers_5):
        return written
    weights = hf / "model.safetensors"
    tensors = {t.name: (t.dtype, np.array(t.data)) for t in safetensors.read(weights, weights.name)}
    weights.unlink()  # mapped while read: written anew, not over
    if transformers_5:
        reusing = range(gemma3n_ggufs.KV_FROM, json.loads((hf / "config.json").read_text())["num_hidden_layers"])
        gone = [f"model.layers.{i}.self_attn.{p}.weight" for i in reusing for p in ("k_proj", "v_proj", "k_norm")]
        tensors = {n: v for n, v in tensors.items() if n not in gone}
    if sees:
        tensors = {n.replace("model.", "model.language_model.", 1): v for n, v in tensors.items()}
        for stand_in in (
            "model.vision_tower.timm_model.conv_stem.conv.weight",
            "model.embed_vision.embedding_projection.weight",
            "model.audio_tower.subsample_conv_projection.input_proj_linear.weight",
            "model.embed_audio.embedding_projection.weight",
        ):
            tensors[stand_in] = ("F16", np.zeros((8, 8), dtype=np.float16))
        text = json.loads((hf / "config.json").read_text())
        config = {
            "architectures": ["Gemma3nForConditionalGeneration"],
            "model_type": "gemma3n",
            "text_config": {k: v for k, v in text.items() if k != "architectures"},
            "vision_config": {"model_type": "gemma3n_vision", "hidden_size": 8},
            "audio_config": {"model_type": "gemma3n_audio", "hidden_size": 8},
            "tie_word_embeddings": True,
        }
        _write_json(hf / "config.json", config)
    write_safetensors(weights, tensors)
    return written


def _gemma3n_back(name: str, data: np.ndarray) -> dict[str, np.ndarray]:
    """A Gemma 3n tensor as transformers keeps it: the AltUp projections each apart, the per-layer
    embeddings without the rows the first row stands for (past ``vocab_size_per_layer_input``),
    the correction's scale a parameter."""
    if name in _GEMMA3N_STACKS:
        return {f"{_GEMMA3N_STACKS[name]}.{i}.weight": matrix for i, matrix in enumerate(data)}
    if name == "per_layer_token_embd.weight":
        own = len(data)
        while own > 1 and np.array_equal(data[own - 1], data[0]):
            own -= 1
        return {"model.embed_tokens_per_layer.weight": data[:own]}
    if not name.startswith("blk."):
        return {_hf_name(name, "gemma3n"): data}
    _, layer, rest = name.split(".", 2)
    if rest == "altup_correct_scale.weight":
        return {f"model.layers.{layer}.altup.correct_output_scale": data}
    part, _, suffix = rest.rpartition(".")
    return {f"model.layers.{layer}.{_GEMMA3N_PARTS[part]}.{suffix}": data}


def _gemma3n_config(kv: dict[str, Any]) -> dict[str, Any]:
    """Gemma 3n's settings as its releases state them (``layer_types``, the KV shared from layer 20,
    the sparse FFN gates, AltUp's and LAuReL's, the per-layer embeddings' rows)."""
    a, n = "gemma3n", int(kv["gemma3n.block_count"])
    sliding = [bool(x) for x in kv["gemma3n.attention.sliding_window_pattern"]]
    sparse = gemma3n_ggufs.SPARSE
    return {
        "layer_types": ["sliding_attention" if s else "full_attention" for s in sliding],
        "sliding_window": int(kv[f"{a}.attention.sliding_window"]),
        "final_logit_softcapping": float(kv[f"{a}.final_logit_softcapping"]),
        "rope_local_base_freq": float(kv[f"{a}.rope.freq_base_swa"]),
        "num_kv_shared_layers": int(kv[f"{a}.attention.shared_kv_layers"]),
        "activation_sparsity_pattern": [0.95] * sparse + [0.0] * (n - sparse),
        "hidden_size_per_layer_input": int(kv[f"{a}.embedding_length_per_layer_input"]),
        "vocab_size_per_layer_input": len(kv["tokenizer.ggml.tokens"]) - gemma3n_ggufs.GEMMA3N.per_layer_short,
        "altup_num_inputs": int(kv[f"{a}.altup.num_inputs"]),
        "altup_active_idx": int(kv[f"{a}.altup.active_idx"]),
        "altup_coef_clip": 120.0,
        "altup_correct_scale": True,
        "laurel_rank": gemma3n_ggufs.LAUREL,
        "hidden_activation": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": int(kv[f"{a}.attention.key_length"]),
    }


def _nemotron_h_back(name: str, data: np.ndarray) -> dict[str, np.ndarray]:
    """A Nemotron-H tensor as its releases keep it: under ``backbone.``, ``A`` as its logarithm,
    ``A``, ``D`` and the norm as vectors, the convolution a Conv1d's ``(channels, 1, kernel)``, the
    experts each apart."""
    if name in _NEMOTRON_H_GLOBAL:
        return {_NEMOTRON_H_GLOBAL[name]: data}
    _, layer, rest = name.split(".", 2)
    stem = f"backbone.layers.{layer}"
    if rest in ("ffn_up_exps.weight", "ffn_down_exps.weight"):
        projection = rest.split("_")[1]
        return {f"{stem}.mixer.experts.{e}.{projection}_proj.weight": rows for e, rows in enumerate(data)}
    if rest in _NEMOTRON_H_PARAMS:
        values = np.log(-data) if rest == "ssm_a" else data
        return {f"{stem}.{_NEMOTRON_H_PARAMS[rest]}": values.reshape(-1)}
    part, _, suffix = rest.rpartition(".")
    if part == "ssm_norm":
        data = data.reshape(-1)
    elif part == "ssm_conv1d" and suffix == "weight":
        data = data[:, None, :]
    return {f"{stem}.{_NEMOTRON_H_PARTS[part]}.{suffix}": data}


def _nemotron_h_config(kv: dict[str, Any]) -> dict[str, Any]:
    """Nemotron-H's settings as its releases state them (``hybrid_override_pattern``, the Mamba-2
    mixer's ``mamba_*`` widths, ReLU² FFNs; a mixture's experts and router)."""
    a = str(kv["general.architecture"])
    kv_heads, widths = kv[f"{a}.attention.head_count_kv"], kv[f"{a}.feed_forward_length"]
    moe = f"{a}.expert_count" in kv
    pattern = "".join(
        "*" if int(h) else ("E" if moe else "-") if int(f) else "M" for h, f in zip(kv_heads, widths, strict=True)
    )
    heads = int(kv[f"{a}.ssm.time_step_rank"])
    config: dict[str, Any] = {
        "hybrid_override_pattern": pattern,
        "num_key_value_heads": max(int(h) for h in kv_heads),
        "head_dim": int(kv[f"{a}.attention.key_length"]),
        "intermediate_size": max(int(f) for f in widths),
        "layer_norm_epsilon": float(kv[f"{a}.attention.layer_norm_rms_epsilon"]),
        "mamba_num_heads": heads,
        "mamba_head_dim": int(kv[f"{a}.ssm.inner_size"]) // heads,
        "ssm_state_size": int(kv[f"{a}.ssm.state_size"]),
        "n_groups": int(kv[f"{a}.ssm.group_count"]),
        "conv_kernel": int(kv[f"{a}.ssm.conv_kernel"]),
        "use_conv_bias": True,
        "mlp_hidden_act": "relu2",
        "mamba_hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "use_bias": False,
        "residual_in_fp32": False,
        # transformers clamps a step below time_step_min in a prompt (not in decoding); NVIDIA's
        # reference and llama.cpp never: a random model's steps may fall below the default 0.001.
        "time_step_min": 0.0,
    }
    if moe:
        config |= {
            "n_routed_experts": int(kv[f"{a}.expert_count"]),
            "num_experts_per_tok": int(kv[f"{a}.expert_used_count"]),
            "moe_intermediate_size": int(kv[f"{a}.expert_feed_forward_length"]),
            "moe_shared_expert_intermediate_size": int(kv[f"{a}.expert_shared_feed_forward_length"]),
            "n_shared_experts": int(kv[f"{a}.expert_shared_count"]),
            "norm_topk_prob": bool(kv[f"{a}.expert_weights_norm"]),
            "routed_scaling_factor": float(kv[f"{a}.expert_weights_scale"]),
            "n_group": 1,
            "topk_group": 1,
            "moe_latent_size": int(kv[f"{a}.moe_latent_size"]) if f"{a}.moe_latent_size" in kv else None,
        }
    return config


def _deepseek2_config(kv: dict[str, Any]) -> dict[str, Any]:
    """DeepSeek V3's or GLM-4.7-Flash's settings (by the vocabulary's pre-tokenizer), as their
    releases state them: heads as many for K and V as for Q (transformers expands the latent),
    the dense layers as each family says."""
    glm, a = kv["tokenizer.ggml.pre"] == "glm4", "deepseek2"
    v2 = int(kv[f"{a}.expert_gating_func"]) == 1  # DeepSeek-V2's softmax router
    layers, dense = int(kv[f"{a}.block_count"]), int(kv[f"{a}.leading_dense_block_count"])
    rotating = int(kv[f"{a}.rope.dimension_count"])
    config: dict[str, Any] = {
        "architectures": [
            "Glm4MoeLiteForCausalLM" if glm else "DeepseekV2ForCausalLM" if v2 else "DeepseekV3ForCausalLM"
        ],
        "model_type": "glm4_moe_lite" if glm else "deepseek_v2" if v2 else "deepseek_v3",
        "num_key_value_heads": int(kv[f"{a}.attention.head_count"]),
        "q_lora_rank": int(kv[f"{a}.attention.q_lora_rank"]) or None,  # null: Q in one projection
        "kv_lora_rank": int(kv[f"{a}.attention.kv_lora_rank"]),
        "qk_rope_head_dim": rotating,
        "qk_nope_head_dim": int(kv[f"{a}.attention.key_length_mla"]) - rotating,
        "v_head_dim": int(kv[f"{a}.attention.value_length_mla"]),
        "n_routed_experts": int(kv[f"{a}.expert_count"]),
        "n_shared_experts": int(kv[f"{a}.expert_shared_count"]),
        "num_experts_per_tok": int(kv[f"{a}.expert_used_count"]),
        "moe_intermediate_size": int(kv[f"{a}.expert_feed_forward_length"]),
        "n_group": int(kv[f"{a}.expert_group_count"]),
        "topk_group": int(kv[f"{a}.expert_group_used_count"]),
        "routed_scaling_factor": float(kv[f"{a}.expert_weights_scale"]),
        "norm_topk_prob": bool(kv[f"{a}.expert_weights_norm"]),
        "hidden_act": "silu",
        "attention_bias": False,
        "rope_interleave": True,
        "num_nextn_predict_layers": 0,
    }
    if glm:
        config["mlp_layer_types"] = ["dense"] * dense + ["sparse"] * (layers - dense)
    else:
        config["first_k_dense_replace"] = dense
    if v2:  # its releases': the best experts of all, no groups
        config |= {"topk_method": "greedy", "n_group": 1, "topk_group": 1}
    if f"{a}.rope.scaling.factor" in kv:  # DeepSeek V3's YaRN, as its release states it
        config["rope_scaling"] = {
            "type": "yarn",
            "factor": float(kv[f"{a}.rope.scaling.factor"]),
            "original_max_position_embeddings": int(kv[f"{a}.rope.scaling.original_context_length"]),
            "beta_fast": float(kv[f"{a}.rope.scaling.yarn_beta_fast"]),
            "beta_slow": float(kv[f"{a}.rope.scaling.yarn_beta_slow"]),
            "mscale": round(float(kv[f"{a}.rope.scaling.yarn_log_multiplier"]) / 0.1, 6),
            "mscale_all_dim": round(float(kv[f"{a}.rope.scaling.yarn_log_multiplier"]) / 0.1, 6),
        }
    return config


def _gptoss_config(kv: dict[str, Any]) -> dict[str, Any]:
    """gpt-oss's settings as its releases state them: experts as wide as the FFN, windows every
    other layer from the first, YaRN (whose ``truncate``, false in the releases, llama.cpp does
    not read: true here, as llama.cpp computes), and the MXFP4 the experts may be kept in."""
    layers = int(kv["gpt-oss.block_count"])
    return {
        "head_dim": int(kv["gpt-oss.attention.key_length"]),
        "intermediate_size": int(kv["gpt-oss.expert_feed_forward_length"]),
        "num_local_experts": int(kv["gpt-oss.expert_count"]),
        "num_experts_per_tok": int(kv["gpt-oss.expert_used_count"]),
        "experts_per_token": int(kv["gpt-oss.expert_used_count"]),
        "sliding_window": int(kv["gpt-oss.attention.sliding_window"]),
        "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)],
        "attention_bias": True,
        "swiglu_limit": 7.0,
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": float(kv["gpt-oss.rope.scaling.factor"]),
            "original_max_position_embeddings": int(kv["gpt-oss.rope.scaling.original_context_length"]),
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": True,
        },
        "torch_dtype": "bfloat16",
    }


def write_hf_gemma4(folder: Path, *, moe: bool = False, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-gemma4/`` (or ``hf-gemma4-moe/``), a Gemma 4 checkpoint in F16 with E2B's parts
    (per-layer embeddings, shared KV) or 26B-A4B's (a mixture beside the dense FFN), and
    ``folder/gemma4.gguf`` (``gemma4-moe.gguf``), its twin."""
    shape = gemma4_ggufs.GEMMA4_MOE if moe else gemma4_ggufs.GEMMA4_E2B
    name = "gemma4-moe" if moe else "gemma4"
    return _exported(folder, name, lambda p: gemma4_ggufs.write_gemma4_text(p, shape, seed=seed))


def write_hf_gemma4_vision(folder: Path, *, audio: bool = True, seed: int = 0) -> tuple[Path, Path, Path]:
    """``folder/hf-gemma4-vision/``, a Gemma 4 that sees and (with ``audio``) hears
    (``Gemma4ForConditionalGeneration``: a text model with 31B's parts under
    ``model.language_model.``, its ViT and ``embed_vision``, its Conformer and ``embed_audio``), and
    its twins ``folder/text.gguf`` and ``folder/mmproj.gguf`` (a ``gemma4v`` and ``gemma4a`` projector)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = gemma4_ggufs.write_gemma4_text(folder / "text.gguf", gemma4_ggufs.GEMMA4_31B, seed=seed)
    mmproj = tower_ggufs.write_gemma4_projector(folder / "mmproj.gguf", audio=audio, f16=True, seed=seed)
    return export(text, folder / "hf-gemma4-vision", sees="model.language_model.", tower=mmproj), text, mmproj


def write_hf_deepseek2(folder: Path, *, glm: bool = True, v2: bool = False, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-glm4-moe-lite/`` (or ``hf-deepseek-v3/``, ``hf-deepseek-v2/``), a GLM-4.7-Flash
    checkpoint with its parts (latent attention, a dense layer, then sigmoid-routed experts, a
    layer's in one tensor as transformers 5 saves them, beside a shared one), DeepSeek V3's (its
    experts in groups, each apart as its release keeps them; YaRN) or DeepSeek-V2-Lite's (Q in one
    projection, a softmax router; ``v2``), in F16, and ``folder/<name>.gguf``, its twin."""
    shape = (
        deepseek2_ggufs.DEEPSEEK_V2_LITE if v2 else deepseek2_ggufs.GLM47_FLASH if glm else deepseek2_ggufs.DEEPSEEK_V3
    )
    name = "deepseek-v2" if v2 else "glm4-moe-lite" if glm else "deepseek-v3"
    return _exported(folder, name, lambda p: deepseek2_ggufs.write_deepseek2(p, shape, seed=seed))


def write_hf_nemotron_h(
    folder: Path, *, shape: str = "nano2", transformers_5: bool = False, seed: int = 0
) -> tuple[Path, Path]:
    """``folder/hf-nemotron-h-<shape>/``, a Nemotron-H checkpoint in F16 with Nemotron Nano 2's
    parts (``shape`` "nano2": Mamba-2, attention and MLP layers), Nemotron 3 Nano's ("nano3": a
    mixture for the MLP) or Nemotron 3 Super's ("super": the mixture in a latent width), as its
    releases keep it (under ``backbone.``, each expert apart) or, ``transformers_5``, as
    transformers 5 saves it (under ``model.``, a layer's experts in one tensor per projection), and
    ``folder/nemotron-h-<shape>.gguf``, its twin."""
    shapes = {
        "nano2": nemotron_h_ggufs.NEMOTRON_NANO2,
        "nano3": nemotron_h_ggufs.NEMOTRON3_NANO,
        "super": nemotron_h_ggufs.NEMOTRON3_SUPER,
    }
    name = f"nemotron-h-{shape}"
    written = _exported(folder, name, lambda p: nemotron_h_ggufs.write_nemotron_h(p, shapes[shape], seed=seed))
    if transformers_5:
        _saved_by_transformers_5(written[0])
    return written


def _saved_by_transformers_5(folder: Path) -> None:
    """A Nemotron-H folder's tensors as transformers 5 saves them: ``model.`` for ``backbone.``, and
    a layer's experts stacked into one ``up_proj`` and one ``down_proj``."""
    path = folder / "model.safetensors"
    tensors: dict[str, np.ndarray] = {}
    experts: dict[str, dict[int, np.ndarray]] = {}
    dtypes: dict[str, str] = {}
    for source in safetensors.read(path, path.name):
        name, data = source.name.replace("backbone.", "model.", 1), np.array(source.data)  # copied: rewritten
        dtypes[name] = source.dtype
        m = re.fullmatch(r"(model\.layers\.\d+\.mixer\.experts)\.(\d+)\.(up|down)_proj\.weight", name)
        if m:
            experts.setdefault(f"{m[1]}.{m[3]}_proj", {})[int(m[2])] = data
            dtypes[f"{m[1]}.{m[3]}_proj"] = source.dtype
        else:
            tensors[name] = data
    for name, each in experts.items():
        tensors[name] = np.stack([each[e] for e in sorted(each)])
    path.unlink()
    write_safetensors(path, {name: (dtypes[name], data) for name, data in tensors.items()})


def write_hf_nemotron_omni(
    folder: Path, *, audio: bool = True, grid: int = omni_ggufs.SOURCE_GRID, final_norm: bool = False, seed: int = 0
) -> tuple[Path, Path, Path]:
    """``folder/hf-nemotron-omni/``, a Nemotron 3 Nano Omni as its release keeps it
    (``NemotronH_Nano_Omni_Reasoning_V3``; without ``audio``, ``NemotronH_Nano_VL_V2``, Nemotron Nano
    VL's): the Nemotron-H text model under ``language_model.backbone.``, its settings under
    ``llm_config``; RADIO and its MLP, and the Parakeet (``omni_ggufs.release_tower``; RADIO's
    position table at ``grid``; with ``final_norm``, the LayerNorm Megatron adds after it where the
    text model has a multi-token-prediction layer, which config.json then states); F16 matrices.
    Its twins ``folder/text.gguf`` and ``folder/mmproj.gguf`` are llama.cpp's files of the same
    model (``write_nemotron_omni_vision``)."""
    v, a = omni_ggufs.VISION, omni_ggufs.PARAKEET
    text, mmproj = omni_ggufs.write_nemotron_omni_vision(folder, seed=seed, audio=audio, f16=True, post_ln=final_norm)
    hf = export(text, folder / "hf-nemotron-omni")
    weights = hf / "model.safetensors"
    tensors = {f"language_model.{t.name}": (t.dtype, np.array(t.data)) for t in safetensors.read(weights, weights.name)}
    write_safetensors(weights, tensors | omni_ggufs.release_tower(mmproj, seed=seed, grid=grid))
    llm = json.loads((hf / "config.json").read_text())
    if final_norm:
        llm["num_nextn_predict_layers"] = 1  # whose weights the folder leaves out, as cllm does
    n_tokens = llm["vocab_size"]
    config: dict[str, Any] = {
        "architectures": ["NemotronH_Nano_Omni_Reasoning_V3" if audio else "NemotronH_Nano_VL_V2"],
        "model_type": "nemotron_h_omni",
        "llm_config": llm,
        "vision_config": {
            "model_type": "radio",
            "version": "radio_v2.5-h",
            "hidden_size": v.n_embd,
            "num_hidden_layers": v.n_layer,
            "num_attention_heads": v.n_head,
            "mlp_ratio": v.n_ff / v.n_embd,
            "patch_size": v.patch_size,
            "max_img_size": grid * v.patch_size,
            "num_cls_tokens": 1,
            "num_registers": omni_ggufs.N_REGISTERS - 1,
            "norm_mean": [0.5, 0.5, 0.5],
            "norm_std": [0.5, 0.5, 0.5],
            "video_temporal_patch_size": 2,  # its video embedder, which the folder leaves out as libmtmd does
        },
        "force_image_size": v.image_size,
        "downsample_ratio": 1 / v.merge,
        "vit_hidden_size": v.n_embd,
        "projector_hidden_size": omni_ggufs.PROJECTOR_HIDDEN,
        "img_context_token_id": n_tokens - 1,
        "max_sequence_length": llm["max_position_embeddings"],
    }
    if audio:
        config["sound_context_token_id"] = n_tokens - 2
        config["sound_config"] = {
            "model_type": "parakeet",
            "hidden_size": a.n_embd,
            "num_attention_heads": a.n_head,
            "num_hidden_layers": a.n_layer,
            "intermediate_size": a.n_ff,
            "conv_kernel_size": a.conv_kernel,
            "subsampling_conv_channels": a.channels,
            "subsampling_conv_kernel_size": 3,
            "subsampling_conv_stride": 2,
            "subsampling_factor": a.subsampling,
            "num_mel_bins": a.n_mel,
            "projection_hidden_size": a.hidden,
            "sampling_rate": 16000,
        }
    (hf / "config.json").write_text(json.dumps(config, indent=2))
    (hf / "preprocessor_config.json").write_text(
        json.dumps(
            {"image_size": v.image_size, "patch_size": v.patch_size, "norm_mean": [0.5] * 3, "norm_std": [0.5] * 3}
        )
    )
    return hf, text, mmproj


def write_hf_lfm2_vision(folder: Path, *, layernorm: bool = True, seed: int = 0) -> tuple[Path, Path, Path]:
    """``folder/hf-lfm2-vl/``, an LFM2-VL (``Lfm2VlForConditionalGeneration``: the LFM2 text model
    under ``model.language_model.`` with LFM2-VL's picture marks in its vocabulary, SigLIP2 and its
    projector, F16; without ``layernorm``, LFM2.5-VL's projector, which has no layer norm), and its
    twins ``folder/text.gguf`` and ``folder/mmproj.gguf`` (an ``lfm2`` projector)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = ollama_ggufs.write_lfm2(folder / "text.gguf", seed=seed, f16=True, vocab=tower_ggufs.lfm2_vl_vocab())
    mmproj = tower_ggufs.write_lfm2_projector(folder / "mmproj.gguf", layernorm=layernorm, seed=seed)
    return export(text, folder / "hf-lfm2-vl", sees="model.language_model.", tower=mmproj), text, mmproj


def write_hf_command_r(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-command-r/``, a Command R checkpoint (``CohereForCausalLM``: layer norms, attention
    and FFN side by side, logits scaled, digits split one by one; F16), and
    ``folder/command-r.gguf``, its twin."""
    return _exported(folder, "command-r", lambda p: ollama_ggufs.write_command_r(p, seed=seed, f16=True))


def write_hf_lfm2moe(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-lfm2moe/``, an LFM2 mixture (``Lfm2MoeForCausalLM``: a dense block, then one of
    experts each apart with a sigmoid router and its bias; F16), and ``folder/lfm2moe.gguf``, its twin."""
    return _exported(folder, "lfm2moe", lambda p: ollama_ggufs.write_lfm2moe(p, seed=seed, f16=True))


def write_hf_olmo3(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-olmo3/``, an OLMo 3 checkpoint (``Olmo3ForCausalLM``: Q and K normed across heads,
    norms after attention and the FFN, a 4-token window that a short prompt already slides; F16),
    and ``folder/olmo2.gguf``, its twin."""
    return _exported(folder, "olmo2", lambda p: ollama_ggufs.write_olmo2(p, seed=seed, f16=True, window=4), "olmo3")


def write_hf_lfm2(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-lfm2/``, an LFM2 checkpoint (``Lfm2ForCausalLM``: a short convolution's block, then
    an attention block; F16), and ``folder/lfm2.gguf``, its twin."""
    return _exported(folder, "lfm2", lambda p: ollama_ggufs.write_lfm2(p, seed=seed, f16=True))


def write_hf_gptoss(folder: Path, *, seed: int = 0, dequantized: bool = False) -> tuple[Path, Path]:
    """``folder/hf-gptoss/``, a gpt-oss checkpoint (``GptOssForCausalLM``: its experts in MXFP4 as
    the releases keep them, or ``dequantized`` as a fine-tune saved in 16 bits keeps them; the rest
    F16), and ``folder/gpt-oss.gguf``, its twin."""
    folder.mkdir(parents=True, exist_ok=True)
    twin = ollama_ggufs.write_gptoss(folder / "gpt-oss.gguf", seed=seed, f16=True)
    out = export(twin, folder / "hf-gptoss", dequantized=dequantized)
    if not dequantized:  # as the releases state it
        config = json.loads((out / "config.json").read_text())
        config["quantization_config"] = {
            "quant_method": "mxfp4",
            "modules_to_not_convert": [
                "model.layers.*.self_attn",
                "model.layers.*.mlp.router",
                "model.embed_tokens",
                "lm_head",
            ],
        }
        _write_json(out / "config.json", config)
    return out, twin


def _write_tokenizer(folder: Path, kv: dict[str, Any]) -> None:
    tokens, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"]
    vocab, added = {}, []
    for tid, (text, kind) in enumerate(zip(tokens, types, strict=True)):
        if kind == gguf.TokenType.NORMAL:
            vocab[text] = tid
        elif kind in (gguf.TokenType.CONTROL, gguf.TokenType.USER_DEFINED):
            special = kind == gguf.TokenType.CONTROL
            added.append(
                {"id": tid, "content": text, "single_word": False, "lstrip": False, "rstrip": False}
                | {"normalized": False, "special": special}
            )
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    pre = kv["tokenizer.ggml.pre"]
    if pre == "command-r":  # Cohere's: every digit apart, then GPT-2's split
        byte_level = byte_level | {"use_regex": True}
        steps = [{"type": "Digits", "individual_digits": True}, byte_level]
    else:
        patterns = SPLIT_PATTERNS[pre]
        steps = [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}
            for pattern in ((patterns,) if isinstance(patterns, str) else patterns)
        ] + [byte_level]
    spec = {
        "version": "1.0",
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": steps},
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "byte_fallback": False,
            "vocab": vocab,
            "merges": [m.split(" ") for m in kv["tokenizer.ggml.merges"]],
        },
    }
    _write_json(folder / "tokenizer.json", spec)


def _write_gemma4_tokenizer(folder: Path, kv: dict[str, Any]) -> None:
    """Gemma 4's tokenizer.json: BPE over text whose spaces are ``▁``, falling back on ``<0xXX>``
    byte tokens, its special tokens added (all special, as Google's are), a bos before every text."""
    tokens, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"]
    plain = (gguf.TokenType.NORMAL, gguf.TokenType.BYTE)
    vocab = {text: tid for tid, (text, kind) in enumerate(zip(tokens, types, strict=True)) if kind in plain}
    added = [
        {"id": tid, "content": text, "single_word": False, "lstrip": False, "rstrip": False}
        | {"normalized": False, "special": True}
        for tid, (text, kind) in enumerate(zip(tokens, types, strict=True))
        if kind not in plain
    ]
    bos = tokens[int(kv["tokenizer.ggml.bos_token_id"])]
    space = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
    spec = {
        "version": "1.0",
        "added_tokens": added,
        "normalizer": space,
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [int(kv["tokenizer.ggml.bos_token_id"])], "tokens": [bos]}},
        },
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
            ],
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": tokens[int(kv["tokenizer.ggml.unknown_token_id"])],
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": True,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [m.split(" ") for m in kv["tokenizer.ggml.merges"]],
        },
    }
    _write_json(folder / "tokenizer.json", spec)


def _write_settings(folder: Path, kv: dict[str, Any], template_file: bool) -> None:
    """``tokenizer_config.json``: the special tokens by their text, whether a bos and eos are added
    (bos then stated, else none as Qwen's), and the chat template (or ``chat_template.jinja``)."""
    tokens, template = kv["tokenizer.ggml.tokens"], kv.get("tokenizer.chat_template")
    adds_bos = bool(kv.get("tokenizer.ggml.add_bos_token"))
    settings: dict[str, Any] = {"model_max_length": 131072, "bos_token": None, "add_bos_token": adds_bos}
    for name, key in (("bos", "bos"), ("eos", "eos"), ("pad", "padding"), ("unk", "unknown")):
        tid = kv.get(f"tokenizer.ggml.{key}_token_id")
        if tid is not None and (name != "bos" or adds_bos):
            settings[f"{name}_token"] = tokens[int(tid)]
    if "tokenizer.ggml.add_eos_token" in kv:
        settings["add_eos_token"] = bool(kv["tokenizer.ggml.add_eos_token"])
    if template and template_file:
        (folder / "chat_template.jinja").write_text(template)
    elif template:
        settings["chat_template"] = template
    _write_json(folder / "tokenizer_config.json", settings)


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")


def _write_safetensors(folder: Path, tensors: dict[str, np.ndarray], dtype: str, shards: int) -> None:
    names = sorted(tensors)
    parts = [names[i::shards] for i in range(shards)]
    index: dict[str, str] = {}
    for i, part in enumerate(parts, 1):
        file = "model.safetensors" if shards == 1 else f"model-{i:05d}-of-{shards:05d}.safetensors"
        write_safetensors(folder / file, {n: _typed(tensors[n], dtype) for n in part})
        index |= dict.fromkeys(part, file)
    if shards > 1:
        _write_json(folder / "model.safetensors.index.json", {"metadata": {}, "weight_map": index})


def _typed(data: np.ndarray, dtype: str) -> tuple[str, np.ndarray]:
    """Matrices in ``dtype``, vectors F32; BF16 rounded to nearest even, as torch does; bytes (MXFP4's) as they are."""
    if data.dtype == np.uint8:
        return "U8", data
    if data.ndim <= 1 or dtype == "F32":  # vectors, and scalars (Gemma 4's clamps)
        return "F32", data.astype(np.float32)
    if dtype == "F16":
        return "F16", data.astype(np.float16)
    return "BF16", to_bf16(data)


def to_bf16(data: np.ndarray) -> np.ndarray:
    """F32 values as BF16's bits, rounded to nearest even."""
    bits = np.ascontiguousarray(data, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def read_safetensors(path: Path) -> dict[str, tuple[str, np.ndarray]]:
    """A safetensors file's tensors (dtype and a copy of the values, by name), to edit and write back."""
    return {t.name: (t.dtype, np.array(t.data)) for t in safetensors.read(path, path.name)}


def write_safetensors(path: Path, tensors: dict[str, tuple[str, np.ndarray]]) -> Path:
    """A safetensors file: an 8-byte header length, the JSON header (padded to 8 bytes), the data."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(data.shape), "data_offsets": [offset, offset + data.nbytes]}
        offset += data.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with path.open("wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for _, data in tensors.values():
            f.write(np.ascontiguousarray(data).tobytes())
    return path
