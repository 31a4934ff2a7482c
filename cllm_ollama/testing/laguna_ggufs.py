"""A tiny random-weight Laguna (poolside) in llama.cpp's layout (``laguna``), in F16 as converted
from a checkpoint: a full-attention layer then sliding ones (their own rotary base and width, the
full layers' partial rotation under YaRN), each layer's own number of heads, Q and K normed, the
attention's output gated per head (softplus), a dense layer, then sigmoid-routed experts with a
bias beside a shared expert. ``hf_folders.write_hf_laguna`` exports it as the checkpoint it
converts from.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from .gguf_base import TINY, Tensors, Vocab, add_tokenizer, f16_exact, finish, moe_ffn, synthetic_vocab, with_tokens

_F16 = gguf.GGMLQuantizationType.F16
LAGUNA_HEADS = (4, 2, 4, 2)  # each layer's
LAGUNA_SLIDING = (False, True, True, True)  # a full-attention layer every fourth, from the first
_HEAD_DIM, _KV_HEADS, _FF, _EXPERTS, _USED, _FF_EXP, _FF_SHARED = 16, 2, 96, 8, 2, 32, 48


def laguna_vocab() -> Vocab:
    """The synthetic vocabulary with Laguna's turn end, ``</assistant>``."""
    return with_tokens(synthetic_vocab(), ["</assistant>"])


def write_laguna(path: Path, *, seed: int = 0) -> Path:
    """The tiny Laguna (routers, biases and norms F32, of values F16 holds, so that the checkpoint
    exported from it converts back to it exactly)."""
    t = Tensors(gguf.GGUFWriter(str(path), "laguna"), np.random.default_rng(seed), 0.25, _F16)
    w, n_layer, n_embd = t.w, len(LAGUNA_HEADS), TINY.n_embd
    w.add_name("tiny-laguna")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(16384)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(_FF)
    w.add_head_count(list(LAGUNA_HEADS))
    w.add_head_count_kv(_KV_HEADS)
    w.add_key_length(_HEAD_DIM)
    w.add_value_length(_HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(500000.0)
    w.add_rope_dimension_count(_HEAD_DIM // 2)  # the full layers rotate half of each head
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(4.0)
    w.add_rope_scaling_orig_ctx_len(4096)
    w.add_uint32("laguna.rope.dimension_count_swa", _HEAD_DIM)
    w.add_float32("laguna.rope.freq_base_swa", 10000.0)
    w.add_sliding_window(8)
    w.add_array("laguna.attention.sliding_window_pattern", list(LAGUNA_SLIDING))
    w.add_leading_dense_block_count(1)
    w.add_expert_count(_EXPERTS)
    w.add_expert_used_count(_USED)
    w.add_expert_feed_forward_length(_FF_EXP)
    w.add_expert_shared_feed_forward_length(_FF_SHARED)
    w.add_expert_shared_count(1)
    w.add_expert_weights_norm(True)
    w.add_expert_weights_scale(2.0)
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    vocab = laguna_vocab()
    add_tokenizer(w, vocab, None)
    w.add_eot_token_id(vocab.tokens.index("</assistant>"))

    t.matrix("token_embd.weight", len(vocab.tokens), n_embd, std=1.0)
    t.varied_norm("output_norm.weight", n_embd)
    t.matrix("output.weight", len(vocab.tokens), n_embd)
    for il, heads in enumerate(LAGUNA_HEADS):
        p = f"blk.{il}."
        t.varied_norm(p + "attn_norm.weight", n_embd)
        t.matrix(p + "attn_q.weight", heads * _HEAD_DIM, n_embd)
        t.matrix(p + "attn_k.weight", _KV_HEADS * _HEAD_DIM, n_embd)
        t.matrix(p + "attn_v.weight", _KV_HEADS * _HEAD_DIM, n_embd)
        t.varied_norm(p + "attn_q_norm.weight", _HEAD_DIM)
        t.varied_norm(p + "attn_k_norm.weight", _HEAD_DIM)
        t.matrix(p + "attn_gate.weight", heads, n_embd)  # one softplus gate per head
        t.matrix(p + "attn_output.weight", n_embd, heads * _HEAD_DIM)
        t.varied_norm(p + "ffn_norm.weight", n_embd)
        if il == 0:
            t.matrix(p + "ffn_gate.weight", _FF, n_embd)
            t.matrix(p + "ffn_up.weight", _FF, n_embd)
            t.matrix(p + "ffn_down.weight", n_embd, _FF)
            continue
        moe_ffn(t, p, _EXPERTS, _FF_EXP, n_embd, router_std=0.3)
        t.f32(p + "exp_probs_b.bias", f16_exact(t, (_EXPERTS,), 0.3))
        t.matrix(p + "ffn_gate_shexp.weight", _FF_SHARED, n_embd)
        t.matrix(p + "ffn_up_shexp.weight", _FF_SHARED, n_embd)
        t.matrix(p + "ffn_down_shexp.weight", n_embd, _FF_SHARED)
    finish(w)
    return path
