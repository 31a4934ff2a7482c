"""The shared base of the tiny test-model writers: a byte-level BPE vocabulary learned on a
built-in text, the shapes, a random-tensor writer, and the headers and blocks every writer module
(``core_ggufs``, ``vision_ggufs``, ``ollama_ggufs``...) builds its models from.

Nothing here downloads anything. The name tables that turn llama.cpp's layout into Ollama's live
in the writer modules and are kept apart from the converter's (``cllm_ollama.convert``) on
purpose: they are the inverse maps its tests prove it against.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

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


@cache  # the same corpus every time: learned once a process (0.14 s), not once a model written
def _learn_merges(n_merges: int) -> tuple[tuple[str, str], ...]:
    enc = _byte_encoder()
    return learn_merges(
        Counter(tuple(enc[b] for b in piece.encode()) for piece in _PRETOKENIZE.findall(_CORPUS)), n_merges
    )


def learn_merges(words: Counter[tuple[str, ...]], n_merges: int) -> tuple[tuple[str, str], ...]:
    """BPE's merges learned from ``words`` (each a sequence of symbols, with its count): the most
    frequent pair merged each time, until ``n_merges`` or no pair occurs twice."""
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
    return tuple(merges)


def synthetic_vocab(size: int | None = None) -> Vocab:
    """A byte-level BPE vocab: 256 byte tokens, learned merges, Qwen's special tokens.

    ``size=None`` gives a small vocab (fast tests); ``QWEN3_VOCAB_SIZE`` pads with unused
    tokens so that the specials land at Qwen's ids and tensor shapes match the real model.
    """
    enc = _byte_encoder()
    tokens = [enc[b] for b in range(256)]
    merges = _learn_merges(400)
    tokens += [a + b for a, b in merges]
    types: list[int] = [gguf.TokenType.NORMAL] * len(tokens)
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


def with_tokens(vocab: Vocab, texts: list[str] | tuple[str, ...], kind: int = gguf.TokenType.CONTROL) -> Vocab:
    """``vocab`` with ``texts`` added (of ``kind``) after its tokens, its padding then made again to a
    multiple of 32 rows."""
    pairs = [(t, ty) for t, ty in zip(vocab.tokens, vocab.types, strict=True) if not t.startswith("<|pad_")]
    pairs += [(t, int(kind)) for t in texts]
    while len(pairs) % 32:
        pairs.append((f"<|pad_{len(pairs)}|>", int(gguf.TokenType.UNUSED)))
    return dataclasses.replace(vocab, tokens=[t for t, _ in pairs], types=[ty for _, ty in pairs])


# Gemma 4's special tokens, in its order: control tokens, then those llama.cpp's converter makes
# user-defined so that they are always rendered (thought channels, tool calls and their answers).
GEMMA4_CONTROL = ("<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<|turn>", "<turn|>")
GEMMA4_VISIBLE = (
    "<|channel>",
    "<channel|>",
    "<|tool_call>",
    "<tool_call|>",
    "<|tool_response>",
    "<tool_response|>",
    '<|"|>',
)


def gemma4_vocab() -> Vocab:
    """A vocabulary shaped as Gemma 4's (SentencePiece-style BPE): its special tokens, the 256
    ``<0xXX>`` byte tokens it falls back on, the corpus's characters with ``▁`` for a space, and
    merges learned on each line of the corpus as a whole (Gemma 4 splits text only at newlines)."""
    lines = [line.replace(" ", "\u2581") for line in _CORPUS.splitlines() if line]
    chars = sorted({c for line in lines for c in line})
    merges = learn_merges(Counter(tuple(line) for line in lines), 300)
    tokens = [*GEMMA4_CONTROL, *GEMMA4_VISIBLE, *(f"<0x{b:02X}>" for b in range(256)), "\n", *chars]
    tokens += [a + b for a, b in merges]
    types = [int(gguf.TokenType.CONTROL)] * len(GEMMA4_CONTROL) + [int(gguf.TokenType.USER_DEFINED)] * len(
        GEMMA4_VISIBLE
    )
    types += [int(gguf.TokenType.BYTE)] * 256
    types += [int(gguf.TokenType.NORMAL)] * (len(tokens) - len(types))
    return Vocab(tokens=tokens, types=types, merges=[f"{a} {b}" for a, b in merges], eos_id=1, bos_id=2)


def vocab_from_gguf(path: Path) -> Vocab:
    """Copy a real tokenizer (e.g. llama.cpp's ggml-vocab-qwen2.gguf)."""
    reader = gguf.GGUFReader(path)

    def field(key: str) -> object:
        return reader.fields[key].contents()

    tokens = list(field("tokenizer.ggml.tokens"))  # type: ignore[call-overload]
    ids = {t: i for i, t in enumerate(tokens)}
    eos: int = int(field("tokenizer.ggml.eos_token_id"))  # type: ignore[call-overload]
    return Vocab(
        tokens=tokens,
        types=[int(t) for t in field("tokenizer.ggml.token_type")],  # type: ignore[attr-defined]
        merges=list(field("tokenizer.ggml.merges")),  # type: ignore[call-overload]
        eos_id=ids.get("<|im_end|>", eos),
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


def add_tokenizer(
    w: gguf.GGUFWriter, vocab: Vocab, chat_template: str | None, fim: bool = False, pre: str = "qwen2"
) -> None:
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
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
class Tensors:
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

    def varied_norm(self, name: str, n: int, scale: float = 1.0) -> None:
        """A norm's weights about ``scale``, not all ones and of values F16 holds, so that a norm
        converted into another's place shows (checkpoints' twins)."""
        self.f32(name, scale * (1.0 + f16_exact(self, (n,), 0.1)))

    def f32(self, name: str, data: np.ndarray) -> None:
        """Always F32, whatever ``qtype``: biases, 1-D tensors and the SSM's small parameters."""
        self.w.add_tensor(name, np.ascontiguousarray(data, dtype=np.float32))


def finish(w: gguf.GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def model_header(w: gguf.GGUFWriter, s: Shape | SsmShape, name: str, qtype: gguf.GGMLQuantizationType) -> None:
    """What every test model states first: name, file type, context, width and depth."""
    w.add_name(name)
    w.add_file_type(_FILE_TYPES[qtype])
    w.add_context_length(s.context_length)
    w.add_embedding_length(s.n_embd)
    w.add_block_count(s.n_layer)


def attention_header(w: gguf.GGUFWriter, s: Shape, name: str, qtype: gguf.GGMLQuantizationType) -> None:
    """The hyperparameters a qwen3- or gemma3-style transformer states, in the order both write them."""
    model_header(w, s, name, qtype)
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    w.add_head_count_kv(s.n_head_kv)
    w.add_key_length(s.head_dim)
    w.add_value_length(s.head_dim)
    w.add_rope_dimension_count(s.head_dim)
    w.add_rope_freq_base(1e6)


def attention_block(t: Tensors, s: Shape, p: str, *, post_norms: bool, qk_norms: bool = True, ffn: bool = True) -> None:
    """One transformer block's tensors (qwen3 layout; gemma3 adds norms after attention and FFN,
    gemma2 has those but no Q and K norms); without its FFN's projections (``ffn=False``) for a
    block whose FFN is a mixture of experts."""
    t.norm(p + "attn_norm.weight", s.n_embd)
    t.matrix(p + "attn_q.weight", s.n_head * s.head_dim, s.n_embd)
    t.matrix(p + "attn_k.weight", s.n_head_kv * s.head_dim, s.n_embd)
    t.matrix(p + "attn_v.weight", s.n_head_kv * s.head_dim, s.n_embd)
    t.matrix(p + "attn_output.weight", s.n_embd, s.n_head * s.head_dim)
    if qk_norms:
        t.norm(p + "attn_q_norm.weight", s.head_dim)
        t.norm(p + "attn_k_norm.weight", s.head_dim)
    if post_norms:
        t.norm(p + "post_attention_norm.weight", s.n_embd)
    t.norm(p + "ffn_norm.weight", s.n_embd)
    if ffn:
        t.matrix(p + "ffn_gate.weight", s.n_ff, s.n_embd)
        t.matrix(p + "ffn_up.weight", s.n_ff, s.n_embd)
        t.matrix(p + "ffn_down.weight", s.n_embd, s.n_ff)
    if post_norms:
        t.norm(p + "post_ffw_norm.weight", s.n_embd)


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


def projector_header(
    path: Path,
    v: VisionShape,
    kind: str,
    n_embd_text: int,
    seed: int,
    *,
    activation: str | None = "gelu",
    eps: float = 1e-6,
    mean_std: tuple[list[float], list[float]] = ([0.5, 0.5, 0.5], [0.5, 0.5, 0.5]),
) -> Tensors:
    """A CLIP GGUF's writer with the keys every vision projector states (``clip.cpp`` ``load_hparams``):
    its FFN ``activation`` (``clip.use_gelu`` or ``clip.use_silu``; None: libmtmd's quick GELU),
    norm epsilon and pixel statistics."""
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
    if activation is not None:
        w.add_bool(f"clip.use_{activation}", True)
    return Tensors(w, np.random.default_rng(seed), 0.2, gguf.GGMLQuantizationType.F32)


def vit_block(
    t: Tensors,
    v: VisionShape,
    *,
    gated: bool = False,
    norm_bias: bool = True,
    post_ln: bool = True,
    biases: bool = True,
) -> None:
    """The ViT blocks the projectors share (pre-norm attention and an MLP, ``gated`` for SwiGLU;
    norms without bias for RMS norms; ``biases``: the projections' zero biases), and the final norm
    (``post_ln``)."""
    for i in range(v.n_layer):
        p = f"v.blk.{i}."
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            t.matrix(f"{p}{name}.weight", v.n_embd, v.n_embd)
            if biases:
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
            if biases:
                t.f32(f"{p}{name}.bias", np.zeros(rows))
    if not post_ln:
        return
    t.norm("v.post_ln.weight", v.n_embd)
    t.f32("v.post_ln.bias", np.zeros(v.n_embd))


def llama_body(t: Tensors, s: Shape, vocab: Vocab, *, output: bool = False) -> None:
    """A Llama-style text model's tokenizer and tensors (``llama_block``s), and the file finished.
    ``output``: an output matrix of its own (else the token embedding is used, tied)."""
    add_tokenizer(t.w, vocab, None)
    t.matrix("token_embd.weight", len(vocab.tokens), s.n_embd)
    t.norm("output_norm.weight", s.n_embd)
    if output:
        t.matrix("output.weight", len(vocab.tokens), s.n_embd)
    for i in range(s.n_layer):
        llama_block(t, s, f"blk.{i}.")
    finish(t.w)


def llama_block(t: Tensors, s: Shape, p: str, *, ffn: bool = True) -> None:
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


def moe_ffn(t: Tensors, p: str, n_expert: int, n_ff: int, n_embd: int = TINY.n_embd, router_std: float = 0.5) -> None:
    """A layer's mixture of experts as llama.cpp keeps it: the router in F32, of values F16 holds
    (as converted from an F16 checkpoint), and the experts' projections stacked (F16 unless ``t``
    writes F32)."""
    t.f32(p + "ffn_gate_inp.weight", f16_exact(t, (n_expert, n_embd), router_std))
    for name, shape in (("gate", (n_ff, n_embd)), ("up", (n_ff, n_embd)), ("down", (n_embd, n_ff))):
        data = t.rng.standard_normal((n_expert, *shape)) * 0.5
        t.w.add_tensor(
            p + f"ffn_{name}_exps.weight",
            data.astype(np.float32 if t.qtype == gguf.GGMLQuantizationType.F32 else np.float16),
        )


def copy_fields(
    src: gguf.GGUFReader,
    w: gguf.GGUFWriter,
    *,
    skip: tuple[str, ...] = (),
    key: Callable[[str], str] = lambda name: name,
    value: Callable[[str, Any], Any] = lambda name, v: v,
) -> None:
    """Every metadata field of ``src`` but ``skip`` (and the architecture) into ``w``, renamed by ``key``."""
    for f in src.fields.values():
        if f.name.startswith("GGUF.") or f.name in ("general.architecture", *skip):
            continue
        sub_type = f.types[-1] if len(f.types) > 1 else None
        w.add_key_value(key(f.name), value(f.name, f.contents()), f.types[0], sub_type=sub_type)


def unpadded_vocab() -> Vocab:
    """The synthetic vocabulary without padding tokens at the end: the converter cuts Gemma's rows
    past the tokenizer's, as llama.cpp's does."""
    vocab = synthetic_vocab()
    real = max(i for i, kind in enumerate(vocab.types) if kind != gguf.TokenType.UNUSED) + 1
    return dataclasses.replace(vocab, tokens=vocab.tokens[:real], types=vocab.types[:real])


def f16_exact(t: Tensors, shape: tuple[int, ...], std: float = 0.2) -> np.ndarray:
    """Random weights F16 holds exactly, so that one stored as F16 and as F32 compares equal."""
    return (t.rng.standard_normal(shape) * std).astype(np.float16).astype(np.float32)
