"""Tiny random-weight GLM-4 text models (GLM-4-0414, GLM-Z1) in llama.cpp's layout (``glm4``), in
F16 as converted from a checkpoint: Q, K and V with biases, half of each head rotating, norms after
attention and after the FFN, the FFN's gate and up in one tensor, GLM's vocabulary and template.
``hf_folders.write_hf_glm4`` exports them as the checkpoints they convert from.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from .deepseek2_ggufs import GLM_SPECIALS, GLM_TEMPLATE
from .gguf_base import TINY, Tensors, add_tokenizer, f16_exact, finish, synthetic_vocab, with_tokens

_F16 = gguf.GGMLQuantizationType.F16
N_LAYER, N_HEAD, N_HEAD_KV, HEAD_DIM, N_FF = 2, 4, 2, 16, 96


def write_glm4(path: Path, *, seed: int = 0) -> Path:
    """A tiny GLM-4 in F16 (biases and norms F32, of values F16 holds, so that the checkpoint
    exported from it converts back to it exactly)."""
    t = Tensors(gguf.GGUFWriter(str(path), "glm4"), np.random.default_rng(seed), 0.25, _F16)
    w, n_embd = t.w, TINY.n_embd
    w.add_name("tiny-glm4")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(4096)
    w.add_embedding_length(n_embd)
    w.add_block_count(N_LAYER)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_feed_forward_length(N_FF)
    w.add_rope_freq_base(1e4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_dimension_count(HEAD_DIM // 2)
    vocab = with_tokens(synthetic_vocab(), GLM_SPECIALS)
    ids = {text: i for i, text in enumerate(vocab.tokens)}
    add_tokenizer(w, vocab, GLM_TEMPLATE, pre="glm4")
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
            ("attn_q", N_HEAD * HEAD_DIM),
            ("attn_k", N_HEAD_KV * HEAD_DIM),
            ("attn_v", N_HEAD_KV * HEAD_DIM),
        ):
            t.matrix(p + name + ".weight", rows, n_embd)
            t.f32(p + name + ".bias", f16_exact(t, (rows,), 0.3))
        t.matrix(p + "attn_output.weight", n_embd, N_HEAD * HEAD_DIM)
        t.varied_norm(p + "post_attention_norm.weight", n_embd)
        t.varied_norm(p + "ffn_norm.weight", n_embd)
        t.matrix(p + "ffn_up.weight", 2 * N_FF, n_embd)  # the gate's rows, then up's
        t.matrix(p + "ffn_down.weight", n_embd, N_FF)
        t.varied_norm(p + "post_ffw_norm.weight", n_embd)
    finish(w)
    return path
