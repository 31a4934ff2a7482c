"""The model families cllm converts from Hugging Face's layout, by ``config.json``'s architecture:
llama.cpp's architecture, its hyperparameter keys, and each checkpoint tensor's GGUF name.

Llama and Mistral are llama.cpp's ``llama``, whose rotary embedding pairs neighbouring dimensions
where Hugging Face's pairs the two halves of a head: their Q and K rows are reordered (``permute``,
as llama.cpp's and Ollama's converters do). Qwen 2 and 3 rotate halves in llama.cpp too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from gguf import GGUFValueType

from ..framework import KV
from .errors import ImportRefused

_U32 = GGUFValueType.UINT32
_F32 = GGUFValueType.FLOAT32
_STR = GGUFValueType.STRING

# config.json's "architectures" -> llama.cpp's architecture.
ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
}
_GLOBAL = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
_BLOCK = re.compile(r"model\.layers\.(\d+)\.(.+)\.(weight|bias)")
_BLOCK_PARTS = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
# Qwen 3's norms of each head's queries and keys.
_QK_NORMS = {"self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm"}
# Buffers some checkpoints carry that llama.cpp computes itself.
_SKIPPED = re.compile(r".*\.rotary_emb\.inv_freq$")


@dataclass(frozen=True)
class Family:
    """How one checkpoint becomes llama.cpp's: its architecture, keys and tensor names."""

    arch: str
    config: Mapping[str, Any]

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> Family:
        names = config.get("architectures")
        name = names[0] if isinstance(names, list) and names and isinstance(names[0], str) else None
        if name not in ARCHITECTURES:
            known = ", ".join(sorted(ARCHITECTURES))
            raise ImportRefused(f"unsupported architecture {name!r}: cllm converts {known}")
        return cls(ARCHITECTURES[name], config)

    def _int(self, *keys: str, default: int | None = None) -> int:
        for key in keys:
            value = self.config.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        if default is None:
            raise ImportRefused(f"config.json has no {keys[0]}")
        return default

    @property
    def n_head(self) -> int:
        return self._int("num_attention_heads")

    @property
    def n_head_kv(self) -> int:
        return self._int("num_key_value_heads", default=self.n_head)

    @property
    def head_dim(self) -> int:
        return self._int("head_dim", default=self._int("hidden_size") // self.n_head)

    def kv(self) -> KV:
        """The architecture's hyperparameter keys, as llama.cpp's converter writes them."""
        a = self.arch
        kv: KV = {
            f"{a}.context_length": (self._int("max_position_embeddings", default=4096), _U32),
            f"{a}.embedding_length": (self._int("hidden_size"), _U32),
            f"{a}.block_count": (self.n_layer, _U32),
            f"{a}.feed_forward_length": (self._int("intermediate_size"), _U32),
            f"{a}.attention.head_count": (self.n_head, _U32),
            f"{a}.attention.head_count_kv": (self.n_head_kv, _U32),
            f"{a}.rope.freq_base": (float(self.config.get("rope_theta") or 10000.0), _F32),
            f"{a}.attention.layer_norm_rms_epsilon": (float(self.config.get("rms_norm_eps") or 1e-6), _F32),
        }
        if a == "llama" or "head_dim" in self.config:
            kv[f"{a}.attention.key_length"] = (self.head_dim, _U32)
            kv[f"{a}.attention.value_length"] = (self.head_dim, _U32)
        if a == "llama":
            kv[f"{a}.rope.dimension_count"] = (self.head_dim, _U32)
        kv |= self._rope_scaling()
        return kv

    @property
    def n_layer(self) -> int:
        return self._int("num_hidden_layers")

    def _rope_scaling(self) -> KV:
        scaling = self.config.get("rope_scaling")
        if not isinstance(scaling, dict):
            return {}
        kind = scaling.get("rope_type", scaling.get("type"))
        factor = scaling.get("factor")
        a = self.arch
        if kind in (None, "default", "llama3"):  # llama3's factors are a tensor (rope_factors)
            return {}
        if kind in ("linear", "yarn") and isinstance(factor, int | float):
            kv: KV = {f"{a}.rope.scaling.type": (kind, _STR), f"{a}.rope.scaling.factor": (float(factor), _F32)}
            original = scaling.get("original_max_position_embeddings")
            if kind == "yarn" and isinstance(original, int):
                kv[f"{a}.rope.scaling.original_context_length"] = (original, _U32)
            return kv
        raise ImportRefused(f"config.json's rope_scaling {kind!r} is not one cllm converts (linear, yarn, llama3)")

    def rope_factors(self) -> np.ndarray | None:
        """Llama 3.1's frequency factors (``rope_freqs.weight``), from its ``rope_scaling``."""
        scaling = self.config.get("rope_scaling")
        if self.arch != "llama" or not isinstance(scaling, dict) or scaling.get("rope_type") != "llama3":
            return None
        base = float(self.config.get("rope_theta") or 10000.0)
        factor = float(scaling.get("factor") or 8.0)
        low, high = float(scaling.get("low_freq_factor") or 1.0), float(scaling.get("high_freq_factor") or 4.0)
        original = float(scaling.get("original_max_position_embeddings") or 8192)
        low_wavelen, high_wavelen = original / low, original / high
        factors = []
        for i in range(0, self.head_dim, 2):
            wavelen = 2 * math.pi * base ** (i / self.head_dim)
            if wavelen < high_wavelen:
                factors.append(1.0)
            elif wavelen > low_wavelen:
                factors.append(factor)
            else:
                smooth = (original / wavelen - low) / (high - low)
                factors.append(1 / ((1 - smooth) / factor + smooth))
        return np.array(factors, dtype=np.float32)

    def gguf_name(self, name: str) -> str | None:
        """The tensor's llama.cpp name; None for a buffer llama.cpp does not read."""
        if name in _GLOBAL:
            return _GLOBAL[name]
        if _SKIPPED.match(name):
            return None
        m = _BLOCK.fullmatch(name)
        parts = _BLOCK_PARTS | _QK_NORMS if self.arch == "qwen3" else _BLOCK_PARTS
        if m and m[2] in parts:
            return f"blk.{m[1]}.{parts[m[2]]}.{m[3]}"
        raise ImportRefused(f"tensor {name} is not one cllm's converter knows for {self.arch}")

    def reorder(self, gguf_name: str) -> Callable[[np.ndarray], np.ndarray] | None:
        """For llama's Q and K: the rows reordered from halves to neighbouring pairs, per head."""
        if self.arch != "llama":
            return None
        if re.fullmatch(r"blk\.\d+\.attn_q\.(weight|bias)", gguf_name):
            heads = self.n_head
        elif re.fullmatch(r"blk\.\d+\.attn_k\.(weight|bias)", gguf_name):
            heads = self.n_head_kv
        else:
            return None
        return lambda rows: permute(rows, heads)


def permute(rows: np.ndarray, heads: int) -> np.ndarray:
    """Each head's rows ``[first half..., second half...]`` interleaved as ``[h0, s0, h1, s1, ...]``
    (``LlamaModel.permute`` in llama.cpp's converter)."""
    shape = rows.shape
    return np.ascontiguousarray(
        rows.reshape(heads, 2, shape[0] // heads // 2, *shape[1:]).swapaxes(1, 2).reshape(shape)
    )
