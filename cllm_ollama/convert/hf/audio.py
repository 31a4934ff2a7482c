"""Audio towers converted to the audio side of the projector GGUF libmtmd reads, beside the vision
side, as llama.cpp's converters write them.

Gemma 4's (``gemma4a``, beside ``gemma4v``, as ``Gemma4VisionAudioModel`` writes it): a Conformer,
a subsampler of two 3x3 convolutions and a projection, then blocks of
a half-step FFN, chunked attention with relative positions (its per-dimension query scale stored
as llama.cpp uses it, after a softplus), a depthwise convolution between two projections and a
second half-step FFN; then an output projection, and ``embed_audio``'s projection into the text
model. Its linears are clamped (``Gemma4ClippableLinear``), the clamps stored beside their weights.

Nemotron 3 Nano Omni's (``parakeet``, beside ``nemotron_v2_vl``, as ``NemotronNanoV2VLModel``
writes it): a FastConformer, mapped through the names, shapes and types Ollama's converter gives
it (its subsampling's output projection stays F32, where llama.cpp's converter writes F16).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType

from ..framework import KV, Tensor
from ..parakeet import SUBSAMPLING, parakeet_kv, parakeet_name, parakeet_refusal, parakeet_tensor
from .errors import ImportRefused
from .safetensors import SourceTensor, to_f32
from .vision import config_int, converted, infinite_clamp

_U32, _F32 = GGUFValueType.UINT32, GGUFValueType.FLOAT32
_F32_TYPE, _F16_TYPE = GGMLQuantizationType.F32, GGMLQuantizationType.F16
_STR, _BOOL = GGUFValueType.STRING, GGUFValueType.BOOL
_TOWER = ("model.audio_tower.", "audio_tower.")
_PROJECTOR = ("model.embed_audio.", "embed_audio.")
# Outside the blocks: Hugging Face's name (under the tower or its projector) -> llama.cpp's.
_GLOBALS = {
    "subsample_conv_projection.layer0.conv.weight": "a.conv1d.0.weight",
    "subsample_conv_projection.layer0.norm.weight": "a.conv1d.0.norm.weight",
    "subsample_conv_projection.layer1.conv.weight": "a.conv1d.1.weight",
    "subsample_conv_projection.layer1.norm.weight": "a.conv1d.1.norm.weight",
    "subsample_conv_projection.input_proj_linear.weight": "a.input_projection.weight",
    "output_proj.weight": "a.pre_encode.out.weight",
    "output_proj.bias": "a.pre_encode.out.bias",
}
_BLOCK = re.compile(r"layers\.(\d+)\.(.+?)(?:\.linear)?\.(weight|bias|input_min|input_max|output_min|output_max)")
# A block's: llama.cpp's names (its ``conv_norm`` and ``norm_conv`` as its converter swaps them).
_PARTS = {
    "feed_forward1.pre_layer_norm": "ffn_norm",
    "feed_forward1.ffw_layer_1": "ffn_up",
    "feed_forward1.ffw_layer_2": "ffn_down",
    "feed_forward1.post_layer_norm": "ffn_post_norm",
    "feed_forward2.pre_layer_norm": "ffn_norm_1",
    "feed_forward2.ffw_layer_1": "ffn_up_1",
    "feed_forward2.ffw_layer_2": "ffn_down_1",
    "feed_forward2.post_layer_norm": "ffn_post_norm_1",
    "norm_pre_attn": "attn_pre_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.post": "attn_out",
    "self_attn.relative_k_proj": "attn_k_rel",
    "norm_post_attn": "attn_post_norm",
    "lconv1d.pre_layer_norm": "conv_norm",
    "lconv1d.linear_start": "conv_pw1",
    "lconv1d.depthwise_conv1d": "conv_dw",
    "lconv1d.conv_norm": "norm_conv",
    "lconv1d.linear_end": "conv_pw2",
    "norm_out": "ln2",
}
_PER_DIM_SCALE = re.compile(r"layers\.(\d+)\.self_attn\.per_dim_scale")
# What libmtmd's gemma4a fixes (``models/gemma4a.cpp``), which a config stating otherwise would
# have computed otherwise.
_FIXED = {
    "attention_chunk_size": 12,
    "attention_context_left": 13,
    "attention_context_right": 0,
    "residual_weight": 0.5,
    "attention_logit_cap": 50.0,
    "hidden_act": "silu",
    "conv_kernel_size": 5,  # the depthwise convolution's left padding of 4
    "rms_norm_eps": 1e-6,
}
_REQUIRED = ("a.conv1d.0.weight", "a.conv1d.1.weight", "a.input_projection.weight", "mm.a.input_projection.weight")


def gemma4_audio(
    audio: Mapping[str, Any], text: Mapping[str, Any], sources: list[SourceTensor]
) -> tuple[KV, list[Tensor]]:
    """The ``gemma4a`` side's keys and tensors for the audio tower ``sources`` (``audio``: the
    config's ``audio_config``, ``text``: its text model's settings); ``ImportRefused`` for a tower
    libmtmd would compute otherwise."""
    for key, value in _FIXED.items():
        if key in audio and not _same(audio[key], value):
            raise ImportRefused(f"config.json's audio_config {key} is {audio[key]!r}; libmtmd's gemma4a has {value!r}")
    width, heads, layers = (
        config_int(audio, key, part="audio_config")
        for key in ("hidden_size", "num_attention_heads", "num_hidden_layers")
    )
    if width % heads:
        raise ImportRefused("config.json's audio_config heads do not divide its hidden_size")
    tensors: dict[str, Tensor] = {}
    for source in sources:
        name = _gguf_name(source.name)
        if name is None or infinite_clamp(name, source):
            continue
        if name.endswith(".conv_dw.weight"):  # a depthwise Conv1d's (channels, 1, kernel), without its unit axis
            if len(source.shape) != 3 or source.shape[1] != 1:
                raise ImportRefused(f"tensor {source.name} of shape {list(source.shape)} is no depthwise kernel")
            source = source.with_data(source.data[:, 0, :])
        tensors[name] = converted(name, source, None)
    missing = [n for n in _REQUIRED if n not in tensors]
    missing += [f"a.blk.{i}.attn_q.weight" for i in range(layers) if f"a.blk.{i}.attn_q.weight" not in tensors]
    if missing:
        raise ImportRefused(f"the audio tower has no {missing[0]}: is a shard missing?")
    mels = config_int(audio, "input_feat_size", default=128, part="audio_config")
    channels = tensors["a.conv1d.1.weight"].shape[0]
    if tensors["a.input_projection.weight"].shape != (width, channels * mels // 4):
        # libmtmd projects what the two convolutions leave of each frame's mel bins (a quarter),
        # transformers as many inputs as its first convolution has channels (a quarter): the
        # releases' 128 of each agree; a mismatch would end the server at its first clip.
        raise ImportRefused(
            f"the audio tower's input projection does not take {channels} channels of {mels // 4} mel bins"
        )
    kv: KV = {
        "clip.has_audio_encoder": (True, _BOOL),
        "clip.audio.projector_type": ("gemma4a", _STR),
        "clip.audio.projection_dim": (config_int(text, "hidden_size", part="text_config"), _U32),
        "clip.audio.embedding_length": (width, _U32),
        "clip.audio.feed_forward_length": (4 * width, _U32),
        "clip.audio.block_count": (layers, _U32),
        "clip.audio.attention.head_count": (heads, _U32),
        "clip.audio.attention.layer_norm_epsilon": (float(audio.get("rms_norm_eps") or 1e-6), _F32),
        "clip.audio.num_mel_bins": (mels, _U32),
    }
    return kv, list(tensors.values())


def _gguf_name(name: str) -> str | None:
    """llama.cpp's name for an audio tower tensor; None for one it does not read."""
    rest = next((name[len(p) :] for p in _PROJECTOR if name.startswith(p)), None)
    if rest is not None:
        if rest == "embedding_projection.weight":
            return "mm.a.input_projection.weight"
        raise ImportRefused(f"tensor {name} is not one cllm's converter knows for Gemma 4's audio projector")
    rest = next((name[len(p) :] for p in _TOWER if name.startswith(p)), None)
    if rest is None:
        return None
    if rest in _GLOBALS:
        return _GLOBALS[rest]
    if m := _PER_DIM_SCALE.fullmatch(rest):  # a parameter, no module's weight
        return f"a.blk.{m[1]}.per_dim_scale.weight"
    m = _BLOCK.fullmatch(rest)
    if m and m[2] in _PARTS:
        return f"a.blk.{m[1]}.{_PARTS[m[2]]}.{m[3]}"
    raise ImportRefused(f"tensor {name} is not one cllm's converter knows for Gemma 4's audio tower")


def _same(given: Any, fixed: Any) -> bool:
    """Whether a setting is the value libmtmd fixes: numbers to within F32's rounding (a config
    written from an F32 epsilon says 9.99999997e-07 for 1e-06)."""
    if isinstance(fixed, float) and isinstance(given, int | float) and not isinstance(given, bool):
        return math.isclose(given, fixed, rel_tol=1e-6)
    return bool(given == fixed)


# Nemotron Omni's Parakeet under its releases' names (NeMo's) -> Ollama's (``convert_nemotron_h.go``'s
# replacements), which ``parakeet.py`` takes on to clip.cpp's: whole-name starts, then a block's parts.
_SOUND_STARTS = (
    ("sound_encoder.encoder.feature_extractor.featurizer.", "a.feature_extractor."),
    ("sound_encoder.encoder.subsampling.linear.", "a.subsampling.linear."),
    *((f"sound_encoder.encoder.subsampling.layers.{i}.", f"a.subsampling.{name}.") for name, i in SUBSAMPLING),
    ("sound_projection.norm.", "mm.a.norm."),
    ("sound_projection.linear1.", "mm.a.1."),
    ("sound_projection.linear2.", "mm.a.2."),
)
# Parakeet's spectrogram (libmtmd's fixed ones too): a 512-point FFT of 25 ms Hann windows at 16 kHz.
_RATE, _N_FFT, _WINDOW = 16000, 512, 400
_SOUND_BLOCK = re.compile(r"sound_encoder\.encoder\.layers\.(\d+)\.(.+?)(?:\.(weight|bias|running_mean|running_var))?")
_SOUND_PARTS = {
    "feed_forward1.linear1": "ffn1_up",
    "feed_forward1.linear2": "ffn1_down",
    "feed_forward2.linear1": "ffn2_up",
    "feed_forward2.linear2": "ffn2_down",
    "norm_feed_forward1": "ffn1_norm",
    "norm_feed_forward2": "ffn2_norm",
    "norm_self_att": "attn_norm",
    "norm_conv": "conv_norm",
    "norm_out": "out_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_out",
    "self_attn.relative_k_proj": "attn_rel_k",
    "self_attn.bias_u": "attn_bias_u",
    "self_attn.bias_v": "attn_bias_v",
    "conv.pointwise_conv1": "conv_pw1",
    "conv.pointwise_conv2": "conv_pw2",
    "conv.depthwise_conv": "conv_dw",
    "conv.norm": "conv_bn",
}
# Ollama's defaults for what a release's sound_config leaves out (``nemotronHNanoVLModel``), by
# the audio key each becomes.
_SOUND_SETTINGS = {
    "subsampling_factor": ("subsampling_factor", 8),
    "conv_kernel_size": ("conv_kernel_size", 9),
    "embedding_length": ("hidden_size", 1024),
    "attention.head_count": ("num_attention_heads", 8),
    "block_count": ("num_hidden_layers", None),
    "num_mel_bins": ("num_mel_bins", 128),
}


def parakeet(
    sound: Mapping[str, Any], text: Mapping[str, Any], sources: list[SourceTensor], part: str = "sound_config"
) -> tuple[KV, list[Tensor]]:
    """Nemotron Omni's Parakeet as the ``parakeet`` side llama.cpp's ``NemotronNanoV2VLModel``
    writes (``sound``: config.json's ``part``, the release's ``sound_config`` or transformers'
    ``audio_config``; ``text``: its text model's settings), through Ollama's names and shapes,
    which ``parakeet.py`` maps for Ollama's own files; ``ImportRefused`` for a tower clip.cpp would
    not run. Its biases (the convolutions', the projector's) are written as llama.cpp's converter
    and Ollama's write them, and, as there, clip.cpp's Parakeet adds none."""
    kind = sound.get("model_type", "parakeet")
    if kind not in ("parakeet", "parakeet_encoder"):  # the release's name, transformers'
        raise ImportRefused(f"config.json's {part} is a {kind!r}; cllm converts Parakeet's")
    settings: dict[str, Any] = {
        key: config_int(sound, name, default, part=part) for key, (name, default) in _SOUND_SETTINGS.items()
    }
    settings["feed_forward_length"] = config_int(
        sound, "intermediate_size", 4 * settings["embedding_length"], part=part
    )
    why = parakeet_refusal(settings)
    if why is not None:
        raise ImportRefused(f"config.json's {part} gives {why}")
    tensors = [parakeet_tensor(t) for source in sources if (t := _sound_tensor(source)) is not None]
    names = {t.name for t in tensors}
    # The mel filterbank and window the release keeps (its featurizer's buffers, which transformers
    # does not save): without them clip.cpp loads no projector, so they are computed as NeMo does.
    if "a.mel_filters" not in names:
        tensors.append(Tensor.of("a.mel_filters", _F32_TYPE, mel_filterbank(settings["num_mel_bins"])))
    if "a.window" not in names:
        tensors.append(Tensor.of("a.window", _F32_TYPE, np.hanning(_WINDOW).astype(np.float32)))
    wanted = ["a.conv1d.0.weight", "a.pre_encode.out.weight", "mm.a.mlp.1.weight"]
    wanted += [f"a.blk.{i}.attn_q.weight" for i in range(settings["block_count"])]
    missing = [n for n in wanted if n not in names]
    if missing:
        raise ImportRefused(f"the audio tower has no {missing[0]}: is a shard missing?")
    projection = config_int(text, "hidden_size", part="llm_config")
    return parakeet_kv(settings, projection, 1e-5), tensors


def mel_filterbank(n_mel: int) -> np.ndarray:
    """Parakeet's mel filterbank, ``(1, n_mel, 257)``: triangles on the Slaney mel scale over a
    512-point FFT of 16 kHz audio, each scaled to unit area (NeMo's ``FilterbankFeatures``, librosa's
    ``filters.mel(norm="slaney")``, transformers' ``mel_filter_bank``), as a release keeps it."""
    edges = _slaney_hertz(np.linspace(_slaney_mel(0.0), _slaney_mel(_RATE / 2), n_mel + 2))
    bins = np.linspace(0, _RATE // 2, _N_FFT // 2 + 1)
    slopes = edges[None, :] - bins[:, None]
    widths = np.diff(edges)
    triangles = np.maximum(0.0, np.minimum(-slopes[:, :-2] / widths[:-1], slopes[:, 2:] / widths[1:]))
    filters = triangles.astype(np.float32) * (2.0 / (edges[2:] - edges[:-2]))[None, :]
    return np.ascontiguousarray(filters.T[None], dtype=np.float32)


def _slaney_mel(hertz: np.ndarray | float) -> np.ndarray:
    """Slaney's mel scale: linear below 1 kHz, logarithmic above."""
    f = np.asarray(hertz, dtype=np.float64)
    return np.where(f < 1000.0, 3.0 * f / 200.0, 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) * 27.0 / np.log(6.4))


def _slaney_hertz(mels: np.ndarray) -> np.ndarray:
    return np.where(mels < 15.0, 200.0 * mels / 3.0, 1000.0 * np.exp(np.log(6.4) * (mels - 15.0) / 27.0))


def _sound_tensor(source: SourceTensor) -> Tensor | None:
    """A Parakeet tensor under clip.cpp's name, in Ollama's shape and type (the depthwise and
    pointwise kernels squeezed; F32 the biases, vectors, feature extractor, subsampling and
    depthwise kernel, F16 the other matrices); None for the batch norm's step count."""
    name = _ollama_sound_name(source.name)
    if name is None:
        return None
    source.require_float()
    shape = source.shape
    if ".conv_dw.weight" in name and len(shape) == 3:
        shape = (shape[0], shape[2])
    elif ".conv_pw" in name and name.endswith(".weight") and len(shape) == 3 and shape[2] == 1:
        shape = shape[:2]
    f32 = (
        name.endswith(".bias")
        or len(shape) == 1
        or name.startswith(("a.feature_extractor.", "a.subsampling."))
        or ".conv_dw." in name
    )
    kind, dtype = (_F32_TYPE, np.dtype(np.float32)) if f32 else (_F16_TYPE, np.dtype(np.float16))
    data, from_dtype = source.data, source.dtype
    return Tensor(
        parakeet_name(name),
        kind,
        shape,
        dtype,
        lambda: np.ascontiguousarray(to_f32(data, from_dtype).reshape(shape), dtype),
    )


def _ollama_sound_name(name: str) -> str | None:
    """Ollama's name for one of the release's Parakeet tensors; None for the batch norm's step count."""
    if name.endswith(".num_batches_tracked"):
        return None
    for old, new in _SOUND_STARTS:
        if name.startswith(old):
            return new + name[len(old) :]
    m = _SOUND_BLOCK.fullmatch(name)
    if m and m[2] in _SOUND_PARTS:
        return f"a.blk.{m[1]}.{_SOUND_PARTS[m[2]]}" + (f".{m[3]}" if m[3] else "")
    raise ImportRefused(f"tensor {name} is not one cllm's converter knows for Parakeet's audio tower")
