"""Tiny random-weight Gemma 3n text models in llama.cpp's layout (``gemma3n``), in F16 as converted
from a checkpoint: four AltUp streams, LAuReL's low-rank residual, per-layer embeddings, sparse
FFN gates on the first 10 layers, and the layers from 20 on reusing the KV of layer 18 (sliding)
or 19 (full), which llama.cpp's gemma3n fixes (its E2B and E4B); so a tiny one has 25 layers, its
last five reusing KV (the last of them full). ``hf_folders.write_hf_gemma3n`` exports them as the
checkpoints they convert from.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from .gguf_base import TINY, Tensors, add_tokenizer, f16_exact, finish, unpadded_vocab

_F16 = gguf.GGMLQuantizationType.F16
# What llama.cpp's gemma3n fixes: AltUp's streams, LAuReL's rank, the per-layer embeddings' width,
# the layers that reuse KV from, and the layers whose FFN gates are sparse.
ALTUP, LAUREL, PER_LAYER, KV_FROM, SPARSE = 4, 64, 256, 20, 10


@dataclass(frozen=True)
class Gemma3nShape:
    """A tiny Gemma 3n: every fifth layer full attention, and the last too."""

    n_layer: int = 25
    n_embd: int = TINY.n_embd
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 16
    # Wide enough that llama.cpp's sparse gate, whose spread divides by n - 1 where transformers'
    # divides by n, cuts where transformers' does (96 wide, the logits differ by up to 11%).
    n_ff: int = 1024
    window: int = 8
    # The per-layer embeddings' own rows (``vocab_size_per_layer_input``), short of the vocabulary
    # by this many: the tokens past them take the first row's, as transformers reads them.
    per_layer_short: int = 4

    def sliding(self, il: int) -> bool:
        return (il + 1) % 5 != 0 and il != self.n_layer - 1


GEMMA3N = Gemma3nShape()


def write_gemma3n(path: Path, shape: Gemma3nShape = GEMMA3N, *, seed: int = 0) -> Path:
    """A tiny Gemma 3n of ``shape`` in F16 (norms, scales and vectors F32, of values F16 holds, so
    that the checkpoint exported from it converts back to it exactly). The layers that reuse KV
    keep the K and V llama.cpp loads but never reads as zeros (and a K norm of ones): the stand-ins
    the converter writes where transformers 5 saves none."""
    s = shape
    t = Tensors(gguf.GGUFWriter(str(path), "gemma3n"), np.random.default_rng(seed), 0.5, _F16)
    w = t.w
    w.add_name("tiny-gemma3n")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(4096)
    w.add_embedding_length(s.n_embd)
    w.add_block_count(s.n_layer)
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    w.add_head_count_kv(s.n_head_kv)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_key_length(s.head_dim)
    w.add_value_length(s.head_dim)
    w.add_rope_freq_base_swa(1e4)
    w.add_float32("gemma3n.final_logit_softcapping", 30.0)
    w.add_sliding_window(s.window)
    w.add_array("gemma3n.attention.sliding_window_pattern", [s.sliding(i) for i in range(s.n_layer)])
    w.add_uint32("gemma3n.altup.active_idx", 0)
    w.add_uint32("gemma3n.altup.num_inputs", ALTUP)
    w.add_uint32("gemma3n.embedding_length_per_layer_input", PER_LAYER)
    w.add_uint32("gemma3n.attention.shared_kv_layers", s.n_layer - KV_FROM)
    normal = statistics.NormalDist()
    w.add_array(
        "gemma3n.activation_sparsity_scale",
        [normal.inv_cdf(0.95) if i < SPARSE else -math.inf for i in range(s.n_layer)],
    )
    vocab = unpadded_vocab()
    add_tokenizer(w, vocab, None)
    w.add_add_space_prefix(False)

    n_vocab, per_layer = len(vocab.tokens), PER_LAYER * s.n_layer
    # Input embeddings Gemma scales by sqrt(n_embd), tied to the output: its logits a few units wide.
    t.matrix("token_embd.weight", n_vocab, s.n_embd, std=2.0 / np.sqrt(s.n_embd))
    t.varied_norm("output_norm.weight", s.n_embd)
    table = (t.rng.standard_normal((n_vocab, per_layer)) * 0.5).astype(np.float16)
    table[n_vocab - s.per_layer_short :] = table[0]  # past its own rows, the first row's
    w.add_tensor("per_layer_token_embd.weight", table)
    t.matrix("per_layer_model_proj.weight", per_layer, s.n_embd, std=0.5 / np.sqrt(s.n_embd))
    t.varied_norm("per_layer_proj_norm.weight", PER_LAYER)
    for name in ("altup_proj.weight", "altup_unembd_proj.weight"):  # the streams' projections, stacked
        w.add_tensor(name, (t.rng.standard_normal((ALTUP - 1, s.n_embd, s.n_embd)) / s.n_embd**0.5).astype(np.float16))
    kv_rows = s.n_head_kv * s.head_dim
    for il in range(s.n_layer):
        p = f"blk.{il}."
        t.varied_norm(p + "attn_norm.weight", s.n_embd)
        t.matrix(p + "attn_q.weight", s.n_head * s.head_dim, s.n_embd)
        # Q and K normed small: Gemma 3n does not scale its attention, and unit norms would make
        # the random model's attention a near argmax.
        t.varied_norm(p + "attn_q_norm.weight", s.head_dim, 0.4)
        if il < KV_FROM:
            t.matrix(p + "attn_k.weight", kv_rows, s.n_embd)
            t.matrix(p + "attn_v.weight", kv_rows, s.n_embd)
            t.varied_norm(p + "attn_k_norm.weight", s.head_dim, 0.4)
        else:  # loaded, never read: KV from layer 18 or 19
            w.add_tensor(p + "attn_k.weight", np.zeros((kv_rows, s.n_embd), dtype=np.float16))
            w.add_tensor(p + "attn_v.weight", np.zeros((kv_rows, s.n_embd), dtype=np.float16))
            t.f32(p + "attn_k_norm.weight", np.ones(s.head_dim))
        t.matrix(p + "attn_output.weight", s.n_embd, s.n_head * s.head_dim)
        t.varied_norm(p + "post_attention_norm.weight", s.n_embd)
        t.varied_norm(p + "ffn_norm.weight", s.n_embd)
        t.matrix(p + "ffn_gate.weight", s.n_ff, s.n_embd)
        t.matrix(p + "ffn_up.weight", s.n_ff, s.n_embd)
        t.matrix(p + "ffn_down.weight", s.n_embd, s.n_ff)
        t.varied_norm(p + "post_ffw_norm.weight", s.n_embd)
        t.matrix(p + "inp_gate.weight", PER_LAYER, s.n_embd)
        t.matrix(p + "proj.weight", s.n_embd, PER_LAYER, std=0.5 / np.sqrt(PER_LAYER))
        t.varied_norm(p + "post_norm.weight", s.n_embd)
        t.f32(p + "altup_correct_coef.weight", f16_exact(t, (ALTUP, ALTUP), 0.3))  # F32, as converted
        t.varied_norm(p + "altup_correct_scale.weight", s.n_embd)
        t.f32(p + "altup_predict_coef.weight", f16_exact(t, (ALTUP * ALTUP, ALTUP), 0.3))
        t.matrix(p + "altup_router.weight", ALTUP, s.n_embd)
        t.varied_norm(p + "altup_router_norm.weight", s.n_embd)
        t.matrix(p + "laurel_l.weight", LAUREL, s.n_embd, std=0.5 / np.sqrt(s.n_embd))
        t.matrix(p + "laurel_r.weight", s.n_embd, LAUREL, std=0.5 / np.sqrt(LAUREL))
        t.varied_norm(p + "laurel_post_norm.weight", s.n_embd)
    finish(w)
    return path
