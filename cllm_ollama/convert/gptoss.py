"""gpt-oss as Ollama's converter wrote it (``gptoss``), as llama.cpp's ``gpt-oss`` (``handle_gptoss``
in Ollama's shim): tensor names fixed and the fused experts of older files split."""

from __future__ import annotations

from gguf import GGUFValueType

from .framework import KV, Header, LayoutRefused, Rewrite, Tensor, keep_all, refusal, suffix_renames

_U32 = GGUFValueType.UINT32
_STR = GGUFValueType.STRING

_GPTOSS_NAMES = suffix_renames(((".attn_out", ".attn_output"), (".ffn_norm", ".post_attention_norm")))


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


def gptoss(h: Header) -> Rewrite:
    """gpt-oss (``handle_gptoss``): architecture ``gpt-oss``, the expert width and YaRN stated, the
    GPT-4o pre-tokenizer (without it Harmony's headers come out malformed), tensor names fixed."""
    if any(kind == "4" for kind in h.types.values()):
        # Ollama's first converter (August 2025) stored MXFP4 as ggml type 4 in its own nibble order.
        raise LayoutRefused(refusal("gptoss", "its MXFP4 experts are in the Go engine's first layout (ggml type 4)"))
    set_kv: KV = {"tokenizer.ggml.pre": ("gpt-4o", _STR)}
    if not h.has("expert_feed_forward_length"):
        gate = h.first_rows("ffn_gate_exps.weight")
        fused = h.first_rows("ffn_gate_up_exps.weight") or h.first_rows("ffn_gate_up_exps")
        n_ff = gate or (fused // 2 if fused else h.kv.get("gptoss.feed_forward_length"))
        if not n_ff:
            raise LayoutRefused(refusal("gptoss", "no expert width in its keys or its expert tensors"))
        set_kv["gpt-oss.expert_feed_forward_length"] = (int(n_ff), _U32)
    if not h.has("rope.scaling.type"):
        set_kv["gpt-oss.rope.scaling.type"] = ("yarn", _STR)
    return Rewrite(
        role="model",
        arch="gpt-oss",
        keep_tensor=keep_all,
        key_prefixes=("gptoss.", "gpt-oss."),
        set_kv=set_kv,
        tensors=_gptoss_tensors,
    )
