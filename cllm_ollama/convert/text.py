"""Text families whose map is a few keys and names: LFM2, OLMo 3 (as olmo2), Laguna, and GLM-4.7
Flash (as deepseek2), each as Ollama's shim's ``handle_<arch>`` remaps it at every load."""

from __future__ import annotations

from gguf import GGUFValueType

from .framework import KV, Header, LayoutRefused, Rewrite, keep_all, refusal, renaming, suffix_renames

_F32 = GGUFValueType.FLOAT32
_U32 = GGUFValueType.UINT32
_STR = GGUFValueType.STRING


def is_ollama_lfm2(h: Header) -> bool:
    """Ollama's LFM2 names the final norm ``output_norm``."""
    return "output_norm.weight" in h.shapes and "token_embd_norm.weight" not in h.shapes


def lfm2(h: Header) -> Rewrite:
    """LFM2 (``handle_lfm2``): the final norm under llama.cpp's name, its pre-tokenizer named, and
    the FFN width taken from the tensors (some files state another)."""
    set_kv: KV = {"tokenizer.ggml.pre": ("lfm2", _STR)}
    n_ff = h.rows("blk.0.ffn_gate.weight")
    if n_ff and h.kv.get("lfm2.feed_forward_length") != n_ff:
        set_kv["lfm2.feed_forward_length"] = (n_ff, _U32)
    return Rewrite(
        role="model",
        arch="lfm2",
        keep_tensor=keep_all,
        exact={"output_norm.weight": "token_embd_norm.weight"},
        set_kv=set_kv,
    )


def olmo3(h: Header) -> Rewrite:
    """OLMo 3 (``handle_olmo3``): llama.cpp's olmo2 reads the same tensors and OLMo 3's
    sliding-window RoPE; only the architecture and its key prefix change."""
    return Rewrite(role="model", arch="olmo2", keep_tensor=keep_all, key_prefixes=("olmo3.", "olmo2."))


_LAGUNA_KEYS = {
    "laguna.rope.swa.dimension_count": ("laguna.rope.dimension_count_swa", _U32),
    "laguna.rope.swa.freq_base": ("laguna.rope.freq_base_swa", _F32),
}


def is_ollama_laguna(h: Header) -> bool:
    """Ollama's names for Laguna's sliding-window RoPE keys or its attention gate."""
    return h.has("rope.swa.dimension_count") or h.has("rope.swa.freq_base") or "blk.0.attn_g.weight" in h.shapes


def laguna(h: Header) -> Rewrite:
    """Laguna (``handle_laguna``): the sliding-window RoPE keys and the attention gate under
    llama.cpp's names."""
    set_kv: KV = {new: (h.kv[old], kind) for old, (new, kind) in _LAGUNA_KEYS.items() if old in h.kv}
    return Rewrite(
        role="model",
        arch="laguna",
        keep_tensor=keep_all,
        keep_key=lambda key: key not in _LAGUNA_KEYS,
        set_kv=set_kv,
        tensors=renaming(suffix_renames(((".attn_g", ".attn_gate"),))),
    )


def glm4moelite(h: Header) -> Rewrite:
    """GLM-4.7 Flash (``handle_glm4moelite``): llama.cpp runs it as deepseek2 with MLA's absorbed
    conventions (one KV head; key and value lengths of the compressed KV; per-head lengths as the
    ``_mla`` keys), no expert groups, GLM-4's pre-tokenizer and its end-of-turn tokens named."""
    kv = h.kv
    keys = ("attention.kv_lora_rank", "rope.dimension_count", "attention.key_length")
    rank, rope, head_dim = (kv.get(f"glm4moelite.{key}") for key in keys)
    if not (rank and rope and head_dim):
        raise LayoutRefused(refusal("glm4moelite", "no kv_lora_rank, rope.dimension_count or key_length"))
    set_kv: KV = {
        "deepseek2.attention.head_count_kv": (1, _U32),
        "deepseek2.attention.key_length": (int(rank) + int(rope), _U32),
        "deepseek2.attention.value_length": (int(rank), _U32),
        "deepseek2.attention.key_length_mla": (int(head_dim), _U32),
        "deepseek2.attention.value_length_mla": (int(head_dim), _U32),
        "tokenizer.ggml.pre": ("glm4", _STR),
    }
    for key in ("expert_group_count", "expert_group_used_count"):
        if not h.has(key):
            set_kv[f"deepseek2.{key}"] = (1, _U32)
    eos = kv.get("tokenizer.ggml.eos_token_ids")
    if isinstance(eos, list):
        ids = [int(i) for i in eos if int(i) >= 0]
        for key, at in (("tokenizer.ggml.eot_token_id", 1), ("tokenizer.ggml.eom_token_id", 2)):
            if key not in kv and len(ids) > at:
                set_kv[key] = (ids[at], _U32)
    return Rewrite(
        role="model", arch="deepseek2", keep_tensor=keep_all, key_prefixes=("glm4moelite.", "deepseek2."), set_kv=set_kv
    )
