"""Hugging Face checkpoints (``config.json``, safetensors, ``tokenizer.json``) converted to a GGUF
llama.cpp runs, as ``ollama create`` does for a model folder (Ollama's ``convert/``).

Matrices are written as F16, or BF16 where the checkpoint holds BF16, vectors as F32: Ollama's
choice, which ``create --quantize`` then quantizes. The tokenizer is a byte-level BPE
``tokenizer.json`` or a SentencePiece ``tokenizer.model``. The families are ``families.ARCHITECTURES``;
a folder cllm cannot convert raises ``ImportRefused`` with what to do instead.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType, LlamaFileType

from ..framework import KV, Tensor, write
from . import audio, mxfp4, safetensors, vision
from .checkpoint import Checkpoint
from .errors import ImportRefused
from .families import AUDIO_LEFT_OUT, TOWER_LEFT_OUT, Family, Order
from .lora import convert_lora
from .safetensors import SourceTensor
from .sentence import dense_head, pooling_kv
from .tokenizer import tokenizer_kv

__all__ = ["Checkpoint", "Converted", "ImportRefused", "convert", "convert_lora", "is_checkpoint"]

log = logging.getLogger(__name__)
_F32, _F16, _BF16 = GGMLQuantizationType.F32, GGMLQuantizationType.F16, GGMLQuantizationType.BF16
_MXFP4 = GGMLQuantizationType.MXFP4
_VOCAB_ROWS = ("token_embd.weight", "output.weight", "per_layer_token_embd.weight")
# Matrices kept in F32, as llama.cpp's converter keeps them: a router's weights (and a shared
# expert's gate, a vector once its unit axis goes), BERT's position
# and token-type embeddings, which llama.cpp adds to F32 rows (its CPU adds no F16 to F32), as it
# adds gpt-oss's experts' biases, a delta net's and LFM2's convolutions, and Mamba-2's D (a column
# per head); Gemma 3n's AltUp coefficients, which multiply the router's tanh unrounded. Norms are F32 whatever
# their shape (Cohere's per-head ones are matrices).
_F32_MATRICES = (
    "ffn_gate_inp.weight",
    "ffn_gate_inp_shexp.weight",
    "position_embd.weight",
    "token_types.weight",
    "ssm_conv1d.weight",
    "shortconv.conv.weight",
    "_exps.bias",
    ".ssm_d",
    "altup_correct_coef.weight",
    "altup_predict_coef.weight",
)


def _require_shards(checkpoint: Checkpoint, read: set[str]) -> None:
    """Every tensor the shards' index names was read (a folder uploaded without one of its shards);
    an index that is stale or unreadable, with every tensor there all the same, is no matter."""
    try:
        index = checkpoint.json("model.safetensors.index.json")
    except ImportRefused:
        return
    weight_map = index.get("weight_map") if index is not None else None
    if isinstance(weight_map, dict):
        missing = sorted({str(f) for name, f in weight_map.items() if name not in read})
        if missing:
            raise ImportRefused(
                f"the checkpoint lacks {', '.join(missing)}, which its index names: is a shard missing?"
            )


def is_checkpoint(names: list[str]) -> bool:
    """Whether files of these names are a safetensors checkpoint (Ollama's ``detectModelTypeFromFiles``)."""
    return any(name.endswith(".safetensors") for name in names)


class Converted(NamedTuple):
    """What a conversion wrote: the notes for the user (what was left out), and whether it wrote
    the projector of a model that sees."""

    notes: list[str]
    sees: bool = False


def convert(checkpoint: Checkpoint, dst: Path, projector: Path | None = None) -> Converted:
    """Write ``dst``, the GGUF of ``checkpoint``, and ``projector``, its vision tower's (``mmproj``)
    where it has one cllm converts (Gemma 3's, Pixtral's, Qwen-VL's; one it cannot is left out,
    and the notes say why).
    ``ImportRefused`` for what cllm does not convert (the caller removes partial files)."""
    config = checkpoint.json("config.json")
    if config is None:
        raise ImportRefused("the model folder has no config.json")
    try:  # what config.json cannot say is refused before any tensor is read
        family = Family.of(config)
        hyperparameters = family.kv()
        factors = family.rope_factors()
    except ImportRefused:
        raise
    except (TypeError, ValueError) as e:  # a setting of another type than its family's (a string for a number)
        log.warning("config.json not understood", exc_info=True)
        raise ImportRefused(f"config.json has a setting of the wrong type: {e}") from e
    sources = [t for name, path in checkpoint.weights() for t in safetensors.read(path, name)]
    _require_shards(checkpoint, {t.name for t in sources})
    tensors = _tensors(family, sources)
    if family.layout.dense_head:  # EmbeddingGemma's projections after pooling, in modules of their own
        head, weights = dense_head(checkpoint, family.arch, family.n_embd)
        hyperparameters |= head
        tensors += [_converted(name, weight, None, None) for name, weight in weights.items()]
    by_name = {t.name: t for t in tensors}
    if "token_embd.weight" not in by_name:
        raise ImportRefused("the checkpoint has no token embedding (model.embed_tokens.weight)")
    if family.layout.own_output and "output.weight" not in by_name:  # tied: the embedding, again
        if config.get("tie_word_embeddings") is False:
            raise ImportRefused(
                "the checkpoint has no lm_head.weight, and config.json does not tie it to the embedding"
            )
        tensors.append(by_name["token_embd.weight"].renamed("output.weight"))
    layers = {int(name.split(".")[1]) for name in by_name if name.startswith("blk.")}
    missing = next((i for i in range(family.n_layer) if i not in layers), None)
    if missing is not None:
        raise ImportRefused(f"the checkpoint has no model.layers.{missing}: is a shard missing?")
    for name, (shape, value) in family.stand_ins(set(by_name)).items():  # loaded, never read
        like = by_name.get(name.replace(name.split(".")[2], "attn_q", 1))  # the layer's Q: F16 or BF16
        matrices_kind = _F16 if like is None else like.kind
        tensors.append(_filled(name, _F32 if len(shape) == 1 else matrices_kind, shape, value))
    rows = by_name["token_embd.weight"].shape[0]
    layout = family.layout
    vocabulary = tokenizer_kv(
        checkpoint,
        config,
        rows,
        pad=layout.pad_vocabulary,
        kind=layout.tokenizer,
        pre=layout.pre_tokenizer,
        turn_ends=layout.turn_ends,
    )
    if family.layout.space_prefix is not None:
        vocabulary["tokenizer.ggml.add_space_prefix"] = (family.layout.space_prefix, GGUFValueType.BOOL)
    n_vocab = len(vocabulary["tokenizer.ggml.tokens"][0])
    tensors = [
        _first_row_padded(t, n_vocab) if t.name in layout.first_row_pads and t.shape[0] < n_vocab else t
        for t in tensors
    ]
    short = [t.name for t in tensors if t.name in _VOCAB_ROWS and t.shape[0] < n_vocab]
    if short:  # llama.cpp would refuse to load it (Gemma 4's per-layer embeddings, an output)
        raise ImportRefused(f"{short[0]} has fewer rows than the vocabulary's {n_vocab} tokens")
    if n_vocab < rows:  # rows past the vocabulary, cut (Gemma's, as llama.cpp's converter does)
        tensors = [t.take(slice(0, n_vocab), t.name) if t.name in _VOCAB_ROWS else t for t in tensors]
    matrices = [t.kind for t in tensors if len(t.shape) > 1 and t.kind != _F32]  # routers stay F32
    file_type = (
        LlamaFileType.MOSTLY_MXFP4_MOE
        if _MXFP4 in matrices
        else LlamaFileType.MOSTLY_BF16
        if matrices and all(k == _BF16 for k in matrices)
        else LlamaFileType.MOSTLY_F16
    )
    kv: KV = {  # the architecture is the writer's own first key
        "general.name": (_loadable_name(checkpoint.name, vocabulary["tokenizer.ggml.tokens"][0]), GGUFValueType.STRING),
        "general.file_type": (int(file_type), GGUFValueType.UINT32),
        "general.quantization_version": (2, GGUFValueType.UINT32),
        **hyperparameters,
        **pooling_kv(checkpoint, family.arch),
        **vocabulary,
    }
    tensors[:0] = [Tensor.of(name, _F32, values) for name, values in factors.items()]
    tower = [t for t in sources if family.in_tower(t.name)]
    seen, why = None, ""
    kind = family.layout.vision
    if tower and projector is not None and kind is not None:
        embedding = next((t for t in sources if family.is_token_embedding(t.name)), None)
        try:
            seen = vision.projector(kind, checkpoint, config, tower, embedding, vocabulary["tokenizer.ggml.tokens"][0])
        except ImportRefused as exc:  # the text model is still worth having; the stream says why
            why = f" ({exc})"
    notes = []
    heard = [t for t in tower if family.hears(t.name)]
    if seen is not None and heard:  # an audio tower, beside the vision tower in one projector
        try:
            clip_kv, clip_tensors = seen
            audio_kv, audio_tensors = _audio(family.layout.audio, config, heard)
            if "clip.projector_type" in clip_kv:  # each side's type under its modality, as llama.cpp's
                clip_kv["clip.vision.projector_type"] = clip_kv.pop("clip.projector_type")
            seen = clip_kv | audio_kv, clip_tensors + audio_tensors
        except ImportRefused as exc:
            notes.append(f"{AUDIO_LEFT_OUT} ({exc})")
    write(dst, family.arch, kv, tensors)
    if seen is not None and projector is not None:
        write(projector, "clip", *seen)
        return Converted(notes, sees=True)
    return Converted([TOWER_LEFT_OUT + why] if tower else [])


def _audio(kind: str | None, config: dict[str, Any], heard: list[SourceTensor]) -> tuple[KV, list[Tensor]]:
    """The projector's audio side of ``kind`` (the family's ``Layout.audio``) for the tower ``heard``."""
    text = config.get("text_config") or config.get("llm_config") or {}
    if kind == "parakeet":
        key = "sound_config" if "sound_config" in config else "audio_config"  # the release's, transformers'
        return audio.parakeet(_settings(config, key), text, heard, part=key)
    if kind == "gemma4a":
        return audio.gemma4_audio(_settings(config, "audio_config"), text, heard)
    raise ImportRefused("cllm converts no audio tower of this model")


def _settings(config: dict[str, Any], key: str) -> dict[str, Any]:
    """config.json's settings of one part (``audio_config``), or ``ImportRefused`` without them."""
    part = config.get(key)
    if not isinstance(part, dict):
        raise ImportRefused(f"config.json has no {key} for the model's tower")
    return part


# llama.cpp gives a model named like Phi-3 its special tokens' attributes, and fails to load it
# when one of these is missing from its vocabulary (llama-vocab.cpp, "phi-3"/"phi3" in general.name).
_PHI3_NAMES = ("phi-3", "phi3")
_PHI3_TOKENS = ("</s>", "<unk>", "<s>", "<|endoftext|>")


def _loadable_name(name: str, tokens: list[str]) -> str:
    """The model's name, unless it would make llama.cpp look for Phi-3's tokens the vocabulary lacks
    (a model created as "phi3-tuned" from another family's folder): then none."""
    if any(n in name.lower() for n in _PHI3_NAMES) and not set(_PHI3_TOKENS) <= set(tokens):
        return ""
    return name


def _tensors(family: Family, sources: list[safetensors.SourceTensor]) -> list[Tensor]:
    """Each checkpoint tensor under its llama.cpp name, in its GGUF type (Ollama's ``Kind``), its
    data produced when written; a layer's experts stacked into one tensor per projection."""
    out: dict[str, Tensor] = {}
    experts: dict[str, dict[int, safetensors.SourceTensor]] = {}
    stacks: dict[str, tuple[dict[int, safetensors.SourceTensor], int]] = {}
    interleaved: dict[tuple[int, str], dict[str, safetensors.SourceTensor]] = {}
    for source in sources:
        if family.is_prediction_layer(source.name):
            continue
        packed = family.interleaved_experts(source.name)
        if packed is not None:
            layer, projection, what = packed
            if what in interleaved.setdefault((layer, projection), {}):
                raise ImportRefused(f"tensor {source.name} is in the checkpoint twice")
            interleaved[layer, projection][what] = source
            continue
        stack = family.stacked(source.name)
        if stack is not None:
            stacked, index, count = stack
            stacks.setdefault(stacked, ({}, count))[0][index] = source
            continue
        expert = family.expert(source.name)
        if expert is not None:
            layer, index, projection = expert
            experts.setdefault(f"blk.{layer}.ffn_{projection}_exps.weight", {})[index] = source
            continue
        fused = family.fused_experts(source.name, source.shape)
        if fused is not None:
            for stacked, part in _fused_experts(source, *fused):
                if stacked in out:
                    raise ImportRefused(f"tensor {source.name} is in the checkpoint twice")
                out[stacked] = _converted(stacked, part, None, None)
            continue
        name = family.gguf_name(source.name)
        if name is None:
            continue
        family.refuse_misread(name, source.shape)
        for stored, part in family.split(name, family.view(name, source)):
            if stored in out:
                raise ImportRefused(f"tensor {source.name} is in the checkpoint twice")
            out[stored] = _converted(stored, part, family.reorder(stored, part.shape), family.values(stored))
    for name, parts in experts.items():
        out[name] = _stacked(name, parts, family.n_expert)
    for name, (parts, count) in stacks.items():
        out[name] = _stacked(name, parts, count, "its {} matrices")
    for (layer, projection), pack in interleaved.items():
        out |= {t.name: t for t in _interleaved_experts(family, layer, projection, pack)}
    return list(out.values())


def _fused_experts(
    source: safetensors.SourceTensor, layer: int, kind: str, transposed: bool
) -> list[tuple[str, safetensors.SourceTensor]]:
    """A layer's experts kept in one tensor (``Family.fused_experts``), as llama.cpp's ``(experts,
    out, in)``: ``up`` and ``down`` whole, ``gate_up`` (the gate's outputs, then the up projection's)
    in halves."""
    data = source.data.swapaxes(1, 2) if transposed else source.data
    if kind in ("up", "down"):  # one projection's (Nemotron-H's experts have no gate)
        return [(f"blk.{layer}.ffn_{kind}_exps.weight", source.with_data(data))]
    half = data.shape[1] // 2
    return [
        (f"blk.{layer}.ffn_{part}_exps.weight", source.with_data(rows))
        for part, rows in zip(("gate", "up"), (data[:, :half], data[:, half:]), strict=True)
    ]


def _interleaved_experts(
    family: Family, layer: int, projection: str, parts: dict[str, safetensors.SourceTensor]
) -> list[Tensor]:
    """gpt-oss's experts of one layer and projection (``Family.interleaved_experts``) as llama.cpp's
    ``(experts, out, in)``: MXFP4 blocks and scales repacked as ggml's (``mxfp4``), or dequantized
    ``(experts, in, out)`` weights transposed; ``gate_up``'s outputs, and its bias, split into the
    gate's (even) and up's (odd)."""
    n_expert, (outputs, inputs) = family.n_expert, family.expert_projection(projection)
    stem = f"model.layers.{layer}.mlp.experts.{projection}_proj"
    expected = {
        "weight": (n_expert, inputs, outputs),
        "blocks": (n_expert, outputs, inputs // mxfp4.BLOCK, 16),
        "scales": (n_expert, outputs, inputs // mxfp4.BLOCK),
        "bias": (n_expert, outputs),
    }
    for what, source in parts.items():
        integral = what in ("blocks", "scales")
        if source.shape != expected[what] or (source.dtype == "U8") != integral:
            raise ImportRefused(
                f"tensor {source.name} of {source.dtype}{list(source.shape)} is not {n_expert} experts' "
                f"{projection} {what} ({'U8' if integral else 'floats'}{list(expected[what])})"
            )
    quantized = "blocks" in parts or "scales" in parts
    if quantized and ("blocks" not in parts or "scales" not in parts or inputs % mxfp4.BLOCK):
        raise ImportRefused(f"{stem}: MXFP4 needs its _blocks and _scales, and inputs a multiple of {mxfp4.BLOCK}")
    if not quantized and "weight" not in parts:
        raise ImportRefused(f"the checkpoint has no {stem}: is a shard missing?")
    picks = {"gate": slice(0, None, 2), "up": slice(1, None, 2)} if projection == "gate_up" else {"down": slice(None)}
    tensors = []
    for part, rows in picks.items():
        name = f"blk.{layer}.ffn_{part}_exps"
        if "bias" in parts:
            bias = parts["bias"]
            tensors.append(_converted(f"{name}.bias", bias.with_data(bias.data[:, rows]), None, None))
        if quantized:
            blocks, scales = parts["blocks"].data[:, rows], parts["scales"].data[:, rows]
            shape = (n_expert, blocks.shape[1], inputs // mxfp4.BLOCK * mxfp4.BYTES)
            produce = functools.partial(mxfp4.to_ggml, blocks, scales)
            tensors.append(Tensor(f"{name}.weight", _MXFP4, shape, np.dtype(np.uint8), produce))
        else:
            weight = parts["weight"]
            transposed = weight.with_data(weight.data.swapaxes(1, 2)[:, rows])
            tensors.append(_converted(f"{name}.weight", transposed, None, None))
    return tensors


def _stacked(
    name: str, parts: dict[int, safetensors.SourceTensor], n_expert: int, whose: str = "the layer's {} experts"
) -> Tensor:
    """Matrices llama.cpp keeps in one tensor, stacked: one projection of every expert of a layer
    (``ffn_*_exps``), or Gemma 3n's altup projections."""
    if sorted(parts) != list(range(n_expert)):
        raise ImportRefused(f"{name}: the checkpoint has {len(parts)} of {whose.format(n_expert)}")
    ordered = [parts[i] for i in range(n_expert)]
    shapes, dtypes = {p.shape for p in ordered}, {p.dtype for p in ordered}
    if len(shapes) != 1 or len(dtypes) != 1 or len(ordered[0].shape) != 2:
        raise ImportRefused(f"{name}: its matrices differ in shape or type")
    members = [_converted(name, p, None, None) for p in ordered]
    first = members[0]
    shape = (n_expert, *first.shape)
    return Tensor(name, first.kind, shape, first.dtype, lambda: np.stack([m.data() for m in members]))


def _filled(name: str, kind: GGMLQuantizationType, shape: tuple[int, ...], value: float) -> Tensor:
    """A tensor of ``shape`` every value of which is ``value``, in ``kind`` (F32, F16 or BF16)."""
    if kind == _BF16:  # BF16 is F32's upper half
        bits = np.array(value, dtype=np.float32).view(np.uint32) >> 16
        return Tensor(name, kind, shape, np.dtype(np.uint16), lambda: np.full(shape, bits, dtype=np.uint16))
    dtype = np.dtype(np.float16 if kind == _F16 else np.float32)
    return Tensor(name, kind, shape, dtype, lambda: np.full(shape, value, dtype=dtype))


def _first_row_padded(table: Tensor, rows: int) -> Tensor:
    """``table`` with copies of its first row after its own, to ``rows`` rows (``_Layout.first_row_pads``)."""
    source = table.data

    def produce() -> np.ndarray:
        data = source()
        return np.concatenate([data, np.repeat(data[:1], rows - data.shape[0], axis=0)])

    return Tensor(table.name, table.kind, (rows, *table.shape[1:]), table.dtype, produce)


def _converted(
    name: str,
    source: safetensors.SourceTensor,
    order: Order | None,
    values: Callable[[np.ndarray], np.ndarray] | None,
) -> Tensor:
    """The tensor in Ollama's type for it (vectors F32, matrices F16, or BF16 kept), its rows or
    columns reordered and its values changed as its family says (``Family.values``: then in F32),
    when it is written."""
    source.require_float()
    data = source.data
    dtype: np.dtype[Any]
    if len(source.shape) == 1 or name.endswith(_F32_MATRICES) or values is not None or name.endswith("norm.weight"):
        kind, dtype = _F32, np.dtype(np.float32)
    elif source.dtype == "BF16":
        kind, dtype = _BF16, np.dtype(np.uint16)
    else:
        kind, dtype = _F16, np.dtype(np.float16)

    def produce() -> np.ndarray:
        arranged = order.apply(data) if order is not None else data  # whole rows or columns: any dtype
        if kind != _F32:
            return np.ascontiguousarray(arranged, dtype=dtype)
        floats = safetensors.to_f32(arranged, source.dtype)
        return np.ascontiguousarray(values(floats), dtype=np.float32) if values is not None else floats

    return Tensor(name, kind, source.shape, dtype, produce)
