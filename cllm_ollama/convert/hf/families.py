"""The model families cllm converts from Hugging Face's layout, by ``config.json``'s architecture:
llama.cpp's architecture, its hyperparameter keys, and each checkpoint tensor's GGUF name and values.

Llama and Mistral are llama.cpp's ``llama``, whose rotary embedding pairs neighbouring dimensions
where Hugging Face's pairs the two halves of a head: their Q and K rows are reordered (``permute``,
as llama.cpp's and Ollama's converters do). Qwen 2 and 3 and Gemma 3 rotate halves in llama.cpp too.
Gemma 3's norms scale by ``1 + weight``, which llama.cpp stores with the 1 added.
Qwen2-VL, Qwen2.5-VL and Qwen3-VL are Qwen 2 and 3 with M-RoPE (a token's position in time, row
and column rotate sections of each head), llama.cpp's ``qwen2vl`` and ``qwen3vl``. Qwen 3.5 has
M-RoPE too, and three of every four layers are a gated delta net (linear attention) whose
parameters llama.cpp keeps otherwise: ``A`` as ``-exp(A_log)``, the convolution without its unit
axis, and the value heads tiled rather than grouped by key head (``Family.reorder``).
gpt-oss keeps a layer's experts in one tensor per projection, its gate's and up's rows interleaved,
as MXFP4 blocks and scales (the releases) or dequantized (a fine-tune saved in 16 bits):
``Family.interleaved_experts``. DeepSeek V3 and GLM-4.7-Flash are llama.cpp's ``deepseek2``, whose
latent attention expands the cache per head with ``kv_b_proj`` split in two (``Family.split``).
GLM-OCR is GLM-4's ``glm4`` with M-RoPE, whose Q and K rows go the other way, from pairs to
halves (``halves_order``).
Nemotron-H is llama.cpp's ``nemotron_h``: Mamba-2 layers beside attention and FFN layers, told
apart by per-layer KV heads and FFN widths, ``A`` as ``-exp(A_log)`` as Qwen 3.5's.
The others are renamings with their own keys: EmbeddingGemma,
LFM2 and its mixture, OLMo 2 and 3, Ministral 3 (llama.cpp's ``mistral3``, not a Llama), Command
R, Gemma 1 and Nomic BERT; where llama.cpp fixes a setting a checkpoint may state otherwise, the
checkpoint is refused (``Family._require_fixed``) rather than converted to compute something else.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from gguf import GGUFValueType

from ..framework import KV
from .errors import ImportRefused
from .safetensors import SourceTensor

_U32 = GGUFValueType.UINT32
_F32 = GGUFValueType.FLOAT32
_STR = GGUFValueType.STRING

_GLOBAL = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
_BLOCK = re.compile(r"model\.layers\.(\d+)\.(.+)\.(weight|bias)")
_PARAM = re.compile(r"model\.layers\.(\d+)\.(.+)")
_ATTENTION = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
_PRE_NORMS = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
_QK_NORMS = {"self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm"}
_GEMMA_NORMS = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "post_ffw_norm",
}
# One expert's projection in a mixture of experts (each expert its own tensors, as transformers 4
# saves them): Qwen 3's, and Mixtral's, whose w1, w3 and w2 are the gate, up and down projections.
_EXPERT = re.compile(r"model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight")
_MIXTRAL_EXPERT = re.compile(r"model\.layers\.(\d+)\.block_sparse_moe\.experts\.(\d+)\.(w1|w3|w2)\.weight")
_MIXTRAL_PROJECTIONS = {"w1": "gate", "w3": "up", "w2": "down"}
# Buffers some checkpoints carry that llama.cpp computes itself.
_SKIPPED = re.compile(r".*\.rotary_emb\.inv_freq$")
# BERT (an encoder: sentence-transformers' embedding models): its embeddings, and each layer's
# tensors; the pooler and the pretraining heads, which an embedding model does not use, are left.
_BERT_GLOBAL = {
    "embeddings.word_embeddings.weight": "token_embd.weight",
    "embeddings.position_embeddings.weight": "position_embd.weight",
    "embeddings.token_type_embeddings.weight": "token_types.weight",
    "embeddings.LayerNorm.weight": "token_embd_norm.weight",
    "embeddings.LayerNorm.bias": "token_embd_norm.bias",
}
_BERT_BLOCK = re.compile(r"encoder\.layer\.(\d+)\.(.+)\.(weight|bias)")
_BERT = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}
_BERT_SKIPPED = re.compile(r"embeddings\.position_ids|pooler\..*|cls\..*")
# Nomic BERT (nomic-embed-text and its fine-tunes, ``NomicBertModel`` as its own code saves it):
# rotary positions, fused Q/K/V, a SwiGLU whose value is fc11 and gate fc12, norms after each part.
_NOMIC_GLOBAL = {
    "embeddings.word_embeddings.weight": "token_embd.weight",
    "embeddings.token_type_embeddings.weight": "token_types.weight",
    "emb_ln.weight": "token_embd_norm.weight",
    "emb_ln.bias": "token_embd_norm.bias",
}
_NOMIC_BLOCK = re.compile(r"encoder\.layers\.(\d+)\.(.+)\.(weight|bias)")
_NOMIC = {
    "attn.Wqkv": "attn_qkv",
    "attn.out_proj": "attn_output",
    "norm1": "attn_output_norm",
    "mlp.fc11": "ffn_up",
    "mlp.fc12": "ffn_gate",
    "mlp.fc2": "ffn_down",
    "norm2": "layer_output_norm",
}
# Its config.json's names (GPT-2's) for the settings the others name as transformers does.
_NOMIC_NAMES = {
    "n_embd": "hidden_size",
    "n_layer": "num_hidden_layers",
    "n_head": "num_attention_heads",
    "n_inner": "intermediate_size",
    "n_positions": "max_position_embeddings",
    "layer_norm_epsilon": "layer_norm_eps",
    "rotary_emb_base": "rope_theta",
}
# The settings its llama.cpp architecture fixes (llama.cpp's converter asserts them).
_NOMIC_FIXED = {
    "activation_function": "swiglu",
    "causal": False,
    "prenorm": False,
    "qkv_proj_bias": False,
    "mlp_fc1_bias": False,
    "mlp_fc2_bias": False,
    "rotary_emb_fraction": 1.0,
    "rotary_emb_interleaved": False,
    "rotary_emb_scale_base": None,
    "rotary_scaling_factor": None,
    "use_rms_norm": False,
    "parallel_block": False,
}


@dataclass(frozen=True)
class _Layout:
    arch: str
    parts: Mapping[str, str]  # a block's tensors: Hugging Face's name -> llama.cpp's
    norm_shift: float = 0.0  # added to every norm's weights
    # Embedding rows past the tokenizer's vocabulary: kept as padding tokens, or cut (Gemma's).
    pad_vocabulary: bool = True
    # A space put before a prompt by a SentencePiece vocabulary: llama.cpp's default (None), or
    # as stated (Gemma's never, as llama.cpp's converter writes it whatever the tokenizer says).
    space_prefix: bool | None = None
    # A checkpoint that sees (``...ForConditionalGeneration``): its text model's settings are under
    # ``text_config`` (Nemotron's releases' ``llm_config``) and its tensors under a prefix, apart
    # from the vision tower's ...
    tower: bool = False
    # ... which become a projector of this ``clip.projector_type`` (``vision.projector``), or, with
    # none, are left out; and its audio tower's, which become that projector's side of this type
    # (``audio.projector``), or, with none, are left out.
    vision: str | None = None
    audio: str | None = None
    # The output is always the token embedding (Gemma 2's): a stray lm_head is not written.
    tied: bool = False
    # A mixture's experts: one tensor per expert and projection (layer, expert, projection), stacked
    # per layer as llama.cpp keeps them; the projection's name in the checkpoint -> gate, up or down.
    experts: re.Pattern[str] | None = None
    projections: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # A layer's experts kept in one tensor (``Family.fused_experts``): the setting that says an
    # expert's width, and whether they are always ``(experts, in, out)`` (Llama 4's releases').
    expert_width: str = "moe_intermediate_size"
    transposed_experts: bool = False
    # Where the tensors outside the blocks and the blocks' are, and what is left out (a decoder's
    # by default; BERT's are its own).
    globals: Mapping[str, str] = dataclasses.field(default_factory=lambda: _GLOBAL)
    block: re.Pattern[str] = _BLOCK
    skipped: re.Pattern[str] = _SKIPPED
    prefix: str = ""  # before every tensor's name, in some checkpoints (BertForMaskedLM's "bert.")
    # A block's parameters that are not a module's weight or bias: Hugging Face's name -> llama.cpp's.
    params: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Norms whose weights ``norm_shift`` leaves as they are (Qwen 3.5's delta net's, a plain RMS norm).
    unshifted: tuple[str, ...] = ()
    # A layer's experts as gpt-oss keeps them (``Family.interleaved_experts``).
    interleaved: bool = False
    # Projections after the pooling, in sentence-transformers modules of their own (EmbeddingGemma's).
    dense_head: bool = False
    # llama.cpp loads no model of this architecture without an output of its own (OLMo's): a tied
    # checkpoint's is its token embedding, written again.
    own_output: bool = False
    # The tokenizer.json's kind where it is not byte-level BPE's: Gemma 4's SentencePiece-style BPE.
    tokenizer: str | None = None
    # llama.cpp's pre-tokenizer whatever tokenizer.json's split patterns (as Ollama's converter names
    # it per family: DeepSeek V3's, GLM's), and tokens that end a turn by their text (llama.cpp's
    # eot and eom, as its converter sets GLM's).
    pre_tokenizer: str | None = None
    turn_ends: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # The ``num_nextn_predict_layers`` layers past ``num_hidden_layers`` are a multi-token-prediction
    # block (DeepSeek V3's, GLM's), left out as Ollama's converter leaves it (cllm does not draft).
    mtp_layers: bool = False
    # A prefix some checkpoints keep their model under instead of ``model.`` (Nemotron-H's releases'
    # ``backbone.``, which transformers 5 renames on load and saves as ``model.``).
    root: str | None = None
    # Matrices outside the blocks that llama.cpp keeps stacked in one tensor (Gemma 3n's altup
    # projections): the checkpoint's ``<stem>.<index>.weight`` -> llama.cpp's name for the stack.
    stacks: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Vocabulary tables shorter than the vocabulary whose rows past their own the first row stands
    # for (Gemma 3n's per-layer embeddings past ``vocab_size_per_layer_input``, as transformers reads them).
    first_row_pads: tuple[str, ...] = ()


_LLAMA = _Layout("llama", _ATTENTION | _PRE_NORMS)
# Ministral 3 (``Ministral3ForCausalLM``, or a ``Mistral3ForConditionalGeneration`` whose text model
# is ``ministral3``): a Llama with YaRN scaled as transformers scales it (``mscale_all_dim``) and its
# queries tempered by position beyond the trained context (``llama_4_scaling_beta``): llama.cpp's
# ``mistral3``, which reads both; as ``llama`` neither, and its logits are off at every position.
_MINISTRAL3 = dataclasses.replace(_LLAMA, arch="mistral3")
# Phi-3's projections fused as llama.cpp keeps them: Q, K and V in one, the FFN's gate and up in one.
_PHI3 = {
    "self_attn.qkv_proj": "attn_qkv",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
# config.json's "architectures" -> how its checkpoint becomes llama.cpp's.
_QWEN2 = _ATTENTION | _PRE_NORMS
_QWEN3 = _ATTENTION | _PRE_NORMS | _QK_NORMS
# Qwen 3.5's: a full-attention layer's (its query twice as wide, the second half a gate), or a
# gated delta net's; every layer's norm after attention is llama.cpp's post-attention norm.
_QWEN35 = _QWEN3 | {
    "post_attention_layernorm": "post_attention_norm",
    "linear_attn.in_proj_qkv": "attn_qkv",
    "linear_attn.in_proj_z": "attn_gate",
    "linear_attn.in_proj_a": "ssm_alpha",
    "linear_attn.in_proj_b": "ssm_beta",
    "linear_attn.conv1d": "ssm_conv1d",
    "linear_attn.norm": "ssm_norm",
    "linear_attn.out_proj": "ssm_out",
}
_QWEN35_PARAMS = {"linear_attn.A_log": "ssm_a", "linear_attn.dt_bias": "ssm_dt.bias"}
_QWEN35_SHARED = {
    "mlp.gate": "ffn_gate_inp",
    "mlp.shared_expert.gate_proj": "ffn_gate_shexp",
    "mlp.shared_expert.up_proj": "ffn_up_shexp",
    "mlp.shared_expert.down_proj": "ffn_down_shexp",
    "mlp.shared_expert_gate": "ffn_gate_inp_shexp",
}
# A layer's experts in one tensor each for down and for gate and up together (transformers 5's
# own layout, as the Qwen 3.5 releases keep them): ``(experts, 2 x width, hidden)`` and ``(experts, hidden, width)``;
# Llama 4's under its ``feed_forward``, always transposed (``(experts, hidden, 2 x width)``).
_FUSED_EXPERTS = re.compile(
    r"model\.layers\.(\d+)\.(?:mlp\.|mixer\.|feed_forward\.)?experts\.(gate_up|up|down)_proj(?:\.weight)?"
)
# gpt-oss's: a layer's experts per projection, gate and up in one (their rows interleaved), as
# dequantized ``(experts, in, out)`` weights or MXFP4 ``_blocks`` and ``_scales``, and their ``_bias``.
_INTERLEAVED_EXPERTS = re.compile(r"model\.layers\.(\d+)\.mlp\.experts\.(gate_up|down)_proj(?:_(blocks|scales|bias))?")
_GPTOSS = _ATTENTION | {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "post_attention_norm",
    "mlp.router": "ffn_gate_inp",
}
# LFM2's: attention (Q and K normed per head) or a short convolution per layer, each beside a SwiGLU
# FFN (w1 the gate, w3 up, w2 down); its final norm is named as if it followed the embeddings.
_LFM2 = {
    "operator_norm": "attn_norm",
    "ffn_norm": "ffn_norm",
    "feed_forward.w1": "ffn_gate",
    "feed_forward.w3": "ffn_up",
    "feed_forward.w2": "ffn_down",
    "conv.conv": "shortconv.conv",
    "conv.in_proj": "shortconv.in_proj",
    "conv.out_proj": "shortconv.out_proj",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.out_proj": "attn_output",
    "self_attn.q_layernorm": "attn_q_norm",
    "self_attn.k_layernorm": "attn_k_norm",
}
# Cohere's (Command R, Aya): one layer norm before attention and the FFN side by side, Q and K
# normed per head in Command R+ (``use_qk_norm``); its rotary pairs neighbours, as llama.cpp's does.
_COHERE = _ATTENTION | {"input_layernorm": "attn_norm"} | _QK_NORMS
# OLMo 2's and 3's: norms after attention and after the FFN only, Q and K normed across all heads.
_OLMO2 = _ATTENTION | {
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "post_attention_layernorm": "post_attention_norm",
    "post_feedforward_layernorm": "post_ffw_norm",
}
# LFM2's mixture (LFM2-8B-A1B): after its leading dense layers, experts each apart (w1, w3, w2 as
# Mixtral's), a router and a bias its sigmoid scores are chosen by (not weighed by).
_LFM2_EXPERT = re.compile(r"model\.layers\.(\d+)\.feed_forward\.experts\.(\d+)\.(w1|w3|w2)\.weight")
_LFM2MOE_FIXED = {"use_expert_bias": True, "norm_topk_prob": True, "routed_scaling_factor": 1.0}
_LFM2_GLOBAL = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.embedding_norm.weight": "token_embd_norm.weight",
    "lm_head.weight": "output.weight",
}
# The activation llama.cpp's gpt-oss computes (``ggml_swiglu_oai``'s fixed alpha and clamp).
_GPTOSS_SWIGLU = {"swiglu_alpha": 1.702, "swiglu_limit": 7.0}
# Its multi-token-prediction block, which llama.cpp's converter leaves out unless asked (and Ollama's
# models have not).
_QWEN35_SKIPPED = re.compile(_SKIPPED.pattern + r"|(model\.)?mtp\..*")
_GEMMA3 = _Layout("gemma3", _ATTENTION | _GEMMA_NORMS | _QK_NORMS, 1.0, pad_vocabulary=False, space_prefix=False)
# EmbeddingGemma (``Gemma3TextModel`` as sentence-transformers saves it): Gemma 3's layers without
# the ``model.`` before their names, attending both ways (llama.cpp's ``gemma-embedding``).
_EMBEDDING_GEMMA = dataclasses.replace(
    _GEMMA3,
    arch="gemma-embedding",
    tied=True,
    dense_head=True,
    prefix="model.",
    globals={"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight"},
    block=re.compile(r"layers\.(\d+)\.(.+)\.(weight|bias)"),
)
# Gemma (1, and CodeGemma): a Llama's blocks with Gemma's +1 norms, GeGLU and a tied output.
_GEMMA = _Layout("gemma", _ATTENTION | _PRE_NORMS, 1.0, pad_vocabulary=False, space_prefix=False, tied=True)
_GEMMA2 = _Layout("gemma2", _ATTENTION | _GEMMA_NORMS, 1.0, pad_vocabulary=False, space_prefix=False, tied=True)
# GLM-4-0414 and GLM-Z1 (``Glm4ForCausalLM``): Q, K and V with biases, the first half of each head
# rotating in neighbouring pairs (llama.cpp's plain rotation: nothing reordered), a norm after
# attention and after the FFN beside those before them, the FFN's gate and up in one projection
# (as Phi-3's); GLM's pre-tokenizer and the ends of its turns, as GLM-4.7-Flash's: llama.cpp's ``glm4``.
_GLM4 = _Layout(
    "glm4",
    {
        **{k: v for k, v in _ATTENTION.items() if k.startswith("self_attn.")},
        "mlp.gate_up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
        "input_layernorm": "attn_norm",
        "post_self_attn_layernorm": "post_attention_norm",
        "post_attention_layernorm": "ffn_norm",
        "post_mlp_layernorm": "post_ffw_norm",
    },
    pre_tokenizer="glm4",
    turn_ends={"eot": "<|user|>", "eom": "<|observation|>"},
)
# GLM-OCR (``GlmOcrForConditionalGeneration``): GLM-4's blocks without Q/K/V biases under a model
# that sees, M-RoPE over its rotating dimensions (Q and K rows from neighbouring pairs to halves,
# ``Family.reorder``: llama.cpp's M-RoPE rotates halves), its multi-token-prediction layer left out,
# GLM's ``chatglm-bpe`` pre-tokenizer as Ollama's converter names it; its tower a ``glm4v`` projector.
_GLMOCR = dataclasses.replace(_GLM4, tower=True, vision="glm4v", mtp_layers=True, pre_tokenizer="chatglm-bpe")
# GLM-4.1V (``Glm4vForConditionalGeneration``, and ``Glm46VForConditionalGeneration`` over the same
# text model): GLM-OCR's layout with GLM-4's Q, K and V biases, half of each head rotating, GLM-4's
# pre-tokenizer; its tower the same projector.
_GLM4V = dataclasses.replace(_GLMOCR, pre_tokenizer="glm4")
# Gemma 4's E2B and E4B and Gemma 3n's per-layer embeddings: a second table whose slice for each
# layer, with a projection of the layer's input, gates into its output.
_PER_LAYER_INPUTS = {
    "per_layer_input_gate": "inp_gate",
    "per_layer_projection": "proj",
    "post_per_layer_input_norm": "post_norm",
}
_PER_LAYER_EMBEDDINGS = {
    "model.embed_tokens_per_layer.weight": "per_layer_token_embd.weight",
    "model.per_layer_model_projection.weight": "per_layer_model_proj.weight",
    "model.per_layer_projection_norm.weight": "per_layer_proj_norm.weight",
}
# Gemma 4 (``Gemma4ForCausalLM``, and the text model of ``Gemma4ForConditionalGeneration``): Gemma
# 3's blocks with plain norms (no +1), and in E2B/E4B per-layer embeddings (a second table whose
# slice for each layer gates into its output), in the 26B-A4B a mixture beside the dense FFN
# (its router's scale, and each expert's, as llama.cpp names them); a layer's output scale.
_GEMMA4 = _Layout(
    "gemma4",
    _ATTENTION
    | _GEMMA_NORMS
    | _QK_NORMS
    | {
        **_PER_LAYER_INPUTS,
        "router.proj": "ffn_gate_inp",
        "pre_feedforward_layernorm_2": "pre_ffw_norm_2",
        "post_feedforward_layernorm_1": "post_ffw_norm_1",
        "post_feedforward_layernorm_2": "post_ffw_norm_2",
    },
    pad_vocabulary=False,
    space_prefix=False,
    experts=_EXPERT,  # a mixture (its experts kept fused: ``Family.fused_experts``)
    globals=_GLOBAL | _PER_LAYER_EMBEDDINGS,
    params={
        "layer_scalar": "layer_output_scale.weight",
        "router.scale": "ffn_gate_inp.scale",
        "router.per_expert_scale": "ffn_down_exps.scale",
    },
    tokenizer="gemma4",
)
# Gemma 3n (E2B, E4B: the text model of ``Gemma3nForConditionalGeneration``, or ``Gemma3nForCausalLM``):
# Gemma 3's blocks with plain norms (no +1) and per-layer embeddings as Gemma 4's, four AltUp streams
# (each layer predicts them from the active one and corrects them after it: a router and two tiny
# coefficient maps), a low-rank residual beside attention (LAuReL), and the streams' projections
# out of and back into the active one, stacked as llama.cpp keeps them: llama.cpp's ``gemma3n``.
_GEMMA3N = _Layout(
    "gemma3n",
    _ATTENTION
    | _GEMMA_NORMS
    | _QK_NORMS
    | {
        **_PER_LAYER_INPUTS,
        "altup.correction_coefs": "altup_correct_coef",
        "altup.prediction_coefs": "altup_predict_coef",
        "altup.modality_router": "altup_router",
        "altup.router_norm": "altup_router_norm",
        "laurel.linear_left": "laurel_l",
        "laurel.linear_right": "laurel_r",
        "laurel.post_laurel_norm": "laurel_post_norm",
    },
    pad_vocabulary=False,
    space_prefix=False,
    tied=True,
    globals=_GLOBAL | _PER_LAYER_EMBEDDINGS,
    params={"altup.correct_output_scale": "altup_correct_scale.weight"},
    stacks={
        "model.altup_projections": "altup_proj.weight",
        "model.altup_unembed_projections": "altup_unembd_proj.weight",
    },
    first_row_pads=("per_layer_token_embd.weight",),
)
# DeepSeek V3's (and GLM-4.7-Flash's) multi-head latent attention: Q through a low-rank projection
# (or one, without ``q_lora_rank``), K and V from one compressed latent (``kv_a_proj_with_mqa``,
# its last rows the shared rotary key) that ``kv_b_proj`` expands, which llama.cpp splits into its
# K and V halves per head (``Family.split``); leading dense layers, then routed experts chosen by
# sigmoid scores plus a bias, beside shared ones: llama.cpp's ``deepseek2``.
_DEEPSEEK2 = _Layout(
    "deepseek2",
    _PRE_NORMS
    | {
        "self_attn.q_proj": "attn_q",
        "self_attn.q_a_proj": "attn_q_a",
        "self_attn.q_a_layernorm": "attn_q_a_norm",
        "self_attn.q_b_proj": "attn_q_b",
        "self_attn.kv_a_proj_with_mqa": "attn_kv_a_mqa",
        "self_attn.kv_a_layernorm": "attn_kv_a_norm",
        "self_attn.kv_b_proj": "attn_kv_b",
        "self_attn.o_proj": "attn_output",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
        "mlp.gate": "ffn_gate_inp",
        "mlp.shared_experts.gate_proj": "ffn_gate_shexp",
        "mlp.shared_experts.up_proj": "ffn_up_shexp",
        "mlp.shared_experts.down_proj": "ffn_down_shexp",
    },
    experts=_EXPERT,
    params={"mlp.gate.e_score_correction_bias": "exp_probs_b.bias"},
    pre_tokenizer="deepseek-v3",
    mtp_layers=True,
)
# Nemotron-H's: every layer one mixer after one norm, a Mamba-2's (its in-projection, convolution,
# grouped gated norm and out-projection; ``A``, ``D`` and the step's bias as parameters), an
# attention's without rotation, a ReLU² MLP's (up and down), or a mixture's (experts of up and down
# each apart or fused, a sigmoid router and its bias, a shared expert, and in Nemotron 3 Super a
# latent projection around the experts): llama.cpp's ``nemotron_h`` and ``nemotron_h_moe``.
_NEMOTRON_H = _Layout(
    "nemotron_h",
    {
        "norm": "attn_norm",
        "mixer.in_proj": "ssm_in",
        "mixer.conv1d": "ssm_conv1d",
        "mixer.norm": "ssm_norm",
        "mixer.out_proj": "ssm_out",
        "mixer.q_proj": "attn_q",
        "mixer.k_proj": "attn_k",
        "mixer.v_proj": "attn_v",
        "mixer.o_proj": "attn_output",
        "mixer.up_proj": "ffn_up",
        "mixer.down_proj": "ffn_down",
        "mixer.gate": "ffn_gate_inp",
        "mixer.shared_experts.up_proj": "ffn_up_shexp",
        "mixer.shared_experts.down_proj": "ffn_down_shexp",
        "mixer.fc1_latent_proj": "ffn_latent_down",
        "mixer.fc2_latent_proj": "ffn_latent_up",
    },
    experts=re.compile(r"model\.layers\.(\d+)\.mixer\.experts\.(\d+)\.(up|down)_proj\.weight"),
    globals={
        "model.embeddings.weight": "token_embd.weight",
        "model.norm_f.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    },
    params={
        "mixer.A_log": "ssm_a",
        "mixer.D": "ssm_d",
        "mixer.dt_bias": "ssm_dt.bias",
        "mixer.gate.e_score_correction_bias": "exp_probs_b.bias",
    },
    skipped=re.compile(_SKIPPED.pattern + r"|mtp\..*"),  # its multi-token-prediction block
    root="backbone.",
    # llama.cpp's converter names its tokenizer by its outputs: pixtral-12b's (Llama 3's split).
    pre_tokenizer="pixtral",
)
# Laguna's (poolside): attention with Q and K normed per head and its output gated (softplus) per
# head or per element (``g_proj``), a sliding window on some layers, leading dense layers, then
# sigmoid-routed experts with a bias beside a shared expert: llama.cpp's ``laguna``.
_LAGUNA = _Layout(
    "laguna",
    _ATTENTION
    | _PRE_NORMS
    | _QK_NORMS
    | {
        "self_attn.g_proj": "attn_gate",
        "mlp.gate": "ffn_gate_inp",
        # the shared expert as transformers keeps it, and as the releases do (singular)
        **{f"mlp.shared_expert{s}.{p}_proj": f"ffn_{p}_shexp" for s in ("s", "") for p in ("gate", "up", "down")},
    },
    experts=_EXPERT,
    params={  # the router's bias, as transformers keeps it and as the releases do
        "mlp.gate.e_score_correction_bias": "exp_probs_b.bias",
        "mlp.experts.e_score_correction_bias": "exp_probs_b.bias",
    },
    turn_ends={"eot": "</assistant>"},  # its turn's end, which llama.cpp's converter makes a control token
)
_NEMOTRON_OMNI = dataclasses.replace(_NEMOTRON_H, tower=True, vision="nemotron_v2_vl", audio="parakeet")
# Llama 4 (Scout, Maverick: ``Llama4ForConditionalGeneration``): a Llama whose Q and K rotate in
# neighbouring pairs as stored (no rows reordered), dense FFNs and mixtures of experts in turn
# (``interleave_moe_layer_step``), each mixture a sigmoid router choosing routed experts (a layer's in
# one transposed tensor per projection) beside a shared expert: llama.cpp's ``llama4``, with the
# tower as a ``llama4`` projector.
_LLAMA4 = _Layout(
    "llama4",
    _ATTENTION
    | _PRE_NORMS
    | {
        "feed_forward.gate_proj": "ffn_gate",
        "feed_forward.up_proj": "ffn_up",
        "feed_forward.down_proj": "ffn_down",
        "feed_forward.router": "ffn_gate_inp",
        **{f"feed_forward.shared_expert.{p}_proj": f"ffn_{p}_shexp" for p in ("gate", "up", "down")},
    },
    experts=_EXPERT,
    expert_width="intermediate_size",
    transposed_experts=True,
    tower=True,
    vision="llama4",
    pre_tokenizer="llama4",  # as llama.cpp's converter names the releases' (GPT-4o's split)
)
LAYOUTS = {
    "LlamaForCausalLM": _LLAMA,
    "MistralForCausalLM": _LLAMA,
    "Ministral3ForCausalLM": _MINISTRAL3,
    "Qwen2ForCausalLM": _Layout("qwen2", _QWEN2),
    "Qwen3ForCausalLM": _Layout("qwen3", _QWEN3),
    "Qwen3MoeForCausalLM": _Layout("qwen3moe", _QWEN3 | {"mlp.gate": "ffn_gate_inp"}, experts=_EXPERT),
    "MixtralForCausalLM": dataclasses.replace(
        _LLAMA,
        parts={**_LLAMA.parts, "block_sparse_moe.gate": "ffn_gate_inp"},
        experts=_MIXTRAL_EXPERT,
        projections=_MIXTRAL_PROJECTIONS,
    ),
    "Phi3ForCausalLM": _Layout("phi3", _PHI3 | _PRE_NORMS),
    "Lfm2ForCausalLM": _Layout("lfm2", _LFM2, globals=_LFM2_GLOBAL),
    "Lfm2MoeForCausalLM": _Layout(
        "lfm2moe",
        _LFM2 | {"feed_forward.gate": "ffn_gate_inp"},
        globals=_LFM2_GLOBAL,
        experts=_LFM2_EXPERT,
        projections=_MIXTRAL_PROJECTIONS,
        params={"feed_forward.expert_bias": "exp_probs_b.bias"},
    ),
    "CohereForCausalLM": _Layout("command-r", _COHERE, tied=True),
    "Olmo2ForCausalLM": _Layout("olmo2", _OLMO2, own_output=True),
    "Olmo3ForCausalLM": _Layout("olmo2", _OLMO2, own_output=True),
    "GemmaForCausalLM": _GEMMA,
    "Gemma2ForCausalLM": _GEMMA2,
    "BertModel": _Layout("bert", _BERT, globals=_BERT_GLOBAL, block=_BERT_BLOCK, skipped=_BERT_SKIPPED, prefix="bert."),
    "NomicBertModel": _Layout("nomic-bert", _NOMIC, globals=_NOMIC_GLOBAL, block=_NOMIC_BLOCK, skipped=_BERT_SKIPPED),
    "Gemma3ForCausalLM": _GEMMA3,
    "Gemma3ForConditionalGeneration": dataclasses.replace(_GEMMA3, tower=True, vision="gemma3"),
    "Gemma3TextModel": _EMBEDDING_GEMMA,
    "Gemma3nForCausalLM": _GEMMA3N,
    # Its vision (MobileNetV5) and audio (USM) towers are left out, as Ollama's converter leaves them.
    "Gemma3nForConditionalGeneration": dataclasses.replace(_GEMMA3N, tower=True),
    "Gemma4ForCausalLM": _GEMMA4,
    "Gemma4ForConditionalGeneration": dataclasses.replace(_GEMMA4, tower=True, vision="gemma4v", audio="gemma4a"),
    "DeepseekV3ForCausalLM": _DEEPSEEK2,
    # DeepSeek-V2 (and V2-Lite, DeepSeek-Coder-V2): V3's layout, its tokenizer named by its splits.
    "DeepseekV2ForCausalLM": dataclasses.replace(_DEEPSEEK2, pre_tokenizer=None),
    "NemotronHForCausalLM": _NEMOTRON_H,
    # Nemotron Nano 12B v2 VL and Nemotron 3 Nano Omni as their releases keep them (Ollama's
    # ``nemotronHNanoVLModel``): the text model under ``language_model.backbone.``, a RADIO tower
    # and its MLP (``nemotron_v2_vl``), Omni's Parakeet beside it (``parakeet``).
    "NemotronH_Nano_VL_V2": dataclasses.replace(_NEMOTRON_H, tower=True, vision="nemotron_v2_vl"),
    "NemotronH_Nano_Omni_Reasoning_V3": _NEMOTRON_OMNI,
    "NemotronH_Omni_Reasoning_V3": _NEMOTRON_OMNI,  # as transformers 5 saves it: the release's tensor names
    "LagunaForCausalLM": _LAGUNA,
    "Glm4MoeLiteForCausalLM": dataclasses.replace(_DEEPSEEK2, pre_tokenizer="glm4", turn_ends=_GLM4.turn_ends),
    "Glm4ForCausalLM": _GLM4,
    "GlmOcrForConditionalGeneration": _GLMOCR,
    "Glm4vForConditionalGeneration": _GLM4V,
    "Glm46VForConditionalGeneration": _GLM4V,
    "Mistral3ForConditionalGeneration": dataclasses.replace(_LLAMA, tower=True, vision="pixtral"),
    "Llama4ForConditionalGeneration": _LLAMA4,
    "Llama4ForCausalLM": dataclasses.replace(_LLAMA4, tower=False, vision=None),  # its text model alone
    "Qwen2VLForConditionalGeneration": _Layout("qwen2vl", _QWEN2, tower=True, vision="qwen2vl_merger"),
    "Lfm2VlForConditionalGeneration": _Layout("lfm2", _LFM2, globals=_LFM2_GLOBAL, tower=True, vision="lfm2"),
    "Qwen2_5_VLForConditionalGeneration": _Layout("qwen2vl", _QWEN2, tower=True, vision="qwen2.5vl_merger"),
    "Qwen3VLForConditionalGeneration": _Layout("qwen3vl", _QWEN3, tower=True, vision="qwen3vl_merger"),
    "Qwen3VLMoeForConditionalGeneration": _Layout(
        "qwen3vlmoe", _QWEN3 | {"mlp.gate": "ffn_gate_inp"}, tower=True, vision="qwen3vl_merger", experts=_EXPERT
    ),
    "GptOssForCausalLM": _Layout("gpt-oss", _GPTOSS, params={"self_attn.sinks": "attn_sinks.weight"}, interleaved=True),
    "Qwen3_5ForCausalLM": _Layout(
        "qwen35", _QWEN35, 1.0, params=_QWEN35_PARAMS, unshifted=("ssm_norm.weight",), skipped=_QWEN35_SKIPPED
    ),
}
# Qwen 3.5's mixture of experts: routed experts (each apart, or a layer's in one tensor as the
# releases keep them: ``Family.fused_experts``) beside a shared one whose output a gate of its own scales.
LAYOUTS["Qwen3_5MoeForCausalLM"] = dataclasses.replace(
    LAYOUTS["Qwen3_5ForCausalLM"],
    arch="qwen35moe",
    parts=_QWEN35 | _QWEN35_SHARED,
    experts=_EXPERT,
)
for _name in ("Qwen3_5", "Qwen3_5Moe"):
    LAYOUTS[f"{_name}ForConditionalGeneration"] = dataclasses.replace(
        LAYOUTS[f"{_name}ForCausalLM"], tower=True, vision="qwen3vl_merger"
    )
# Qwen3-Next, Qwen 3.5's forerunner: the same delta nets and mixture, its delta net's Q, K, V and
# gate in one projection (per key head: its Q, K, V heads and gates), beta and alpha in another,
# both as llama.cpp's qwen3next reads them (``ssm_in``, ``ssm_ba``); its value heads grouped by key
# head as transformers keeps them, and no M-RoPE.
LAYOUTS["Qwen3NextForCausalLM"] = dataclasses.replace(
    LAYOUTS["Qwen3_5MoeForCausalLM"],
    arch="qwen3next",
    parts={k: v for k, v in (_QWEN35 | _QWEN35_SHARED).items() if not k.startswith("linear_attn.in_proj")}
    | {"linear_attn.in_proj_qkvz": "ssm_in", "linear_attn.in_proj_ba": "ssm_ba"},
)
# A LoRA's base by its GGUF architecture: a layout whose names also carry a seeing model's text
# prefix (an adapter trained on Gemma 3 4B or Mistral Small names its tensors so).
# The first layout of an architecture (a Llama's, not Mixtral's).
_BY_ARCH: dict[str, _Layout] = {}
for _layout in LAYOUTS.values():
    _BY_ARCH.setdefault(_layout.arch, dataclasses.replace(_layout, tower=True))
_BY_ARCH["nemotron_h_moe"] = dataclasses.replace(_NEMOTRON_H, arch="nemotron_h_moe", tower=True)
# Where a checkpoint that sees keeps its text model (transformers before 4.52, and since), and its tower.
_TEXT_PREFIXES = (("language_model.model.", "model."), ("model.language_model.", "model."), ("language_model.", ""))
# Audio towers and their projectors: Gemma 4's, Nemotron Omni's Parakeet.
_AUDIO_PREFIXES = ("model.audio_tower.", "model.embed_audio.", "sound_encoder.", "sound_projection.")
_TOWER_PREFIXES = (
    "vision_tower.",
    "multi_modal_projector.",
    "model.vision_tower.",
    "model.multi_modal_projector.",
    "visual.",  # Qwen-VL's, its merger inside
    "model.visual.",
    "model.embed_vision.",  # Gemma 4's projector
    "vision_model.",  # Nemotron's RADIO, its MLP, and the norm before it
    "mlp1.",
    "vision_projector.",
    *_AUDIO_PREFIXES,
)
TOWER_LEFT_OUT = "the vision tower is left out: the model is converted to see text only"
AUDIO_LEFT_OUT = "the audio tower is left out: the model is converted to read and see, not to hear"
# What Gemma 4's per-layer settings (``per_layer_config``) may change, by layer.
_GEMMA4_PER_LAYER = ("head_dim", "num_key_value_heads")
# Gemma 4's settings that llama.cpp's gemma4 computes with whatever config.json says.
_GEMMA4_FIXED = {"hidden_activation": "gelu_pytorch_tanh", "attention_bias": False}
# llama.cpp's Llamas: Q and K rows reordered to neighbouring pairs, the rotary width stated.
_LLAMAS = ("llama", "mistral3")
# The architectures whose positions are M-RoPE's (``Family._mrope``).
_MROPE = ("qwen2vl", "qwen3vl", "qwen3vlmoe", "qwen35", "qwen35moe")
_DELTA_NETS = ("qwen35", "qwen35moe", "qwen3next")
_MAMBA2 = ("nemotron_h", "nemotron_h_moe")
# The delta nets whose value heads llama.cpp keeps tiled rather than grouped by key head.
_TILED = ("qwen35", "qwen35moe")
# Qwen 3.5's sections where config.json states none (transformers' and llama.cpp's default).
_QWEN35_MROPE = [11, 11, 10]
# Depthwise convolutions, kept ``(channels, kernel)`` by llama.cpp: Qwen 3.5's and LFM2's.
_CONVOLUTIONS = ("ssm_conv1d.weight", "shortconv.conv.weight")
# YaRN's parameters that llama.cpp reads where a checkpoint states them (its defaults otherwise);
# gpt-oss's ``truncate: false`` it cannot: its correction range is always whole dimensions. Its
# attention factor llama.cpp computes itself (a stated one is its ratio to llama.cpp's, ``attn_factor``).
_YARN_KEYS = {"beta_fast": "yarn_beta_fast", "beta_slow": "yarn_beta_slow"}
_GEMMA3_DEFAULTS: dict[str, Any] = {
    "query_pre_attn_scalar": 256,
    "max_position_embeddings": 131072,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "rope_theta": 1_000_000.0,
    "rms_norm_eps": 1e-6,
}
# Nemotron-H's settings llama.cpp's nemotron_h computes with whatever config.json says: ReLU² FFNs,
# SiLU before the scan, no biases but the convolution's, which it adds unchecked.
_NEMOTRON_H_FIXED = {
    "mlp_hidden_act": "relu2",
    "mamba_hidden_act": "silu",
    "attention_bias": False,
    "mlp_bias": False,
    "use_bias": False,
    "mamba_proj_bias": False,
    "use_conv_bias": True,
}
# Nemotron-H's settings under their older names -> its own (transformers reads the older first).
_NEMOTRON_H_OLDER = {"mamba_n_groups": "n_groups", "mamba_d_conv": "conv_kernel", "mamba_conv_bias": "use_conv_bias"}
# Nemotron-H's layer kinds by their names in ``layers_block_type`` (transformers 5's, and the
# earlier ones) -> ``hybrid_override_pattern``'s letters: Mamba-2, attention, MLP, mixture.
_NEMOTRON_H_KINDS = {
    "mamba": "M",
    "linear_attention": "M",
    "attention": "*",
    "full_attention": "*",
    "mlp": "-",
    "moe": "E",
}
# Llama 4's settings llama.cpp's llama4 computes with whatever config.json says: SiLU FFNs, no
# biases, attention in chunks of 8192 on the rotating layers, the others' queries tempered from
# position 8192 on (0.1 a step of 8192).
_LLAMA4_FIXED = {
    "hidden_act": "silu",
    "attention_bias": False,
    "attention_chunk_size": 8192,
    "floor_scale": 8192,
    "attn_scale": 0.1,
}
# llama.cpp's llama4: every how many layers one neither rotates nor attends in chunks (fixed there;
# transformers' ``no_rope_layer_interval`` default too), and the number of experts of the one
# release (Maverick's) whose Q and K are not normed after rotation.
_LLAMA4_NO_ROPE_STEP = 4
_LLAMA4_UNNORMED_EXPERTS = 128
# Laguna's settings llama.cpp's laguna computes with whatever config.json says.
_LAGUNA_FIXED = {
    "hidden_act": "silu",
    "attention_bias": False,
    "moe_apply_router_weight_on_input": False,
    "moe_router_logit_softcapping": 0.0,
}
# Gemma 3n's settings llama.cpp's gemma3n fixes whatever the GGUF says (``llama-hparams.h``:
# four AltUp streams, the first active, LAuReL's rank 64, per-layer embeddings 256 wide).
_GEMMA3N_FIXED = {
    "hidden_activation": "gelu_pytorch_tanh",
    "attention_bias": False,
    "altup_num_inputs": 4,
    "altup_active_idx": 0,
    "laurel_rank": 64,
    "hidden_size_per_layer_input": 256,
    "final_logit_softcapping": 30.0,  # never read from the GGUF: llama.cpp's default
}
# llama.cpp's gemma3n: layers from 20 on reuse the KV of layer 18 (sliding) or 19 (full); the
# first 10 layers' FFN gates keep what lies beyond the 95th percentile of a normal fit.
_GEMMA3N_KV_FROM = 20
_GEMMA3N_SPARSE = (10, 0.95)
# The most experts llama.cpp loads (``LLAMA_MAX_EXPERTS``; more, and it asserts).
_MAX_EXPERTS = 1024
# Settings llama.cpp's deepseek2 computes with whatever config.json says.
_DEEPSEEK2_FIXED = {"hidden_act": "silu", "attention_bias": False, "rope_interleave": True}
# Weights llama.cpp multiplies by the input without adapters (``ggml_mul_mat``, not
# ``build_lora_mm``), by architecture and name (a block's part, or a global's): a LoRA on one would
# change nothing. deepseek2's latent attention and output, Mamba-2's convolution, Nemotron 3
# Super's latent projections, Gemma 3n's AltUp router and stream projections, and the per-layer
# embeddings and their projection (llama.cpp would take an adapter on ``per_layer_token_embd``
# for the token embedding's, and refuse to load it).
_UNADAPTED = {
    "deepseek2": ("attn_q", "attn_q_a", "attn_q_b", "attn_kv_a_mqa", "attn_kv_b", "output"),
    "nemotron_h": ("ssm_conv1d",),
    "nemotron_h_moe": ("ssm_conv1d", "ffn_latent_down", "ffn_latent_up"),
    "gemma3n": ("altup_router", "altup_proj", "altup_unembd_proj", "per_layer_model_proj", "per_layer_token_embd"),
    "gemma4": ("per_layer_model_proj", "per_layer_token_embd"),
}
# Settings a config.json states null to say there is none (not to take the default): DeepSeek-V2-Lite's
# Q in one projection, Gemma 3n's logits uncapped, a Llama 4's attention unchunked.
_NULL_IS_NONE = {
    "deepseek2": ("q_lora_rank",),
    "gemma3n": ("final_logit_softcapping",),
    "llama4": ("attention_chunk_size",),  # null: every layer attends to everything, which llama.cpp's llama4 cannot
}
# What config.json may leave out, by its architecture (transformers' defaults where llama.cpp's
# architecture is shared by families whose defaults differ).
_GLM4V_TEXT_DEFAULTS: dict[str, Any] = {
    "num_attention_heads": 32,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "partial_rotary_factor": 1.0,
}
_CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    # transformers' Glm4vTextConfig's (its rotation over the whole head unless stated).
    "Glm4vForConditionalGeneration": _GLM4V_TEXT_DEFAULTS,
    "Glm46VForConditionalGeneration": _GLM4V_TEXT_DEFAULTS,
    # transformers' GlmOcrTextConfig's (a head is hidden_size / heads unless stated; the whole of
    # it rotates: Glm4vTextRotaryEmbedding's default), where config.json leaves them out.
    "GlmOcrForConditionalGeneration": {
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "partial_rotary_factor": 1.0,
    },
    "DeepseekV3ForCausalLM": {
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "n_group": 8,
        "topk_group": 4,
        "routed_scaling_factor": 2.5,
        "norm_topk_prob": True,
        "first_k_dense_replace": 3,
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "rms_norm_eps": 1e-6,
    },
    "DeepseekV2ForCausalLM": {
        "n_routed_experts": 64,
        "n_shared_experts": 2,
        "routed_scaling_factor": 1.0,
        "first_k_dense_replace": 0,
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "moe_intermediate_size": 1407,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 2048,
    },
    # transformers' NemotronHConfig's (its head_dim aside: older configs state attention_head_dim).
    "NemotronHForCausalLM": {
        "intermediate_size": 21504,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "mamba_num_heads": 128,
        "mamba_head_dim": 64,
        "ssm_state_size": 128,
        "n_groups": 8,
        "conv_kernel": 4,
        "layer_norm_epsilon": 1e-5,
        "max_position_embeddings": 4096,
        "n_routed_experts": 8,
        "moe_intermediate_size": 7688,
        "moe_shared_expert_intermediate_size": 7688,
        "num_experts_per_tok": 2,
        "routed_scaling_factor": 1.0,
    },
    "Llama4ForConditionalGeneration": {  # transformers' Llama4TextConfig's (Scout's)
        "hidden_size": 5120,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "num_local_experts": 16,
        "num_experts_per_tok": 1,
    },
    "LagunaForCausalLM": {  # transformers' LagunaConfig's
        "num_attention_heads": 48,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_experts": 256,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
        "moe_routed_scaling_factor": 1.0,
        "sliding_window": 512,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 131072,
        "gating": True,
        "first_k_dense_replace": 1,  # transformers' mlp_layer_types: one dense layer, then sparse
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 500000.0, "partial_rotary_factor": 0.5},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0},
        },
    },
    "Glm4MoeLiteForCausalLM": {
        "n_routed_experts": 64,
        "n_shared_experts": 1,
        "num_experts_per_tok": 4,
        "n_group": 1,
        "topk_group": 1,
        "routed_scaling_factor": 1.8,
        "norm_topk_prob": True,
        "q_lora_rank": 768,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 192,
        "v_head_dim": 256,
        "rms_norm_eps": 1e-5,
        "first_k_dense_replace": 1,  # transformers' mlp_layer_types: one dense layer, then sparse
        "max_position_embeddings": 202752,
    },
}
for _name in ("NemotronH_Nano_VL_V2", "NemotronH_Nano_Omni_Reasoning_V3", "NemotronH_Omni_Reasoning_V3"):
    _CLASS_DEFAULTS[_name] = _CLASS_DEFAULTS["NemotronHForCausalLM"]
_CLASS_DEFAULTS["Llama4ForCausalLM"] = _CLASS_DEFAULTS["Llama4ForConditionalGeneration"]
# What config.json may leave out, as llama.cpp's converter assumes it per architecture.
_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma2": {
        "head_dim": 256,
        "query_pre_attn_scalar": 256,
        "attn_logit_softcapping": 50.0,
        "final_logit_softcapping": 30.0,
        "sliding_window": 4096,
        "rms_norm_eps": 1e-6,
    },
    "gemma3": _GEMMA3_DEFAULTS,
    "gemma-embedding": _GEMMA3_DEFAULTS,
    # transformers' Gemma3nTextConfig's, where config.json leaves them out.
    "gemma3n": {
        "head_dim": 256,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "sliding_window": 512,
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6,
        "final_logit_softcapping": 30.0,
        "num_kv_shared_layers": 15,
        "rope_theta": 1_000_000.0,
        "rope_local_base_freq": 10_000.0,
    },
    "qwen3next": {"head_dim": 256},
    # transformers' Glm4Config's, where config.json leaves them out.
    "glm4": {
        "head_dim": 128,
        "num_key_value_heads": 2,
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1.5625e-07,
        "rope_theta": 10000.0,
    },
    # transformers' Gemma4TextConfig's, where config.json leaves them out.
    "gemma4": {
        "head_dim": 256,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "sliding_window": 512,
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-6,
        "attention_k_eq_v": False,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
        },
    },
}


@dataclass(frozen=True)
class Family:
    """How one checkpoint becomes llama.cpp's: its architecture, keys, tensor names and values."""

    layout: _Layout
    config: Mapping[str, Any]

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> Family:
        names = config.get("architectures")
        name = names[0] if isinstance(names, list) and names and isinstance(names[0], str) else None
        if name not in LAYOUTS:
            raise ImportRefused(f"unsupported architecture {name!r}: cllm converts {', '.join(sorted(LAYOUTS))}")
        layout = LAYOUTS[name]
        text = (config.get("text_config") or config.get("llm_config")) if layout.tower else None
        given = {**config, **text} if isinstance(text, dict) else config
        kind = text.get("model_type", "glm4v_text") if isinstance(text, dict) else "glm4v_text"  # flat: GLM-4.1V's own
        if layout is _GLM4V and kind != "glm4v_text":
            raise ImportRefused(f"config.json's text model is {kind!r}; cllm converts GLM-4.1V's glm4v_text")
        if layout.arch == "llama" and given.get("model_type") == "ministral3":
            layout = dataclasses.replace(layout, arch=_MINISTRAL3.arch)
        if layout.vision == "nemotron_v2_vl" and isinstance(config.get("max_sequence_length"), int):
            given = {**given, "max_position_embeddings": config["max_sequence_length"]}  # as Ollama reads it
        if layout.arch == "nemotron_h":  # its layers by kind, and its older names, however stated
            kinds = _nemotron_h_kinds(given)
            older = {new: given[old] for old, new in _NEMOTRON_H_OLDER.items() if old in given}  # which win there
            given = {**given, **older, "num_hidden_layers": len(kinds), "hybrid_override_pattern": kinds}
            if "E" in kinds:
                layout = dataclasses.replace(layout, arch="nemotron_h_moe")
        if layout.arch == "gemma3n" and isinstance(given.get("intermediate_size"), list):
            widths = set(given["intermediate_size"])  # one per layer: llama.cpp's gemma3n reads one
            if len(widths) != 1:
                raise ImportRefused(
                    "config.json's intermediate_size differs by layer, which llama.cpp's gemma3n cannot"
                )
            given = {**given, "intermediate_size": widths.pop()}
        if layout.arch == "nomic-bert":  # its own names, where transformers' are absent
            given = {**{ours: given[theirs] for theirs, ours in _NOMIC_NAMES.items() if theirs in given}, **given}
        defaults = _CLASS_DEFAULTS.get(name, _DEFAULTS.get(layout.arch, {}))
        stated = {k: v for k, v in given.items() if v is not None}
        for key in _NULL_IS_NONE.get(layout.arch, ()):  # stated null: none of it, not the default
            if key in given and given[key] is None:
                stated[key] = 0
        return cls(layout, {**defaults, **stated})

    @classmethod
    def of_gguf(cls, arch: str, kv: Mapping[str, Any]) -> Family:
        """The family of a GGUF already converted (a LoRA's base): its tensor names, and the head
        counts from its header that say how rows are reordered (a Llama's Q and K, Qwen 3.5's
        value heads, a glm4's with M-RoPE, whose Q and K rows its converter put in halves)."""
        if arch not in _BY_ARCH:
            raise ImportRefused(
                f"safetensors adapters for architecture {arch!r} are not converted: cllm converts them "
                f"for {', '.join(sorted(_BY_ARCH))}"
            )
        keys = {
            "num_attention_heads": "attention.head_count",
            "num_key_value_heads": "attention.head_count_kv",
            # Qwen 3.5's delta net's heads, whose value heads llama.cpp keeps in another order
            "linear_num_key_heads": "ssm.group_count",
            "linear_num_value_heads": "ssm.time_step_rank",
            "linear_key_head_dim": "ssm.state_size",
            "linear_value_head_dim": "ssm.state_size",
        }
        config: dict[str, Any] = {name: kv.get(f"{arch}.{key}") for name, key in keys.items()}
        sections = kv.get(f"{arch}.rope.dimension_sections")
        if arch == "glm4" and isinstance(sections, list) and any(sections):  # GLM-OCR's, GLM-4.1V's
            # Its head size (else, as llama.cpp's, the width over the heads) and rotating width.
            sizes = {"hidden_size": kv.get("glm4.embedding_length"), "head_dim": kv.get("glm4.attention.key_length")}
            rotary, family = kv.get("glm4.rope.dimension_count"), cls(_GLMOCR, config | sizes)
            try:
                head_dim = family.head_dim
            except ImportRefused:  # neither stated
                head_dim = 0
            if not (isinstance(rotary, int) and 0 < rotary <= head_dim):
                raise ImportRefused("the glm4 base states no head size and rotary width for its M-RoPE's Q and K rows")
            if int(rotary / head_dim * head_dim) != rotary:  # as ``_rotary_dims`` multiplies it back
                raise ImportRefused(f"the glm4 base's rotary width {rotary} is no fraction of its heads' {head_dim}")
            return cls(_GLMOCR, {**family.config, "partial_rotary_factor": rotary / head_dim})
        return cls(_BY_ARCH[arch], config)

    @property
    def arch(self) -> str:
        return self.layout.arch

    def _int(self, *keys: str, default: int | None = None) -> int:
        for key in keys:
            value = self.config.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        if default is None:
            raise ImportRefused(f"config.json has no {keys[0]}")
        return default

    @property
    def n_layer(self) -> int:
        return self._int("num_hidden_layers")

    @property
    def n_embd(self) -> int:
        return self._int("hidden_size")

    @property
    def n_head(self) -> int:
        return self._int("num_attention_heads")

    @property
    def n_head_kv(self) -> int:
        return self._int("num_key_value_heads", default=self.n_head)

    @property
    def head_dim(self) -> int:
        return self._int("head_dim", default=self._int("hidden_size") // self.n_head)

    def kv(self) -> KV:
        """The architecture's hyperparameter keys, as llama.cpp's converter writes them."""
        a = self.arch
        kv: KV = {
            f"{a}.context_length": (self._int("max_position_embeddings", default=4096), _U32),
            f"{a}.embedding_length": (self._int("hidden_size"), _U32),
            f"{a}.block_count": (self.n_layer, _U32),
            f"{a}.attention.head_count": (self.n_head, _U32),
            f"{a}.attention.head_count_kv": (self.n_head_kv, _U32),
        }
        if a != "qwen35moe":  # which states its experts' widths alone
            kv[f"{a}.feed_forward_length"] = (self._int("intermediate_size"), _U32)
        if a == "bert":
            return kv | self._bert()
        if a == "nomic-bert":
            return kv | self._nomic_bert()
        kv |= {
            f"{a}.rope.freq_base": (float(self._rope.get("rope_theta") or 10000.0), _F32),
            f"{a}.attention.layer_norm_rms_epsilon": (float(self.config.get("rms_norm_eps") or 1e-6), _F32),
        }
        if a in _LLAMAS or "head_dim" in self.config:
            kv[f"{a}.attention.key_length"] = (self.head_dim, _U32)
            kv[f"{a}.attention.value_length"] = (self.head_dim, _U32)
        if a in _LLAMAS:
            kv[f"{a}.rope.dimension_count"] = (self.head_dim, _U32)
        for keys in _ARCH_KEYS.get(a, ()):  # in order: a later one's keys win
            kv |= keys(self)
        kv |= self._rope_scaling()
        return kv

    def _shared_expert(self) -> KV:
        """The width of the shared expert beside a Qwen mixture's routed ones."""
        return {f"{self.arch}.expert_shared_feed_forward_length": (self._int("shared_expert_intermediate_size"), _U32)}

    def _partial_rotation(self) -> KV:
        """How many of a head's dimensions rotate (Qwen3-Next's quarter), without M-RoPE sections."""
        return {f"{self.arch}.rope.dimension_count": (self._rotary_dims, _U32)}

    def _mixtral(self) -> KV:
        """A Llama of experts' (Mixtral's): how many, and how many a token uses; none for a Llama."""
        if self.layout.experts is None:
            return {}
        return {
            "llama.expert_count": (self.n_expert, _U32),
            "llama.expert_used_count": (self._int("num_experts_per_tok"), _U32),
        }

    @property
    def _rope(self) -> dict[str, Any]:
        """The full-attention layers' rotary parameters, from ``rope_parameters`` (transformers 5)
        or ``rope_scaling`` and ``rope_theta`` (before it)."""
        params = self.config.get("rope_parameters") or self.config.get("rope_scaling") or {}
        params = params if isinstance(params, dict) else {}
        full = params.get("full_attention", params)
        full = dict(full) if isinstance(full, dict) else {}
        full.setdefault("rope_theta", self.config.get("rope_theta"))
        full.setdefault("rope_type", full.get("type"))
        return full

    def _bert(self) -> KV:
        """BERT's: layer norms (with a bias and an epsilon of their own), attention both ways, the
        token types (segments A and B) its embeddings add; only absolute positions."""
        kind = self.config.get("position_embedding_type", "absolute")
        if kind != "absolute" or self.config.get("hidden_act", "gelu") != "gelu":
            raise ImportRefused(
                f"config.json's {kind} positions or {self.config.get('hidden_act')} activation are not BERT's"
            )
        return {
            "bert.attention.layer_norm_epsilon": (float(self.config.get("layer_norm_eps") or 1e-12), _F32),
            "bert.attention.causal": (False, GGUFValueType.BOOL),
            "tokenizer.ggml.token_type_count": (self._int("type_vocab_size", default=2), _U32),
        }

    def _require_fixed(self, fixed: Mapping[str, Any]) -> None:
        """``ImportRefused`` where config.json states one of ``fixed``'s settings otherwise than the
        value llama.cpp's architecture computes with (unstated, the checkpoint has that value)."""
        for key, value in fixed.items():
            if key in self.config and self.config[key] != value:
                raise ImportRefused(
                    f"config.json's {key} is {self.config[key]!r}; llama.cpp's {self.arch} has {value!r}"
                )

    def _nomic_bert(self) -> KV:
        """Nomic BERT's: layer norms with their epsilon, attention both ways, token types, its
        rotary base, and the context it was trained for (nomic-embed-text's config states 8192
        positions, trained at 2048); the rest llama.cpp fixes, so a checkpoint otherwise (a mixture
        of experts, biases, interleaved or partial rotation) is refused."""
        if self.config.get("moe_every_n_layers"):
            raise ImportRefused("config.json makes a Nomic BERT of experts (v2-moe), which cllm does not convert")
        self._require_fixed(_NOMIC_FIXED)
        if self.config.get("hidden_act", "silu") not in ("silu", "swiglu"):
            raise ImportRefused("config.json's hidden_act is not SwiGLU's, which llama.cpp's nomic-bert computes")
        trained = self._int("max_trained_positions", default=self._int("max_position_embeddings"))
        return {
            "nomic-bert.context_length": (min(trained, self._int("max_position_embeddings")), _U32),
            "nomic-bert.attention.layer_norm_epsilon": (float(self.config.get("layer_norm_eps") or 1e-12), _F32),
            "nomic-bert.attention.causal": (False, GGUFValueType.BOOL),
            "nomic-bert.rope.freq_base": (float(self._rope.get("rope_theta") or 1000.0), _F32),
            "tokenizer.ggml.token_type_count": (self._int("type_vocab_size", default=2), _U32),
        }

    @property
    def _rotary_dims(self) -> int:
        """Dimensions of a head that rotate: all, or ``partial_rotary_factor`` of them (Phi-4-mini's
        three quarters; Qwen 3.5's a quarter, GLM-4's half, as transformers assumes where it is not
        stated)."""
        default = 0.25 if self.arch in _DELTA_NETS else 0.5 if self.arch == "glm4" else 1.0
        factor = self._rope.get("partial_rotary_factor", self.config.get("partial_rotary_factor", default))
        return int(float(factor) * self.head_dim)

    @property
    def _original_context(self) -> int:
        rope = self._rope
        original = rope.get("original_max_position_embeddings") or self.config.get("original_max_position_embeddings")
        return original if isinstance(original, int) and original > 0 else self._int("max_position_embeddings")

    def _phi3(self) -> KV:
        """Phi-3's rotary width, trained context, and for Phi-3.5's long contexts (``longrope``) the
        attention factor its factors come with (``rope_factors``), as llama.cpp's converter writes
        them. Its sliding window (``0``: none) is written as given; llama.cpp attends to all."""
        window = self.config.get("sliding_window")
        kv: KV = {
            "phi3.rope.dimension_count": (self._rotary_dims, _U32),
            "phi3.rope.scaling.original_context_length": (self._original_context, _U32),
            "phi3.attention.sliding_window": (window if isinstance(window, int) else 0, _U32),
        }
        if self._longrope:
            scale = self._int("max_position_embeddings") / self._original_context
            factor = math.sqrt(1 + math.log(scale) / math.log(self._original_context)) if scale > 1 else 1.0
            kv["phi3.rope.scaling.attn_factor"] = (factor, _F32)
        return kv

    @property
    def _longrope(self) -> bool:
        return self.arch == "phi3" and self._rope.get("rope_type") in ("longrope", "su")

    def _gemma2(self) -> KV:
        """Gemma 2's softcaps and window (every other layer, llama.cpp's fixed pattern)."""
        kv: KV = {
            "gemma2.attn_logit_softcapping": (float(self.config["attn_logit_softcapping"]), _F32),
            "gemma2.final_logit_softcapping": (float(self.config["final_logit_softcapping"]), _F32),
            "gemma2.attention.sliding_window": (self._int("sliding_window"), _U32),
        }
        self._check_attention_scalar(46)
        return kv

    def _check_attention_scalar(self, layers_27b: int) -> None:
        """Gemma's attention scores are scaled by ``query_pre_attn_scalar``, which llama.cpp does not
        read: it takes the head width, or the 27B's ``hidden_size / heads`` (known by its number of
        layers, ``layers_27b``); a checkpoint that states another is refused, not served wrong."""
        scalar = self.config.get("query_pre_attn_scalar")
        taken = self._int("hidden_size") // self.n_head if self.n_layer == layers_27b else self.head_dim
        if scalar is not None and scalar != taken:
            raise ImportRefused(
                f"config.json's query_pre_attn_scalar is {scalar}; llama.cpp's {self.arch} scales by {taken} here"
            )

    def _gemma3(self) -> KV:
        """Gemma 3's sliding window: its size, which layers have it, and their rotary base (and
        EmbeddingGemma's, whose window reaches as far on either side: half of config.json's
        ``sliding_window`` as saved, which llama.cpp reads and transformers halves on loading)."""
        kv: KV = {}
        a = self.arch
        window = self.config.get("sliding_window")
        if self.config.get("sliding_window_pattern") != 1 and isinstance(window, int):
            kv[f"{a}.attention.sliding_window"] = (window, _U32)
            pattern = self._window_pattern()
            if pattern is not None:
                kv[f"{a}.attention.sliding_window_pattern"] = (pattern, _U32)
        theta = self._sliding_theta
        if isinstance(theta, int | float):
            kv[f"{a}.rope.freq_base_swa"] = (float(theta), _F32)
        softcap = self.config.get("final_logit_softcapping")
        if isinstance(softcap, int | float) and softcap and a == "gemma3":  # an embedding has no logits
            kv["gemma3.final_logit_softcapping"] = (float(softcap), _F32)
        if self.config.get("attn_logit_softcapping"):
            raise ImportRefused("config.json sets attn_logit_softcapping, which Gemma 3 has not")
        if a == "gemma-embedding" and self.config.get("use_bidirectional_attention") is False:
            raise ImportRefused(
                "config.json's use_bidirectional_attention is false; llama.cpp's EmbeddingGemma attends both ways"
            )
        self._check_attention_scalar(62 if a == "gemma3" else 0)  # EmbeddingGemma's scale is its head's
        return kv

    def _glm4(self) -> KV:
        """GLM-4's: nothing beyond its partial rotation (``_partial_rotation``); GLM-OCR's and GLM-4.1V's
        M-RoPE sections (``_mrope``). Another activation, a rotation of odd width, or M-RoPE in a text
        model alone (GLM-4.1V's without its tower) is refused."""
        if self.config.get("hidden_act", "silu") not in ("silu", "swish"):  # one activation, two names
            raise ImportRefused(
                f"config.json's hidden_act is {self.config['hidden_act']!r}; llama.cpp's glm4 has 'silu'"
            )
        if self._rotary_dims % 2 or self._rotary_dims > self.head_dim:
            raise ImportRefused(
                "config.json's rotation is of an odd width or wider than a head, which cllm does not convert"
            )
        if self._glm_mrope:
            return self._mrope()
        if self._rope.get("mrope_section"):
            raise ImportRefused(
                "config.json's rotation is M-RoPE's, which cllm converts for GLM-OCR and GLM-4.1V that see"
            )
        return {}

    @property
    def _glm_mrope(self) -> bool:
        """Whether the model is GLM-OCR's or GLM-4.1V's glm4, whose M-RoPE rotates Q and K in halves in llama.cpp."""
        return self.arch == "glm4" and self.layout.vision == "glm4v"

    def _sliding_rope(self) -> dict[str, Any]:
        """The sliding layers' rotary parameters (transformers 5's ``rope_parameters``), or none."""
        params = self.config.get("rope_parameters")
        local = params.get("sliding_attention") if isinstance(params, dict) else None
        return local if isinstance(local, dict) else {}

    @property
    def _sliding_theta(self) -> Any:
        """The sliding layers' rotary base as stated: transformers 5's, or ``rope_local_base_freq``."""
        return self._sliding_rope().get("rope_theta") or self.config.get("rope_local_base_freq")

    def _gemma3n(self) -> KV:
        """Gemma 3n's: which layers slide and how far, both kinds' rotary base, the logits'
        softcap, the layers reusing earlier layers' KV, the FFN's sparsity, the AltUp streams and
        the per-layer embeddings' width, as llama.cpp's converter writes them; what llama.cpp's
        gemma3n fixes otherwise (``_GEMMA3N_FIXED``, where KV is reused from, which layers are
        sparse) is refused where config.json states something else."""
        self._require_fixed(_GEMMA3N_FIXED)
        n = self.n_layer
        types = self.config.get("layer_types")
        if types is None:  # transformers' default: every fifth layer attends to everything
            types = ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(n)]
        if not isinstance(types, list) or len(types) != n or set(types) - {"sliding_attention", "full_attention"}:
            raise ImportRefused(f"config.json's layer_types are not {n} layers of full or sliding attention")
        for params in (self._rope, self._sliding_rope()):
            if params.get("rope_type", "default") not in (None, "default"):
                raise ImportRefused("config.json scales the rotation, which llama.cpp's gemma3n does not")
        shared = self.config.get("num_kv_shared_layers")
        if not isinstance(shared, int) or not _whole(shared) or shared >= n:
            raise ImportRefused(f"config.json's num_kv_shared_layers is not a number of its {n} layers")
        self._gemma3n_reuse(types, shared)
        sparse_layers, quantile = _GEMMA3N_SPARSE
        default = [quantile] * sparse_layers + [0.0] * (n - sparse_layers) if n > sparse_layers else [0.0] * n
        pattern = self.config.get("activation_sparsity_pattern", default)
        want = [quantile if i < sparse_layers else 0.0 for i in range(n)]
        if not isinstance(pattern, list) or len(pattern) != n or not np.allclose(pattern, want):
            raise ImportRefused(
                f"config.json's activation_sparsity_pattern is not {quantile} on the first {sparse_layers} layers "
                "and 0 after them, as llama.cpp's gemma3n computes"
            )
        normal = statistics.NormalDist()
        scales = [normal.inv_cdf(p) if p > 0 else -math.inf for p in pattern]
        return {
            "gemma3n.rope.freq_base_swa": (float(self._sliding_theta or 10_000.0), _F32),
            "gemma3n.final_logit_softcapping": (float(self.config["final_logit_softcapping"]), _F32),
            "gemma3n.attention.sliding_window": (self._int("sliding_window"), _U32),
            "gemma3n.attention.sliding_window_pattern": (
                [t == "sliding_attention" for t in types],
                GGUFValueType.ARRAY,
            ),
            "gemma3n.altup.active_idx": (0, _U32),
            "gemma3n.altup.num_inputs": (4, _U32),
            "gemma3n.embedding_length_per_layer_input": (256, _U32),
            "gemma3n.attention.shared_kv_layers": (shared, _U32),
            "gemma3n.activation_sparsity_scale": (scales, GGUFValueType.ARRAY),
        }

    def _gemma3n_reuse(self, types: list[str], shared: int) -> None:
        """``ImportRefused`` unless the layers that reuse KV are those llama.cpp's gemma3n makes
        reuse it (from layer 20 on), each reusing the layer transformers reuses (the last of its
        kind before them), which llama.cpp takes to be layer 18 for a sliding one, 19 for a full one."""
        n, first = len(types), _GEMMA3N_KV_FROM
        if (shared and n - shared != first) or (not shared and n > first):
            raise ImportRefused(
                f"config.json's num_kv_shared_layers ({shared} of {n} layers) does not leave {first} layers "
                f"their own KV, as llama.cpp's gemma3n does"
            )
        for i in range(first, n):
            kind = types[i]
            source = max((j for j in range(first) if types[j] == kind), default=None)
            taken = first - (2 if kind == "sliding_attention" else 1)
            if source != taken:
                raise ImportRefused(
                    f"config.json's layer_types make layer {i} reuse layer {source}'s KV; llama.cpp's gemma3n "
                    f"reuses layer {taken}'s"
                )

    def stacked(self, name: str) -> tuple[str, int, int] | None:
        """(llama.cpp's name, index, count) of a matrix llama.cpp keeps stacked with others of its
        kind outside the blocks (``_Layout.stacks``: Gemma 3n's ``altup_num_inputs - 1`` projections
        of each direction)."""
        stem, _, rest = self._text_name(name).rpartition(".")[0].rpartition(".")
        if stem not in self.layout.stacks or not rest.isdigit() or not name.endswith(".weight"):
            return None
        return self.layout.stacks[stem], int(rest), self._int("altup_num_inputs", default=4) - 1

    def stand_ins(self, present: set[str]) -> dict[str, tuple[tuple[int, ...], float]]:
        """Tensors llama.cpp loads but never reads, where the checkpoint has none, as (shape, value):
        the K, V and K norm of Gemma 3n's layers that reuse earlier layers' KV, which transformers 5
        saves without them."""
        if self.arch != "gemma3n":
            return {}
        kv_rows = self.n_head_kv * self.head_dim
        stand_ins: dict[str, tuple[tuple[int, ...], float]] = {}
        for il in range(_GEMMA3N_KV_FROM, self.n_layer):
            for part, shape, value in (
                ("attn_k.weight", (kv_rows, self.n_embd), 0.0),
                ("attn_v.weight", (kv_rows, self.n_embd), 0.0),
                ("attn_k_norm.weight", (self.head_dim,), 1.0),
            ):
                if f"blk.{il}.{part}" not in present:
                    stand_ins[f"blk.{il}.{part}"] = (shape, value)
        return stand_ins

    def _gemma4(self) -> KV:
        """Gemma 4's: which layers slide (``layer_types``) and how far, each kind's head width and KV
        heads (full-attention layers' wider, from ``per_layer_config`` or ``global_head_dim`` and
        ``num_global_key_value_heads`` as transformers reads them), the last layers reusing earlier
        layers' KV (``num_kv_shared_layers``; those layers' FFN twice as wide with
        ``use_double_wide_mlp``), the per-layer embeddings' width, both kinds' rotary base, the
        logits' softcap and the mixture's experts."""
        self._require_fixed(_GEMMA4_FIXED)
        if self.config.get("use_bidirectional_attention") == "all":
            raise ImportRefused("config.json makes every layer attend both ways, which llama.cpp's gemma4 does not")
        sliding = self._gemma4_sliding()
        (head_full, kv_full), (head_swa, kv_swa) = self._gemma4_heads(sliding)
        shared = self.config.get("num_kv_shared_layers") or 0
        own = self.n_layer - shared if isinstance(shared, int) and not isinstance(shared, bool) and shared >= 0 else 0
        if own < 2:  # llama.cpp asserts it on loading, ending the process
            raise ImportRefused("config.json's num_kv_shared_layers must leave two layers of their own KV")
        if shared and (sliding[own - 1] or not sliding[own - 2]):
            # llama.cpp's shared layers reuse the last of those (full attention) or the one before
            # it (sliding), where transformers reuses the last of each kind: the two agree only so.
            raise ImportRefused(
                "config.json's last layers of their own KV are not a sliding then a full-attention one, "
                "whose KV llama.cpp's shared layers reuse"
            )
        width = self._int("intermediate_size")
        ffn: Any = (width, _U32)
        if self.config.get("use_double_wide_mlp") and shared:
            ffn = (
                [width if i < self.n_layer - shared else 2 * width for i in range(self.n_layer)],
                GGUFValueType.ARRAY,
            )
        local = self._gemma4_sliding_rope()
        kv: KV = {
            "gemma4.feed_forward_length": ffn,
            "gemma4.attention.head_count_kv": (kv_full, _U32)
            if kv_full == kv_swa
            else ([kv_swa if s else kv_full for s in sliding], GGUFValueType.ARRAY),
            "gemma4.attention.key_length": (head_full, _U32),
            "gemma4.attention.value_length": (head_full, _U32),
            "gemma4.attention.key_length_swa": (head_swa, _U32),
            "gemma4.attention.value_length_swa": (head_swa, _U32),
            "gemma4.attention.sliding_window": (self._int("sliding_window", default=512), _U32),
            "gemma4.attention.sliding_window_pattern": (sliding, GGUFValueType.ARRAY),
            "gemma4.attention.shared_kv_layers": (shared, _U32),
            "gemma4.embedding_length_per_layer_input": (self._int("hidden_size_per_layer_input", default=0), _U32),
            "gemma4.rope.freq_base": (float(self._rope.get("rope_theta") or 1_000_000.0), _F32),
            "gemma4.rope.freq_base_swa": (float(local.get("rope_theta") or 10_000.0), _F32),
            "gemma4.rope.dimension_count": (head_full, _U32),  # its unrotated part by factors (``rope_factors``)
            "gemma4.rope.dimension_count_swa": (head_swa, _U32),
        }
        softcap = self.config.get("final_logit_softcapping")
        if isinstance(softcap, int | float) and softcap:
            kv["gemma4.final_logit_softcapping"] = (float(softcap), _F32)
        if self.config.get("enable_moe_block"):
            kv |= {
                "gemma4.expert_count": (self.n_expert, _U32),
                "gemma4.expert_used_count": (self._int("top_k_experts"), _U32),
                "gemma4.expert_feed_forward_length": (self._int("moe_intermediate_size"), _U32),
            }
        return kv

    def _gemma4_sliding(self) -> list[bool]:
        """Which layers slide, from ``layer_types`` (transformers' default: five of every six), the
        last always attending to everything, as transformers forces it."""
        types = self.config.get("layer_types")
        if types is None:
            types = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(self.n_layer)]
        if not (
            isinstance(types, list)
            and len(types) == self.n_layer
            and all(t in ("sliding_attention", "full_attention") for t in types)
        ):
            raise ImportRefused("config.json's layer_types are not one sliding or full attention per layer")
        return [t == "sliding_attention" for t in types[:-1]] + [False]

    def _gemma4_heads(self, sliding: list[bool]) -> tuple[tuple[int, int], tuple[int, int]]:
        """(head width, KV heads) of the full-attention layers, then of the sliding ones: a layer's
        ``per_layer_config`` over the model's (transformers 5 saves it), or transformers' overrides
        for full-attention layers where config.json has none (``global_head_dim``, 512 unless
        stated; ``num_global_key_value_heads``, where keys are values); llama.cpp has one of each
        per kind."""
        given = self.config.get("per_layer_config")
        if given is None:
            override: dict[str, Any] = {"head_dim": self.config.get("global_head_dim", 512)}
            if self.config.get("attention_k_eq_v") and self.config.get("num_global_key_value_heads"):
                override["num_key_value_heads"] = self.config["num_global_key_value_heads"]
            given = {str(i): override for i, s in enumerate(sliding) if not s}
        if (
            not isinstance(given, dict)
            or not all(isinstance(v, dict) for v in given.values())
            or not all(str(k).isdigit() for k in given)
        ):
            raise ImportRefused("config.json's per_layer_config is not one setting map per layer")
        by_layer = {int(k): v for k, v in given.items()}  # transformers 5 pads the keys with zeros ("05")
        shapes: dict[bool, set[tuple[int, int]]] = {True: set(), False: set()}
        for i, s in enumerate(sliding):
            layer = by_layer.get(i, {})
            if set(layer) - set(_GEMMA4_PER_LAYER):
                raise ImportRefused(
                    f"config.json's per_layer_config changes {sorted(layer)} of a layer; "
                    f"llama.cpp's gemma4 reads only {list(_GEMMA4_PER_LAYER)}"
                )
            head = layer.get("head_dim", self.head_dim)
            heads = layer.get("num_key_value_heads", self.n_head_kv)
            if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in (head, heads)):
                raise ImportRefused(f"config.json's per_layer_config gives layer {i} no head width or KV heads")
            shapes[s].add((head, heads))
        if len(shapes[True]) > 1 or len(shapes[False]) > 1:
            raise ImportRefused(
                "config.json's per_layer_config varies heads within one kind of layer, as llama.cpp's gemma4 cannot"
            )
        full = shapes[False].pop()
        return full, shapes[True].pop() if shapes[True] else full

    def _gemma4_sliding_rope(self) -> dict[str, Any]:
        """The sliding layers' rotary parameters: only the plain rotation of whole heads, as
        llama.cpp's gemma4 computes."""
        params = self.config.get("rope_parameters")
        local = params.get("sliding_attention") if isinstance(params, dict) else None
        local = local if isinstance(local, dict) else {}
        if local.get("rope_type", "default") != "default" or local.get("partial_rotary_factor", 1.0) != 1.0:
            raise ImportRefused(
                "config.json's sliding layers rotate otherwise than whole heads by default, as llama.cpp's gemma4 does"
            )
        return local

    def _gemma4_rope_factors(self) -> dict[str, np.ndarray]:
        """Gemma 4's full-attention rotation (``proportional``: the first ``partial_rotary_factor`` of a
        head's pairs at the whole head's frequencies, the rest still) as llama.cpp's converter writes
        it: a factor per pair, so large for the still ones that they do not turn."""
        rope = self._rope
        kind, factor = rope.get("rope_type") or "default", rope.get("partial_rotary_factor", 1.0)
        if kind not in ("proportional", "default") or not isinstance(factor, int | float) or not 0 < factor <= 1:
            raise ImportRefused(f"config.json's full-attention rope {kind!r} is not Gemma 4's proportional one")
        if kind == "default" and factor != 1.0:
            raise ImportRefused(
                "config.json rotates part of each full-attention head by default, which llama.cpp's gemma4 does not"
            )
        head = self._gemma4_heads(self._gemma4_sliding())[0][0]
        pairs, turning = head // 2, int(head * factor / 2)
        return {"rope_freqs.weight": np.array([1.0] * turning + [1e30] * (pairs - turning), dtype=np.float32)}

    def _gptoss(self) -> KV:
        """gpt-oss's experts (each as wide as ``intermediate_size``), and its window, which llama.cpp
        puts on every other layer from the first; a checkpoint it would run otherwise (its windows
        elsewhere, another clamp on the activation) is refused."""
        types = self.config.get("layer_types")
        windows = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(self.n_layer)]
        if types is not None and types != windows:
            raise ImportRefused("config.json's layer_types do not alternate from a sliding layer, as llama.cpp needs")
        self._require_fixed(_GPTOSS_SWIGLU)
        return {
            "gpt-oss.expert_count": (self.n_expert, _U32),
            "gpt-oss.expert_used_count": (self._int("num_experts_per_tok", "experts_per_token"), _U32),
            "gpt-oss.expert_feed_forward_length": (self._int("intermediate_size"), _U32),
            "gpt-oss.attention.sliding_window": (self._int("sliding_window"), _U32),
        }

    def _llama4(self) -> KV:
        """Llama 4's FFN widths (the dense layers' ``intermediate_size_mlp``, an expert's
        ``intermediate_size``), its experts and the layers they are on; a checkpoint llama.cpp would
        run otherwise (rotation, chunks, mixtures or Q/K norms elsewhere) is refused."""
        self._require_fixed(_LLAMA4_FIXED)
        if not self.config.get("attn_temperature_tuning", True):  # Scout's states 4: any true value
            raise ImportRefused("config.json turns off attn_temperature_tuning, which llama.cpp's llama4 applies")
        self._llama4_rotation()
        normed = self.n_expert != _LLAMA4_UNNORMED_EXPERTS
        if bool(self.config.get("use_qk_norm", True)) != normed:
            raise ImportRefused(
                f"config.json's use_qk_norm is {not normed}; llama.cpp's llama4 norms Q and K "
                f"{'unless' if normed else 'except where'} a model has {_LLAMA4_UNNORMED_EXPERTS} experts"
            )
        return {
            "llama4.feed_forward_length": (self._int("intermediate_size_mlp"), _U32),
            "llama4.rope.dimension_count": (self.head_dim, _U32),
            "llama4.expert_count": (self.n_expert, _U32),
            "llama4.expert_used_count": (self._require_mixture(), _U32),
            "llama4.expert_feed_forward_length": (self._int("intermediate_size"), _U32),
            "llama4.interleave_moe_layer_step": (self._llama4_moe_step(), _U32),
        }

    def _llama4_rotation(self) -> None:
        """``ImportRefused`` unless every layer but each 4th rotates and attends in chunks, as
        llama.cpp's llama4 fixes it: ``no_rope_layers`` (1 where a layer rotates), else every
        ``no_rope_layer_interval``th unrotated, and transformers 5's ``layer_types``."""
        n = self.n_layer
        rotating = [int((i + 1) % _LLAMA4_NO_ROPE_STEP != 0) for i in range(n)]
        interval = self._int("no_rope_layer_interval", default=_LLAMA4_NO_ROPE_STEP)
        stated = self.config.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(n)]
        types = self.config.get("layer_types")
        chunked = ["chunked_attention" if r else "full_attention" for r in rotating]
        if stated != rotating or (types is not None and types != chunked):
            raise ImportRefused(
                f"config.json's layers rotate and attend in chunks otherwise than every layer but each "
                f"{_LLAMA4_NO_ROPE_STEP}th, as llama.cpp's llama4 does"
            )

    def _llama4_moe_step(self) -> int:
        """Every how many layers one is a mixture: from ``moe_layers`` where stated (which
        transformers reads over the step), else ``interleave_moe_layer_step``; ``ImportRefused``
        where they are not the last of every so many layers, the only mixtures llama.cpp places."""
        n, moe = self.n_layer, self.config.get("moe_layers")
        stated = self.config.get("interleave_moe_layer_step", 1)
        step = moe[0] + 1 if isinstance(moe, list) and moe and _whole(moe[0]) else stated
        if not _whole(step) or step < 1 or (moe is not None and moe != list(range(step - 1, n, step))):
            raise ImportRefused(
                "config.json's moe_layers or interleave_moe_layer_step are not the last of every so many layers, "
                "the only mixtures llama.cpp's llama4 places"
            )
        return int(step)

    def _require_mixture(self) -> int:
        """How many experts a token uses; ``ImportRefused`` for a mixture llama.cpp would not load."""
        used = self._int("num_experts_per_tok")
        if used > self.n_expert or self.n_expert > _MAX_EXPERTS:
            raise ImportRefused(
                f"config.json's {self.n_expert} experts, {used} a token, are not a mixture llama.cpp runs "
                f"(at most {_MAX_EXPERTS} experts, no more a token than there are)"
            )
        return used

    def _ministral3(self) -> KV:
        """Ministral 3's YaRN attention factor (``mscale_all_dim``, as llama.cpp's log multiplier;
        llama.cpp assumes ``mscale`` 1) and its query temperature by position (``llama_4_scaling_beta``,
        counted in the trained context, which llama.cpp then needs)."""
        rope, kv = self._rope, {}
        if self.config.get("sliding_window"):
            raise ImportRefused("config.json sets a sliding_window, which llama.cpp's mistral3 has not")
        mscale, all_dims = rope.get("mscale"), rope.get("mscale_all_dim")
        if mscale and all_dims:  # transformers' factor is then their ratio; llama.cpp's, with mscale 1
            if float(mscale) != 1.0:
                raise ImportRefused("config.json's rope mscale is not 1, which llama.cpp's mistral3 assumes")
            kv["mistral3.rope.scaling.yarn_log_multiplier"] = (float(all_dims), _F32)
        beta = rope.get("llama_4_scaling_beta")
        if isinstance(beta, int | float) and beta:
            if rope.get("rope_type") != "yarn" or not isinstance(rope.get("original_max_position_embeddings"), int):
                raise ImportRefused("config.json's llama_4_scaling_beta needs YaRN's original_max_position_embeddings")
            kv["mistral3.attention.temperature_scale"] = (float(beta), _F32)
        return kv

    def _cohere(self) -> KV:
        """Command R's: its context (``model_max_length``, which the releases state past the
        ``max_position_embeddings`` they were trained beyond), its layer norms' epsilon, and the
        scale of its logits; its output is always its embedding in llama.cpp."""
        if self.config.get("tie_word_embeddings") is False:
            raise ImportRefused("config.json unties the output from the embedding, which llama.cpp's command-r ties")
        if self._rope.get("rope_type") not in (None, "default"):
            raise ImportRefused("config.json scales Cohere's rotary positions, which llama.cpp's command-r does not")
        if bool(self.config.get("use_qk_norm")) != (self.n_layer >= 64):
            raise ImportRefused(
                "llama.cpp's command-r norms Q and K exactly in models of 64 layers or more (Command R+); "
                f"config.json's use_qk_norm is {bool(self.config.get('use_qk_norm'))} for {self.n_layer} layers"
            )
        if self.n_head * self.head_dim != self.n_embd:
            raise ImportRefused("llama.cpp's command-r needs its heads to span hidden_size exactly")
        return {
            "command-r.context_length": (self._int("model_max_length", "max_position_embeddings"), _U32),
            "command-r.attention.layer_norm_epsilon": (float(self.config.get("layer_norm_eps") or 1e-5), _F32),
            "command-r.logit_scale": (float(self.config.get("logit_scale") or 0.0625), _F32),
        }

    def _olmo(self) -> KV:
        """OLMo 3's sliding window and which layers have it (llama.cpp's default without
        ``layer_types``: all but every fourth, as OLMo 3's); OLMo 2 has none."""
        window = self.config.get("sliding_window")
        if not isinstance(window, int) or window <= 0:
            return {}
        kv: KV = {"olmo2.attention.sliding_window": (window, _U32)}
        types = self.config.get("layer_types")
        if isinstance(types, list):
            if len(types) != self.n_layer or not all(t in ("sliding_attention", "full_attention") for t in types):
                raise ImportRefused("config.json's layer_types are not one sliding or full attention per layer")
            kv["olmo2.attention.sliding_window_pattern"] = (
                [t == "sliding_attention" for t in types],
                GGUFValueType.ARRAY,
            )
        return kv

    def _lfm2(self) -> KV:
        """LFM2's: which layers attend (the others' KV heads 0, which tells llama.cpp they convolve),
        the convolution's span, its epsilon, and its FFN's width as transformers derives it (its
        mixture's dense layers take ``intermediate_size`` as it is)."""
        types = self.config.get("layer_types")
        if (
            not isinstance(types, list)
            or len(types) != self.n_layer
            or not all(t in ("conv", "full_attention") for t in types)
        ):
            attending = self.config.get("full_attn_idxs")
            if not isinstance(attending, list):
                raise ImportRefused("config.json has neither layer_types nor full_attn_idxs for LFM2's layers")
            types = ["full_attention" if i in attending else "conv" for i in range(self.n_layer)]
        if self.config.get("conv_bias"):
            raise ImportRefused("config.json sets conv_bias, which llama.cpp's lfm2 has not")
        span = self.config.get("conv_L_cache", 3)
        if not isinstance(span, int) or isinstance(span, bool) or span < 2:  # llama.cpp asserts it, ending the process
            raise ImportRefused("config.json's conv_L_cache is not 2 or more, which llama.cpp's lfm2 needs")
        width = self._int("block_ff_dim", "intermediate_size")
        if self.arch == "lfm2" and self.config.get("block_auto_adjust_ff_dim", True):
            width = int(2 * width / 3)
            multiplier = self.config.get("block_ffn_dim_multiplier")
            if isinstance(multiplier, int | float):
                width = int(multiplier * width)
            step = self._int("block_multiple_of", default=256)
            width = step * ((width + step - 1) // step)
        a = self.arch
        return {
            f"{a}.feed_forward_length": (width, _U32),
            f"{a}.attention.head_count_kv": (
                [self.n_head_kv if t == "full_attention" else 0 for t in types],
                GGUFValueType.ARRAY,
            ),
            f"{a}.attention.layer_norm_rms_epsilon": (float(self.config.get("norm_eps") or 1e-5), _F32),
            f"{a}.shortconv.l_cache": (span, _U32),
        }

    def _lfm2moe(self) -> KV:
        """LFM2's mixture: how many layers lead dense, and its sigmoid router, whose top scores
        llama.cpp normalizes and does not scale (a checkpoint otherwise is refused)."""
        self._require_fixed(_LFM2MOE_FIXED)
        return {
            "lfm2moe.leading_dense_block_count": (self._int("num_dense_layers", default=0), _U32),
            "lfm2moe.expert_gating_func": (2, _U32),  # sigmoid
        }

    def _deepseek2(self) -> KV:
        """DeepSeek V3's and GLM-4.7-Flash's: the latent attention as llama.cpp computes it (one KV
        head of the latent and the rotary key, expanded per head by ``k_b`` and ``v_b``), the
        leading dense layers, and the router (sigmoid scores plus a bias choose among groups of
        experts, the chosen weighed by their scores, normalized and scaled), its shared experts."""
        self._require_fixed(_DEEPSEEK2_FIXED)
        rope = self._rope
        if float(rope.get("partial_rotary_factor", self.config.get("partial_rotary_factor", 1.0))) != 1.0:
            raise ImportRefused("config.json rotates part of qk_rope_head_dim; llama.cpp's deepseek2 rotates all of it")
        scale = rope.get("mscale_all_dim")
        if rope.get("rope_type") == "yarn" and (
            not isinstance(scale, int | float) or isinstance(scale, bool) or scale <= 0 or rope.get("mscale") != scale
        ):
            raise ImportRefused(
                "config.json's YaRN has mscale and mscale_all_dim unequal or unstated; llama.cpp's deepseek2 "
                "scales attention as if both were mscale_all_dim"
            )
        q_lora = self.config.get("q_lora_rank")
        if not _whole(q_lora):
            raise ImportRefused("config.json's q_lora_rank is neither a whole number nor null")
        if q_lora and (self.n_layer in (26, 27) or (self.n_layer == 48 and self.config.get("vocab_size") == 128256)):
            raise ImportRefused(  # deepseek2.cpp's is_lite: it does not read q_lora_rank, and wants attn_q
                f"llama.cpp takes a deepseek2 of {self.n_layer} layers for DeepSeek-V2-Lite, whose Q has no low-rank "
                f"projection; this one's has (q_lora_rank {q_lora})"
            )
        kv_lora, rotating = self._int("kv_lora_rank"), self._int("qk_rope_head_dim")
        n_group, used_groups = self._int("n_group", default=1), self._int("topk_group", default=1)
        if self.n_expert % n_group or used_groups > n_group or (n_group > 1 and self.n_expert // n_group < 2):
            raise ImportRefused(
                f"config.json's {self.n_expert} experts in n_group {n_group} (topk_group {used_groups}) are not "
                "groups llama.cpp chooses among (at least two experts each, topk_group at most n_group)"
            )
        softmax = self.config.get("architectures") == ["DeepseekV2ForCausalLM"]  # V2's router; V3's sigmoid
        method = self.config.get("topk_method", "greedy") if softmax else "noaux_tc"
        if method not in ("greedy", "group_limited_greedy", "noaux_tc"):
            raise ImportRefused(f"config.json's topk_method {method!r} is not one transformers' DeepSeek-V2 has")
        if method == "greedy" or used_groups == n_group:  # every group chosen: none, as llama.cpp asserts
            n_group = used_groups = 1
        if method == "group_limited_greedy" and n_group > 1:
            raise ImportRefused(
                "config.json chooses DeepSeek-V2's expert groups by their best expert; llama.cpp's deepseek2 chooses "
                "them by their best two"
            )
        if self._int("num_experts_per_tok") > self.n_expert:
            raise ImportRefused(f"config.json's num_experts_per_tok is more than its {self.n_expert} experts")
        if self._int("n_shared_experts", default=0) < 1:
            raise ImportRefused("config.json has no shared experts (n_shared_experts), which llama.cpp needs")
        a = self.arch
        kv: KV = {
            f"{a}.attention.head_count_kv": (1, _U32),
            f"{a}.attention.key_length": (kv_lora + rotating, _U32),
            f"{a}.attention.value_length": (kv_lora, _U32),
            f"{a}.attention.key_length_mla": (self._int("qk_nope_head_dim") + rotating, _U32),
            f"{a}.attention.value_length_mla": (self._int("v_head_dim"), _U32),
            f"{a}.attention.q_lora_rank": (q_lora, _U32),
            f"{a}.attention.kv_lora_rank": (kv_lora, _U32),
            f"{a}.rope.dimension_count": (rotating, _U32),
            f"{a}.leading_dense_block_count": (self._dense_layers(), _U32),
            f"{a}.expert_count": (self.n_expert, _U32),
            f"{a}.expert_used_count": (self._int("num_experts_per_tok"), _U32),
            f"{a}.expert_feed_forward_length": (self._int("moe_intermediate_size"), _U32),
            f"{a}.expert_shared_count": (self._int("n_shared_experts"), _U32),
            f"{a}.expert_weights_scale": (float(self.config.get("routed_scaling_factor") or 1.0), _F32),
            # transformers' DeepSeek-V2 never normalizes the chosen experts' weights, whatever it says
            f"{a}.expert_weights_norm": (not softmax and bool(self.config.get("norm_topk_prob")), GGUFValueType.BOOL),
            f"{a}.expert_gating_func": (1 if softmax else 2, _U32),  # softmax or sigmoid, as transformers' router
            f"{a}.expert_group_count": (n_group, _U32),
            f"{a}.expert_group_used_count": (used_groups, _U32),
        }
        if rope.get("rope_type") == "yarn":  # as llama.cpp's converter writes it (its loader divides by 0.1)
            kv[f"{a}.rope.scaling.yarn_log_multiplier"] = (0.1 * float(rope["mscale_all_dim"]), _F32)
        return kv

    def _dense_layers(self) -> int:
        """How many layers lead with a dense FFN before the mixtures (``first_k_dense_replace``, or
        GLM's ``mlp_layer_types``); layers llama.cpp cannot order so are refused."""
        types = self.config.get("mlp_layer_types")
        if types is None:
            dense = self.config.get("first_k_dense_replace", 0)
            if not _whole(dense) or dense >= self.n_layer:
                raise ImportRefused("config.json's first_k_dense_replace is not a number of the model's layers")
            return dense
        dense = types.index("sparse") if isinstance(types, list) and "sparse" in types else self.n_layer
        if (
            not isinstance(types, list)
            or len(types) != self.n_layer
            or types != ["dense"] * dense + ["sparse"] * (self.n_layer - dense)
        ):
            raise ImportRefused("config.json's mlp_layer_types are not dense layers, then sparse ones")
        return dense

    def _laguna(self) -> KV:
        """Laguna's: each layer's heads, which layers slide (their own rotary base and width), the
        full layers' partial rotation, the leading dense layers, and its sigmoid router (normalized,
        scaled) beside one shared expert. A router llama.cpp's laguna does not compute is refused."""
        self._require_fixed(_LAGUNA_FIXED)
        n, a = self.n_layer, self.arch
        heads = self._laguna_heads()
        types = self.config.get("layer_types") or ["full_attention"] * n
        if not isinstance(types, list) or len(types) != n or set(types) - {"full_attention", "sliding_attention"}:
            raise ImportRefused("config.json's layer_types are not full or sliding attention, one for each layer")
        dense = self._dense_layers()  # transformers' default: one (``_CLASS_DEFAULTS``)
        used = self._require_mixture()
        if self._rotary_dims > self.head_dim:
            raise ImportRefused("config.json rotates more than a whole head (partial_rotary_factor over 1)")
        rope = self.config.get("rope_parameters")
        sliding = rope.get("sliding_attention") if isinstance(rope, dict) else None
        kv: KV = {
            f"{a}.attention.head_count": (heads, GGUFValueType.ARRAY),
            f"{a}.rope.dimension_count": (self._rotary_dims, _U32),
            f"{a}.leading_dense_block_count": (dense, _U32),
            f"{a}.expert_count": (self.n_expert, _U32),
            f"{a}.expert_used_count": (used, _U32),
            f"{a}.expert_feed_forward_length": (self._int("moe_intermediate_size"), _U32),
            f"{a}.expert_shared_feed_forward_length": (self._int("shared_expert_intermediate_size"), _U32),
            f"{a}.expert_shared_count": (1, _U32),
            f"{a}.expert_weights_norm": (True, GGUFValueType.BOOL),  # transformers' router always normalizes
            f"{a}.expert_weights_scale": (float(self.config.get("moe_routed_scaling_factor") or 1.0), _F32),
            f"{a}.expert_gating_func": (2, _U32),
        }
        if "sliding_attention" in types:
            if not isinstance(sliding, dict) or sliding.get("rope_type", "default") != "default":
                raise ImportRefused("config.json's sliding layers rotate otherwise than llama.cpp's laguna (plainly)")
            kv |= {
                f"{a}.attention.sliding_window": (self._int("sliding_window"), _U32),
                f"{a}.attention.sliding_window_pattern": (
                    [t == "sliding_attention" for t in types],
                    GGUFValueType.ARRAY,
                ),
                f"{a}.rope.freq_base_swa": (float(sliding.get("rope_theta") or 10000.0), _F32),
                f"{a}.rope.dimension_count_swa": (
                    int(float(sliding.get("partial_rotary_factor", 1.0)) * self.head_dim),
                    _U32,
                ),
            }
        return kv

    def _laguna_heads(self) -> list[int]:
        """Laguna's attention heads per layer (``num_attention_heads_per_layer``, or as many in each)."""
        heads = self.config.get("num_attention_heads_per_layer") or [self.n_head] * self.n_layer
        if (
            not isinstance(heads, list)
            or len(heads) != self.n_layer
            or not all(_whole(h) and h > 0 and h % self.n_head_kv == 0 for h in heads)
        ):
            raise ImportRefused(
                "config.json's num_attention_heads_per_layer are not a multiple of its KV heads for each layer"
            )
        return heads

    def refuse_misread(self, gguf_name: str, shape: tuple[int, ...]) -> None:
        """``ImportRefused`` for a tensor llama.cpp would read otherwise than transformers: Laguna's
        output gate (llama.cpp gates per head or per element by its width; transformers by
        ``gating``), or a config whose ``gating_types`` contradict ``gating`` (as llama.cpp's converter
        refuses it: runtimes reading ``gating`` would mis-handle it)."""
        if self.arch != "laguna" or not gguf_name.endswith(".attn_gate.weight"):
            return
        layer = int(gguf_name.split(".")[1])
        heads = self._laguna_heads()[layer]
        gating, types = self.config.get("gating", True), self.config.get("gating_types")
        per_head = gating is True or gating == "per-head"  # transformers' reading
        if isinstance(types, list) and len(types) > layer:
            declared = str(types[layer]).replace("_", "-")
            if (declared == "per-head") != per_head:
                raise ImportRefused(
                    f"config.json's gating_types say {declared} at layer {layer}, its gating {gating!r} otherwise"
                )
        want = heads if per_head else heads * self.head_dim
        if shape[0] != want:
            raise ImportRefused(
                f"{gguf_name} gates {shape[0]} outputs; config.json's gating {gating!r} over {heads} heads means {want}"
            )

    def _nemotron_h(self) -> KV:
        """Nemotron-H's: which layers are Mamba-2's, attention's or an FFN's (llama.cpp tells them
        apart by their KV heads and FFN widths, both 0 for a Mamba-2 layer), the Mamba-2 mixer's
        widths, and its mixture's experts (sigmoid scores plus a bias, normalized and scaled, beside
        a shared expert; Nemotron 3 Super's latent width)."""
        self._require_fixed(_NEMOTRON_H_FIXED)
        if self.config.get("sliding_window") is not None:
            raise ImportRefused("config.json sets a sliding_window, which llama.cpp's nemotron_h has not")
        kinds = str(self.config["hybrid_override_pattern"])
        heads, width, groups = self._int("mamba_num_heads"), self._int("mamba_head_dim"), self._mamba_groups
        if heads % groups:
            raise ImportRefused(f"config.json's mamba_num_heads {heads} do not split into its n_groups {groups}")
        a, eps = self.arch, float(self.config.get("layer_norm_epsilon") or 1e-5)
        head_dim = self._int("head_dim", "attention_head_dim", default=128)  # transformers' default
        moe = self._int("moe_intermediate_size") if "E" in kinds else 0
        kv: KV = {
            f"{a}.attention.head_count_kv": ([self.n_head_kv if k == "*" else 0 for k in kinds], GGUFValueType.ARRAY),
            f"{a}.feed_forward_length": (
                [self._int("intermediate_size") if k == "-" else moe if k == "E" else 0 for k in kinds],
                GGUFValueType.ARRAY,
            ),
            f"{a}.attention.key_length": (head_dim, _U32),
            f"{a}.attention.value_length": (head_dim, _U32),
            f"{a}.attention.layer_norm_epsilon": (eps, _F32),
            f"{a}.attention.layer_norm_rms_epsilon": (eps, _F32),
            f"{a}.ssm.conv_kernel": (self._int("conv_kernel"), _U32),
            f"{a}.ssm.state_size": (self._int("ssm_state_size"), _U32),
            f"{a}.ssm.group_count": (groups, _U32),
            f"{a}.ssm.inner_size": (heads * width, _U32),
            f"{a}.ssm.time_step_rank": (heads, _U32),
        }
        if not moe:
            return kv
        n_group, used_groups = self._int("n_group", default=1), self._int("topk_group", default=1)
        if n_group != 1 and used_groups != n_group:
            raise ImportRefused(f"config.json chooses experts among n_group {n_group}, which llama.cpp's {a} does not")
        used = self._require_mixture()
        kv |= {
            f"{a}.expert_count": (self.n_expert, _U32),
            f"{a}.expert_used_count": (used, _U32),
            f"{a}.expert_feed_forward_length": (moe, _U32),
            f"{a}.expert_shared_feed_forward_length": (self._int("moe_shared_expert_intermediate_size"), _U32),
            f"{a}.expert_shared_count": (self._int("n_shared_experts", default=1), _U32),
            f"{a}.expert_weights_norm": (bool(self.config.get("norm_topk_prob", True)), GGUFValueType.BOOL),
            f"{a}.expert_weights_scale": (float(self.config.get("routed_scaling_factor") or 1.0), _F32),
        }
        latent = self.config.get("moe_latent_size")
        if latent is not None:
            kv[f"{a}.moe_latent_size"] = (self._int("moe_latent_size"), _U32)
        return kv

    @property
    def _mamba_groups(self) -> int:
        """How many groups a Mamba-2 layer's B and C (and its gated norm) are in."""
        return self._int("n_groups")

    def _mrope(self) -> KV:
        """Qwen-VL's, Qwen 3.5's and GLM-OCR's M-RoPE: how many of a head's dimensions rotate (Qwen 3.5's a
        quarter), how many of those pairs each of time, row and column takes (``mrope_section``,
        padded to llama.cpp's four); Qwen3-VL's also how many of its
        tower's layers feed the text model's first layers (deepstack)."""
        sections = self._rope.get("mrope_section", _QWEN35_MROPE if self.arch in _DELTA_NETS else None)
        if not (isinstance(sections, list) and 0 < len(sections) <= 4 and all(isinstance(n, int) for n in sections)):
            raise ImportRefused("config.json's rope scaling has no mrope_section for the model's M-RoPE positions")
        pairs = self._rotary_dims // 2
        if sum(sections) != pairs:
            raise ImportRefused(
                f"config.json's mrope_section {sections} does not cover a head's {pairs} rotating pairs"
            )
        kv: KV = {
            f"{self.arch}.rope.dimension_count": (self._rotary_dims, _U32),
            f"{self.arch}.rope.dimension_sections": ([*sections, 0, 0, 0][:4], GGUFValueType.ARRAY),
        }
        if self.arch in ("qwen3vl", "qwen3vlmoe"):
            vision = self.config.get("vision_config")
            deepstack = vision.get("deepstack_visual_indexes") if isinstance(vision, dict) else None
            kv[f"{self.arch}.n_deepstack_layers"] = (len(deepstack) if isinstance(deepstack, list) else 0, _U32)
        return kv

    def _delta_net(self) -> KV:
        """Qwen 3.5's gated delta net: its convolution, key and value heads (llama.cpp's ``ssm`` keys),
        and which layers attend to everything (every ``full_attention_interval``th)."""
        interval = self._int("full_attention_interval", default=4)
        types = self.config.get("layer_types")
        pattern = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(self.n_layer)]
        if types is not None and types != pattern:
            raise ImportRefused(
                f"config.json's layer_types are not a full-attention layer every {interval}, as llama.cpp needs"
            )
        if self._int("linear_key_head_dim") != self._int("linear_value_head_dim"):
            raise ImportRefused(
                "config.json's linear_key_head_dim and linear_value_head_dim differ; llama.cpp needs them equal"
            )
        if self.n_v_heads % self.n_k_heads:
            raise ImportRefused("config.json's linear_num_value_heads is not a multiple of linear_num_key_heads")
        return {
            f"{self.arch}.ssm.conv_kernel": (self._int("linear_conv_kernel_dim"), _U32),
            f"{self.arch}.ssm.state_size": (self._int("linear_key_head_dim"), _U32),
            f"{self.arch}.ssm.group_count": (self.n_k_heads, _U32),
            f"{self.arch}.ssm.time_step_rank": (self.n_v_heads, _U32),
            f"{self.arch}.ssm.inner_size": (self._int("linear_value_head_dim") * self.n_v_heads, _U32),
            f"{self.arch}.full_attention_interval": (interval, _U32),
        }

    @property
    def n_k_heads(self) -> int:
        return self._int("linear_num_key_heads")

    @property
    def n_v_heads(self) -> int:
        return self._int("linear_num_value_heads")

    def _experts(self) -> KV:
        """How many experts, how many a token uses, and how wide each is."""
        if self.config.get("mlp_only_layers") or self.config.get("decoder_sparse_step", 1) != 1:
            raise ImportRefused(
                f"config.json makes some layers dense (mlp_only_layers), which llama.cpp's {self.arch} has not"
            )
        # llama.cpp normalizes the chosen experts' weights; Qwen3-MoE's transformers, only if told.
        normalized = self.config.get("norm_topk_prob", self.arch != "qwen3moe")
        if self.arch in ("qwen3moe", "qwen3next") and normalized is not True:
            raise ImportRefused(f"config.json's norm_topk_prob is not true; llama.cpp's {self.arch} normalizes")
        return {
            f"{self.arch}.expert_count": (self.n_expert, _U32),
            f"{self.arch}.expert_used_count": (self._int("num_experts_per_tok"), _U32),
            f"{self.arch}.expert_feed_forward_length": (self._int("moe_intermediate_size"), _U32),
        }

    @property
    def n_expert(self) -> int:
        return self._int("num_experts", "num_local_experts", "n_routed_experts")

    def expert(self, name: str) -> tuple[int, int, str] | None:
        """(layer, expert, projection) of one expert's tensor, which llama.cpp keeps stacked per layer."""
        experts = self.layout.experts
        m = experts.fullmatch(self._text_name(name)) if experts is not None else None
        return (int(m[1]), int(m[2]), self.layout.projections.get(m[3], m[3])) if m else None

    def is_token_embedding(self, name: str) -> bool:
        """Whether the tensor is the text model's token embedding (an expert's, or a
        multi-token-prediction layer's own, is never asked about)."""
        if self.expert(name) is not None or _FUSED_EXPERTS.fullmatch(self._text_name(name)):
            return False
        if self.is_prediction_layer(name):
            return False
        return self.gguf_name(name) == "token_embd.weight"

    def fused_experts(self, name: str, shape: tuple[int, ...]) -> tuple[int, str, bool] | None:
        """(layer, ``gate_up``, ``up`` or ``down``, transposed) of a layer's experts kept in one tensor of
        ``shape``: ``(experts, out, in)`` as transformers 5 holds them (and saves Qwen3-VL-MoE's),
        or transposed, ``(experts, in, out)``, as the Qwen3-VL-MoE releases (transformers 4) did,
        told apart by the widths (or, where the hidden size is twice an expert's, by the
        transformers that saved it); Llama 4's are always transposed."""
        m = _FUSED_EXPERTS.fullmatch(self._text_name(name)) if self.layout.experts is not None else None
        if m is None:
            return None
        # an expert's input: the model's width, or the latent one around Nemotron 3 Super's experts
        hidden, width = self._int("moe_latent_size", "hidden_size"), self._int(self.layout.expert_width)
        out, inputs = {"gate_up": (2 * width, hidden), "up": (width, hidden), "down": (hidden, width)}[m[2]]
        transposed = shape[1:] == (inputs, out)
        plain = shape[1:] == (out, inputs) and not self.layout.transposed_experts
        if len(shape) != 3 or shape[0] != self.n_expert or not (plain or transposed):
            raise ImportRefused(
                f"tensor {name} of shape {list(shape)} is not {self.n_expert} experts' {m[2]} projections"
            )
        if plain and transposed:
            version = str(self.config.get("transformers_version") or "5")
            transposed = version.split(".")[0].isdigit() and int(version.split(".")[0]) < 5
        return int(m[1]), m[2], transposed

    def interleaved_experts(self, name: str) -> tuple[int, str, str] | None:
        """(layer, ``gate_up`` or ``down``, what) of a gpt-oss expert tensor: its ``weight``
        (``(experts, in, out)``), its MXFP4 ``blocks`` and ``scales``, or its ``bias``."""
        m = _INTERLEAVED_EXPERTS.fullmatch(name) if self.layout.interleaved else None
        return (int(m[1]), m[2], m[3] or "weight") if m else None

    def expert_projection(self, projection: str) -> tuple[int, int]:
        """(outputs, inputs) of one of gpt-oss's experts' ``gate_up`` (both, their rows interleaved) or ``down``."""
        hidden, width = self._int("hidden_size"), self._int("intermediate_size")
        return (2 * width, hidden) if projection == "gate_up" else (hidden, width)

    def _text_name(self, name: str) -> str:
        """The name under a model that sees as a text model's own (``model.layers...``), or under
        the layout's own root (Nemotron-H's ``backbone.``) as under ``model.``."""
        if self.layout.tower:
            name = next((new + name[len(old) :] for old, new in _TEXT_PREFIXES if name.startswith(old)), name)
        root = self.layout.root
        if root is not None and name.startswith(root):
            return "model." + name[len(root) :]
        return name

    def _window_pattern(self) -> int | None:
        """Every how many layers one attends to everything (llama.cpp's pattern; 6 if unstated)."""
        pattern = self.config.get("sliding_window_pattern", self.config.get("_sliding_window_pattern"))
        if isinstance(pattern, int) and pattern > 0:
            return pattern
        types = self.config.get("layer_types")
        if not isinstance(types, list) or "full_attention" not in types:
            return None
        period = types.index("full_attention") + 1
        if types != [("full_attention" if (i + 1) % period == 0 else "sliding_attention") for i in range(len(types))]:
            raise ImportRefused("config.json's layer_types are not a repeating pattern, which llama.cpp needs")
        return period

    def _rope_scaling(self) -> KV:
        rope, a = self._rope, self.arch
        kind, factor = rope.get("rope_type"), rope.get("factor")
        if kind in (None, "default", "llama3", "mrope") or self._longrope:  # factors as tensors, M-RoPE as _mrope
            return {}
        if kind == "proportional" and a == "gemma4":  # as a tensor of factors (``rope_factors``)
            return {}
        if kind in ("linear", "yarn") and isinstance(factor, int | float):
            kv: KV = {f"{a}.rope.scaling.type": (kind, _STR), f"{a}.rope.scaling.factor": (float(factor), _F32)}
            original = rope.get("original_max_position_embeddings")
            if kind == "yarn" and isinstance(original, int):
                kv[f"{a}.rope.scaling.original_context_length"] = (original, _U32)
            for key, name in _YARN_KEYS.items():  # as llama.cpp's converter copies them
                value = rope.get(key)
                if kind == "yarn" and isinstance(value, int | float) and not isinstance(value, bool):
                    kv[f"{a}.rope.scaling.{name}"] = (float(value), _F32)
            stated = rope.get("attention_factor")  # transformers' in place of its own from the factor
            if kind == "yarn" and stated is not None:
                ratio = float(stated) / self._yarn_attention(float(factor))
                if abs(ratio - 1) > 1e-6:  # llama.cpp multiplies its own by this
                    kv[f"{a}.rope.scaling.attn_factor"] = (ratio, _F32)
            return kv
        raise ImportRefused(f"config.json's rope scaling {kind!r} is not one cllm converts (linear, yarn, llama3)")

    def _yarn_attention(self, factor: float) -> float:
        """YaRN's attention factor as llama.cpp computes it from the keys written
        (``llama-context.cpp``): ``0.1 ln(factor) + 1``, or Ministral 3's ratio with its log multiplier."""

        def mscale(scale: float, m: float) -> float:
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1

        rope = self._rope
        if self.arch == "mistral3" and rope.get("mscale") and rope.get("mscale_all_dim"):
            return mscale(factor, 1.0) / mscale(factor, float(rope["mscale_all_dim"]))
        if self.arch == "deepseek2":  # mscale over mscale_all_dim, equal (``_deepseek2``)
            return 1.0
        return mscale(factor, 1.0)

    def rope_factors(self) -> dict[str, np.ndarray]:
        """Rotary frequency factors llama.cpp reads as tensors: Llama 3.1's (``rope_freqs.weight``),
        or Phi-3.5's long and short ones (``rope_factors_long``/``_short``), from the rope scaling."""
        rope = self._rope
        if self.arch == "gemma4":
            return self._gemma4_rope_factors()
        if self._longrope:
            given = {f"rope_factors_{kind}.weight": rope.get(f"{kind}_factor") for kind in ("long", "short")}
            if not all(isinstance(f, list) and len(f) == self._rotary_dims // 2 for f in given.values()):
                raise ImportRefused(
                    f"config.json's longrope needs long_factor and short_factor of {self._rotary_dims // 2} values"
                )
            return {name: np.array(f, dtype=np.float32) for name, f in given.items()}
        if self.arch not in ("llama", "llama4") or rope.get("rope_type") != "llama3":
            return {}
        base = float(rope.get("rope_theta") or 10000.0)
        factor = float(rope.get("factor") or 8.0)
        low, high = float(rope.get("low_freq_factor") or 1.0), float(rope.get("high_freq_factor") or 4.0)
        original = float(rope.get("original_max_position_embeddings") or 8192)
        low_wavelen, high_wavelen = original / low, original / high
        factors = []
        for i in range(0, self.head_dim, 2):
            wavelen = 2 * math.pi * base ** (i / self.head_dim)
            if wavelen < high_wavelen:
                factors.append(1.0)
            elif wavelen > low_wavelen:
                factors.append(factor)
            else:
                smooth = (original / wavelen - low) / (high - low)
                factors.append(1 / ((1 - smooth) / factor + smooth))
        return {"rope_freqs.weight": np.array(factors, dtype=np.float32)}

    def is_prediction_layer(self, name: str) -> bool:
        """Whether the tensor is a multi-token-prediction layer's (one of ``num_nextn_predict_layers``
        past ``num_hidden_layers``), left out; ``ImportRefused`` for a layer past those too, which
        a ``num_hidden_layers`` stated short would otherwise drop."""
        m = _PARAM.fullmatch(self._text_name(name)) if self.layout.mtp_layers else None
        if m is None or int(m[1]) < self.n_layer:
            return False
        predicting = self.config.get("num_nextn_predict_layers", 0)
        if _whole(predicting) and int(m[1]) < self.n_layer + predicting:
            return True
        raise ImportRefused(
            f"tensor {name} is past the model's {self.n_layer} layers (num_hidden_layers) and its "
            f"multi-token-prediction ones (num_nextn_predict_layers)"
        )

    def unadapted(self, gguf_name: str) -> bool:
        """Whether llama.cpp computes with this weight without adapters (``_UNADAPTED``)."""
        parts = gguf_name.split(".")
        stem = parts[2] if parts[0] == "blk" and len(parts) > 2 else parts[0]
        return stem in _UNADAPTED.get(self.arch, ())

    def in_tower(self, name: str) -> bool:
        """Whether the tensor is the vision tower's or its projector's (left out), or an audio tower's."""
        return self.layout.tower and name.startswith(_TOWER_PREFIXES)

    def hears(self, name: str) -> bool:
        """Whether the tensor is an audio tower's or its projector's (Gemma 4's, Nemotron Omni's)."""
        return self.layout.tower and name.startswith(_AUDIO_PREFIXES)

    def gguf_name(self, name: str) -> str | None:
        """The tensor's llama.cpp name; None for a buffer llama.cpp does not read, or the tower's."""
        if self.in_tower(name):
            return None
        name = self._text_name(name)
        layout = self.layout
        name = name.removeprefix(layout.prefix) if layout.prefix else name
        if name == "lm_head.weight" and layout.tied:
            return None
        if name in layout.globals:
            return layout.globals[name]
        if layout.skipped.fullmatch(name):
            return None
        m = layout.block.fullmatch(name)
        if m and m[2] in self.layout.parts:
            return f"blk.{m[1]}.{self.layout.parts[m[2]]}.{m[3]}"
        m = _PARAM.fullmatch(name)
        if m and m[2] in layout.params:
            return f"blk.{m[1]}.{layout.params[m[2]]}"
        raise ImportRefused(f"tensor {name} is not one cllm's converter knows for {self.arch}")

    def values(self, gguf_name: str) -> Callable[[np.ndarray], np.ndarray] | None:
        """What the tensor's values (F32) become: Gemma's and Qwen 3.5's norms, which scale by ``1 +
        weight``, with the 1 added; Qwen 3.5's ``A`` from its logarithm, as ``-exp(A_log)``."""
        layout = self.layout
        if layout.norm_shift and gguf_name.endswith("norm.weight") and not gguf_name.endswith(layout.unshifted):
            return lambda v: v + np.float32(layout.norm_shift)
        if self.arch in (*_DELTA_NETS, *_MAMBA2) and gguf_name.endswith(".ssm_a"):
            return lambda v: -np.exp(v)
        if gguf_name.endswith("altup_correct_scale.weight") and self.config.get("altup_correct_scale") is False:
            return np.ones_like  # unscaled, as transformers computes it without (llama.cpp always scales)
        return None

    def split(self, gguf_name: str, source: SourceTensor) -> list[tuple[str, SourceTensor]]:
        """The tensor as llama.cpp's tensors: itself, or deepseek2's ``attn_kv_b`` (each head's K
        rows, then its V rows, of the latent's columns) as ``attn_k_b``, each head's K transposed
        (``(heads, latent, K)``), and ``attn_v_b`` (``(heads, V, latent)``), for the latent
        attention llama.cpp computes without expanding the cache."""
        if self.arch != "deepseek2" or not gguf_name.endswith(".attn_kv_b.weight"):
            return [(gguf_name, source)]
        heads, keys, values = self.n_head, self._int("qk_nope_head_dim"), self._int("v_head_dim")
        latent = self._int("kv_lora_rank")
        if source.shape != (heads * (keys + values), latent):
            raise ImportRefused(
                f"{gguf_name} has shape {list(source.shape)}, not {heads} heads' K and V rows of a {latent}-wide latent"
            )
        per_head = source.data.reshape(heads, keys + values, latent)
        stem = gguf_name.removesuffix("attn_kv_b.weight")
        return [
            (stem + "attn_k_b.weight", source.with_data(per_head[:, :keys].swapaxes(1, 2))),
            (stem + "attn_v_b.weight", source.with_data(per_head[:, keys:])),
        ]

    def view(self, gguf_name: str, source: SourceTensor) -> SourceTensor:
        """The tensor as llama.cpp lays it out where only its shape differs: Qwen 3.5's, LFM2's and
        Mamba-2's convolutions without their unit axis (``(channels, 1, kernel)`` in the
        checkpoint), Qwen 3.5's shared expert's gate a vector, Mamba-2's ``A`` and ``D`` a column
        per head and its norm a row per group."""
        if gguf_name.endswith(_CONVOLUTIONS) and len(source.shape) == 3 and source.shape[1] == 1:
            return source.with_data(source.data[:, 0, :])
        if gguf_name.endswith("ffn_gate_inp_shexp.weight") and len(source.shape) == 2 and source.shape[0] == 1:
            return source.with_data(source.data[0])  # one row: llama.cpp's vector
        if self.arch in _MAMBA2 and gguf_name.endswith((".ssm_a", ".ssm_d")) and len(source.shape) == 1:
            return source.with_data(source.data[:, None])  # a column per head
        if self.arch in _MAMBA2 and gguf_name.endswith(".ssm_norm.weight") and len(source.shape) == 1:
            return source.with_data(source.data.reshape(self._mamba_groups, -1))  # normed per group
        return source

    def reorder(self, gguf_name: str, shape: tuple[int, ...]) -> Order | None:
        """Rows or columns the tensor of ``shape`` (the checkpoint's ``(out, in)``) has in another
        order in llama.cpp: a Llama's Q and K rows, from halves to neighbouring pairs per head
        (GLM-OCR's the other way, for llama.cpp's M-RoPE); Qwen
        3.5's value heads, from grouped by key head to tiled (``_reorder_v_heads`` in llama.cpp's
        converter), where it has more value heads than key heads."""
        if self.arch in _TILED:
            return self._tiled_v_heads(gguf_name, shape)
        neox = self._glm_mrope
        if self.arch not in _LLAMAS and not neox:
            return None
        if re.fullmatch(r"blk\.\d+\.attn_q\.(weight|bias)", gguf_name):
            heads = self.n_head
        elif re.fullmatch(r"blk\.\d+\.attn_k\.(weight|bias)", gguf_name):
            heads = self.n_head_kv
        else:
            return None
        if neox:
            return halves_order(gguf_name, shape, heads, self.head_dim, self._rotary_dims)
        return pairs_order(gguf_name, shape, heads)

    def _tiled_v_heads(self, gguf_name: str, shape: tuple[int, ...]) -> Order | None:
        n_k, n_v = self.n_k_heads, self.n_v_heads
        if n_k == n_v or not gguf_name.startswith("blk."):
            return None
        width = self._int("linear_value_head_dim")

        def tiled(size: int) -> np.ndarray:
            return np.arange(n_v * size).reshape(n_k, n_v // n_k, size).swapaxes(0, 1).reshape(-1)

        part = gguf_name.split(".", 2)[2]
        keys = 2 * self._int("linear_key_head_dim") * n_k  # Q's and K's rows (or channels) before V's
        if part in ("attn_qkv.weight", "ssm_conv1d.weight"):
            order = Order(0, np.concatenate([np.arange(keys), keys + tiled(width)]))
        elif part == "attn_gate.weight":
            order = Order(0, tiled(width))
        elif part in ("ssm_alpha.weight", "ssm_beta.weight", "ssm_a", "ssm_dt.bias"):
            order = Order(0, tiled(1))
        elif part == "ssm_out.weight":
            order = Order(1, tiled(width))
        else:
            return None
        if len(shape) <= order.axis or shape[order.axis] != len(order.index):
            raise ImportRefused(f"{gguf_name} has shape {list(shape)}, which its value heads do not fill")
        return order


# Each architecture's keys beyond the common ones (``Family.kv``), in the order they are added.
_ARCH_KEYS: dict[str, tuple[Callable[[Family], KV], ...]] = {
    "llama": (Family._mixtral,),
    "mistral3": (Family._ministral3,),
    "phi3": (Family._phi3,),
    "gemma2": (Family._gemma2,),
    "gemma3": (Family._gemma3,),
    "gemma-embedding": (Family._gemma3,),
    "qwen3moe": (Family._experts,),
    "qwen2vl": (Family._mrope,),
    "qwen3vl": (Family._mrope,),
    "qwen3vlmoe": (Family._experts, Family._mrope),
    "qwen35": (Family._mrope, Family._delta_net),
    "qwen35moe": (Family._mrope, Family._delta_net, Family._experts, Family._shared_expert),
    "qwen3next": (Family._delta_net, Family._experts, Family._shared_expert, Family._partial_rotation),
    "gpt-oss": (Family._gptoss,),
    "lfm2": (Family._lfm2,),
    "lfm2moe": (Family._lfm2, Family._experts, Family._lfm2moe),
    "olmo2": (Family._olmo,),
    "command-r": (Family._cohere,),
    "gemma3n": (Family._gemma3n,),
    "glm4": (Family._glm4, Family._partial_rotation),
    "gemma4": (Family._gemma4,),
    "deepseek2": (Family._deepseek2,),
    "laguna": (Family._laguna,),
    "llama4": (Family._llama4,),
    "nemotron_h": (Family._nemotron_h,),
    "nemotron_h_moe": (Family._nemotron_h,),
}


@dataclass(frozen=True, eq=False)
class Order:
    """A tensor's rows (``axis`` 0) or columns (1) in llama.cpp's order: place ``i`` takes the
    checkpoint's ``index[i]``."""

    axis: int
    index: np.ndarray

    def apply(self, data: np.ndarray) -> np.ndarray:
        return np.take(data, self.index, axis=self.axis)


def pairs_order(name: str, shape: tuple[int, ...], heads: int) -> Order:
    """``permute``'s order of the rows of the tensor ``name`` of ``shape``; ``ImportRefused`` where
    its rows do not split into pairs per head."""
    if shape[0] % (2 * heads):
        raise ImportRefused(f"{name} has {shape[0]} rows, which {heads} heads cannot share in pairs")
    return Order(0, permute(np.arange(shape[0]), heads))


def halves_order(name: str, shape: tuple[int, ...], heads: int, head_dim: int, rotary: int) -> Order:
    """Each head's rotating rows from neighbouring pairs ``[a0, b0, a1, b1, ...]`` to halves ``[a...,
    b...]``, the rest as they are (``normal_to_neox`` in llama.cpp's GLM converter, Ollama's
    ``normalToNeoXRepacker``); ``ImportRefused`` where the rows are not ``heads`` heads."""
    if shape[0] != heads * head_dim:
        raise ImportRefused(f"{name} has {shape[0]} rows, not {heads} heads of {head_dim}")
    head = np.concatenate([np.arange(0, rotary, 2), np.arange(1, rotary, 2), np.arange(rotary, head_dim)])
    return Order(0, (np.arange(heads)[:, None] * head_dim + head).reshape(-1))


def permute(rows: np.ndarray, heads: int) -> np.ndarray:
    """Each head's rows ``[first half..., second half...]`` interleaved as ``[h0, s0, h1, s1, ...]``
    (``LlamaModel.permute`` in llama.cpp's converter)."""
    shape = rows.shape
    return np.ascontiguousarray(
        rows.reshape(heads, 2, shape[0] // heads // 2, *shape[1:]).swapaxes(1, 2).reshape(shape)
    )


def _nemotron_h_kinds(config: Mapping[str, Any]) -> str:
    """Nemotron-H's layers as ``hybrid_override_pattern`` letters, from that pattern (its releases')
    or ``layers_block_type`` (transformers 5's); ``ImportRefused`` for a kind llama.cpp lacks."""
    pattern = config.get("hybrid_override_pattern")
    types = config.get("layers_block_type", config.get("layer_types"))
    if isinstance(types, list) and all(isinstance(t, str) for t in types):
        pattern = "".join(_NEMOTRON_H_KINDS.get(t, "?") for t in types)
    if not isinstance(pattern, str) or not pattern or set(pattern) - set("M*-E"):
        raise ImportRefused(
            "config.json's hybrid_override_pattern (or layers_block_type) is not Nemotron-H's Mamba-2, "
            "attention, MLP and mixture layers"
        )
    if "-" in pattern and "E" in pattern:  # llama.cpp's nemotron_h_moe makes every FFN layer a mixture
        raise ImportRefused("config.json mixes MLP and mixture layers, which llama.cpp's nemotron_h_moe does not")
    return pattern


def _whole(value: Any) -> bool:
    """Whether a setting is a whole number of something (0 or more; not a bool, which Python counts)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
