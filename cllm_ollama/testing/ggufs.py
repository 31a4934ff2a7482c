"""Writes real, loadable GGUFs with random weights, for tests and benchmarks.

qwen3 is the workhorse; gemma3 (sliding-window attention on some layers), mamba (a recurrent
state instead of a KV cache) and jamba (mamba and attention layers: hybrid memory) are the
families whose memory behaves differently when a prompt's start is reused or shared.

Nothing here downloads anything: the tokenizer is a byte-level BPE learned on a built-in
text (or copied from a vocab GGUF given by the caller), the chat template is Qwen3's.
Greedy decoding of such a model is deterministic, which makes it a strong oracle.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import gguf
import numpy as np

# Qwen's special tokens; on a full-size vocab they sit at Qwen's own ids.
QWEN_SPECIALS: dict[str, tuple[int, int]] = {
    # text: (id in the real Qwen2/3 vocab, gguf token type)
    "<|endoftext|>": (151643, gguf.TokenType.CONTROL),
    "<|im_start|>": (151644, gguf.TokenType.CONTROL),
    "<|im_end|>": (151645, gguf.TokenType.CONTROL),
    "<tool_call>": (151657, gguf.TokenType.USER_DEFINED),
    "<|fim_prefix|>": (151659, gguf.TokenType.CONTROL),
    "<|fim_middle|>": (151660, gguf.TokenType.CONTROL),
    "<|fim_suffix|>": (151661, gguf.TokenType.CONTROL),
    "</tool_call>": (151658, gguf.TokenType.USER_DEFINED),
    "<think>": (151667, gguf.TokenType.USER_DEFINED),
    "</think>": (151668, gguf.TokenType.USER_DEFINED),
}
QWEN3_VOCAB_SIZE = 151936

_CORPUS = """
The quick brown fox jumps over the lazy dog. A user asks a question and the assistant answers it.
Hello, how are you today? I am fine, thank you. What is the capital of France? Paris is the capital.
Write a short poem about the sea. The sea is blue and the sky is wide; the waves come in with the tide.
Please return the answer as JSON with the keys name and age. {"name": "Alice", "age": 30}
The function get_weather takes a city and returns the temperature in degrees. Call it for Berlin.
Continuous batching lets many requests share one decode step, so the server answers more people at once.
Once upon a time there was a little model that generated tokens one after another, very fast.
def add(a, b): return a + b  # numbers, lists, strings and dictionaries are all values in Python.
Thinking step by step: first read the question, then plan, then write the answer clearly and briefly.
"""
_PRETOKENIZE = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]+|\s+""")


@cache
def _byte_encoder() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map, as llama.cpp's BPE expects."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs, strict=True)}


@dataclass(frozen=True)
class Vocab:
    tokens: list[str]
    types: list[int]
    merges: list[str]
    eos_id: int
    bos_id: int


def _learn_merges(n_merges: int) -> list[tuple[str, str]]:
    enc = _byte_encoder()
    words = Counter(tuple(enc[b] for b in piece.encode()) for piece in _PRETOKENIZE.findall(_CORPUS))
    merges: list[tuple[str, str]] = []
    while len(merges) < n_merges:
        pairs: Counter[tuple[str, str]] = Counter()
        for word, count in words.items():
            for pair in itertools.pairwise(word):
                pairs[pair] += count
        if not pairs:
            break
        best, count = pairs.most_common(1)[0]
        if count < 2:
            break
        merges.append(best)
        merged: Counter[tuple[str, ...]] = Counter()
        for word, c in words.items():
            out: list[str] = []
            i = 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += c
        words = merged
    return merges


def synthetic_vocab(size: int | None = None) -> Vocab:
    """A byte-level BPE vocab: 256 byte tokens, learned merges, Qwen's special tokens.

    ``size=None`` gives a small vocab (fast tests); ``QWEN3_VOCAB_SIZE`` pads with unused
    tokens so that the specials land at Qwen's ids and tensor shapes match the real model.
    """
    enc = _byte_encoder()
    tokens = [enc[b] for b in range(256)]
    merges = _learn_merges(400)
    tokens += [a + b for a, b in merges]
    types = [gguf.TokenType.NORMAL] * len(tokens)
    if size is None:
        for text, (_, ttype) in QWEN_SPECIALS.items():
            tokens.append(text)
            types.append(ttype)
        while len(tokens) % 32:  # keep the embedding rows quantizable
            tokens.append(f"<|pad_{len(tokens)}|>")
            types.append(gguf.TokenType.UNUSED)
    else:
        by_id = {tid: (text, ttype) for text, (tid, ttype) in QWEN_SPECIALS.items()}
        for tid in range(len(tokens), size):
            text, ttype = by_id.get(tid, (f"<|extra_{tid}|>", gguf.TokenType.UNUSED))
            tokens.append(text)
            types.append(ttype)
    ids = {t: i for i, t in enumerate(tokens)}
    return Vocab(
        tokens=tokens,
        types=[int(t) for t in types],
        merges=[f"{a} {b}" for a, b in merges],
        eos_id=ids["<|im_end|>"],
        bos_id=ids["<|endoftext|>"],
    )


def vocab_from_gguf(path: Path) -> Vocab:
    """Copy a real tokenizer (e.g. llama.cpp's ggml-vocab-qwen2.gguf)."""
    reader = gguf.GGUFReader(path)

    def field(key: str) -> object:
        return reader.fields[key].contents()

    tokens = list(field("tokenizer.ggml.tokens"))  # type: ignore[call-overload]
    ids = {t: i for i, t in enumerate(tokens)}
    return Vocab(
        tokens=tokens,
        types=[int(t) for t in field("tokenizer.ggml.token_type")],  # type: ignore[attr-defined]
        merges=list(field("tokenizer.ggml.merges")),  # type: ignore[call-overload]
        eos_id=ids.get("<|im_end|>", int(field("tokenizer.ggml.eos_token_id"))),  # type: ignore[call-overload]
        bos_id=int(field("tokenizer.ggml.bos_token_id")),  # type: ignore[call-overload]
    )


def qwen3_chat_template() -> str:
    return resources.files("cllm_ollama.testing").joinpath("qwen3.jinja").read_text()


@dataclass(frozen=True)
class Shape:
    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 16
    n_ff: int = 128
    context_length: int = 40960


TINY = Shape()
QWEN3_0_6B = Shape(n_layer=28, n_embd=1024, n_head=16, n_head_kv=8, head_dim=128, n_ff=3072)


_FILE_TYPES = {
    gguf.GGMLQuantizationType.F32: gguf.LlamaFileType.ALL_F32,
    gguf.GGMLQuantizationType.F16: gguf.LlamaFileType.MOSTLY_F16,
    gguf.GGMLQuantizationType.Q8_0: gguf.LlamaFileType.MOSTLY_Q8_0,
}


def _add_tokenizer(w: gguf.GGUFWriter, vocab: Vocab, chat_template: str | None, fim: bool = False) -> None:
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(vocab.tokens)
    w.add_token_types(vocab.types)
    w.add_token_merges(vocab.merges)
    w.add_bos_token_id(vocab.bos_id)
    w.add_eos_token_id(vocab.eos_id)
    w.add_pad_token_id(vocab.bos_id)
    w.add_add_bos_token(False)
    w.add_chat_template(chat_template if chat_template is not None else qwen3_chat_template())
    if fim:
        ids = {t: i for i, t in enumerate(vocab.tokens)}
        w.add_uint32(gguf.Keys.Tokenizer.FIM_PRE_ID, ids["<|fim_prefix|>"])
        w.add_uint32(gguf.Keys.Tokenizer.FIM_SUF_ID, ids["<|fim_suffix|>"])
        w.add_uint32(gguf.Keys.Tokenizer.FIM_MID_ID, ids["<|fim_middle|>"])


@dataclass
class _Tensors:
    """Adds random matrices (stored as ``qtype``) and F32 vectors to a writer, from one RNG."""

    w: gguf.GGUFWriter
    rng: np.random.Generator
    weight_std: float
    qtype: gguf.GGMLQuantizationType

    def matrix(
        self, name: str, rows: int, cols: int, zero_rows: tuple[int, ...] = (), std: float | None = None
    ) -> None:
        """A ``(rows, cols)`` numpy matrix, i.e. ggml ``{cols, rows}``: ``rows`` outputs of ``cols`` inputs."""
        scale = self.weight_std if std is None else std
        data = (self.rng.standard_normal((rows, cols), dtype=np.float32) * scale).astype(np.float32)
        data[list(zero_rows)] = 0.0
        if self.qtype == gguf.GGMLQuantizationType.F32:
            self.w.add_tensor(name, data)
        elif self.qtype == gguf.GGMLQuantizationType.F16:
            self.w.add_tensor(name, data.astype(np.float16))
        else:
            self.w.add_tensor(name, gguf.quants.quantize(data, self.qtype), raw_dtype=self.qtype)

    def norm(self, name: str, n: int) -> None:
        self.w.add_tensor(name, np.ones(n, dtype=np.float32))

    def f32(self, name: str, data: np.ndarray) -> None:
        """Always F32, whatever ``qtype``: biases, 1-D tensors and the SSM's small parameters."""
        self.w.add_tensor(name, np.ascontiguousarray(data, dtype=np.float32))


def _finish(w: gguf.GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _model_header(w: gguf.GGUFWriter, s: Shape | SsmShape, name: str, qtype: gguf.GGMLQuantizationType) -> None:
    """What every test model states first: name, file type, context, width and depth."""
    w.add_name(name)
    w.add_file_type(_FILE_TYPES[qtype])
    w.add_context_length(s.context_length)
    w.add_embedding_length(s.n_embd)
    w.add_block_count(s.n_layer)


def _attention_header(w: gguf.GGUFWriter, s: Shape, name: str, qtype: gguf.GGMLQuantizationType) -> None:
    """The hyperparameters a qwen3- or gemma3-style transformer states, in the order both write them."""
    _model_header(w, s, name, qtype)
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    w.add_head_count_kv(s.n_head_kv)
    w.add_key_length(s.head_dim)
    w.add_value_length(s.head_dim)
    w.add_rope_dimension_count(s.head_dim)
    w.add_rope_freq_base(1e6)


def _attention_block(t: _Tensors, s: Shape, p: str, *, post_norms: bool) -> None:
    """One transformer block's tensors (qwen3 layout; gemma3 adds norms after attention and FFN)."""
    t.norm(p + "attn_norm.weight", s.n_embd)
    t.matrix(p + "attn_q.weight", s.n_head * s.head_dim, s.n_embd)
    t.matrix(p + "attn_k.weight", s.n_head_kv * s.head_dim, s.n_embd)
    t.matrix(p + "attn_v.weight", s.n_head_kv * s.head_dim, s.n_embd)
    t.matrix(p + "attn_output.weight", s.n_embd, s.n_head * s.head_dim)
    t.norm(p + "attn_q_norm.weight", s.head_dim)
    t.norm(p + "attn_k_norm.weight", s.head_dim)
    if post_norms:
        t.norm(p + "post_attention_norm.weight", s.n_embd)
    t.norm(p + "ffn_norm.weight", s.n_embd)
    t.matrix(p + "ffn_gate.weight", s.n_ff, s.n_embd)
    t.matrix(p + "ffn_up.weight", s.n_ff, s.n_embd)
    t.matrix(p + "ffn_down.weight", s.n_embd, s.n_ff)
    if post_norms:
        t.norm(p + "post_ffw_norm.weight", s.n_embd)


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
    t = _Tensors(gguf.GGUFWriter(str(path), "qwen3"), np.random.default_rng(seed), weight_std, qtype)
    w, s = t.w, shape
    _attention_header(w, s, name, qtype)
    w.add_layer_norm_rms_eps(1e-6)
    _add_tokenizer(w, vocab, chat_template, fim)

    n_vocab = len(vocab.tokens)
    t.matrix("token_embd.weight", n_vocab, s.n_embd, (vocab.eos_id, vocab.bos_id) if endless else ())
    t.norm("output_norm.weight", s.n_embd)
    for i in range(s.n_layer):
        _attention_block(t, s, f"blk.{i}.", post_norms=False)
    if reranker:
        w.add_pooling_type(gguf.PoolingType.RANK)
        w.add_classifier_output_labels(["yes", "no"])
        w.add_string(gguf.Keys.Tokenizer.CHAT_TEMPLATE_N.format(name="rerank"), RERANK_TEMPLATE)
        t.matrix("cls.output.weight", 2, s.n_embd)
    for key, value in (metadata or {}).items():
        vtype = gguf.GGUFValueType.FLOAT32 if isinstance(value, float) else gguf.GGUFValueType.UINT32
        w.kv_data[0][key] = gguf.GGUFValue(value=value, type=vtype)
    _finish(w)
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
    t = _Tensors(gguf.GGUFWriter(str(path), "gemma3"), np.random.default_rng(seed), weight_std, qtype)
    w, s = t.w, shape
    _attention_header(w, s, name, qtype)
    w.add_rope_freq_base_swa(1e4)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_sliding_window(sliding_window)
    w.add_sliding_window_pattern(swa_pattern)
    _add_tokenizer(w, vocab, chat_template)

    # gemma3 multiplies the input embeddings by sqrt(n_embd) and normalises every block's output
    # (post norms): with tied embeddings the token itself would dominate the residual stream and
    # greedy decoding repeat one token forever. Scaled-down input embeddings and a separate
    # output projection keep the blocks' contribution, and the logits, as large as qwen3's.
    n_vocab = len(vocab.tokens)
    t.matrix("token_embd.weight", n_vocab, s.n_embd, std=weight_std / np.sqrt(s.n_embd))
    t.matrix("output.weight", n_vocab, s.n_embd, (vocab.eos_id, vocab.bos_id) if endless else ())
    t.norm("output_norm.weight", s.n_embd)
    for i in range(s.n_layer):
        _attention_block(t, s, f"blk.{i}.", post_norms=True)
    _finish(w)
    return path


@dataclass(frozen=True)
class SsmShape:
    """A Mamba (v1) block: llama.cpp supports only ``d_inner == 2 * n_embd``."""

    n_layer: int = 2
    n_embd: int = 64
    d_state: int = 16
    d_conv: int = 4
    dt_rank: int = 4  # ceil(n_embd / 16), as Mamba's "auto"
    context_length: int = 1 << 20
    # jamba only: attention heads and FFN width of the attention/FFN parts
    n_head: int = 4
    n_head_kv: int = 2
    n_ff: int = 128

    @property
    def d_inner(self) -> int:
        return 2 * self.n_embd


TINY_SSM = SsmShape()


def _mamba_layer(t: _Tensors, p: str, s: SsmShape, *, bc_norms: bool) -> None:
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
    _model_header(w, s, name, qtype)
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
    t = _Tensors(gguf.GGUFWriter(str(path), "mamba"), np.random.default_rng(seed), weight_std, qtype)
    w, s = t.w, shape
    _ssm_header(w, s, name, qtype)
    # As convert_hf_to_gguf.py writes a Mamba: no attention, no separate FFN.
    w.add_feed_forward_length(0)
    w.add_head_count(0)
    _add_tokenizer(w, vocab, chat_template)

    t.matrix("token_embd.weight", len(vocab.tokens), s.n_embd, (vocab.eos_id, vocab.bos_id) if endless else ())
    t.norm("output_norm.weight", s.n_embd)
    for i in range(s.n_layer):
        p = f"blk.{i}."
        t.norm(p + "attn_norm.weight", s.n_embd)
        _mamba_layer(t, p, s, bc_norms=False)
    _finish(w)
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
    t = _Tensors(gguf.GGUFWriter(str(path), "jamba"), np.random.default_rng(seed), weight_std, qtype)
    w, s = t.w, shape
    _ssm_header(w, s, name, qtype)
    is_attn = [i % 2 == 1 for i in range(s.n_layer)]
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    # llama.cpp's jamba tells a Mamba layer by its 0 KV heads.
    w.add_head_count_kv([s.n_head_kv if a else 0 for a in is_attn])
    _add_tokenizer(w, vocab, chat_template)

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
    _finish(w)
    return path


@dataclass(frozen=True)
class VisionShape:
    """A one-block ViT over ``image_size`` pixels in ``patch_size`` patches, pooled by ``merge``:
    ``(image_size / patch_size / merge) ** 2`` image tokens per image (4 with the defaults)."""

    image_size: int = 32
    patch_size: int = 8
    n_embd: int = 32
    n_head: int = 2
    n_ff: int = 64
    merge: int = 2
    n_layer: int = 1

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


TINY_VISION = VisionShape()


def _projector_header(
    path: Path,
    v: VisionShape,
    kind: str,
    n_embd_text: int,
    seed: int,
    *,
    activation: str = "gelu",
    eps: float = 1e-6,
    mean_std: tuple[list[float], list[float]] = ([0.5, 0.5, 0.5], [0.5, 0.5, 0.5]),
) -> _Tensors:
    """A CLIP GGUF's writer with the keys every vision projector states (``clip.cpp`` ``load_hparams``):
    its FFN ``activation`` (``clip.use_gelu`` or ``clip.use_silu``), norm epsilon and pixel statistics."""
    w = gguf.GGUFWriter(str(path), "clip")
    w.add_name(f"tiny-{kind}-mmproj")
    w.add_clip_has_vision_encoder(True)
    w.add_clip_projector_type(kind)
    w.add_vision_image_size(v.image_size)
    w.add_vision_patch_size(v.patch_size)
    w.add_vision_embedding_length(v.n_embd)
    w.add_vision_feed_forward_length(v.n_ff)
    w.add_vision_block_count(v.n_layer)
    w.add_vision_head_count(v.n_head)
    w.add_vision_projection_dim(n_embd_text)
    w.add_vision_attention_layernorm_eps(eps)
    w.add_vision_image_mean(mean_std[0])
    w.add_vision_image_std(mean_std[1])
    w.add_bool(f"clip.use_{activation}", True)
    return _Tensors(w, np.random.default_rng(seed), 0.2, gguf.GGMLQuantizationType.F32)


def _vit_block(
    t: _Tensors, v: VisionShape, *, gated: bool = False, norm_bias: bool = True, post_ln: bool = True
) -> None:
    """The ViT blocks the projectors share (pre-norm attention and an MLP, ``gated`` for SwiGLU;
    norms without bias for RMS norms), and the final norm (``post_ln``)."""
    for i in range(v.n_layer):
        p = f"v.blk.{i}."
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            t.matrix(f"{p}{name}.weight", v.n_embd, v.n_embd)
            t.f32(f"{p}{name}.bias", np.zeros(v.n_embd))
        for name in ("ln1", "ln2"):
            t.norm(f"{p}{name}.weight", v.n_embd)
            if norm_bias:
                t.f32(f"{p}{name}.bias", np.zeros(v.n_embd))
        for name, rows, cols in (("ffn_gate", v.n_ff, v.n_embd),) * gated + (
            ("ffn_up", v.n_ff, v.n_embd),
            ("ffn_down", v.n_embd, v.n_ff),
        ):
            t.matrix(f"{p}{name}.weight", rows, cols)
            t.f32(f"{p}{name}.bias", np.zeros(rows))
    if not post_ln:
        return
    t.norm("v.post_ln.weight", v.n_embd)
    t.f32("v.post_ln.bias", np.zeros(v.n_embd))


def write_gemma3_projector(
    path: Path, *, n_embd_text: int = TINY.n_embd, shape: VisionShape = TINY_VISION, seed: int = 0
) -> Path:
    """Write a random-weight gemma3 projector (an ``mmproj`` GGUF, architecture ``clip``) of ~50 KB.

    The keys and tensors are what libmtmd's ``clip.cpp`` requires of a gemma3 projector
    (``load_hparams``, ``load_tensors``); its output width must equal the text model's ``n_embd``.
    Gemma 3's image tokens attend to each other non-causally, which the media step must honour.
    """
    v = shape
    t = _projector_header(path, v, "gemma3", n_embd_text, seed)
    w = t.w
    w.add_vision_projector_scale_factor(v.merge)

    t.f32("v.patch_embd.weight", t.rng.standard_normal((v.n_embd, 3, v.patch_size, v.patch_size)) * 0.2)
    t.f32("v.patch_embd.bias", np.zeros(v.n_embd))
    t.matrix("v.position_embd.weight", v.n_patches, v.n_embd)
    _vit_block(t, v)
    t.norm("mm.soft_emb_norm.weight", v.n_embd)
    t.matrix("mm.input_projection.weight", v.n_embd, n_embd_text)
    _finish(w)
    return path


def write_qwen2vl(path: Path, *, shape: Shape = TINY, vocab: Vocab | None = None, seed: int = 0) -> Path:
    """Write a random-weight qwen2vl GGUF: a Qwen2 text model with M-RoPE (four position streams
    per token, rope ``dimension_sections``), the text half of Qwen2-VL."""
    vocab = vocab or synthetic_vocab()
    t = _Tensors(gguf.GGUFWriter(str(path), "qwen2vl"), np.random.default_rng(seed), 0.5, gguf.GGMLQuantizationType.F32)
    w, s = t.w, shape
    _attention_header(w, s, "tiny-qwen2vl", gguf.GGMLQuantizationType.F32)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_dimension_sections([2, 3, 3, 0])  # t, y, x: half the head (16), as Qwen2-VL's [16, 24, 24]
    _llama_body(t, s, vocab)
    return path


def _llama_body(t: _Tensors, s: Shape, vocab: Vocab) -> None:
    """A Llama-style text model's tokenizer and tensors (``_llama_block``s), and the file finished."""
    _add_tokenizer(t.w, vocab, None)
    t.matrix("token_embd.weight", len(vocab.tokens), s.n_embd)
    t.norm("output_norm.weight", s.n_embd)
    for i in range(s.n_layer):
        _llama_block(t, s, f"blk.{i}.")
    _finish(t.w)


def _llama_block(t: _Tensors, s: Shape, p: str, *, ffn: bool = True) -> None:
    """One Llama-style block's tensors (no QK norms): Qwen2's, Mistral's; without its FFN's
    projections (``ffn=False``) for a block whose FFN is a mixture of experts."""
    t.norm(p + "attn_norm.weight", s.n_embd)
    t.matrix(p + "attn_q.weight", s.n_head * s.head_dim, s.n_embd)
    t.matrix(p + "attn_k.weight", s.n_head_kv * s.head_dim, s.n_embd)
    t.matrix(p + "attn_v.weight", s.n_head_kv * s.head_dim, s.n_embd)
    t.matrix(p + "attn_output.weight", s.n_embd, s.n_head * s.head_dim)
    t.norm(p + "ffn_norm.weight", s.n_embd)
    if not ffn:
        return
    t.matrix(p + "ffn_gate.weight", s.n_ff, s.n_embd)
    t.matrix(p + "ffn_up.weight", s.n_ff, s.n_embd)
    t.matrix(p + "ffn_down.weight", s.n_embd, s.n_ff)


def write_qwen2vl_projector(
    path: Path, *, n_embd_text: int = TINY.n_embd, shape: VisionShape = TINY_VISION, seed: int = 0
) -> Path:
    """Write a random-weight Qwen2-VL projector (``qwen2vl_merger``): a ViT with 2-D rotary
    positions whose 2x2 patch groups become one image token each. Its images take fewer
    positions than tokens in the text model (M-RoPE: ``max(rows, columns)``)."""
    v = shape
    t = _projector_header(path, v, "qwen2vl_merger", n_embd_text, seed)
    w = t.w
    # Two temporal halves of the patch embedding (Qwen2-VL embeds pairs of frames), no bias.
    for name in ("v.patch_embd.weight", "v.patch_embd.weight.1"):
        t.f32(name, t.rng.standard_normal((v.n_embd, 3, v.patch_size, v.patch_size)) * 0.2)
    _vit_block(t, v)
    merged = 4 * v.n_embd  # a 2x2 group of patches
    t.matrix("mm.0.weight", merged, merged)
    t.f32("mm.0.bias", np.zeros(merged))
    t.matrix("mm.2.weight", n_embd_text, merged)
    t.f32("mm.2.bias", np.zeros(n_embd_text))
    _finish(w)
    return path


def write_lora(
    folder: Path, *, rank: int = 4, alpha: float = 8.0, seed: int = 0, endless: bool = False
) -> tuple[Path, Path]:
    """A tiny base model and a LoRA for it: ``folder/base.gguf`` (``write_qwen3``) and
    ``folder/adapter.gguf``, low-rank deltas (A, B) on every layer's attention query and FFN up
    projection, in the layout llama.cpp's ``llama_adapter_lora_init`` checks (A is ``{n_in, rank}``,
    B ``{rank, n_out}``), scaled by ``alpha / rank``. ``endless``: as ``write_qwen3``'s (oracle tests)."""
    folder.mkdir(parents=True, exist_ok=True)
    base = write_qwen3(folder / "base.gguf", seed=seed, endless=endless)
    path = folder / "adapter.gguf"
    s = TINY
    f32 = gguf.GGMLQuantizationType.F32
    t = _Tensors(gguf.GGUFWriter(str(path), "qwen3"), np.random.default_rng(seed + 1), 0.5, f32)
    t.w.add_type("adapter")
    t.w.add_string("adapter.type", "lora")
    t.w.add_float32("adapter.lora.alpha", alpha)
    for i in range(s.n_layer):
        for name, n_out in (("attn_q", s.n_head * s.head_dim), ("ffn_up", s.n_ff)):
            t.matrix(f"blk.{i}.{name}.weight.lora_a", rank, s.n_embd)
            t.matrix(f"blk.{i}.{name}.weight.lora_b", n_out, rank)
    _finish(t.w)
    return base, path


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


if __name__ == "__main__":
    from .kinds import main  # the command's table of kinds, one writer module each

    main()
