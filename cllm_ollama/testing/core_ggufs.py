"""The workhorse tiny models, in llama.cpp's layout: qwen3, gemma3 (sliding-window attention on
some layers), mamba (a recurrent state instead of a KV cache) and jamba (mamba and attention layers:
hybrid memory) are the families whose memory behaves differently when a prompt's start is reused or
shared; with them a reranker, a LoRA, and the two pairs that see (gemma3, qwen2vl).

The tokenizer is ``gguf_base``'s byte-level BPE (or one copied from a vocab GGUF given by the
caller), the chat template is Qwen3's. Greedy decoding of such a model is deterministic, which makes
it a strong oracle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import gguf
import numpy as np

from .gguf_base import (
    TINY,
    TINY_SSM,
    TINY_VISION,
    Shape,
    SsmShape,
    Tensors,
    VisionShape,
    Vocab,
    add_tokenizer,
    attention_block,
    attention_header,
    f16_exact,
    finish,
    llama_body,
    model_header,
    projector_header,
    synthetic_vocab,
    vit_block,
)


def write_qwen3(
    path: Path,
    *,
    shape: Shape = TINY,
    vocab: Vocab | None = None,
    weight_std: float = 0.5,
    qtype: gguf.GGMLQuantizationType = gguf.GGMLQuantizationType.F32,
    chat_template: str | None = None,
    name: str = "tiny-qwen3",
    seed: int = 0,
    endless: bool = False,
    fim: bool = False,
    metadata: Mapping[str, int | float] | None = None,
    reranker: bool = False,
) -> Path:
    """Write a random-weight qwen3 GGUF.

    ``reranker`` makes it a Qwen3-Reranker as llama.cpp's converter writes one: rank pooling,
    a ``cls.output`` head of two labels (yes, no: llama.cpp softmaxes them, a score is P(yes)) and
    a ``rerank`` template the query and document are put into.

    ``endless`` zeroes the end-of-generation tokens' embedding rows (the output projection is
    tied to them), so their logit is 0 while the best other token's is far above: greedy
    decoding then never ends by itself, which tests that need a request to keep running want.
    ``fim`` declares the fill-in-the-middle tokens (what makes a model support ``suffix``).
    ``metadata`` sets or overrides numeric keys (ints as uint32, floats as float32), e.g. to
    write the broken hyperparameters a hostile upload would carry.

    A weight scale around 0.5 keeps logits peaked, so greedy decoding does not flip on the
    last-bit differences between llama.cpp's batched and single-sequence kernels.
    Matrices are stored as ``qtype`` (F32, F16 or Q8_0, which gguf-py can write); use
    ``binding.quantize`` for K-quants.
    """
    vocab = vocab or synthetic_vocab()
    t = Tensors(gguf.GGUFWriter(str(path), "qwen3"), np.random.default_rng(seed), weight_std, qtype)
    w, s = t.w, shape
    attention_header(w, s, name, qtype)
    w.add_layer_norm_rms_eps(1e-6)
    add_tokenizer(w, vocab, chat_template, fim)

    n_vocab = len(vocab.tokens)
    t.matrix("token_embd.weight", n_vocab, s.n_embd, (vocab.eos_id, vocab.bos_id) if endless else ())
    t.norm("output_norm.weight", s.n_embd)
    for i in range(s.n_layer):
        attention_block(t, s, f"blk.{i}.", post_norms=False)
    if reranker:
        w.add_pooling_type(gguf.PoolingType.RANK)
        w.add_classifier_output_labels(["yes", "no"])
        w.add_string(gguf.Keys.Tokenizer.CHAT_TEMPLATE_N.format(name="rerank"), RERANK_TEMPLATE)
        t.matrix("cls.output.weight", 2, s.n_embd)
    for key, value in (metadata or {}).items():
        vtype = gguf.GGUFValueType.FLOAT32 if isinstance(value, float) else gguf.GGUFValueType.UINT32
        w.kv_data[0][key] = gguf.GGUFValue(value=value, type=vtype)
    finish(w)
    return path


# Qwen3-Reranker's prompt, shortened: where llama-server puts the query and the document.
RERANK_TEMPLATE = "<|im_start|>user\nQuery: {query}\nDocument: {document}<|im_end|>\n<|im_start|>assistant\n"


def write_reranker(path: Path, *, seed: int = 0) -> Path:
    """A tiny Qwen3-Reranker (``write_qwen3``'s ``reranker``)."""
    return write_qwen3(path, name="tiny-reranker", seed=seed, reranker=True)


def write_gemma3(
    path: Path,
    *,
    shape: Shape = TINY,
    sliding_window: int = 16,
    swa_pattern: int = 2,
    vocab: Vocab | None = None,
    weight_std: float = 0.5,
    qtype: gguf.GGMLQuantizationType = gguf.GGMLQuantizationType.F32,
    chat_template: str | None = None,
    name: str = "tiny-gemma3",
    seed: int = 0,
    endless: bool = False,
) -> Path:
    """Write a random-weight gemma3 GGUF: sliding-window attention on some layers.

    Of every ``swa_pattern`` layers the last attends to the whole sequence and the others to the
    last ``sliding_window`` positions only (llama.cpp's ``LLAMA_SWA_TYPE_STANDARD``), so with the
    defaults layer 0 is a 16-token window and layer 1 is global, and llama.cpp gives the model an
    iSWA cache (one KV cache per kind of layer). Prompts longer than the window exercise it.
    ``endless`` as in ``write_qwen3`` (zero rows in the untied output projection).
    Norm weights are ones: llama.cpp's gemma3 multiplies by them as stored (the converter has
    already added Gemma's +1).
    """
    vocab = vocab or synthetic_vocab()
    t = Tensors(gguf.GGUFWriter(str(path), "gemma3"), np.random.default_rng(seed), weight_std, qtype)
    w, s = t.w, shape
    attention_header(w, s, name, qtype)
    w.add_rope_freq_base_swa(1e4)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_sliding_window(sliding_window)
    w.add_sliding_window_pattern(swa_pattern)
    add_tokenizer(w, vocab, chat_template)

    # gemma3 multiplies the input embeddings by sqrt(n_embd) and normalises every block's output
    # (post norms): with tied embeddings the token itself would dominate the residual stream and
    # greedy decoding repeat one token forever. Scaled-down input embeddings and a separate
    # output projection keep the blocks' contribution, and the logits, as large as qwen3's.
    n_vocab = len(vocab.tokens)
    t.matrix("token_embd.weight", n_vocab, s.n_embd, std=weight_std / np.sqrt(s.n_embd))
    t.matrix("output.weight", n_vocab, s.n_embd, (vocab.eos_id, vocab.bos_id) if endless else ())
    t.norm("output_norm.weight", s.n_embd)
    for i in range(s.n_layer):
        attention_block(t, s, f"blk.{i}.", post_norms=True)
    finish(w)
    return path


def _mamba_layer(t: Tensors, p: str, s: SsmShape, *, bc_norms: bool) -> None:
    """The selective-scan block's tensors (``bc_norms``: jamba's RMS norms on dt, B and C).

    The scan's own parameters follow Mamba's initialisation rather than ``weight_std``, which
    keeps the state stable and long-lived: A = -(1..d_state) for every channel, D = 1, and a
    step size softplus(dt bias) between 0.001 and 0.1, so that the state remembers the tokens
    before the convolution's window and a prompt's history changes its continuation.
    """
    rng = t.rng
    t.matrix(p + "ssm_in.weight", 2 * s.d_inner, s.n_embd)
    t.matrix(p + "ssm_conv1d.weight", s.d_inner, s.d_conv)
    t.f32(p + "ssm_conv1d.bias", np.zeros(s.d_inner))
    t.matrix(p + "ssm_x.weight", s.dt_rank + 2 * s.d_state, s.d_inner, std=s.d_inner**-0.5)
    if bc_norms:
        t.norm(p + "ssm_dt_norm.weight", s.dt_rank)
    t.matrix(p + "ssm_dt.weight", s.d_inner, s.dt_rank, std=s.dt_rank**-0.5)
    dt = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), s.d_inner))
    t.f32(p + "ssm_dt.bias", dt + np.log(-np.expm1(-dt)))  # softplus(bias) == dt
    if bc_norms:
        t.norm(p + "ssm_b_norm.weight", s.d_state)
        t.norm(p + "ssm_c_norm.weight", s.d_state)
    t.f32(p + "ssm_a", -np.tile(np.arange(1, s.d_state + 1, dtype=np.float32), (s.d_inner, 1)))
    t.f32(p + "ssm_d", np.ones(s.d_inner))
    t.matrix(p + "ssm_out.weight", s.n_embd, s.d_inner)


def _ssm_header(w: gguf.GGUFWriter, s: SsmShape, name: str, qtype: gguf.GGMLQuantizationType) -> None:
    model_header(w, s, name, qtype)
    w.add_ssm_conv_kernel(s.d_conv)
    w.add_ssm_inner_size(s.d_inner)
    w.add_ssm_state_size(s.d_state)
    w.add_ssm_time_step_rank(s.dt_rank)
    w.add_layer_norm_rms_eps(1e-5)


def write_mamba(
    path: Path,
    *,
    shape: SsmShape = TINY_SSM,
    vocab: Vocab | None = None,
    weight_std: float = 0.5,
    qtype: gguf.GGMLQuantizationType = gguf.GGMLQuantizationType.F32,
    chat_template: str | None = None,
    name: str = "tiny-mamba",
    seed: int = 0,
    endless: bool = False,
) -> Path:
    """Write a random-weight mamba GGUF: a recurrent model (``llama_model_is_recurrent``).

    Its memory is one fixed-size state per sequence instead of a KV cache, which cannot drop
    part of a sequence: a prompt's start can only be kept by continuing it, never cut.
    ``endless`` as in ``write_qwen3``.
    """
    vocab = vocab or synthetic_vocab()
    t = Tensors(gguf.GGUFWriter(str(path), "mamba"), np.random.default_rng(seed), weight_std, qtype)
    w, s = t.w, shape
    _ssm_header(w, s, name, qtype)
    # As convert_hf_to_gguf.py writes a Mamba: no attention, no separate FFN.
    w.add_feed_forward_length(0)
    w.add_head_count(0)
    add_tokenizer(w, vocab, chat_template)

    t.matrix("token_embd.weight", len(vocab.tokens), s.n_embd, (vocab.eos_id, vocab.bos_id) if endless else ())
    t.norm("output_norm.weight", s.n_embd)
    for i in range(s.n_layer):
        p = f"blk.{i}."
        t.norm(p + "attn_norm.weight", s.n_embd)
        _mamba_layer(t, p, s, bc_norms=False)
    finish(w)
    return path


def write_jamba(
    path: Path,
    *,
    shape: SsmShape = TINY_SSM,
    vocab: Vocab | None = None,
    weight_std: float = 0.5,
    qtype: gguf.GGMLQuantizationType = gguf.GGMLQuantizationType.F32,
    chat_template: str | None = None,
    name: str = "tiny-jamba",
    seed: int = 0,
    endless: bool = False,
) -> Path:
    """Write a random-weight jamba GGUF: a hybrid model (``llama_model_is_hybrid``).

    Even layers are Mamba blocks (recurrent state), odd ones attention (a KV cache, no RoPE),
    each followed by a SwiGLU FFN; llama.cpp gives it a hybrid memory of both kinds, where
    removing part of a sequence fails because the recurrent half cannot.
    ``endless`` as in ``write_qwen3``.
    """
    vocab = vocab or synthetic_vocab()
    t = Tensors(gguf.GGUFWriter(str(path), "jamba"), np.random.default_rng(seed), weight_std, qtype)
    w, s = t.w, shape
    _ssm_header(w, s, name, qtype)
    is_attn = [i % 2 == 1 for i in range(s.n_layer)]
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    # llama.cpp's jamba tells a Mamba layer by its 0 KV heads.
    w.add_head_count_kv([s.n_head_kv if a else 0 for a in is_attn])
    add_tokenizer(w, vocab, chat_template)

    head_dim = s.n_embd // s.n_head
    t.matrix("token_embd.weight", len(vocab.tokens), s.n_embd, (vocab.eos_id, vocab.bos_id) if endless else ())
    t.norm("output_norm.weight", s.n_embd)
    for i in range(s.n_layer):
        p = f"blk.{i}."
        t.norm(p + "attn_norm.weight", s.n_embd)
        if is_attn[i]:
            t.matrix(p + "attn_q.weight", s.n_embd, s.n_embd)
            t.matrix(p + "attn_k.weight", s.n_head_kv * head_dim, s.n_embd)
            t.matrix(p + "attn_v.weight", s.n_head_kv * head_dim, s.n_embd)
            t.matrix(p + "attn_output.weight", s.n_embd, s.n_embd)
        else:
            _mamba_layer(t, p, s, bc_norms=True)
        t.norm(p + "ffn_norm.weight", s.n_embd)
        t.matrix(p + "ffn_gate.weight", s.n_ff, s.n_embd)
        t.matrix(p + "ffn_up.weight", s.n_ff, s.n_embd)
        t.matrix(p + "ffn_down.weight", s.n_embd, s.n_ff)
    finish(w)
    return path


def write_gemma3_projector(
    path: Path, *, n_embd_text: int = TINY.n_embd, shape: VisionShape = TINY_VISION, seed: int = 0, f16: bool = False
) -> Path:
    """Write a random-weight gemma3 projector (an ``mmproj`` GGUF, architecture ``clip``) of ~50 KB.

    The keys and tensors are what libmtmd's ``clip.cpp`` requires of a gemma3 projector
    (``load_hparams``, ``load_tensors``); its output width must equal the text model's ``n_embd``.
    Gemma 3's image tokens attend to each other non-causally, which the media step must honour.
    ``f16``: typed as llama.cpp's converter writes one (matrices F16, the embeddings F32 with
    values F16 holds), the twin of a checkpoint whose tower is F16.
    """
    v = shape
    t = projector_header(path, v, "gemma3", n_embd_text, seed)
    if f16:
        t = dataclasses.replace(t, qtype=gguf.GGMLQuantizationType.F16)
    w = t.w
    w.add_vision_projector_scale_factor(v.merge)

    patch = t.rng.standard_normal((v.n_embd, 3, v.patch_size, v.patch_size)) * 0.2
    t.f32("v.patch_embd.weight", patch.astype(np.float16) if f16 else patch)
    t.f32("v.patch_embd.bias", np.zeros(v.n_embd))
    if f16:
        t.f32("v.position_embd.weight", f16_exact(t, (v.n_patches, v.n_embd)))
    else:
        t.matrix("v.position_embd.weight", v.n_patches, v.n_embd)
    vit_block(t, v)
    t.norm("mm.soft_emb_norm.weight", v.n_embd)
    t.matrix("mm.input_projection.weight", v.n_embd, n_embd_text)
    finish(w)
    return path


def write_qwen2vl(path: Path, *, shape: Shape = TINY, vocab: Vocab | None = None, seed: int = 0) -> Path:
    """Write a random-weight qwen2vl GGUF: a Qwen2 text model with M-RoPE (four position streams
    per token, rope ``dimension_sections``), the text half of Qwen2-VL."""
    vocab = vocab or synthetic_vocab()
    t = Tensors(gguf.GGUFWriter(str(path), "qwen2vl"), np.random.default_rng(seed), 0.5, gguf.GGMLQuantizationType.F32)
    w, s = t.w, shape
    attention_header(w, s, "tiny-qwen2vl", gguf.GGMLQuantizationType.F32)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_dimension_sections([2, 3, 3, 0])  # t, y, x: half the head (16), as Qwen2-VL's [16, 24, 24]
    llama_body(t, s, vocab)
    return path


def write_qwen2vl_projector(
    path: Path, *, n_embd_text: int = TINY.n_embd, shape: VisionShape = TINY_VISION, seed: int = 0
) -> Path:
    """Write a random-weight Qwen2-VL projector (``qwen2vl_merger``): a ViT with 2-D rotary
    positions whose 2x2 patch groups become one image token each. Its images take fewer
    positions than tokens in the text model (M-RoPE: ``max(rows, columns)``)."""
    v = shape
    t = projector_header(path, v, "qwen2vl_merger", n_embd_text, seed)
    w = t.w
    # Two temporal halves of the patch embedding (Qwen2-VL embeds pairs of frames), no bias.
    for name in ("v.patch_embd.weight", "v.patch_embd.weight.1"):
        t.f32(name, t.rng.standard_normal((v.n_embd, 3, v.patch_size, v.patch_size)) * 0.2)
    vit_block(t, v)
    merged = 4 * v.n_embd  # a 2x2 group of patches
    t.matrix("mm.0.weight", merged, merged)
    t.f32("mm.0.bias", np.zeros(merged))
    t.matrix("mm.2.weight", n_embd_text, merged)
    t.f32("mm.2.bias", np.zeros(n_embd_text))
    finish(w)
    return path


def write_lora(
    folder: Path, *, rank: int = 4, alpha: float = 8.0, seed: int = 0, endless: bool = False
) -> tuple[Path, Path]:
    """A tiny base model and a LoRA for it: ``folder/base.gguf`` (``write_qwen3``) and
    ``folder/adapter.gguf``, low-rank deltas on every layer's attention query and FFN up
    projection (``write_lora_for``). ``endless``: as ``write_qwen3``'s (oracle tests)."""
    folder.mkdir(parents=True, exist_ok=True)
    base = write_qwen3(folder / "base.gguf", seed=seed, endless=endless)
    return base, write_lora_for(base, folder / "adapter.gguf", ("attn_q", "ffn_up"), rank=rank, alpha=alpha, seed=seed)


def write_lora_for(
    base: Path, path: Path, parts: tuple[str, ...], *, rank: int = 4, alpha: float = 8.0, seed: int = 0
) -> Path:
    """A LoRA GGUF for the model at ``base``: random A and B (scaled by ``alpha / rank``) for each
    layer's ``parts`` (``attn_q``, ``ffn_up``...) and, if named, ``token_embd`` and ``output``, in
    the layout llama.cpp's ``llama_adapter_lora_init`` checks: A is ``{n_in, rank}``, B ``{rank,
    n_out}``; the token embedding's A is ``{rank, n_vocab}``, looked up by token as its rows."""
    reader = gguf.GGUFReader(base)
    arch = str(reader.fields["general.architecture"].contents())
    shapes = {t.name: [int(d) for d in t.shape] for t in reader.tensors}  # ggml order: {n_in, n_out}
    t = Tensors(gguf.GGUFWriter(str(path), arch), np.random.default_rng(seed + 1), 0.5, gguf.GGMLQuantizationType.F32)
    t.w.add_type("adapter")
    t.w.add_string("adapter.type", "lora")
    t.w.add_float32("adapter.lora.alpha", alpha)
    n_layer = int(reader.fields[f"{arch}.block_count"].contents())
    names = [f"{p}.weight" for p in parts if p in ("token_embd", "output")]
    names += [f"blk.{i}.{p}.weight" for i in range(n_layer) for p in parts if p not in ("token_embd", "output")]
    for name in names:
        n_in, n_out = shapes[name][:2]
        if name == "token_embd.weight":
            t.matrix(name + ".lora_a", n_out, rank)
            t.matrix(name + ".lora_b", n_in, rank)
        else:
            t.matrix(name + ".lora_a", rank, n_in)
            t.matrix(name + ".lora_b", n_out, rank)
    finish(t.w)
    return path


def write_vision(folder: Path, *, kind: str = "gemma3", seed: int = 0) -> tuple[Path, Path]:
    """A tiny model that sees: ``folder/text.gguf`` and ``folder/mmproj.gguf``, its projector.

    ``gemma3``: image tokens attend non-causally, one position each. ``qwen2vl``: M-RoPE.
    """
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "qwen2vl":
        text = write_qwen2vl(folder / "text.gguf", seed=seed)
        return text, write_qwen2vl_projector(folder / "mmproj.gguf", n_embd_text=TINY.n_embd, seed=seed)
    text = write_gemma3(folder / "text.gguf", seed=seed)
    return text, write_gemma3_projector(folder / "mmproj.gguf", n_embd_text=TINY.n_embd, seed=seed)
