"""A checkpoint's vision tower converted to the projector GGUF (``mmproj``) libmtmd reads, beside its
text model, as Ollama's converter splits a model that sees (``MultimodalConverter``).

Gemma 3's: a SigLIP encoder and Gemma's projector (``clip.projector_type`` ``gemma3``), named and
typed as llama.cpp's ``Gemma3VisionModel`` writes them: the patch and position embeddings in F32,
matrices in F16, vectors in F32, the projector's soft-embedding norm with Gemma's +1.
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
    checkpoint: Checkpoint, config: Mapping[str, Any], sources: list[SourceTensor]
) -> tuple[KV, list[Tensor]]:
    """The projector GGUF's keys and tensors for Gemma 3's tower ``sources``; ``ImportRefused`` for
    one llama.cpp could not run."""
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


def _int(config: Mapping[str, Any], key: str) -> int:
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ImportRefused(f"config.json's vision_config has no {key}")
    return value


def _floats(processor: Mapping[str, Any], key: str) -> list[float]:
    """The processor's pixel statistics (Gemma 3's 0.5 where it has none)."""
    values = processor.get(key, [0.5, 0.5, 0.5])
    if not isinstance(values, list) or len(values) != 3 or not all(isinstance(v, int | float) for v in values):
        raise ImportRefused(f"preprocessor_config.json's {key} is not three numbers")
    return [float(v) for v in values]


def _converted(name: str, source: SourceTensor) -> Tensor:
    """In llama.cpp's type for it: the embeddings and vectors F32, matrices F16."""
    if source.dtype not in FLOATS:
        raise ImportRefused(f"tensor {source.name} is {source.dtype}; cllm converts F32, F16 and BF16 weights")
    keep_f32 = name.startswith(("v.patch_embd", "v.position_embd")) or len(source.shape) == 1
    kind, dtype = (_F32, np.dtype(np.float32)) if keep_f32 else (_F16, np.dtype(np.float16))
    data, bf16 = source.data, source.dtype == "BF16"

    def produce() -> np.ndarray:
        values = (data.astype(np.uint32) << 16).view(np.float32) if bf16 else data.astype(np.float32)
        if name == "mm.soft_emb_norm.weight":
            values = values + np.float32(1.0)  # Gemma's norms scale by 1 + weight
        return np.ascontiguousarray(values, dtype=dtype)

    return Tensor(name, kind, source.shape, dtype, produce)
