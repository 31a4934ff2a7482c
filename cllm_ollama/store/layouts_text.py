"""Text models written by Ollama's converter for its Go engine, mapped to what llama.cpp loads.

Each map mirrors what Ollama's own llama-server shim (``llama/compat/llama-ollama-compat.cpp``
in ollama/ollama, the ``handle_<arch>`` functions) does in memory at every load; cllm does it once,
when the model enters the store, through ``layouts.rewrite``. ``plan_text`` answers for the
architectures it knows: the rewrites, None when the file is already in llama.cpp's layout, or
``LayoutRefused`` naming what cannot be mapped. Multi-token-prediction heads that the text
model's llama.cpp loader does not read are dropped (llama.cpp refuses unread tensors); the towers
of Gemma 4 and Qwen 3.5 are left out of the text model here and split out in ``layouts_vision``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gguf import GGUFValueType

from .layouts import Header, LayoutRefused, Rewrite, Tensor, _always, refusal

_F32 = GGUFValueType.FLOAT32
_U32 = GGUFValueType.UINT32
_STR = GGUFValueType.STRING
_ARRAY = GGUFValueType.ARRAY

_KV = dict[str, tuple[Any, GGUFValueType]]


def plan_text(h: Header) -> list[Rewrite] | None:
    """The rewrite of a text model in Ollama's layout; None when ``h`` is not one this module maps
    (or is already laid out as llama.cpp's converter writes it)."""
    mapper = _MAPS.get(h.arch)
    if mapper is None:
        return None
    marker, build = mapper
    return [build(h)] if marker(h) else None


def _all(name: str) -> bool:
    return True


def _suffix_renames(pairs: tuple[tuple[str, str], ...]) -> Callable[[str], str]:
    """Tensor-name fixes at a name component's end (``.attn_out`` but never ``.attn_output``)."""
    patterns = [(re.compile(re.escape(old) + r"(?=\.|$)"), new) for old, new in pairs]

    def rename(name: str) -> str:
        for pattern, new in patterns:
            name = pattern.sub(new, name)
        return name

    return rename


def _renaming(rename: Callable[[str], str]) -> Callable[[list[Tensor]], list[Tensor]]:
    return lambda tensors: [t.renamed(rename(t.name)) for t in tensors]


def _max_of(value: Any, fallback: int) -> int:
    """A per-layer array collapsed to its largest entry (llama.cpp reads one number)."""
    if isinstance(value, list):
        return max((int(v) for v in value), default=0) or fallback
    return int(value)


def _first_rows(h: Header, name: str) -> int | None:
    """The second ggml dimension of the first block's ``name`` that has one."""
    for key, shape in h.shapes.items():
        if re.fullmatch(r"blk\.\d+\." + re.escape(name), key) and len(shape) > 1:
            return shape[1]
    return None


# --- gpt-oss -------------------------------------------------------------------------------------

_GPTOSS_NAMES = _suffix_renames(((".attn_out", ".attn_output"), (".ffn_norm", ".post_attention_norm")))


def _gptoss_tensors(tensors: list[Tensor]) -> list[Tensor]:
    """llama.cpp's names, every tensor with its ``.weight``/``.bias`` suffix, and (files converted
    before October 2025) the fused ``ffn_gate_up_exps``, whose rows interleave gate and up, split
    into ``ffn_gate_exps`` (even rows) and ``ffn_up_exps`` (odd rows), as llama.cpp's converter does."""
    out: list[Tensor] = []
    for t in tensors:
        name = _GPTOSS_NAMES(t.name)
        if not name.endswith((".weight", ".bias")):
            name += ".weight"  # attn_sinks, and the MXFP4 experts of Hugging Face-flavoured conversions
        if ".ffn_gate_up_exps." in name:
            out.append(t.take(slice(0, None, 2), name.replace(".ffn_gate_up_exps.", ".ffn_gate_exps."), axis=1))
            out.append(t.take(slice(1, None, 2), name.replace(".ffn_gate_up_exps.", ".ffn_up_exps."), axis=1))
        else:
            out.append(t.renamed(name))
    return out


def _gptoss(h: Header) -> Rewrite:
    """gpt-oss (``handle_gptoss``): architecture ``gpt-oss``, the expert width and YaRN stated, the
    GPT-4o pre-tokenizer (without it Harmony's headers come out malformed), tensor names fixed."""
    if any(kind == "4" for kind in h.types.values()):
        # Ollama's first converter (August 2025) stored MXFP4 as ggml type 4 in its own nibble order.
        raise LayoutRefused(refusal("gptoss", "its MXFP4 experts are in the Go engine's first layout (ggml type 4)"))
    set_kv: _KV = {"tokenizer.ggml.pre": ("gpt-4o", _STR)}
    if not h.has("expert_feed_forward_length"):
        gate = _first_rows(h, "ffn_gate_exps.weight")
        fused = _first_rows(h, "ffn_gate_up_exps.weight") or _first_rows(h, "ffn_gate_up_exps")
        n_ff = gate or (fused // 2 if fused else h.kv.get("gptoss.feed_forward_length"))
        if not n_ff:
            raise LayoutRefused(refusal("gptoss", "no expert width in its keys or its expert tensors"))
        set_kv["gpt-oss.expert_feed_forward_length"] = (int(n_ff), _U32)
    if not h.has("rope.scaling.type"):
        set_kv["gpt-oss.rope.scaling.type"] = ("yarn", _STR)
    return Rewrite(
        role="model",
        arch="gpt-oss",
        keep_tensor=_all,
        key_prefixes=("gptoss.", "gpt-oss."),
        set_kv=set_kv,
        tensors=_gptoss_tensors,
    )


# --- gemma3n -------------------------------------------------------------------------------------

_GEMMA3N_EOT = 106  # <end_of_turn>


def _gemma3n(h: Header) -> Rewrite:
    """Gemma 3n (``handle_gemma3n``): Ollama keeps the multimodal vocabulary (image and audio
    markers past the text vocabulary) in the token embeddings and tokenizer; llama.cpp's text
    model wants them as long as the per-layer embeddings. Both are cut, byte and ``<unused>``
    tokens typed as SentencePiece's, and turns end at <end_of_turn>."""
    n_vocab = h.rows("per_layer_token_embd.weight")
    if not n_vocab:
        raise LayoutRefused(refusal("gemma3n", "no per_layer_token_embd.weight"))
    kv = h.kv
    set_kv: _KV = {"tokenizer.ggml.model": ("llama", _STR)}
    tokens, types = kv.get("tokenizer.ggml.tokens"), kv.get("tokenizer.ggml.token_type")
    if isinstance(tokens, list) and isinstance(types, list):
        fixed = [
            6 if re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", tok) else 1 if tok.startswith("<unused") else int(kind)
            for tok, kind in zip(tokens[:n_vocab], types[:n_vocab], strict=False)
        ]
        set_kv["tokenizer.ggml.token_type"] = (fixed, _ARRAY)
    eos = kv.get("tokenizer.ggml.eos_token_ids")
    ids = [int(i) for i in eos] if isinstance(eos, list) else [1]
    set_kv["tokenizer.ggml.eos_token_ids"] = ([*ids, _GEMMA3N_EOT] if _GEMMA3N_EOT not in ids else ids, _ARRAY)

    def cut(tensors: list[Tensor]) -> list[Tensor]:
        return [t.take(slice(0, n_vocab), t.name) if t.name == "token_embd.weight" else t for t in tensors]

    return Rewrite(role="model", arch="gemma3n", keep_tensor=_all, set_kv=set_kv, vocab_rows=n_vocab, tensors=cut)


# --- gemma4 --------------------------------------------------------------------------------------

_GEMMA4_TOWERS = ("a.", "v.", "mm.", "model.vision_tower.")


def _gemma4(h: Header) -> Rewrite:
    """Gemma 4's text model (``handle_gemma4``): without the audio and vision towers (which
    ``layouts_vision`` splits into a projector), its BPE tokenizer named ``gemma4`` rather than
    ``llama`` (else its control tokens come out as text), and the experts' per-expert scale under
    llama.cpp's name. (Ollama's shim also fuses the experts' gate and up for speed; llama.cpp loads
    them split.)"""
    set_kv: _KV = {}
    if h.kv.get("tokenizer.ggml.model") == "llama":
        set_kv["tokenizer.ggml.model"] = ("gemma4", _STR)
    return Rewrite(
        role="model",
        arch="gemma4",
        keep_tensor=lambda name: not name.startswith(_GEMMA4_TOWERS),
        keep_key=lambda key: not key.startswith(("gemma4.vision.", "gemma4.audio.")),
        set_kv=set_kv,
        tensors=_renaming(_suffix_renames(((".ffn_gate_inp.per_expert_scale", ".ffn_down_exps.scale"),))),
    )


# --- qwen3.5, qwen3-next ----------------------------------------------------------------------------

_SSM_DT = _suffix_renames(((".ssm_dt", ".ssm_dt.bias"),))


def _ssm_dt(tensors: list[Tensor]) -> list[Tensor]:
    """``blk.N.ssm_dt`` is llama.cpp's ``blk.N.ssm_dt.bias`` (same shape)."""
    return [t.renamed(_SSM_DT(t.name)) if t.name.endswith(".ssm_dt") else t for t in tensors]


# The keys Ollama's converter now leaves out of a Qwen 3.5 text model (``TextKV`` in its
# convert_qwen3next.go): the tower's, and markers llama.cpp does not read.
_QWEN35_TOWER_KEYS = (
    "vision.",
    "image_token_id",
    "vision_start_token_id",
    "vision_end_token_id",
    "mrope_sections",
    "rope.mrope_section",
    "rope.mrope_interleaved",
    "ssm.v_head_reordered",
)


def _qwen35(h: Header) -> Rewrite:
    """Qwen 3.5 dense and MoE (``apply_qwen35_text_fixes``): the KV-head count as one number, the
    M-RoPE sections padded to four, ``ssm_dt`` named, without the vision tower (``layouts_vision``
    splits it into a projector) and the multi-token-prediction head (cllm does not draft with MTP)."""
    kv = h.kv
    set_kv: _KV = {}
    heads = kv.get(f"{h.arch}.attention.head_count_kv")
    if isinstance(heads, list):
        set_kv[f"{h.arch}.attention.head_count_kv"] = (_max_of(heads, 2), _U32)
    # llama.cpp requires four M-RoPE sections; older files state three, or only ``rope.mrope_section``.
    named = kv.get(f"{h.arch}.rope.dimension_sections")
    sections = named if named is not None else kv.get(f"{h.arch}.rope.mrope_section")
    if isinstance(sections, list) and (len(sections) == 3 or named is None):
        set_kv[f"{h.arch}.rope.dimension_sections"] = ([*(int(s) for s in sections[:4]), 0, 0, 0][:4], _ARRAY)
    return Rewrite(
        role="model",
        arch=h.arch,
        keep_tensor=lambda name: not name.startswith(("v.", "mm.", "mtp.")),
        # A llama.cpp qwen35moe states its experts' width only (Ollama's marker: a dense FFN width).
        keep_key=lambda key: (
            not key.startswith(tuple(f"{h.arch}.{k}" for k in _QWEN35_TOWER_KEYS))
            and key != "qwen35moe.feed_forward_length"
        ),
        set_kv=set_kv,
        tensors=_ssm_dt,
    )


def _qwen3next(h: Header) -> Rewrite:
    """Qwen3-Next (``handle_qwen3next``): ``ssm_dt`` named, the KV-head count as one number."""
    heads = h.kv.get("qwen3next.attention.head_count_kv")
    set_kv: _KV = {}
    if isinstance(heads, list) and _max_of(heads, 0):
        set_kv["qwen3next.attention.head_count_kv"] = (_max_of(heads, 0), _U32)
    return Rewrite(role="model", arch="qwen3next", keep_tensor=_all, set_kv=set_kv, tensors=_ssm_dt)


# --- lfm2, olmo3, laguna, nemotron_h_moe -------------------------------------------------------------


def _lfm2(h: Header) -> Rewrite:
    """LFM2 (``handle_lfm2``): the final norm under llama.cpp's name, its pre-tokenizer named, and
    the FFN width taken from the tensors (some files state another)."""
    set_kv: _KV = {"tokenizer.ggml.pre": ("lfm2", _STR)}
    n_ff = h.rows("blk.0.ffn_gate.weight")
    if n_ff and h.kv.get("lfm2.feed_forward_length") != n_ff:
        set_kv["lfm2.feed_forward_length"] = (n_ff, _U32)
    return Rewrite(
        role="model",
        arch="lfm2",
        keep_tensor=_all,
        exact={"output_norm.weight": "token_embd_norm.weight"},
        set_kv=set_kv,
    )


def _olmo3(h: Header) -> Rewrite:
    """OLMo 3 (``handle_olmo3``): llama.cpp's olmo2 reads the same tensors and OLMo 3's
    sliding-window RoPE; only the architecture and its key prefix change."""
    return Rewrite(role="model", arch="olmo2", keep_tensor=_all, key_prefixes=("olmo3.", "olmo2."))


_LAGUNA_KEYS = {
    "laguna.rope.swa.dimension_count": ("laguna.rope.dimension_count_swa", _U32),
    "laguna.rope.swa.freq_base": ("laguna.rope.freq_base_swa", _F32),
}


def _laguna(h: Header) -> Rewrite:
    """Laguna (``handle_laguna``): the sliding-window RoPE keys and the attention gate under
    llama.cpp's names."""
    set_kv: _KV = {new: (h.kv[old], kind) for old, (new, kind) in _LAGUNA_KEYS.items() if old in h.kv}
    return Rewrite(
        role="model",
        arch="laguna",
        keep_tensor=_all,
        keep_key=lambda key: key not in _LAGUNA_KEYS,
        set_kv=set_kv,
        tensors=_renaming(_suffix_renames(((".attn_g", ".attn_gate"),))),
    )


def _nemotron_h_moe(h: Header) -> Rewrite:
    """Nemotron-H MoE (``handle_nemotron_h_moe``): the latent FFN projections under llama.cpp's
    names with their width stated, and the multi-token-prediction head dropped."""
    set_kv: _KV = {}
    latent = _first_rows(h, "ffn_latent_in.weight")
    if latent and not h.has("moe_latent_size"):
        set_kv["nemotron_h_moe.moe_latent_size"] = (latent, _U32)
    names = _suffix_renames(((".ffn_latent_in", ".ffn_latent_down"), (".ffn_latent_out", ".ffn_latent_up")))
    return Rewrite(
        role="model",
        arch="nemotron_h_moe",
        keep_tensor=lambda name: not name.startswith("mtp."),
        set_kv=set_kv,
        tensors=_renaming(names),
    )


# --- glm4moelite -> deepseek2 ----------------------------------------------------------------------


def _glm4moelite(h: Header) -> Rewrite:
    """GLM-4.7 Flash (``handle_glm4moelite``): llama.cpp runs it as deepseek2 with MLA's absorbed
    conventions (one KV head; key and value lengths of the compressed KV; per-head lengths as the
    ``_mla`` keys), no expert groups, GLM-4's pre-tokenizer and its end-of-turn tokens named."""
    kv = h.kv
    keys = ("attention.kv_lora_rank", "rope.dimension_count", "attention.key_length")
    rank, rope, head_dim = (kv.get(f"glm4moelite.{key}") for key in keys)
    if not (rank and rope and head_dim):
        raise LayoutRefused(refusal("glm4moelite", "no kv_lora_rank, rope.dimension_count or key_length"))
    set_kv: _KV = {
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
        role="model", arch="deepseek2", keep_tensor=_all, key_prefixes=("glm4moelite.", "deepseek2."), set_kv=set_kv
    )


# Each architecture's marker (as the shim's ``detect_ollama_*``: a llama.cpp-converted file of a
# shared name has none of them) and its map.
_MAPS: dict[str, tuple[Callable[[Header], bool], Callable[[Header], Rewrite]]] = {
    "gptoss": (_always, _gptoss),
    "gemma3n": (lambda h: h.rows("token_embd.weight") != h.rows("per_layer_token_embd.weight"), _gemma3n),
    "gemma4": (
        lambda h: h.any_tensor(*_GEMMA4_TOWERS) or h.kv.get("tokenizer.ggml.model") == "llama",
        _gemma4,
    ),
    "qwen35": (
        lambda h: (
            any(h.has(k) for k in ("vision.block_count", "image_token_id", "ssm.v_head_reordered"))
            or h.has("rope.mrope_interleaved")
            or h.any_tensor("mtp.", "v.")
        ),
        _qwen35,
    ),
    "qwen35moe": (
        lambda h: (
            any(h.has(k) for k in ("vision.block_count", "image_token_id", "ssm.v_head_reordered"))
            or h.has("feed_forward_length")
            or h.has("rope.mrope_interleaved")
            or h.any_tensor("mtp.", "v.")
        ),
        _qwen35,
    ),
    "qwen3next": (lambda h: h.any_tensor_ending(".ssm_dt"), _qwen3next),
    "lfm2": (lambda h: "output_norm.weight" in h.shapes and "token_embd_norm.weight" not in h.shapes, _lfm2),
    "olmo3": (_always, _olmo3),
    "laguna": (
        lambda h: h.has("rope.swa.dimension_count") or h.has("rope.swa.freq_base") or "blk.0.attn_g.weight" in h.shapes,
        _laguna,
    ),
    "nemotron_h_moe": (lambda h: h.any_tensor("blk.0.ffn_latent_in", "blk.1.ffn_latent_in", "mtp."), _nemotron_h_moe),
    "glm4moelite": (_always, _glm4moelite),
}

MAPPED = frozenset(_MAPS)
