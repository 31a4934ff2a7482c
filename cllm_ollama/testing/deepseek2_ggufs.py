"""Tiny random-weight DeepSeek V3 and GLM-4.7-Flash text models in llama.cpp's layout
(``deepseek2``): multi-head latent attention (Q through a low-rank projection, K and V from one
latent that ``attn_k_b`` and ``attn_v_b`` expand per head, a rotary key shared by the heads), a
leading dense layer, then routed experts chosen by sigmoid scores plus a bias (among groups of
them, DeepSeek V3's) beside a shared expert; DeepSeek V3's YaRN. ``hf_folders.write_hf_deepseek2``
exports them as the checkpoints they convert from.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from .gguf_base import TINY, Tensors, Vocab, add_tokenizer, f16_exact, finish, moe_ffn, synthetic_vocab, with_tokens

_F16 = gguf.GGMLQuantizationType.F16
# GLM's turn tokens, which its template writes and llama.cpp's converter makes the ends of a turn.
GLM_SPECIALS = ("[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>")
GLM_TEMPLATE = (
    "[gMASK]<sop>{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


@dataclass(frozen=True)
class Deepseek2Shape:
    """A tiny ``deepseek2``: its first ``n_dense`` layers dense, the others mixtures."""

    n_layer: int = 3
    n_embd: int = TINY.n_embd
    n_head: int = 4
    q_lora_rank: int = 32
    kv_lora_rank: int = 32
    qk_nope: int = 16
    qk_rope: int = 8
    v_head: int = 16
    n_ff: int = 96
    n_dense: int = 1
    n_expert: int = 8
    n_expert_used: int = 2
    n_ff_exp: int = 32
    n_shared: int = 1
    n_group: int = 1
    topk_group: int = 1
    routed_scale: float = 1.8
    yarn: float = 0.0  # YaRN's factor over a 4096-token trained context (DeepSeek V3's), or none
    mscale: float = 1.0  # YaRN's mscale and mscale_all_dim (DeepSeek-V2-Lite's 0.707)
    rms_eps: float = 1e-5
    pre: str = "glm4"  # the vocabulary's pre-tokenizer: GLM's, DeepSeek V3's, or Qwen 2's (V2's, by its splits)
    softmax: bool = False  # DeepSeek-V2's router: softmax, no bias, the chosen not normalized

    @property
    def context_length(self) -> int:
        return int(4096 * self.yarn) if self.yarn else 4096


# GLM-4.7-Flash's parts (no groups, no YaRN), and DeepSeek V3's (experts in groups, YaRN).
GLM47_FLASH = Deepseek2Shape()
DEEPSEEK_V3 = dataclasses.replace(
    GLM47_FLASH, n_group=4, topk_group=2, routed_scale=2.5, yarn=4.0, rms_eps=1e-6, pre="deepseek-v3"
)
# DeepSeek-V2-Lite's (and DeepSeek-Coder-V2-Lite's): Q in one projection, a softmax router.
DEEPSEEK_V2_LITE = dataclasses.replace(
    GLM47_FLASH, q_lora_rank=0, routed_scale=1.0, yarn=4.0, mscale=0.707, rms_eps=1e-6, pre="qwen2", softmax=True
)


def deepseek2_vocab(shape: Deepseek2Shape) -> Vocab:
    """The synthetic vocabulary, with GLM's turn tokens for a GLM."""
    vocab = synthetic_vocab()
    return with_tokens(vocab, GLM_SPECIALS) if shape.pre == "glm4" else vocab


def write_deepseek2(path: Path, shape: Deepseek2Shape = GLM47_FLASH, *, seed: int = 0) -> Path:
    """A tiny ``deepseek2`` of ``shape`` in F16 (routers, biases and norms F32, of values F16 holds,
    so that the checkpoint exported from it converts back to it exactly)."""
    s = shape
    t = Tensors(gguf.GGUFWriter(str(path), "deepseek2"), np.random.default_rng(seed), 0.25, _F16)
    w = t.w
    w.add_name({"glm4": "tiny-glm4-moe-lite", "deepseek-v3": "tiny-deepseek-v3"}.get(s.pre, "tiny-deepseek-v2"))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(s.context_length)
    w.add_embedding_length(s.n_embd)
    w.add_block_count(s.n_layer)
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    w.add_head_count_kv(1)  # the latent, one head for all
    w.add_key_length(s.kv_lora_rank + s.qk_rope)
    w.add_value_length(s.kv_lora_rank)
    w.add_uint32("deepseek2.attention.key_length_mla", s.qk_nope + s.qk_rope)
    w.add_uint32("deepseek2.attention.value_length_mla", s.v_head)
    w.add_q_lora_rank(s.q_lora_rank)
    w.add_kv_lora_rank(s.kv_lora_rank)
    w.add_rope_dimension_count(s.qk_rope)
    w.add_rope_freq_base(1e6 if s.pre == "glm4" else 1e4)
    w.add_layer_norm_rms_eps(s.rms_eps)
    w.add_leading_dense_block_count(s.n_dense)
    w.add_expert_count(s.n_expert)
    w.add_expert_used_count(s.n_expert_used)
    w.add_expert_feed_forward_length(s.n_ff_exp)
    w.add_expert_shared_count(s.n_shared)
    w.add_expert_weights_scale(s.routed_scale)
    w.add_expert_weights_norm(not s.softmax)
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SOFTMAX if s.softmax else gguf.ExpertGatingFuncType.SIGMOID)
    w.add_uint32("deepseek2.expert_group_count", s.n_group)
    w.add_uint32("deepseek2.expert_group_used_count", s.topk_group)
    if s.yarn:  # DeepSeek V3's (mscale and mscale_all_dim 1) or V2-Lite's
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(s.yarn)
        w.add_rope_scaling_orig_ctx_len(4096)
        w.add_float32("deepseek2.rope.scaling.yarn_beta_fast", 32.0)
        w.add_float32("deepseek2.rope.scaling.yarn_beta_slow", 1.0)
        w.add_rope_scaling_yarn_log_mul(0.1 * s.mscale)
    vocab = deepseek2_vocab(s)
    ids = {text: i for i, text in enumerate(vocab.tokens)}
    add_tokenizer(w, vocab, GLM_TEMPLATE if s.pre == "glm4" else None, pre=s.pre)
    if s.pre == "glm4":
        w.add_eot_token_id(ids["<|user|>"])
        w.add_eom_token_id(ids["<|observation|>"])

    def stacked(name: str, shape: tuple[int, ...]) -> None:  # a 3-D F16 tensor, per head
        w.add_tensor(name, (t.rng.standard_normal(shape) * t.weight_std).astype(np.float16))

    n_vocab = len(vocab.tokens)
    t.matrix("token_embd.weight", n_vocab, s.n_embd, std=1.0)
    t.varied_norm("output_norm.weight", s.n_embd)
    t.matrix("output.weight", n_vocab, s.n_embd)
    for il in range(s.n_layer):
        p = f"blk.{il}."
        t.varied_norm(p + "attn_norm.weight", s.n_embd)
        if s.q_lora_rank:
            t.matrix(p + "attn_q_a.weight", s.q_lora_rank, s.n_embd)
            t.varied_norm(p + "attn_q_a_norm.weight", s.q_lora_rank)
            t.matrix(p + "attn_q_b.weight", s.n_head * (s.qk_nope + s.qk_rope), s.q_lora_rank)
        else:  # Q in one projection
            t.matrix(p + "attn_q.weight", s.n_head * (s.qk_nope + s.qk_rope), s.n_embd)
        t.matrix(p + "attn_kv_a_mqa.weight", s.kv_lora_rank + s.qk_rope, s.n_embd)
        t.varied_norm(p + "attn_kv_a_norm.weight", s.kv_lora_rank)
        stacked(p + "attn_k_b.weight", (s.n_head, s.kv_lora_rank, s.qk_nope))
        stacked(p + "attn_v_b.weight", (s.n_head, s.v_head, s.kv_lora_rank))
        t.matrix(p + "attn_output.weight", s.n_embd, s.n_head * s.v_head)
        t.varied_norm(p + "ffn_norm.weight", s.n_embd)
        if il < s.n_dense:
            t.matrix(p + "ffn_gate.weight", s.n_ff, s.n_embd)
            t.matrix(p + "ffn_up.weight", s.n_ff, s.n_embd)
            t.matrix(p + "ffn_down.weight", s.n_embd, s.n_ff)
            continue
        moe_ffn(t, p, s.n_expert, s.n_ff_exp, s.n_embd, router_std=0.3)
        if not s.softmax:  # the bias a sigmoid router's choice adds
            t.f32(p + "exp_probs_b.bias", f16_exact(t, (s.n_expert,), 0.3))
        width = s.n_ff_exp * s.n_shared
        t.matrix(p + "ffn_gate_shexp.weight", width, s.n_embd)
        t.matrix(p + "ffn_up_shexp.weight", width, s.n_embd)
        t.matrix(p + "ffn_down_shexp.weight", s.n_embd, width)
    finish(w)
    return path
