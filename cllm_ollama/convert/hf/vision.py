"""A checkpoint's vision tower converted to the projector GGUF (``mmproj``) libmtmd reads, beside its
text model, as Ollama's converter splits a model that sees (``MultimodalConverter``).

Gemma 3's: a SigLIP encoder and Gemma's projector (``clip.projector_type`` ``gemma3``), named and
typed as llama.cpp's ``Gemma3VisionModel`` writes them: the patch and position embeddings in F32,
matrices in F16, vectors in F32, the projector's soft-embedding norm with Gemma's +1.

Mistral 3's (Mistral Small 3.1 and 3.2): Pixtral, a SwiGLU ViT with RMS norms and 2-D rotary
positions, and a patch merger (``pixtral``), as llama.cpp's ``LlavaVisionModel`` writes it: the
tower's Q and K rows reordered for ggml's rotation as a Llama's are, and the text model's
[IMG_BREAK] embedding row, which ends each row of an image's tokens.

Qwen2-VL's, Qwen2.5-VL's and Qwen3-VL's: a ViT over pairs of video frames (its Conv3D kernel split
into a kernel per frame, a picture being two equal frames), 2-D rotary positions, and a merger of
each 2x2 patches into one token (``qwen2vl_merger``, ``qwen2.5vl_merger``, ``qwen3vl_merger``), as
llama.cpp's ``Qwen2VLVisionModel`` and ``Qwen3VLVisionModel`` write them: Qwen 2's fused Q/K/V
split in three, Qwen 2.5's window attention as the pattern of its full-attention blocks, Qwen 3's
learned position table and its deepstack mergers, whose features of earlier blocks are added to
the text model's first layers.

GLM-4.1V's and GLM-OCR's: a ViT over pairs of frames as Qwen-VL's (its kernel split per frame), RMS
norms (GLM-OCR's Q and K normed per head too), a SwiGLU FFN, 2-D rotary positions (GLM-4.1V's
beside a learned table libmtmd resizes to the picture), then a 2x2 merging convolution, a
projection with its LayerNorm and GELU, and a SwiGLU out to the text model's width (``glm4v``), as
llama.cpp's ``Glm4VVisionModel`` writes it (Q/K/V kept fused; the patch kernels, the position
table and the merging convolution in F32).

Nemotron Nano VL v2's and Nemotron 3 Nano Omni's: RADIO, a ViT after class and register tokens
with a learned position table, then each 2x2 patches through an RMS-normed ReLU² MLP
(``nemotron_v2_vl``), as llama.cpp's ``NemotronNanoV2VLModel`` writes it: the linear patch embedding
as a convolution's kernel, the table resized to the fixed picture's grid, Q/K/V kept fused.

Llama 4's: a ViT over unfolded patches with a class token, a learned position table and 2-D
rotation, a pixel shuffle, an MLP and a projection (``llama4``), renamed as llama.cpp's
``Llama4VisionModel`` renames it, nothing reordered.

LFM2-VL's: SigLIP2 with its patches through a linear (as a convolution's kernel, as Gemma 4's) and
a position table libmtmd resizes to each picture, and a projector over each 2x2 patches (``lfm2``).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType

from ..framework import CLIP_MEAN, CLIP_STD, KV, Tensor
from ..nemotron import positions_resized
from .checkpoint import Checkpoint
from .errors import ImportRefused
from .families import pairs_order
from .safetensors import SourceTensor, to_f32

_F32, _F16 = GGMLQuantizationType.F32, GGMLQuantizationType.F16
# Qwen-VL's merger layers (Qwen 2 and 2.5's, Qwen 3's) and llama.cpp's ``mm.N``.
_MERGER_FCS = (("mlp.0", 0), ("mlp.2", 2), ("linear_fc1", 0), ("linear_fc2", 2))
_U32, _BOOL = GGUFValueType.UINT32, GGUFValueType.BOOL
_STR, _ARRAY = GGUFValueType.STRING, GGUFValueType.ARRAY


@dataclass(frozen=True)
class _Tower:
    """Where a family's tower and projector keep their tensors (transformers before 4.52 and
    since), and llama.cpp's names for them."""

    who: str  # in messages: "Gemma 3's", "Pixtral's"
    prefixes: tuple[str, ...]  # the tower's
    globals: Mapping[str, str]  # outside its blocks
    block: re.Pattern[str]
    parts: Mapping[str, str]  # a block's
    projector: Mapping[str, str]
    required: tuple[str, ...]  # beside each block's attn_q: what a whole tower has
    skipped: str | None = None  # what of the tower llama.cpp does not read
    projector_prefixes: tuple[str, ...] = ("model.multi_modal_projector.", "multi_modal_projector.")

    def gguf_name(self, name: str) -> str | None:
        """The projector's name for a tower tensor; None for one llama.cpp does not read."""
        for prefix in self.projector_prefixes:
            if name.startswith(prefix):
                part = name[len(prefix) :]
                if part in self.projector:
                    return self.projector[part]
                raise ImportRefused(f"tensor {name} is not one cllm's converter knows for {self.who} projector")
        rest = next((name[len(p) :] for p in self.prefixes if name.startswith(p)), None)
        if rest is None or (self.skipped is not None and rest.startswith(self.skipped)):
            return None
        if rest in self.globals:
            return self.globals[rest]
        m = self.block.fullmatch(rest)
        if m and m[2] in self.parts:
            return f"v.blk.{m[1]}.{self.parts[m[2]]}.{m[3]}"
        raise ImportRefused(f"tensor {name} is not one cllm's converter knows for {self.who} vision tower")

    def require(self, tensors: Mapping[str, Tensor], n_layer: int) -> None:
        """Every required tensor, and each block's query (Qwen3-VL's fused with K and V)."""
        missing = [n for n in self.required if n not in tensors]
        missing += [
            f"v.blk.{i}.attn_q.weight"
            for i in range(n_layer)
            if f"v.blk.{i}.attn_q.weight" not in tensors and f"v.blk.{i}.attn_qkv.weight" not in tensors
        ]
        if missing:
            raise ImportRefused(f"the vision tower has no {missing[0]}: is a shard missing?")


# Gemma 3's: SigLIP, and Gemma's projector.
_GEMMA3 = _Tower(
    "Gemma 3's",
    ("model.vision_tower.vision_model.", "vision_tower.vision_model."),
    {
        "embeddings.patch_embedding.weight": "v.patch_embd.weight",
        "embeddings.patch_embedding.bias": "v.patch_embd.bias",
        "embeddings.position_embedding.weight": "v.position_embd.weight",
        "post_layernorm.weight": "v.post_ln.weight",
        "post_layernorm.bias": "v.post_ln.bias",
    },
    re.compile(r"encoder\.layers\.(\d+)\.(.+)\.(weight|bias)"),
    {
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.out_proj": "attn_out",
        "layer_norm1": "ln1",
        "layer_norm2": "ln2",
        "mlp.fc1": "ffn_up",
        "mlp.fc2": "ffn_down",
    },
    {
        "mm_input_projection_weight": "mm.input_projection.weight",
        "mm_soft_emb_norm.weight": "mm.soft_emb_norm.weight",
    },
    ("v.patch_embd.weight", "v.position_embd.weight", "mm.input_projection.weight"),
    skipped="head.",  # SigLIP's pooling head, which Gemma 3 does not use
)
# Mistral 3's: Pixtral, and its patch merger.
_PIXTRAL = _Tower(
    "Pixtral's",
    ("model.vision_tower.", "vision_tower."),
    {"patch_conv.weight": "v.patch_embd.weight", "ln_pre.weight": "v.pre_ln.weight"},
    re.compile(r"transformer\.layers\.(\d+)\.(.+)\.(weight|bias)"),
    {
        "attention.q_proj": "attn_q",
        "attention.k_proj": "attn_k",
        "attention.v_proj": "attn_v",
        "attention.o_proj": "attn_out",
        "attention_norm": "ln1",
        "ffn_norm": "ln2",
        "feed_forward.gate_proj": "ffn_gate",
        "feed_forward.up_proj": "ffn_up",
        "feed_forward.down_proj": "ffn_down",
    },
    {
        "norm.weight": "mm.input_norm.weight",
        "patch_merger.merging_layer.weight": "mm.patch_merger.weight",
        "linear_1.weight": "mm.1.weight",
        "linear_1.bias": "mm.1.bias",
        "linear_2.weight": "mm.2.weight",
        "linear_2.bias": "mm.2.bias",
    },
    ("v.patch_embd.weight", "mm.patch_merger.weight", "mm.1.weight", "mm.2.weight"),
)
# Gemma 4's: a ViT of RMS norms (Q, K and V normed too), a gated FFN, 2-D rotation beside a
# learned 2-D position table, its linears clamped (``Gemma4ClippableLinear``'s scalars beside each
# weight), its patches pooled 3x3 into a token, standardized, then projected (``embed_vision``).
_GEMMA4 = _Tower(
    "Gemma 4's",
    ("model.vision_tower.", "vision_tower."),
    {
        "patch_embedder.input_proj.weight": "v.patch_embd.weight",
        "patch_embedder.position_embedding_table": "v.position_embd.weight",
        "std_bias": "v.std_bias",
        "std_scale": "v.std_scale",
    },
    re.compile(r"encoder\.layers\.(\d+)\.(.+?)(?:\.linear)?\.(weight|input_min|input_max|output_min|output_max)"),
    {
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_out",
        "self_attn.q_norm": "attn_q_norm",
        "self_attn.k_norm": "attn_k_norm",
        "input_layernorm": "ln1",
        "post_attention_layernorm": "attn_post_norm",
        "pre_feedforward_layernorm": "ln2",
        "post_feedforward_layernorm": "ffn_post_norm",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    },
    {"embedding_projection.weight": "mm.input_projection.weight"},
    ("v.patch_embd.weight", "v.position_embd.weight", "mm.input_projection.weight"),
    projector_prefixes=("model.embed_vision.", "embed_vision."),
)
_CLAMPS = ("input_min", "input_max", "output_min", "output_max")
# Llama 4's: a LayerNorm GELU ViT over unfolded patches (a linear, as libmtmd reshapes it) after a
# class token and a learned position table, its Q and K rotating in 2-D in neighbouring pairs as
# stored, then a pixel shuffle and the adapter's two-layer MLP (``vision_adapter``), and the
# projection into the text model (``multi_modal_projector.linear_1``), as llama.cpp's
# ``Llama4VisionModel`` renames them.
_LLAMA4_TOWER = _Tower(
    "Llama 4's",
    ("model.vision_model.", "vision_model."),
    {
        "patch_embedding.linear.weight": "v.patch_embd.weight",
        "class_embedding": "v.class_embd",
        "positional_embedding_vlm": "v.position_embd.weight",
        "layernorm_pre.weight": "v.pre_ln.weight",
        "layernorm_pre.bias": "v.pre_ln.bias",
        "layernorm_post.weight": "v.post_ln.weight",
        "layernorm_post.bias": "v.post_ln.bias",
        "vision_adapter.mlp.fc1.weight": "mm.model.mlp.1.weight",
        "vision_adapter.mlp.fc2.weight": "mm.model.mlp.2.weight",
    },
    re.compile(r"model\.layers\.(\d+)\.(.+)\.(weight|bias)"),
    {
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_out",
        "input_layernorm": "ln1",
        "post_attention_layernorm": "ln2",
        "mlp.fc1": "ffn_up",
        "mlp.fc2": "ffn_down",
    },
    {"linear_1.weight": "mm.model.fc.weight"},
    (
        "v.patch_embd.weight",
        "v.class_embd",
        "v.position_embd.weight",
        "mm.model.mlp.1.weight",
        "mm.model.mlp.2.weight",
        "mm.model.fc.weight",
    ),
)
# The rotation's base libmtmd's llama4 fixes.
_LLAMA4_ROPE_THETA = 10000.0
# LFM2-VL's: SigLIP2 (NaFlex: its patches through a linear, its 16x16 position table resized to
# each picture by libmtmd), and a projector over each 2x2 patches unshuffled into one: a layer
# norm (which LFM2.5-VL has not), then a GELU MLP.
_LFM2_TOWER = dataclasses.replace(
    _GEMMA3,
    who="LFM2-VL's",
    projector={
        "layer_norm.weight": "mm.input_norm.weight",
        "layer_norm.bias": "mm.input_norm.bias",
        **{f"linear_{i}.{kind}": f"mm.{i}.{kind}" for i in (1, 2) for kind in ("weight", "bias")},
    },
    required=(
        "v.patch_embd.weight",
        "v.position_embd.weight",
        "v.post_ln.weight",
        *(f"mm.{i}.{kind}" for i in (1, 2) for kind in ("weight", "bias")),
    ),
)
# The marks libmtmd puts around the tiles of a large picture (LFM2-VL's, as ``mtmd.cpp`` looks
# them up): without them in the vocabulary it would decode a token of -1, or the marks as text.
_LFM2_TILE_MARKS = ("<|img_thumbnail|>", "<|img_row_1_col_1|>")
# What libmtmd's gemma4v fixes: its rotation's base, and a Gemma 4 picture's pooling unless stated.
_GEMMA4_ROPE_THETA = 100.0
_GEMMA4_POOLING = 3
# Gemma 4 scales its pixels itself (``2 * (x - 0.5)``): its processor normalizes nothing.
_NO_MEAN_STD = ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
# The text widths of the Gemma 4s whose picture's tokens attend causally (E2B's, E4B's): libmtmd
# tells them so, where transformers reads ``use_bidirectional_attention``.
_GEMMA4_CAUSAL_WIDTHS = (1536, 2560)
# Qwen-VL's (2, 2.5 and 3): its merger under the tower's prefix, its FFN's names per version.
_QWEN_VL = _Tower(
    "Qwen-VL's",
    ("model.visual.", "visual."),
    {
        "patch_embed.proj.weight": "v.patch_embd.weight",
        "patch_embed.proj.bias": "v.patch_embd.bias",
        "pos_embed.weight": "v.position_embd.weight",
        **{f"merger.{norm}.{kind}": f"v.post_ln.{kind}" for norm in ("ln_q", "norm") for kind in ("weight", "bias")},
        **{f"merger.{fc}.{kind}": f"mm.{i}.{kind}" for fc, i in _MERGER_FCS for kind in ("weight", "bias")},
    },
    re.compile(r"blocks\.(\d+)\.(.+)\.(weight|bias)"),
    {
        "attn.qkv": "attn_qkv",
        "attn.proj": "attn_out",
        "norm1": "ln1",
        "norm2": "ln2",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
        "mlp.fc1": "ffn_up",
        "mlp.fc2": "ffn_down",
        "mlp.linear_fc1": "ffn_up",
        "mlp.linear_fc2": "ffn_down",
    },
    {},
    ("v.patch_embd.weight", "v.patch_embd.weight.1", "mm.0.weight", "mm.2.weight"),
)
# GLM-4.1V's and GLM-OCR's (GLM-4.1V's without its learned position table and the norm after its
# patches, with biases and Q and K norms): its merger under the tower.
_GLM4V = _Tower(
    "GLM-V's",
    ("model.visual.", "visual."),
    {
        "patch_embed.proj.bias": "v.patch_embd.bias",
        "post_conv_layernorm.weight": "v.norm_embd.weight",
        "embeddings.position_embedding.weight": "v.position_embd.weight",
        "post_layernorm.weight": "v.post_ln.weight",
        "downsample.weight": "mm.patch_merger.weight",
        "downsample.bias": "mm.patch_merger.bias",
        "merger.proj.weight": "mm.model.fc.weight",
        "merger.post_projection_norm.weight": "mm.post_norm.weight",
        "merger.post_projection_norm.bias": "mm.post_norm.bias",
        **{f"merger.{p}_proj.{kind}": f"mm.{p}.{kind}" for p in ("gate", "up", "down") for kind in ("weight", "bias")},
    },
    _QWEN_VL.block,
    {
        "attn.qkv": "attn_qkv",
        "attn.proj": "attn_out",
        "attn.q_norm": "attn_q_norm",
        "attn.k_norm": "attn_k_norm",
        "norm1": "ln1",
        "norm2": "ln2",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    },
    {},
    (
        *("v.patch_embd.weight", "v.patch_embd.weight.1", "v.patch_embd.bias", "v.post_ln.weight"),
        *("mm.patch_merger.weight", "mm.patch_merger.bias", "mm.model.fc.weight", "mm.post_norm.weight"),
        *("mm.gate.weight", "mm.up.weight", "mm.down.weight"),
    ),
)
# Nemotron's RADIO (its releases' names, those of RADIO's own code) and its MLP (``mlp1``).
_RADIO = _Tower(
    "RADIO's",
    ("vision_model.radio_model.model.",),
    {
        "patch_generator.embedder.weight": "v.patch_embd.weight",
        "patch_generator.pos_embed": "v.position_embd.weight",
        "patch_generator.cls_token.token": "v.class_embd",
    },
    re.compile(r"blocks\.(\d+)\.(.+)\.(weight|bias)"),
    {
        "attn.qkv": "attn_qkv",
        "attn.proj": "attn_out",
        "norm1": "ln1",
        "norm2": "ln2",
        "mlp.fc1": "ffn_up",
        "mlp.fc2": "ffn_down",
    },
    {"0.weight": "mm.model.mlp.0.weight", "1.weight": "mm.model.mlp.1.weight", "3.weight": "mm.model.mlp.3.weight"},
    (
        *("v.patch_embd.weight", "v.position_embd.weight", "v.class_embd"),
        *("mm.model.mlp.0.weight", "mm.model.mlp.1.weight", "mm.model.mlp.3.weight"),
    ),
    projector_prefixes=("mlp1.",),
)
# RADIO's pixel statistics, kept in its checkpoint (its input conditioner's buffers).
_RADIO_STATISTICS = tuple(f"vision_model.radio_model.input_conditioner.norm_{s}" for s in ("mean", "std"))
# What Nemotron's releases leave to RADIO v2.5-H (Ollama's and llama.cpp's converters fix them too).
_RADIO_H = {"hidden_size": 1280, "num_hidden_layers": 32, "num_attention_heads": 16, "patch_size": 16}
_NEMOTRON_IMAGE_SIZE = 512
# What of a Nemotron's tower libmtmd has no use for: RADIO's summary indices, its input conditioner
# (the processor normalizes), its video embedder (the release's name and transformers').
_RADIO_UNREAD = re.compile(
    r"vision_model\.(?:radio_model\.)?summary_idxs"
    r"|vision_model\.radio_model\.input_conditioner\..+"
    r"|vision_model\.embeddings\.video_patch_projection\..+"
    r"|vision_model\.radio_model\.model\.patch_generator\.video_embedder\..+"
)
# Megatron's LayerNorm after RADIO (beside a multi-token-prediction layer): the ViT's last norm.
_FINAL_NORM = {f"vision_projector.vision_final_layernorm.{kind}": f"v.post_ln.{kind}" for kind in ("weight", "bias")}
# RADIO's LayerScale, as its own code (``ls1.gamma``) and transformers 5 (``layer_scale1.lambda1``) save it.
_LAYER_SCALE = re.compile(
    r"vision_model\.radio_model\.model\.blocks\.(\d+)\.(?:layer_scale|ls)([12])\.(?:lambda1|gamma)"
)
# What libmtmd's glm4v fixes: its tower's rotation's base (transformers' default).
_GLM4V_ROPE_THETA = 10000.0
_GLM4V_IMAGE_SIZE = 336
# Qwen3-VL's deepstack mergers, by their place in the list (the tower's blocks they follow are
# ``deepstack_visual_indexes``'), and llama.cpp's names for their parts.
_DEEPSTACK = re.compile(
    r"(?:model\.)?visual\.deepstack_merger_list\.(\d+)\.(norm|linear_fc1|linear_fc2)\.(weight|bias)"
)
_DEEPSTACK_PARTS = {"norm": "norm", "linear_fc1": "fc1", "linear_fc2": "fc2"}
# Qwen-VL's projectors by clip.projector_type: their FFN's activation (Qwen 2's quick GELU is
# libmtmd's default, stated by no key).
_QWEN_ACTIVATIONS = {"qwen2vl_merger": None, "qwen2.5vl_merger": "silu", "qwen3vl_merger": "gelu"}
# Qwen 2.5's window attention: libmtmd's windows are 112 pixels a side, whatever the checkpoint says.
_QWEN25_WINDOW = 112
# The image tokens Gemma 3's projector pools a picture to, unless the processor says otherwise.
_IMAGE_TOKENS = 256
# The pixel statistics where the processor states none: Gemma 3's, Qwen3-VL's and Qwen 3.5's
# (halves), and CLIP's (Pixtral's, Qwen 2 and 2.5's).
_HALVES_MEAN_STD = ([0.5, 0.5, 0.5], [0.5, 0.5, 0.5])
_CLIP_MEAN_STD = (CLIP_MEAN, CLIP_STD)


def projector(
    kind: str,
    checkpoint: Checkpoint,
    config: Mapping[str, Any],
    sources: list[SourceTensor],
    embedding: SourceTensor | None,
    tokens: list[str],
) -> tuple[KV, list[Tensor]]:
    """The projector GGUF's keys and tensors of ``kind`` (``gemma3``, ``gemma4v``, ``glm4v``, ``lfm2``,
    ``llama4``, ``nemotron_v2_vl``, ``pixtral``, a Qwen-VL's merger: the family's ``Layout.vision``) for the
    tower ``sources``, ``embedding`` the text
    model's token embedding and ``tokens`` its vocabulary (both for Pixtral's [IMG_BREAK] row);
    ``ImportRefused`` for one llama.cpp could not run. The processor's settings come from
    ``preprocessor_config.json``, or the ``image_processor`` of ``processor_config.json``, where
    transformers 5 saves them."""
    vision = config.get("vision_config")
    text = config.get("text_config") or config.get("llm_config") or config  # Qwen's: either; Nemotron's own name
    if not isinstance(vision, dict) or not isinstance(text, dict):
        raise ImportRefused("config.json has no vision_config and text_config for the vision tower")
    processor = checkpoint.json("preprocessor_config.json") or (
        (checkpoint.json("processor_config.json") or {}).get("image_processor") or {}
    )
    if kind == "pixtral":
        return _pixtral(config, vision, text, processor, sources, embedding, tokens)
    if kind in _QWEN_ACTIVATIONS:
        return _qwen_vl(kind, vision, text, processor, sources)
    if kind == "gemma4v":
        return _gemma4(vision, text, processor, sources)
    if kind == "lfm2":
        return _lfm2(config, vision, text, processor, sources, tokens)
    if kind == "glm4v":
        return _glm4v(vision, text, processor, sources)
    if kind == "nemotron_v2_vl":
        return _nemotron(config, vision, text, processor, sources)
    if kind == "llama4":
        return _llama4(vision, text, processor, sources)
    return _gemma3(config, vision, text, processor, sources)


def _gemma3(
    config: Mapping[str, Any],
    vision: Mapping[str, Any],
    text: Mapping[str, Any],
    processor: Mapping[str, Any],
    sources: list[SourceTensor],
) -> tuple[KV, list[Tensor]]:
    tensors = _tensors(_GEMMA3, sources, lambda name: None)
    n_layer = config_int(vision, "num_hidden_layers")
    _GEMMA3.require(tensors, n_layer)
    image_size, patch_size = config_int(vision, "image_size"), config_int(vision, "patch_size")
    tokens = processor.get("image_seq_length") or config.get("mm_tokens_per_image") or _IMAGE_TOKENS
    per_side = round(float(tokens) ** 0.5) if isinstance(tokens, int) and tokens > 0 else 0
    if per_side <= 0 or per_side * per_side != tokens or (image_size // patch_size) % per_side:
        raise ImportRefused(f"an image of {tokens} tokens is not a square pooling of the tower's patches")
    kv = _clip_kv("gemma3", "gelu", vision, text, processor, 1e-6, _HALVES_MEAN_STD)
    scale = (image_size // patch_size) // per_side
    if scale != 4:  # llama.cpp's default; a test model's other pooling is stated
        kv["clip.vision.projector.scale_factor"] = (scale, _U32)
    return kv, list(tensors.values())


def _gemma4(
    vision: Mapping[str, Any], text: Mapping[str, Any], processor: Mapping[str, Any], sources: list[SourceTensor]
) -> tuple[KV, list[Tensor]]:
    """Gemma 4's tower as llama.cpp's ``Gemma4VisionAudioModel`` writes its vision side: the patch
    projection as a convolution's kernel ``(width, 3, patch, patch)``, each clamp a 1-element
    vector beside its weight (an infinite one, which clamps nothing, left out: libmtmd's default).
    ``ImportRefused`` for what libmtmd's gemma4v computes otherwise."""
    n_embd, heads = config_int(vision, "hidden_size"), config_int(vision, "num_attention_heads")
    if vision.get("num_key_value_heads", heads) != heads or vision.get("head_dim", n_embd // heads) * heads != n_embd:
        raise ImportRefused(
            "config.json's vision_config has grouped or narrower heads, which libmtmd's gemma4v has not"
        )
    if vision.get("hidden_activation", "gelu_pytorch_tanh") != "gelu_pytorch_tanh":
        raise ImportRefused("config.json's vision_config activation is not gelu_pytorch_tanh, libmtmd's gemma4v's")
    rope = vision.get("rope_parameters") or {}
    theta = rope.get("rope_theta", _GEMMA4_ROPE_THETA) if isinstance(rope, dict) else None
    if theta != _GEMMA4_ROPE_THETA:
        raise ImportRefused(
            f"config.json's vision_config rotates by another base than libmtmd's {_GEMMA4_ROPE_THETA:g}"
        )
    both_ways = text.get("use_bidirectional_attention") == "vision"
    if both_ways == (config_int(text, "hidden_size") in _GEMMA4_CAUSAL_WIDTHS):
        raise ImportRefused(
            "libmtmd lets a picture's tokens attend to each other both ways in every Gemma 4 but E2B and E4B "
            "(by their width); config.json's use_bidirectional_attention says otherwise"
        )
    patch = config_int(vision, "patch_size")
    tensors: dict[str, Tensor] = {}
    for source in sources:
        name = _GEMMA4.gguf_name(source.name)
        if name is None or infinite_clamp(name, source):
            continue
        if name == "v.patch_embd.weight":
            source = _patch_kernel(source, n_embd, patch)
        tensors[name] = converted(name, source, None)
    _GEMMA4.require(tensors, config_int(vision, "num_hidden_layers"))
    statistics = processor if processor.get("do_normalize") else {}
    eps = float(vision.get("rms_norm_eps") or 1e-6)
    kv = _clip_kv("gemma4v", None, {**vision, "image_size": 224}, text, statistics, eps, _NO_MEAN_STD)
    del kv["clip.projector_type"]  # stated per modality, as llama.cpp's converter does
    kv["clip.vision.projector_type"] = ("gemma4v", _STR)
    pooling = config_int(vision, "pooling_kernel_size", default=_GEMMA4_POOLING)
    if pooling != _GEMMA4_POOLING:
        kv["clip.vision.projector.scale_factor"] = (pooling, _U32)
    return kv, list(tensors.values())


def _lfm2(
    config: Mapping[str, Any],
    vision: Mapping[str, Any],
    text: Mapping[str, Any],
    processor: Mapping[str, Any],
    sources: list[SourceTensor],
    tokens: list[str],
) -> tuple[KV, list[Tensor]]:
    """LFM2-VL's tower as llama.cpp's ``LFM2VLModel`` writes it (``lfm2``): SigLIP2's patch linear as
    a convolution's kernel, its square position table as it is (libmtmd resizes it to each
    picture), the projector's layer norm (where it has one) and MLP; the picture unshuffled by
    ``downsample_factor``. Every block is kept: transformers reads the last, whatever
    ``vision_feature_layer`` says. ``ImportRefused`` for a tower libmtmd's lfm2 would compute
    otherwise than transformers, abort on, or tile without its marks. libmtmd sizes and tiles a
    picture its own way (64 to 256 tokens, tiles of 512 pixels, a thumbnail), whatever the
    processor says."""
    if config.get("projector_hidden_act", "gelu") != "gelu" or config.get("projector_bias", True) is not True:
        raise ImportRefused("config.json's projector is not a GELU MLP with biases, which libmtmd's lfm2 computes")
    if vision.get("hidden_act", "gelu_pytorch_tanh") != "gelu_pytorch_tanh":
        raise ImportRefused("config.json's vision_config activation is not gelu_pytorch_tanh, SigLIP2's")
    missing = [mark for mark in _LFM2_TILE_MARKS if mark not in tokens]
    if missing:
        raise ImportRefused(f"the vocabulary lacks {missing[0]}, which libmtmd puts between a large picture's tiles")
    n_embd, patch = config_int(vision, "hidden_size"), config_int(vision, "patch_size")
    factor = config_int(config, "downsample_factor", 2, "top level")
    tensors: dict[str, Tensor] = {}
    for source in sources:
        name = _LFM2_TOWER.gguf_name(source.name)
        if name == "v.patch_embd.weight":
            source = _patch_kernel(source, n_embd, patch)
        if name is not None:
            tensors[name] = converted(name, source, None)
    _LFM2_TOWER.require(tensors, config_int(vision, "num_hidden_layers"))
    if ("mm.input_norm.weight" in tensors) != (config.get("projector_use_layernorm", True) is True):
        raise ImportRefused("config.json's projector_use_layernorm and the projector's layer norm disagree")
    if factor < 2 or tensors["mm.1.weight"].shape[1] != n_embd * factor * factor:
        raise ImportRefused(
            f"config.json's downsample_factor {factor} does not merge patches into the projector's input "
            "(libmtmd merges at least 2x2)"
        )
    rows = tensors["v.position_embd.weight"].shape[0]
    side = math.isqrt(rows)
    if side * side != rows:
        raise ImportRefused(f"the tower's position table of {rows} patches is not a square, which libmtmd resizes")
    statistics = processor if processor.get("do_normalize", True) is not False else {}
    mean_std = _HALVES_MEAN_STD if statistics else _NO_MEAN_STD
    kv = _clip_kv("lfm2", "gelu", {**vision, "image_size": side * patch}, text, statistics, 1e-6, mean_std)
    kv["clip.vision.projector.scale_factor"] = (factor, _U32)
    return kv, list(tensors.values())


def _glm4v(
    vision: Mapping[str, Any], text: Mapping[str, Any], processor: Mapping[str, Any], sources: list[SourceTensor]
) -> tuple[KV, list[Tensor]]:
    """GLM-4.1V's and GLM-OCR's tower as llama.cpp's ``Glm4VVisionModel`` writes it: the Conv3D
    kernel a kernel per frame, Q/K/V fused, the merging convolution's output as wide as the text
    model's input, GLM-4.1V's position table as it is. ``ImportRefused`` for what libmtmd's glm4v
    computes otherwise (another activation or rotary base, a picture other than two frames, a
    merger out to another width, a table not of the tower's image_size)."""
    settings = _merging_2x2(vision)
    if vision.get("hidden_act", "silu") != "silu":
        raise ImportRefused("config.json's vision_config activation is not silu, which libmtmd's glm4v computes")
    rope = vision.get("rope_parameters") or {}
    if not isinstance(rope, dict) or rope.get("rope_theta", _GLM4V_ROPE_THETA) != _GLM4V_ROPE_THETA:
        raise ImportRefused(f"config.json's vision_config rotates by another base than libmtmd's {_GLM4V_ROPE_THETA:g}")
    if config_int(vision, "out_hidden_size") != config_int(text, "hidden_size", part="text_config"):
        raise ImportRefused("config.json's vision_config out_hidden_size is not the text model's hidden_size")
    tensors: dict[str, Tensor] = {}
    for source in sources:
        if source.name.endswith("patch_embed.proj.weight"):
            pieces = _frames(source, "v.patch_embd.weight", "GLM-V's")
        else:
            name = _GLM4V.gguf_name(source.name)
            pieces = [] if name is None else [(name, source)]
        for name, piece in pieces:
            tensors[name] = converted(name, piece, None)
    _GLM4V.require(tensors, config_int(settings, "num_hidden_layers"))
    table = tensors.get("v.position_embd.weight")
    image_size = config_int(vision, "image_size", default=_GLM4V_IMAGE_SIZE)  # transformers' default
    side = image_size // config_int(vision, "patch_size")
    if table is not None and table.shape[0] != side * side:
        raise ImportRefused(
            f"the tower's position table of {table.shape[0]} patches is not {side}x{side}, its image_size's"
        )
    eps = float(vision.get("rms_norm_eps") or 1e-5)
    kv = _clip_kv("glm4v", "silu", {**settings, "image_size": image_size}, text, processor, eps, _CLIP_MEAN_STD)
    kv["clip.vision.spatial_merge_size"] = (2, _U32)
    return kv, list(tensors.values())


def _nemotron(
    config: Mapping[str, Any],
    vision: Mapping[str, Any],
    text: Mapping[str, Any],
    processor: Mapping[str, Any],
    sources: list[SourceTensor],
) -> tuple[KV, list[Tensor]]:
    """Nemotron's RADIO as llama.cpp's ``NemotronNanoV2VLModel`` writes it: the patch embedding a
    kernel ``(width, 3, patch, patch)``, the position table resized to ``force_image_size``'s grid
    (bilinear, corners aligned, as llama.cpp's converter and Ollama's shim do), the class and
    register tokens, the MLP over each 2x2 patches. Beyond it, as transformers computes them: the
    LayerNorm Megatron puts before the MLP beside a multi-token-prediction layer (which llama.cpp's
    converter drops) as the ViT's ``v.post_ln``, and a LayerScale other than ones as ``ls1``/``ls2``,
    both of which libmtmd's ViT applies. Its widths are those config.json states, else RADIO
    v2.5-H's; its pixel statistics ``_radio_statistics``'. ``ImportRefused`` for what libmtmd's
    nemotron_v2_vl computes otherwise: another merge than 2x2, another RADIO than v2.5-H, an
    activation other than GELU, a part of the tower it has no place for."""
    version = vision.get("version")
    if version is not None and version != "radio_v2.5-h":
        raise ImportRefused(f"config.json's vision_config is RADIO {version!r}; cllm converts radio_v2.5-h")
    if vision.get("hidden_act", "gelu") != "gelu" or vision.get("use_swiglu_ffn"):
        raise ImportRefused("config.json's vision_config FFN is not a GELU MLP, libmtmd's nemotron_v2_vl's")
    ratio = config.get("downsample_ratio", 0.5)
    if ratio != 0.5:
        raise ImportRefused(f"config.json's downsample_ratio is {ratio}; libmtmd's nemotron_v2_vl merges 2x2 patches")
    width = config.get("vit_hidden_size") or config.get("vision_hidden_size") or vision.get("hidden_size")
    settings = {**_RADIO_H, **vision, "hidden_size": width or _RADIO_H["hidden_size"]}
    n_embd, patch = config_int(settings, "hidden_size"), config_int(settings, "patch_size")
    image_size = config.get("force_image_size") or processor.get("image_size") or _NEMOTRON_IMAGE_SIZE
    side = config_int({"image_size": image_size}, "image_size", part="top level") // patch
    tensors: dict[str, Tensor] = {}
    conditioner: dict[str, list[float]] = {}
    for source in sources:
        if source.name in _RADIO_STATISTICS:
            key = "image_mean" if source.name.endswith("mean") else "image_std"
            conditioner[key] = [float(v) for v in to_f32(source.data, source.dtype).reshape(-1)]
            continue
        scale = _LAYER_SCALE.fullmatch(source.name)
        if scale and np.all(to_f32(source.data, source.dtype) == 1.0):  # transformers 5 saves ones: none
            continue
        if _RADIO_UNREAD.fullmatch(source.name):
            continue
        name = f"v.blk.{scale[1]}.ls{scale[2]}.weight" if scale else None  # libmtmd's ViT scales by it
        name = name or _FINAL_NORM.get(source.name) or _RADIO.gguf_name(source.name)
        if name is None and source.name.startswith(("vision_model.", "vision_projector.")):
            raise ImportRefused(f"tensor {source.name} is not one cllm's converter knows for RADIO's vision tower")
        if name is None:  # the audio tower's
            continue
        if name == "v.patch_embd.weight":
            if source.shape != (n_embd, 3 * patch * patch):
                shape = list(source.shape)
                raise ImportRefused(f"tensor {source.name} of shape {shape} is not {patch}x{patch}x3 patches")
            source = source.with_data(source.data.reshape(n_embd, 3, patch, patch))
        tensor = converted(name, source, None)
        if name == "v.position_embd.weight":
            cells, rest = divmod(math.prod(source.shape), n_embd)
            if rest or math.isqrt(cells) ** 2 != cells:
                raise ImportRefused(f"the tower's position table of {list(source.shape)} is not a square grid")
            tensor = positions_resized(tensor, side, n_embd)
        tensors[name] = tensor
    _RADIO.require(tensors, config_int(settings, "num_hidden_layers"))
    up = tensors.get("v.blk.0.ffn_up.weight")
    settings |= {"image_size": side * patch, "intermediate_size": up.shape[0] if up is not None else 0}
    statistics = _radio_statistics(config, processor, vision, conditioner)
    kv = _clip_kv("nemotron_v2_vl", "gelu", settings, text, statistics, 1e-6, _CLIP_MEAN_STD)
    kv["clip.vision.projector.scale_factor"] = (2, _U32)
    return kv, list(tensors.values())


def _radio_statistics(
    config: Mapping[str, Any],
    processor: Mapping[str, Any],
    vision: Mapping[str, Any],
    conditioner: Mapping[str, list[float]],
) -> dict[str, Any]:
    """The pixel statistics a Nemotron's pictures are normalized by, each of mean and std where it
    is first stated: Nemotron's ``norm_mean``/``norm_std`` in config.json or the processor (as
    Ollama's converter reads them), the processor's ``image_mean``/``image_std`` (llama.cpp's
    converter's), RADIO's own (``vision_config``'s, its input conditioner's buffers); where none
    is, CLIP's (Ollama's default; llama.cpp's is ImageNet's)."""
    places = ((config, "norm"), (processor, "norm"), (processor, "image"), (vision, "norm"), (conditioner, "image"))
    found: dict[str, Any] = {}
    for stat in ("mean", "std"):
        given = next((where[f"{kind}_{stat}"] for where, kind in places if f"{kind}_{stat}" in where), None)
        if given is not None:
            found[f"image_{stat}"] = given
    return found


def _llama4(
    vision: Mapping[str, Any],
    text: Mapping[str, Any],
    processor: Mapping[str, Any],
    sources: list[SourceTensor],
) -> tuple[KV, list[Tensor]]:
    """Llama 4's tower as llama.cpp's ``Llama4VisionModel`` writes it (``llama4``): renamed, its
    values as they are; a pixel shuffle of 1/ratio patches a side. One libmtmd would compute
    otherwise, or abort on, is refused."""
    tensors = _tensors(_LLAMA4_TOWER, sources, lambda name: None)
    _LLAMA4_TOWER.require(tensors, config_int(vision, "num_hidden_layers"))
    ratio = vision.get("pixel_shuffle_ratio", 0.5)
    scale = round(1 / ratio) if isinstance(ratio, int | float) and 0 < ratio < 1 else 0
    side, rest = divmod(config_int(vision, "image_size"), config_int(vision, "patch_size"))
    if rest:
        raise ImportRefused("config.json's vision_config image_size is no whole number of patches")
    if scale < 2 or abs(scale * ratio - 1) > 1e-6 or side % scale:
        raise ImportRefused(f"config.json's pixel_shuffle_ratio {ratio} does not merge the tower's patches whole")
    rope = vision.get("rope_parameters")  # transformers 5's, else (and where it states none) rope_theta
    theta = vision.get("rope_theta", _LLAMA4_ROPE_THETA)
    theta = rope.get("rope_theta", theta) if isinstance(rope, dict) else theta
    if vision.get("hidden_act", "gelu") != "gelu" or theta != _LLAMA4_ROPE_THETA:
        raise ImportRefused(
            f"config.json's vision_config is not a GELU ViT rotating at base {_LLAMA4_ROPE_THETA:g} "
            "as libmtmd's llama4 is"
        )
    table = tensors["v.position_embd.weight"].shape
    if table != (side * side + 1, config_int(vision, "hidden_size")):
        raise ImportRefused(
            f"the tower's position table of {table[0]} rows is not its {side}x{side} patches' and a class token's"
        )
    eps = float(vision.get("norm_eps") or 1e-5)  # the tower's (llama.cpp's converter's), whatever else is stated
    kv = _clip_kv("llama4", "gelu", {**vision, "layer_norm_eps": eps}, text, processor, eps, _HALVES_MEAN_STD)
    kv["clip.vision.projector.scale_factor"] = (scale, _U32)
    return kv, list(tensors.values())


def _frames(source: SourceTensor, name: str, who: str) -> list[tuple[str, SourceTensor]]:
    """A patch kernel over two video frames (Conv3D: ``(width, 3, 2, patch, patch)``) as a kernel
    per frame, ``name`` and ``name.1``, as libmtmd applies them (Qwen-VL's, GLM-V's)."""
    if len(source.shape) != 5 or source.shape[2] != 2:
        raise ImportRefused(f"tensor {source.name} is not a kernel over two frames (Conv3D), as {who} is")
    return [(n, source.with_data(source.data[:, :, frame])) for frame, n in enumerate((name, name + ".1"))]


def _patch_kernel(source: SourceTensor, n_embd: int, patch: int) -> SourceTensor:
    """A patch embedding kept as a linear over each patch's rows, columns and channels (Gemma 4's,
    SigLIP2's) as the convolution's kernel ``(width, 3, patch, patch)`` libmtmd applies."""
    if source.shape != (n_embd, patch * patch * 3):
        raise ImportRefused(f"tensor {source.name} of shape {list(source.shape)} is not {patch}x{patch}x3 patches")
    return source.with_data(source.data.reshape(n_embd, patch, patch, 3).transpose(0, 3, 1, 2))


def _pixtral(
    config: Mapping[str, Any],
    vision: Mapping[str, Any],
    text: Mapping[str, Any],
    processor: Mapping[str, Any],
    sources: list[SourceTensor],
    embedding: SourceTensor | None,
    tokens: list[str],
) -> tuple[KV, list[Tensor]]:
    heads = config_int(vision, "num_attention_heads")

    def reorder(name: str) -> int | None:  # the tower's Q and K rows, for ggml's rotation
        return heads if re.fullmatch(r"v\.blk\.\d+\.attn_[qk]\.(weight|bias)", name) else None

    tensors = _tensors(_PIXTRAL, sources, reorder)
    if "[IMG_BREAK]" not in tokens or embedding is None:
        raise ImportRefused("Mistral 3's vision needs the [IMG_BREAK] token and the text model's embedding")
    row = SourceTensor(embedding.name, embedding.dtype, embedding.data[tokens.index("[IMG_BREAK]")])
    tensors["v.token_embd.img_break"] = converted("v.token_embd.img_break", row, None)
    _PIXTRAL.require(tensors, config_int(vision, "num_hidden_layers"))
    activation = vision.get("hidden_act", "gelu")
    if activation not in ("silu", "gelu"):
        raise ImportRefused(f"config.json's vision_config has activation {activation!r}; Pixtral's is silu or gelu")
    kv = _clip_kv("pixtral", activation, vision, text, processor, 1e-5, _CLIP_MEAN_STD)
    kv["clip.vision.spatial_merge_size"] = (config_int(config, "spatial_merge_size", default=2), _U32)
    return kv, list(tensors.values())


def _qwen_vl(
    kind: str,
    vision: Mapping[str, Any],
    text: Mapping[str, Any],
    processor: Mapping[str, Any],
    sources: list[SourceTensor],
) -> tuple[KV, list[Tensor]]:
    vision = _qwen_settings(kind, vision)
    n_layer = config_int(vision, "num_hidden_layers")
    deepstack = vision.get("deepstack_visual_indexes") or []
    if not isinstance(deepstack, list) or not all(isinstance(i, int) and 0 <= i < n_layer for i in deepstack):
        raise ImportRefused(f"config.json's deepstack_visual_indexes {deepstack} are not blocks of the tower")
    tensors: dict[str, Tensor] = {}
    for source in sources:
        for name, piece in _qwen_pieces(source, kind, deepstack):
            tensors[name] = converted(name, piece, None)
    _QWEN_VL.require(tensors, n_layer)
    if kind == "qwen3vl_merger":  # libmtmd's Qwen3-VL graph asserts them rather than refuse
        wanted = ["v.patch_embd.bias", "v.position_embd.weight", *(f"v.blk.{i}.attn_qkv.bias" for i in range(n_layer))]
        missing = [n for n in wanted if n not in tensors]
        if missing:
            raise ImportRefused(f"the vision tower has no {missing[0]}, which llama.cpp's Qwen3-VL needs")
    statistics = _HALVES_MEAN_STD if kind == "qwen3vl_merger" else _CLIP_MEAN_STD
    kv = _clip_kv(kind, _QWEN_ACTIVATIONS[kind], vision, text, processor, 1e-6, statistics)
    if kind == "qwen2.5vl_merger":
        kv["clip.vision.n_wa_pattern"] = (_window_pattern(vision, n_layer), _U32)
    if kind == "qwen3vl_merger":
        kv["clip.vision.spatial_merge_size"] = (2, _U32)
        kv["clip.vision.is_deepstack_layers"] = ([i in deepstack for i in range(n_layer)], _ARRAY)
    return kv, list(tensors.values())


def _qwen_settings(kind: str, vision: Mapping[str, Any]) -> dict[str, Any]:
    """Qwen-VL's vision_config under the names every projector states: its blocks (``depth``), heads
    (``num_heads``), width (Qwen 2's ``embed_dim``; its ``hidden_size`` is the merger's output) and
    FFN (Qwen 2's ``mlp_ratio`` of its width), and a picture size. ``ImportRefused`` for a merger of
    other than 2x2 patches, which libmtmd's Qwen-VL graphs assume."""
    settings = _merging_2x2(vision)
    if kind == "qwen2vl_merger":
        width = config_int(vision, "embed_dim")
        ratio = vision.get("mlp_ratio", 4)
        settings |= {
            "hidden_size": width,
            "intermediate_size": int(width * ratio) if isinstance(ratio, int | float) else 0,
        }
    patch = config_int(vision, "patch_size")
    if kind == "qwen3vl_merger":  # its learned positions are a square table of this many patches
        side = math.isqrt(config_int(vision, "num_position_embeddings", default=2304))
        settings["image_size"] = side * patch
    else:
        settings.setdefault("image_size", 560)  # llama.cpp's converter's
    return settings


def _merging_2x2(vision: Mapping[str, Any]) -> dict[str, Any]:
    """A Qwen-VL's or GLM's vision_config with its ``depth`` and ``num_heads`` under the names every
    projector states; ``ImportRefused`` for a merger of other than 2x2 patches of 2 frames, which
    libmtmd's graphs for them assume."""
    if vision.get("spatial_merge_size", 2) != 2 or vision.get("temporal_patch_size", 2) != 2:
        raise ImportRefused("config.json's vision_config merges other than 2x2 patches of 2 frames, as llama.cpp needs")
    return {**vision, "num_hidden_layers": vision.get("depth"), "num_attention_heads": vision.get("num_heads")}


def _window_pattern(vision: Mapping[str, Any], n_layer: int) -> int:
    """Every how many of Qwen 2.5's blocks one attends to the whole picture (the rest to windows),
    from ``fullatt_block_indexes``, as libmtmd's ``n_wa_pattern`` says it."""
    full = vision.get("fullatt_block_indexes")
    window = vision.get("window_size", _QWEN25_WINDOW)
    if window != _QWEN25_WINDOW:
        raise ImportRefused(f"config.json's window_size is {window}; llama.cpp's Qwen2.5-VL attends in windows of 112")
    if not isinstance(full, list) or not full or not all(isinstance(i, int) for i in full):
        raise ImportRefused("config.json's vision_config has no fullatt_block_indexes for its window attention")
    period = full[0] + 1
    if full != list(range(period - 1, n_layer, period)):
        raise ImportRefused(
            f"config.json's fullatt_block_indexes {full} are not {period - 1}, {2 * period - 1}, ... "
            "(a full-attention block at even steps), as llama.cpp needs"
        )
    return period


def _qwen_pieces(source: SourceTensor, kind: str, deepstack: list[int]) -> list[tuple[str, SourceTensor]]:
    """A Qwen-VL tower tensor as llama.cpp's tensors: the patch kernel's two frames apart, Qwen 2
    and 2.5's fused Q/K/V split (Qwen 3's stays fused), a deepstack merger's part under its block."""
    m = _DEEPSTACK.fullmatch(source.name)
    if m:
        if int(m[1]) >= len(deepstack):
            raise ImportRefused(f"tensor {source.name} has no block in config.json's deepstack_visual_indexes")
        return [(f"v.deepstack.{deepstack[int(m[1])]}.{_DEEPSTACK_PARTS[m[2]]}.{m[3]}", source)]
    name = _QWEN_VL.gguf_name(source.name)
    if name is None:
        return []
    data, shape = source.data, source.shape
    if name == "v.patch_embd.weight":
        return _frames(source, name, "Qwen-VL's")
    if ".attn_qkv." in name and kind != "qwen3vl_merger":
        if shape[0] % 3:
            raise ImportRefused(f"tensor {source.name} has {shape[0]} rows, which Q, K and V cannot share")
        third = shape[0] // 3
        return [
            (
                name.replace("attn_qkv", f"attn_{part}"),
                source.with_data(data[i * third : (i + 1) * third]),
            )
            for i, part in enumerate("qkv")
        ]
    return [(name, source)]


def _tensors(tower: _Tower, sources: list[SourceTensor], reorder: Callable[[str], int | None]) -> dict[str, Tensor]:
    """The tower's tensors by llama.cpp's names; ``reorder``: the heads whose rows a tensor pairs."""
    tensors: dict[str, Tensor] = {}
    for source in sources:
        name = tower.gguf_name(source.name)
        if name is not None:
            tensors[name] = converted(name, source, reorder(name))
    return tensors


def _clip_kv(
    kind: str,
    activation: str | None,
    vision: Mapping[str, Any],
    text: Mapping[str, Any],
    processor: Mapping[str, Any],
    eps: float,
    mean_std: tuple[list[float], list[float]],
) -> KV:
    """What every projector states (``clip.cpp``'s ``load_hparams``): its type and activation (none:
    libmtmd's quick GELU), the ViT's shape, an output as wide as the text model's input, the pixel
    statistics."""
    kv: KV = {
        "general.type": ("mmproj", _STR),
        "clip.has_vision_encoder": (True, _BOOL),
        "clip.projector_type": (kind, _STR),
    }
    if activation is not None:
        kv[f"clip.use_{activation}"] = (True, _BOOL)
    return kv | {
        "clip.vision.image_size": (config_int(vision, "image_size"), _U32),
        "clip.vision.patch_size": (config_int(vision, "patch_size"), _U32),
        "clip.vision.embedding_length": (config_int(vision, "hidden_size"), _U32),
        "clip.vision.feed_forward_length": (config_int(vision, "intermediate_size"), _U32),
        "clip.vision.block_count": (config_int(vision, "num_hidden_layers"), _U32),
        "clip.vision.attention.head_count": (config_int(vision, "num_attention_heads"), _U32),
        "clip.vision.attention.layer_norm_epsilon": (float(vision.get("layer_norm_eps") or eps), GGUFValueType.FLOAT32),
        "clip.vision.projection_dim": (config_int(text, "hidden_size"), _U32),
        "clip.vision.image_mean": (_floats(processor, "image_mean", mean_std[0]), _ARRAY),
        "clip.vision.image_std": (_floats(processor, "image_std", mean_std[1]), _ARRAY),
    }


def config_int(config: Mapping[str, Any], key: str, default: int | None = None, part: str = "vision_config") -> int:
    """A tower's setting that must be a positive whole number (``part``: where config.json keeps it)."""
    value = config.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ImportRefused(f"config.json's {part} has no {key}")
    return value


def _floats(processor: Mapping[str, Any], key: str, default: list[float]) -> list[float]:
    """The processor's pixel statistics, ``default`` where it has none."""
    values = processor.get(key, default)
    if not isinstance(values, list) or len(values) != 3 or not all(isinstance(v, int | float) for v in values):
        raise ImportRefused(f"preprocessor_config.json's {key} is not three numbers")
    return [float(v) for v in values]


def infinite_clamp(name: str, source: SourceTensor) -> bool:
    """Whether the tensor is a clamp of a clipped linear (Gemma 4's) that clamps nothing, which
    libmtmd's default is (transformers starts them infinite)."""
    return name.endswith(_CLAMPS) and bool(np.isinf(to_f32(source.data, source.dtype)).all())


def converted(name: str, source: SourceTensor, heads: int | None) -> Tensor:
    """In llama.cpp's type for it: the embeddings, convolutions (over audio, and GLM-OCR's merging
    one) and vectors F32, matrices F16; with ``heads``, its rows reordered from halves to neighbouring pairs per head;
    Gemma's soft-embedding norm with its +1, Gemma 4's per-dimension query scale after its softplus."""
    source.require_float()
    keep_f32 = (
        name.startswith(("v.patch_embd", "v.position_embd", "v.token_embd", "v.class_embd", "a.conv1d."))
        or name.endswith(".conv_dw.weight")
        or len(source.shape) == 1
        or (name == "mm.patch_merger.weight" and len(source.shape) == 4)
    )
    kind, dtype = (_F32, np.dtype(np.float32)) if keep_f32 else (_F16, np.dtype(np.float16))
    order = pairs_order(name, source.shape, heads) if heads is not None else None

    def produce() -> np.ndarray:
        values = to_f32(source.data, source.dtype)
        if order is not None:
            values = order.apply(values)
        if name == "mm.soft_emb_norm.weight":
            values = values + np.float32(1.0)  # Gemma's norms scale by 1 + weight
        if name.endswith(".per_dim_scale.weight"):  # as llama.cpp's converter stores it
            values = np.logaddexp(np.float32(0.0), values)
        return np.ascontiguousarray(values, dtype=dtype)

    return Tensor(name, kind, source.shape, dtype, produce)
