"""Tiny Hugging Face checkpoints (``config.json``, safetensors, ``tokenizer.json``) for the folder
import (``convert/hf``), written from a tiny GGUF: the GGUF is then the converted folder's twin,
whose greedy answers the converted model must give word for word.

This is the converter run backwards, written apart from it: Hugging Face's tensor names, Q and K
rows of a ``llama`` in halves per head, the vocabulary split into the BPE vocabulary and added tokens
(unused ones left out, as checkpoints leave their padding rows untokenized).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from . import core_ggufs
from .gguf_base import TINY, Tensors, attention_header, llama_body, synthetic_vocab

_FLOATS = (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16)
_ARCHITECTURES = {"qwen3": "Qwen3ForCausalLM", "qwen2": "Qwen2ForCausalLM", "llama": "LlamaForCausalLM"}
# tokenizer.json's split patterns of llama.cpp's pre-tokenizers (Qwen 2's, Llama 3's).
_WORDS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
_REST = r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
SPLIT_PATTERNS = {"qwen2": _WORDS + r"\p{N}" + _REST, "llama-bpe": _WORDS + r"\p{N}{1,3}" + _REST}
_PARTS = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_GLOBAL = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


def write_hf_qwen3(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-qwen3/``, a Qwen3 checkpoint in F16, and ``folder/qwen3.gguf``, its twin."""
    folder.mkdir(parents=True, exist_ok=True)
    twin = core_ggufs.write_qwen3(folder / "qwen3.gguf", qtype=gguf.GGMLQuantizationType.F16, seed=seed)
    return export(twin, folder / "hf-qwen3"), twin


def write_hf_llama(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/hf-llama/``, a Llama checkpoint in F16, and ``folder/llama.gguf``, its twin."""
    folder.mkdir(parents=True, exist_ok=True)
    return export(write_llama(folder / "llama.gguf", seed=seed), folder / "hf-llama"), folder / "llama.gguf"


def write_llama(path: Path, *, seed: int = 0) -> Path:
    """A tiny Llama in F16 (Qwen's tokenizer, which any architecture may have)."""
    qtype = gguf.GGMLQuantizationType.F16
    t = Tensors(gguf.GGUFWriter(str(path), "llama"), np.random.default_rng(seed), 0.5, qtype)
    attention_header(t.w, TINY, "tiny-llama", qtype)
    t.w.add_layer_norm_rms_eps(1e-5)
    llama_body(t, TINY, synthetic_vocab())
    return path


def export(path: Path, folder: Path, *, dtype: str = "F16", shards: int = 1, template_file: bool = False) -> Path:
    """``folder``: the checkpoint the GGUF at ``path`` was converted from (quantized tensors dequantized).

    ``dtype``: its matrices' type (F16, BF16 or F32; vectors F32 as in most checkpoints); ``shards``:
    safetensors files it is split into; ``template_file``: the chat template in
    ``chat_template.jinja`` rather than ``tokenizer_config.json``. A ``llama``'s Q and K rows are put
    back in halves."""
    reader = gguf.GGUFReader(path)
    kv = {f.name: f.contents() for f in reader.fields.values() if not f.name.startswith("GGUF.")}
    arch = str(kv["general.architecture"])
    heads, heads_kv = int(kv[f"{arch}.attention.head_count"]), int(kv[f"{arch}.attention.head_count_kv"])
    folder.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, np.ndarray] = {}
    for t in reader.tensors:
        values = t.data if t.tensor_type in _FLOATS else gguf.quants.dequantize(t.data, t.tensor_type)
        data = np.asarray(values, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])
        part = t.name.split(".")[2] if t.name.startswith("blk.") else ""
        if arch == "llama" and part in ("attn_q", "attn_k"):
            data = _halves(data, heads if part == "attn_q" else heads_kv)
        tensors[_hf_name(t.name)] = data
    _write_safetensors(folder, tensors, dtype, shards)
    _write_json(folder / "config.json", _config(kv, arch))
    _write_tokenizer(folder, kv, template_file)
    return folder


def _hf_name(name: str) -> str:
    stem, _, suffix = name.rpartition(".")
    if stem in _GLOBAL:
        return f"{_GLOBAL[stem]}.{suffix}"
    _, layer, part = stem.split(".", 2)
    return f"model.layers.{layer}.{_PARTS[part]}.{suffix}"


def _halves(rows: np.ndarray, heads: int) -> np.ndarray:
    """Each head's rows from neighbouring pairs ``[a0, b0, a1, b1...]`` back to halves ``[a..., b...]``."""
    n = rows.shape[0] // heads
    return np.concatenate([np.concatenate([h[0::2], h[1::2]]) for h in np.split(rows, heads)]).reshape(heads * n, -1)


def _config(kv: dict[str, Any], arch: str) -> dict[str, Any]:
    n_embd, heads = int(kv[f"{arch}.embedding_length"]), int(kv[f"{arch}.attention.head_count"])
    config: dict[str, Any] = {
        "architectures": [_ARCHITECTURES[arch]],
        "model_type": arch,
        "hidden_size": n_embd,
        "num_hidden_layers": int(kv[f"{arch}.block_count"]),
        "intermediate_size": int(kv[f"{arch}.feed_forward_length"]),
        "num_attention_heads": heads,
        "num_key_value_heads": int(kv[f"{arch}.attention.head_count_kv"]),
        "max_position_embeddings": int(kv[f"{arch}.context_length"]),
        "rope_theta": float(kv[f"{arch}.rope.freq_base"]),
        "rms_norm_eps": float(kv[f"{arch}.attention.layer_norm_rms_epsilon"]),
        "bos_token_id": int(kv["tokenizer.ggml.bos_token_id"]),
        "eos_token_id": int(kv["tokenizer.ggml.eos_token_id"]),
        "tie_word_embeddings": True,
        "torch_dtype": "float16",
    }
    head_dim = kv.get(f"{arch}.attention.key_length")
    if head_dim is not None and int(head_dim) != n_embd // heads:
        config["head_dim"] = int(head_dim)
    return config


def _write_tokenizer(folder: Path, kv: dict[str, Any], template_file: bool) -> None:
    tokens, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"]
    vocab, added = {}, []
    for tid, (text, kind) in enumerate(zip(tokens, types, strict=True)):
        if kind == gguf.TokenType.NORMAL:
            vocab[text] = tid
        elif kind in (gguf.TokenType.CONTROL, gguf.TokenType.USER_DEFINED):
            added.append({"id": tid, "content": text, "special": kind == gguf.TokenType.CONTROL, "normalized": False})
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    split = {"type": "Split", "pattern": {"Regex": SPLIT_PATTERNS[kv["tokenizer.ggml.pre"]]}, "behavior": "Isolated"}
    spec = {
        "version": "1.0",
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split, byte_level]},
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "byte_fallback": False,
            "vocab": vocab,
            "merges": [m.split(" ") for m in kv["tokenizer.ggml.merges"]],
        },
    }
    _write_json(folder / "tokenizer.json", spec)
    template = kv["tokenizer.chat_template"]
    settings: dict[str, Any] = {
        "bos_token": None,
        "eos_token": tokens[int(kv["tokenizer.ggml.eos_token_id"])],
        "pad_token": tokens[int(kv["tokenizer.ggml.padding_token_id"])],
        "model_max_length": 131072,
    }
    if template_file:
        (folder / "chat_template.jinja").write_text(template)
    else:
        settings["chat_template"] = template
    _write_json(folder / "tokenizer_config.json", settings)


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")


def _write_safetensors(folder: Path, tensors: dict[str, np.ndarray], dtype: str, shards: int) -> None:
    names = sorted(tensors)
    parts = [names[i::shards] for i in range(shards)]
    index: dict[str, str] = {}
    for i, part in enumerate(parts, 1):
        file = "model.safetensors" if shards == 1 else f"model-{i:05d}-of-{shards:05d}.safetensors"
        write_safetensors(folder / file, {n: _typed(tensors[n], dtype) for n in part})
        index |= dict.fromkeys(part, file)
    if shards > 1:
        _write_json(folder / "model.safetensors.index.json", {"metadata": {}, "weight_map": index})


def _typed(data: np.ndarray, dtype: str) -> tuple[str, np.ndarray]:
    """Matrices in ``dtype``, vectors F32; BF16 rounded to nearest even, as torch does."""
    if data.ndim == 1 or dtype == "F32":
        return "F32", data.astype(np.float32)
    if dtype == "F16":
        return "F16", data.astype(np.float16)
    return "BF16", to_bf16(data)


def to_bf16(data: np.ndarray) -> np.ndarray:
    """F32 values as BF16's bits, rounded to nearest even."""
    bits = np.ascontiguousarray(data, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def write_safetensors(path: Path, tensors: dict[str, tuple[str, np.ndarray]]) -> Path:
    """A safetensors file: an 8-byte header length, the JSON header (padded to 8 bytes), the data."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(data.shape), "data_offsets": [offset, offset + data.nbytes]}
        offset += data.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with path.open("wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for _, data in tensors.values():
            f.write(np.ascontiguousarray(data).tobytes())
    return path
