"""A checkpoint's vision tower converted to the projector GGUF (``mmproj``) libmtmd reads, beside its
text model, as Ollama's converter splits a model that sees (``MultimodalConverter``).

Gemma 3's: a SigLIP encoder and Gemma's projector (``clip.projector_type`` ``gemma3``), named and
typed as llama.cpp's ``Gemma3VisionModel`` writes them: the patch and position embeddings in F32,
matrices in F16, vectors in F32, the projector's soft-embedding norm with Gemma's +1.

Mistral 3's (Mistral Small 3.1 and 3.2): Pixtral, a SwiGLU ViT with RMS norms and 2-D rotary
positions, and a patch merger (``pixtral``), as llama.cpp's ``LlavaVisionModel`` writes it: the
tower's Q and K rows reordered for ggml's rotation as a Llama's are, and the text model's
[IMG_BREAK] embedding row, which ends each row of an image's tokens.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType

from ..framework import KV, Tensor
from .checkpoint import Checkpoint
from .errors import ImportRefused
from .families import permute
from .safetensors import FLOATS, SourceTensor

_F32, _F16 = GGMLQuantizationType.F32, GGMLQuantizationType.F16
_U32, _BOOL = GGUFValueType.UINT32, GGUFValueType.BOOL
_STR, _ARRAY = GGUFValueType.STRING, GGUFValueType.ARRAY

# Where the tower's tensors sit (transformers before 4.52, and since).
_PREFIXES = ("model.vision_tower.vision_model.", "vision_tower.vision_model.")
_PROJECTOR_PREFIXES = ("model.multi_modal_projector.", "multi_modal_projector.")
_GLOBAL = {
    "embeddings.patch_embedding.weight": "v.patch_embd.weight",
    "embeddings.patch_embedding.bias": "v.patch_embd.bias",
    "embeddings.position_embedding.weight": "v.position_embd.weight",
    "post_layernorm.weight": "v.post_ln.weight",
    "post_layernorm.bias": "v.post_ln.bias",
}
_BLOCK = re.compile(r"encoder\.layers\.(\d+)\.(.+)\.(weight|bias)")
_BLOCK_PARTS = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.out_proj": "attn_out",
    "layer_norm1": "ln1",
    "layer_norm2": "ln2",
    "mlp.fc1": "ffn_up",
    "mlp.fc2": "ffn_down",
}
_PROJECTOR = {
    "mm_input_projection_weight": "mm.input_projection.weight",
    "mm_soft_emb_norm.weight": "mm.soft_emb_norm.weight",
}
# The image tokens Gemma 3's projector pools a picture to, unless the processor says otherwise.
_IMAGE_TOKENS = 256
# Pixtral's, in Mistral 3: its tower, its blocks' parts and the projector's.
_PIXTRAL_PREFIXES = ("model.vision_tower.", "vision_tower.")
_PIXTRAL_GLOBAL = {"patch_conv.weight": "v.patch_embd.weight", "ln_pre.weight": "v.pre_ln.weight"}
_PIXTRAL_BLOCK = re.compile(r"transformer\.layers\.(\d+)\.(.+)\.(weight|bias)")
_PIXTRAL_PARTS = {
    "attention.q_proj": "attn_q",
    "attention.k_proj": "attn_k",
    "attention.v_proj": "attn_v",
    "attention.o_proj": "attn_out",
    "attention_norm": "ln1",
    "ffn_norm": "ln2",
    "feed_forward.gate_proj": "ffn_gate",
    "feed_forward.up_proj": "ffn_up",
    "feed_forward.down_proj": "ffn_down",
}
_PIXTRAL_PROJECTOR = {
    "norm.weight": "mm.input_norm.weight",
    "patch_merger.merging_layer.weight": "mm.patch_merger.weight",
    "linear_1.weight": "mm.1.weight",
    "linear_1.bias": "mm.1.bias",
    "linear_2.weight": "mm.2.weight",
    "linear_2.bias": "mm.2.bias",
}
# Pixtral's processor's pixel statistics (CLIP's), where preprocessor_config.json has none.
_PIXTRAL_MEAN_STD = ([0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711])
ARCHITECTURES = ("Gemma3ForConditionalGeneration", "Mistral3ForConditionalGeneration")


def gguf_name(name: str) -> str | None:
    """The projector's name for a tower tensor; None for one it does not read (SigLIP's pooling
    head, which Gemma 3 does not use)."""
    for prefix in _PROJECTOR_PREFIXES:
        if name.startswith(prefix):
            part = name[len(prefix) :]
            if part in _PROJECTOR:
                return _PROJECTOR[part]
            raise ImportRefused(f"tensor {name} is not one cllm's converter knows for Gemma 3's projector")
    rest = next((name[len(p) :] for p in _PREFIXES if name.startswith(p)), None)
    if rest is None or rest.startswith("head."):
        return None
    if rest in _GLOBAL:
        return _GLOBAL[rest]
    m = _BLOCK.fullmatch(rest)
    if m and m[2] in _BLOCK_PARTS:
        return f"v.blk.{m[1]}.{_BLOCK_PARTS[m[2]]}.{m[3]}"
    raise ImportRefused(f"tensor {name} is not one cllm's converter knows for Gemma 3's vision tower")


def projector(
    checkpoint: Checkpoint,
    config: Mapping[str, Any],
    sources: list[SourceTensor],
    embedding: SourceTensor | None,
    tokens: list[str],
) -> tuple[KV, list[Tensor]]:
    """The projector GGUF's keys and tensors for the tower ``sources`` of the checkpoint's
    architecture (``ARCHITECTURES``), ``embedding`` the text model's token embedding and ``tokens``
    its vocabulary (Pixtral's [IMG_BREAK] row); ``ImportRefused`` for one llama.cpp could not run."""
    if config.get("architectures", [None])[0] == "Mistral3ForConditionalGeneration":
        return _pixtral(checkpoint, config, sources, embedding, tokens)
    return _gemma3(checkpoint, config, sources)


def _gemma3(checkpoint: Checkpoint, config: Mapping[str, Any], sources: list[SourceTensor]) -> tuple[KV, list[Tensor]]:
    vision = config.get("vision_config")
    text = config.get("text_config")
    if not isinstance(vision, dict) or not isinstance(text, dict):
        raise ImportRefused("config.json has no vision_config and text_config for the vision tower")
    tensors: dict[str, Tensor] = {}
    for source in sources:
        name = gguf_name(source.name)
        if name is not None:
            tensors[name] = _converted(name, source)
    n_layer = _int(vision, "num_hidden_layers")
    expected = ["v.patch_embd.weight", "v.position_embd.weight", "mm.input_projection.weight"]
    expected += [f"v.blk.{i}.attn_q.weight" for i in range(n_layer)]
    missing = [n for n in expected if n not in tensors]
    if missing:
        raise ImportRefused(f"the vision tower has no {missing[0]}: is a shard missing?")
    processor = checkpoint.json("preprocessor_config.json") or {}
    image_size, patch_size = _int(vision, "image_size"), _int(vision, "patch_size")
    tokens = processor.get("image_seq_length") or config.get("mm_tokens_per_image") or _IMAGE_TOKENS
    per_side = round(float(tokens) ** 0.5) if isinstance(tokens, int) and tokens > 0 else 0
    if per_side <= 0 or per_side * per_side != tokens or (image_size // patch_size) % per_side:
        raise ImportRefused(f"an image of {tokens} tokens is not a square pooling of the tower's patches")
    kv: KV = {
        "general.type": ("mmproj", _STR),
        "clip.has_vision_encoder": (True, _BOOL),
        "clip.projector_type": ("gemma3", _STR),
        "clip.use_gelu": (True, _BOOL),
        "clip.vision.image_size": (image_size, _U32),
        "clip.vision.patch_size": (patch_size, _U32),
        "clip.vision.embedding_length": (_int(vision, "hidden_size"), _U32),
        "clip.vision.feed_forward_length": (_int(vision, "intermediate_size"), _U32),
        "clip.vision.block_count": (n_layer, _U32),
        "clip.vision.attention.head_count": (_int(vision, "num_attention_heads"), _U32),
        "clip.vision.attention.layer_norm_epsilon": (
            float(vision.get("layer_norm_eps") or 1e-6),
            GGUFValueType.FLOAT32,
        ),
        "clip.vision.projection_dim": (_int(text, "hidden_size"), _U32),
        "clip.vision.image_mean": (_floats(processor, "image_mean"), _ARRAY),
        "clip.vision.image_std": (_floats(processor, "image_std"), _ARRAY),
    }
    scale = (image_size // patch_size) // per_side
    if scale != 4:  # llama.cpp's default; a test model's other pooling is stated
        kv["clip.vision.projector.scale_factor"] = (scale, _U32)
    return kv, list(tensors.values())


def _pixtral(
    checkpoint: Checkpoint,
    config: Mapping[str, Any],
    sources: list[SourceTensor],
    embedding: SourceTensor | None,
    tokens: list[str],
) -> tuple[KV, list[Tensor]]:
    vision, text = config.get("vision_config"), config.get("text_config")
    if not isinstance(vision, dict) or not isinstance(text, dict):
        raise ImportRefused("config.json has no vision_config and text_config for the vision tower")
    heads = _int(vision, "num_attention_heads")
    tensors: dict[str, Tensor] = {}
    for source in sources:
        name = _pixtral_name(source.name)
        if name is None:
            continue
        reorder = None
        if re.fullmatch(r"v\.blk\.\d+\.attn_[qk]\.(weight|bias)", name):
            if source.shape[0] % (2 * heads):
                raise ImportRefused(f"{name} has {source.shape[0]} rows, which {heads} heads cannot share in pairs")
            reorder = heads
        tensors[name] = _converted(name, source, reorder)
    if "[IMG_BREAK]" not in tokens or embedding is None:
        raise ImportRefused("Mistral 3's vision needs the [IMG_BREAK] token and the text model's embedding")
    row = embedding.data[tokens.index("[IMG_BREAK]")]
    tensors["v.token_embd.img_break"] = _converted(
        "v.token_embd.img_break", SourceTensor(embedding.name, embedding.dtype, row)
    )
    n_layer = _int(vision, "num_hidden_layers")
    expected = ["v.patch_embd.weight", "mm.patch_merger.weight", "mm.1.weight", "mm.2.weight"]
    expected += [f"v.blk.{i}.attn_q.weight" for i in range(n_layer)]
    missing = [n for n in expected if n not in tensors]
    if missing:
        raise ImportRefused(f"the vision tower has no {missing[0]}: is a shard missing?")
    activation = vision.get("hidden_act", "gelu")
    if activation not in ("silu", "gelu"):
        raise ImportRefused(f"config.json's vision_config has activation {activation!r}; Pixtral's is silu or gelu")
    processor = checkpoint.json("preprocessor_config.json") or {}
    kv: KV = {
        "general.type": ("mmproj", _STR),
        "clip.has_vision_encoder": (True, _BOOL),
        "clip.projector_type": ("pixtral", _STR),
        f"clip.use_{activation}": (True, _BOOL),
        "clip.vision.image_size": (_int(vision, "image_size"), _U32),
        "clip.vision.patch_size": (_int(vision, "patch_size"), _U32),
        "clip.vision.embedding_length": (_int(vision, "hidden_size"), _U32),
        "clip.vision.feed_forward_length": (_int(vision, "intermediate_size"), _U32),
        "clip.vision.block_count": (n_layer, _U32),
        "clip.vision.attention.head_count": (heads, _U32),
        "clip.vision.attention.layer_norm_epsilon": (
            float(vision.get("layer_norm_eps") or 1e-5),
            GGUFValueType.FLOAT32,
        ),
        "clip.vision.projection_dim": (_int(text, "hidden_size"), _U32),
        "clip.vision.image_mean": (_floats(processor, "image_mean", _PIXTRAL_MEAN_STD[0]), _ARRAY),
        "clip.vision.image_std": (_floats(processor, "image_std", _PIXTRAL_MEAN_STD[1]), _ARRAY),
        "clip.vision.spatial_merge_size": (
            _int({**config, "spatial_merge_size": config.get("spatial_merge_size", 2)}, "spatial_merge_size"),
            _U32,
        ),
    }
    return kv, list(tensors.values())


def _pixtral_name(name: str) -> str | None:
    """The projector's name for a tensor of Mistral 3's tower or projector; None for another's."""
    for prefix in ("model.multi_modal_projector.", "multi_modal_projector."):
        if name.startswith(prefix):
            part = name[len(prefix) :]
            if part in _PIXTRAL_PROJECTOR:
                return _PIXTRAL_PROJECTOR[part]
            raise ImportRefused(f"tensor {name} is not one cllm's converter knows for Mistral 3's projector")
    rest = next((name[len(p) :] for p in _PIXTRAL_PREFIXES if name.startswith(p)), None)
    if rest is None:
        return None
    if rest in _PIXTRAL_GLOBAL:
        return _PIXTRAL_GLOBAL[rest]
    m = _PIXTRAL_BLOCK.fullmatch(rest)
    if m and m[2] in _PIXTRAL_PARTS:
        return f"v.blk.{m[1]}.{_PIXTRAL_PARTS[m[2]]}.{m[3]}"
    raise ImportRefused(f"tensor {name} is not one cllm's converter knows for Pixtral's vision tower")


def _int(config: Mapping[str, Any], key: str) -> int:
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ImportRefused(f"config.json's vision_config has no {key}")
    return value


def _floats(processor: Mapping[str, Any], key: str, default: list[float] | None = None) -> list[float]:
    """The processor's pixel statistics (Gemma 3's 0.5, or ``default``, where it has none)."""
    values = processor.get(key, default or [0.5, 0.5, 0.5])
    if not isinstance(values, list) or len(values) != 3 or not all(isinstance(v, int | float) for v in values):
        raise ImportRefused(f"preprocessor_config.json's {key} is not three numbers")
    return [float(v) for v in values]


def _converted(name: str, source: SourceTensor, heads: int | None = None) -> Tensor:
    """In llama.cpp's type for it: the embeddings and vectors F32, matrices F16; with ``heads``,
    its rows reordered from halves to neighbouring pairs per head (``families.permute``)."""
    if source.dtype not in FLOATS:
        raise ImportRefused(f"tensor {source.name} is {source.dtype}; cllm converts F32, F16 and BF16 weights")
    keep_f32 = name.startswith(("v.patch_embd", "v.position_embd", "v.token_embd")) or len(source.shape) == 1
    kind, dtype = (_F32, np.dtype(np.float32)) if keep_f32 else (_F16, np.dtype(np.float16))
    data, bf16 = source.data, source.dtype == "BF16"

    def produce() -> np.ndarray:
        values = (data.astype(np.uint32) << 16).view(np.float32) if bf16 else data.astype(np.float32)
        if heads is not None:
            values = permute(values, heads)
        if name == "mm.soft_emb_norm.weight":
            values = values + np.float32(1.0)  # Gemma's norms scale by 1 + weight
        return np.ascontiguousarray(values, dtype=dtype)

    return Tensor(name, kind, source.shape, dtype, produce)
