"""Tiny random-weight Gemma 4 text models in llama.cpp's layout with every part of Gemma 4's that
a checkpoint may have: full-attention layers with wider heads whose keys are their values
(``attention_k_eq_v``) and a proportional rotation (``rope_freqs``), per-layer embeddings and the
last layers reusing earlier layers' KV with a doubly wide FFN (E2B and E4B), or a mixture of
experts beside the dense FFN (26B-A4B). ``hf_folders.write_hf_gemma4`` exports them as the
checkpoints they convert from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from .gguf_base import TINY, Tensors, f16_exact, finish, gemma4_vocab, moe_ffn

_F16 = gguf.GGMLQuantizationType.F16
GEMMA4_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|turn>{{ m['role'] }}\n{{ m['content'] }}<turn|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|turn>model\n{% endif %}"
)


@dataclass(frozen=True)
class Gemma4Shape:
    """A tiny Gemma 4: sliding and full-attention layers in turn, the last one full."""

    n_layer: int = 4
    n_embd: int = TINY.n_embd
    n_head: int = 4
    head_dim: int = 16  # a sliding layer's
    n_head_kv: int = 2
    head_dim_full: int = 32  # a full-attention layer's ...
    n_head_kv_full: int = 1  # ... whose keys are its values
    n_ff: int = 96
    window: int = 8
    rotating: float = 0.25  # of a full-attention head's pairs (proportional RoPE)
    n_embd_per_layer: int = 0  # per-layer embeddings' width (E2B, E4B)
    shared: int = 0  # last layers reusing earlier layers' KV (their FFN twice as wide)
    n_expert: int = 0  # a mixture beside the dense FFN (26B-A4B)
    n_expert_used: int = 2
    n_ff_exp: int = 32
    context_length: int = 4096

    def sliding(self, il: int) -> bool:
        return il % 2 == 0 and il != self.n_layer - 1

    def n_ff_at(self, il: int) -> int:
        return 2 * self.n_ff if self.shared and il >= self.n_layer - self.shared else self.n_ff


# E2B's parts, 26B-A4B's, and 31B's (none of theirs).
GEMMA4_E2B = Gemma4Shape(n_embd_per_layer=16, shared=2)
GEMMA4_MOE = Gemma4Shape(n_layer=2, n_expert=4)
GEMMA4_31B = Gemma4Shape()


def write_gemma4_text(path: Path, shape: Gemma4Shape = GEMMA4_E2B, *, seed: int = 0) -> Path:
    """A tiny Gemma 4 text model of ``shape`` in F16 (routers, scales and norms F32, each of values
    F16 holds, so that the checkpoint exported from it converts back to it exactly)."""
    s = shape
    t = Tensors(gguf.GGUFWriter(str(path), "gemma4"), np.random.default_rng(seed), 0.5, _F16)
    w = t.w
    w.add_name("tiny-gemma4")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(s.context_length)
    w.add_embedding_length(s.n_embd)
    w.add_block_count(s.n_layer)
    sliding = [s.sliding(i) for i in range(s.n_layer)]
    if s.shared:  # those layers' FFN twice as wide
        w.add_array("gemma4.feed_forward_length", [s.n_ff_at(i) for i in range(s.n_layer)])
    else:
        w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    w.add_array("gemma4.attention.head_count_kv", [s.n_head_kv if sw else s.n_head_kv_full for sw in sliding])
    w.add_key_length(s.head_dim_full)
    w.add_value_length(s.head_dim_full)
    w.add_uint32("gemma4.attention.key_length_swa", s.head_dim)
    w.add_uint32("gemma4.attention.value_length_swa", s.head_dim)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_sliding_window(s.window)
    w.add_array("gemma4.attention.sliding_window_pattern", sliding)
    w.add_uint32("gemma4.attention.shared_kv_layers", s.shared)
    w.add_uint32("gemma4.embedding_length_per_layer_input", s.n_embd_per_layer)
    w.add_rope_freq_base(1e6)
    w.add_rope_freq_base_swa(1e4)
    w.add_rope_dimension_count(s.head_dim_full)
    w.add_uint32("gemma4.rope.dimension_count_swa", s.head_dim)
    w.add_float32("gemma4.final_logit_softcapping", 30.0)
    if s.n_expert:
        w.add_expert_count(s.n_expert)
        w.add_expert_used_count(s.n_expert_used)
        w.add_expert_feed_forward_length(s.n_ff_exp)
    vocab = gemma4_vocab()
    w.add_tokenizer_model("gemma4")
    w.add_token_list(vocab.tokens)
    w.add_token_scores([-1000.0] * len(vocab.tokens))
    w.add_token_types(vocab.types)
    w.add_token_merges(vocab.merges)
    w.add_bos_token_id(vocab.bos_id)
    w.add_eos_token_id(vocab.eos_id)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(False)
    w.add_chat_template(GEMMA4_TEMPLATE)

    n_vocab = len(vocab.tokens)
    # Input embeddings Gemma scales by sqrt(n_embd), tied to the output: its logits a few units wide.
    t.matrix("token_embd.weight", n_vocab, s.n_embd, std=2.0 / np.sqrt(s.n_embd))
    t.varied_norm("output_norm.weight", s.n_embd)
    turning = int(s.head_dim_full * s.rotating / 2)
    t.f32("rope_freqs.weight", np.array([1.0] * turning + [1e30] * (s.head_dim_full // 2 - turning)))
    if s.n_embd_per_layer:
        per_layer = s.n_embd_per_layer * s.n_layer
        t.matrix("per_layer_token_embd.weight", n_vocab, per_layer)
        t.matrix("per_layer_model_proj.weight", per_layer, s.n_embd, std=0.5 / np.sqrt(s.n_embd))
        t.varied_norm("per_layer_proj_norm.weight", s.n_embd_per_layer)
    for il in range(s.n_layer):
        p = f"blk.{il}."
        head, kv_heads = (s.head_dim, s.n_head_kv) if sliding[il] else (s.head_dim_full, s.n_head_kv_full)
        t.varied_norm(p + "attn_norm.weight", s.n_embd)
        t.matrix(p + "attn_q.weight", s.n_head * head, s.n_embd)
        # Q and K normed small: Gemma 4 does not scale its attention, and unit norms would make the
        # random model's attention a near argmax, which F16's rounding of a picture's embeddings flips.
        t.varied_norm(p + "attn_q_norm.weight", head, 0.4)
        if il < s.n_layer - s.shared:  # a layer of its own KV
            t.matrix(p + "attn_k.weight", kv_heads * head, s.n_embd)
            t.varied_norm(p + "attn_k_norm.weight", head, 0.4)
            if sliding[il]:  # a full-attention layer's keys are its values
                t.matrix(p + "attn_v.weight", kv_heads * head, s.n_embd)
        t.matrix(p + "attn_output.weight", s.n_embd, s.n_head * head)
        t.varied_norm(p + "post_attention_norm.weight", s.n_embd)
        t.varied_norm(p + "ffn_norm.weight", s.n_embd)
        t.matrix(p + "ffn_gate.weight", s.n_ff_at(il), s.n_embd)
        t.matrix(p + "ffn_up.weight", s.n_ff_at(il), s.n_embd)
        t.matrix(p + "ffn_down.weight", s.n_embd, s.n_ff_at(il))
        t.varied_norm(p + "post_ffw_norm.weight", s.n_embd)
        if s.n_expert:
            moe_ffn(t, p, s.n_expert, s.n_ff_exp, s.n_embd)
            t.varied_norm(p + "ffn_gate_inp.scale", s.n_embd)
            t.f32(p + "ffn_down_exps.scale", 1.0 + f16_exact(t, (s.n_expert,), 0.2))
            for name in ("pre_ffw_norm_2", "post_ffw_norm_1", "post_ffw_norm_2"):
                t.varied_norm(p + name + ".weight", s.n_embd)
        if s.n_embd_per_layer:
            t.matrix(p + "inp_gate.weight", s.n_embd_per_layer, s.n_embd)
            t.matrix(p + "proj.weight", s.n_embd, s.n_embd_per_layer)
            t.varied_norm(p + "post_norm.weight", s.n_embd)
        t.f32(p + "layer_output_scale.weight", np.array([0.75]))
    finish(w)
    return path
