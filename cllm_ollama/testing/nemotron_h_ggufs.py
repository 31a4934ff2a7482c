"""Tiny random-weight Nemotron-H text models in llama.cpp's layout, in F16 as converted from a
checkpoint: Nemotron Nano 2's parts (``nemotron_h``: Mamba-2, attention without rotation and ReLU²
MLP layers) or Nemotron 3's (``nemotron_h_moe``: the MLP layers a mixture of ReLU² experts chosen
by sigmoid scores plus a bias, beside a shared expert; Nemotron 3 Super's latent projection around
the experts). ``hf_folders.write_hf_nemotron_h`` exports them as the checkpoints they convert from.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from .gguf_base import TINY, Tensors, add_tokenizer, f16_exact, finish, synthetic_vocab

_F16 = gguf.GGMLQuantizationType.F16


@dataclass(frozen=True)
class NemotronHShape:
    """A tiny Nemotron-H: ``pattern`` (``M`` Mamba-2, ``*`` attention, ``-`` MLP, ``E`` mixture)."""

    pattern: str = "M*M-"
    n_embd: int = TINY.n_embd
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 16
    n_ff: int = 96
    ssm_heads: int = 8
    ssm_head_dim: int = 16
    d_state: int = 16
    d_conv: int = 4
    n_group: int = 2
    n_expert: int = 0
    n_expert_used: int = 2
    n_ff_exp: int = 32
    n_ff_shexp: int = 48
    latent: int = 0  # Nemotron 3 Super's latent width around the experts, or none

    @property
    def d_inner(self) -> int:
        return self.ssm_heads * self.ssm_head_dim


# Nemotron Nano 2's parts, Nemotron 3 Nano's (a mixture), and Nemotron 3 Super's (a latent mixture).
NEMOTRON_NANO2 = NemotronHShape()
NEMOTRON3_NANO = dataclasses.replace(NEMOTRON_NANO2, pattern="M*ME", n_expert=8)
NEMOTRON3_SUPER = dataclasses.replace(NEMOTRON3_NANO, latent=32)


def write_nemotron_h(path: Path, shape: NemotronHShape = NEMOTRON_NANO2, *, seed: int = 0) -> Path:
    """A tiny Nemotron-H of ``shape`` in F16 (routers, biases, norms, the convolution and the
    scan's parameters F32, of values F16 holds, so that the checkpoint exported from it converts
    back to it exactly; ``A`` is then within F32's rounding of ``-exp(log(-A))``)."""
    s = shape
    arch = "nemotron_h_moe" if s.n_expert else "nemotron_h"
    t = Tensors(gguf.GGUFWriter(str(path), arch), np.random.default_rng(seed), 0.25, _F16)
    w = t.w
    w.add_name("tiny-" + arch.replace("_", "-"))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(8192)
    w.add_embedding_length(s.n_embd)
    w.add_block_count(len(s.pattern))
    w.add_head_count(s.n_head)
    w.add_head_count_kv([s.n_head_kv if kind == "*" else 0 for kind in s.pattern])
    w.add_feed_forward_length([s.n_ff if k == "-" else s.n_ff_exp if k == "E" else 0 for k in s.pattern])
    w.add_key_length(s.head_dim)
    w.add_value_length(s.head_dim)
    w.add_layer_norm_eps(1e-5)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)  # unread: its attention does not rotate
    w.add_ssm_conv_kernel(s.d_conv)
    w.add_ssm_inner_size(s.d_inner)
    w.add_ssm_state_size(s.d_state)
    w.add_ssm_group_count(s.n_group)
    w.add_ssm_time_step_rank(s.ssm_heads)
    if s.n_expert:
        w.add_expert_count(s.n_expert)
        w.add_expert_used_count(s.n_expert_used)
        w.add_expert_feed_forward_length(s.n_ff_exp)
        w.add_expert_shared_feed_forward_length(s.n_ff_shexp)
        w.add_expert_shared_count(1)
        w.add_expert_weights_norm(True)
        w.add_expert_weights_scale(2.5)
        if s.latent:
            w.add_uint32(f"{arch}.moe_latent_size", s.latent)
    vocab = synthetic_vocab()
    add_tokenizer(w, vocab, None, pre="pixtral")  # as llama.cpp's converter names Nemotron-H's

    def f32(name: str, *dims: int, std: float = 0.3, mean: float = 0.0) -> None:
        t.f32(name, f16_exact(t, dims, std) + mean)

    n_vocab, conv = len(vocab.tokens), s.d_inner + 2 * s.n_group * s.d_state
    t.matrix("token_embd.weight", n_vocab, s.n_embd, std=1.0)
    f32("output_norm.weight", s.n_embd, std=0.1, mean=1.0)
    t.matrix("output.weight", n_vocab, s.n_embd)
    for i, kind in enumerate(s.pattern):
        p = f"blk.{i}."
        f32(p + "attn_norm.weight", s.n_embd, std=0.1, mean=1.0)
        if kind == "M":
            t.matrix(p + "ssm_in.weight", 2 * s.d_inner + 2 * s.n_group * s.d_state + s.ssm_heads, s.n_embd)
            f32(p + "ssm_conv1d.weight", conv, s.d_conv, std=0.5)
            f32(p + "ssm_conv1d.bias", conv, std=0.1)
            f32(p + "ssm_dt.bias", s.ssm_heads, std=0.5, mean=-2.0)  # a step of about 0.1
            # A from its logarithm (the checkpoint's A_log, of values F16 holds): -exp(A_log).
            t.f32(p + "ssm_a", -np.exp(f16_exact(t, (s.ssm_heads, 1), 0.5)))
            f32(p + "ssm_d", s.ssm_heads, 1, std=0.3, mean=1.0)
            f32(p + "ssm_norm.weight", s.n_group, s.d_inner // s.n_group, std=0.1, mean=1.0)
            t.matrix(p + "ssm_out.weight", s.n_embd, s.d_inner)
        elif kind == "*":
            t.matrix(p + "attn_q.weight", s.n_head * s.head_dim, s.n_embd)
            t.matrix(p + "attn_k.weight", s.n_head_kv * s.head_dim, s.n_embd)
            t.matrix(p + "attn_v.weight", s.n_head_kv * s.head_dim, s.n_embd)
            t.matrix(p + "attn_output.weight", s.n_embd, s.n_head * s.head_dim)
        elif kind == "-":
            t.matrix(p + "ffn_up.weight", s.n_ff, s.n_embd)
            t.matrix(p + "ffn_down.weight", s.n_embd, s.n_ff)
        else:
            width = s.latent or s.n_embd
            t.f32(p + "ffn_gate_inp.weight", f16_exact(t, (s.n_expert, s.n_embd), 0.3))
            f32(p + "exp_probs_b.bias", s.n_expert)
            if s.latent:
                t.matrix(p + "ffn_latent_down.weight", s.latent, s.n_embd)
                t.matrix(p + "ffn_latent_up.weight", s.n_embd, s.latent)
            for name, dims in (("up", (s.n_ff_exp, width)), ("down", (width, s.n_ff_exp))):
                data = t.rng.standard_normal((s.n_expert, *dims)) * t.weight_std
                w.add_tensor(p + f"ffn_{name}_exps.weight", data.astype(np.float16))
            t.matrix(p + "ffn_up_shexp.weight", s.n_ff_shexp, s.n_embd)
            t.matrix(p + "ffn_down_shexp.weight", s.n_embd, s.n_ff_shexp)
    finish(w)
    return path
