"""A tiny random-weight Nemotron Omni in both layouts: llama.cpp's (a ``nemotron_h`` text GGUF and one
projector with a ``nemotron_v2_vl`` vision side and a ``parakeet`` audio side) and Ollama's (one
``nemotron_h_omni`` GGUF with the RADIO vision tower, its projector and the Parakeet audio tower
inside, as ``convert_nemotron_h.go`` writes it), from the same weights. ``convert/nemotron.py``
maps the second into the first.

The text model is a three-block Nemotron-H (a Mamba-2 block, an attention block, a ReLU² MLP
block); the ViT sees 32-pixel images in 8-pixel patches, after two register tokens, its 4 x 4
patches merged 2 x 2 into 4 image tokens. Ollama's file holds RADIO's position table at a 7 x 7
grid, which llama.cpp's converter resizes (bilinear, corners aligned) to the image's 4 x 4: every
other row and column, exactly. The Parakeet tower is one Conformer block 16 wide after the three
stride-2 subsampling convolutions (4 channels) that turn 128 mel bins into 16, its projector an
RMS norm and a ReLU² MLP into the text model: a second of audio is 13 tokens.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import gguf
import numpy as np

from ..convert.hf.audio import mel_filterbank
from .gguf_base import (
    TINY_VISION,
    Tensors,
    add_tokenizer,
    copy_fields,
    f16_exact,
    finish,
    model_header,
    projector_header,
    synthetic_vocab,
)
from .ocr_ggufs import layer_norm, vit_blocks

_F32 = gguf.GGMLQuantizationType.F32


@dataclasses.dataclass(frozen=True)
class NemotronShape:
    """A hybrid Nemotron-H: ``pattern`` (``M`` Mamba-2, ``*`` attention, ``-`` MLP) and its widths."""

    pattern: str = "M*-"
    n_embd: int = 64
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 16
    n_ff: int = 128
    d_inner: int = 128
    d_state: int = 16
    d_conv: int = 4
    ssm_heads: int = 8
    n_group: int = 1
    context_length: int = 8192

    @property
    def n_layer(self) -> int:
        return len(self.pattern)


NEMOTRON = NemotronShape()
VISION = dataclasses.replace(TINY_VISION, n_ff=64)
N_REGISTERS = 2  # RADIO's class and register tokens, before the patches
SOURCE_GRID = 7  # RADIO's position table as Ollama keeps it (its largest grid), resized to 4 x 4
PROJECTOR_HIDDEN = 96


@dataclasses.dataclass(frozen=True)
class ParakeetShape:
    """A Parakeet (FastConformer) audio encoder and its projector (``clip_graph_parakeet``)."""

    n_embd: int = 16
    n_head: int = 2
    n_ff: int = 32
    n_layer: int = 1
    channels: int = 4  # the subsampling convolutions'
    conv_kernel: int = 3  # the Conformer's depthwise convolution (odd)
    n_mel: int = 128  # the only count Ollama's converter accepts
    hidden: int = 32  # the projector's MLP
    subsampling: int = 8  # three stride-2 convolutions: clip.cpp requires 8


PARAKEET = ParakeetShape()
_WINDOW = 400  # 25 ms at 16 kHz


def write_nemotron_h(path: Path, *, shape: NemotronShape = NEMOTRON, seed: int = 0, f16: bool = False) -> Path:
    """A tiny ``nemotron_h`` as llama.cpp loads Ollama's Nemotron-H (per-block KV-head and FFN
    arrays: a Mamba-2 block has neither, an attention block no FFN, an MLP block no KV heads); its
    matrices in F16 with ``f16`` (as a checkpoint's converted)."""
    matrices = gguf.GGMLQuantizationType.F16 if f16 else _F32
    t = Tensors(gguf.GGUFWriter(str(path), "nemotron_h"), np.random.default_rng(seed), 0.5, matrices)
    w, s = t.w, shape
    model_header(w, s, "tiny-nemotron-h", matrices)  # type: ignore[arg-type]
    w.add_head_count(s.n_head)
    w.add_head_count_kv([s.n_head_kv if kind == "*" else 0 for kind in s.pattern])
    w.add_feed_forward_length([s.n_ff if kind == "-" else 0 for kind in s.pattern])
    w.add_key_length(s.head_dim)
    w.add_value_length(s.head_dim)
    w.add_layer_norm_eps(1e-5)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_ssm_conv_kernel(s.d_conv)
    w.add_ssm_inner_size(s.d_inner)
    w.add_ssm_state_size(s.d_state)
    w.add_ssm_group_count(s.n_group)
    w.add_ssm_time_step_rank(s.ssm_heads)
    vocab = synthetic_vocab()
    add_tokenizer(w, vocab, None)
    t.matrix("token_embd.weight", len(vocab.tokens), s.n_embd)
    t.norm("output_norm.weight", s.n_embd)
    conv = s.d_inner + 2 * s.n_group * s.d_state
    for i, kind in enumerate(s.pattern):
        p = f"blk.{i}."
        t.norm(p + "attn_norm.weight", s.n_embd)
        if kind == "M":
            t.matrix(p + "ssm_in.weight", 2 * s.d_inner + 2 * s.n_group * s.d_state + s.ssm_heads, s.n_embd)
            if f16:  # a converter's depthwise kernel stays F32
                t.f32(p + "ssm_conv1d.weight", f16_exact(t, (conv, s.d_conv), 0.5))
            else:
                t.matrix(p + "ssm_conv1d.weight", conv, s.d_conv)
            t.f32(p + "ssm_conv1d.bias", np.zeros(conv))
            t.f32(p + "ssm_dt.bias", np.log(np.expm1(np.full(s.ssm_heads, 0.05))))  # softplus: a 0.05 step
            t.f32(p + "ssm_a", -np.arange(1, s.ssm_heads + 1, dtype=np.float32).reshape(-1, 1))
            t.f32(p + "ssm_d", np.ones((s.ssm_heads, 1)))
            t.f32(p + "ssm_norm.weight", np.ones((s.n_group, s.d_inner // s.n_group)))
            t.matrix(p + "ssm_out.weight", s.n_embd, s.d_inner)
        elif kind == "*":
            t.matrix(p + "attn_q.weight", s.n_head * s.head_dim, s.n_embd)
            t.matrix(p + "attn_k.weight", s.n_head_kv * s.head_dim, s.n_embd)
            t.matrix(p + "attn_v.weight", s.n_head_kv * s.head_dim, s.n_embd)
            t.matrix(p + "attn_output.weight", s.n_embd, s.n_head * s.head_dim)
        else:
            t.matrix(p + "ffn_up.weight", s.n_ff, s.n_embd)
            t.matrix(p + "ffn_down.weight", s.n_embd, s.n_ff)
    finish(w)
    return path


def write_nemotron_projector(
    path: Path,
    *,
    n_embd_text: int = NEMOTRON.n_embd,
    seed: int = 0,
    audio: bool = True,
    f16: bool = False,
    post_ln: bool = False,
) -> Path:
    """The projector as llama.cpp's converter writes Nemotron Omni's (Nano VL's without ``audio``):
    RADIO's patch embedding as a convolution kernel, its class and register tokens, the position
    table resized to the image's grid (``[1, patches, n]``), fused Q/K/V, and the RMS-normed ReLU²
    MLP that takes each 2 x 2 group of patches into the text model; with ``audio``, the Parakeet
    tower beside it (``write_parakeet``), each side's projector type under its modality. The ViT's
    and MLP's matrices in F16 with ``f16`` (as a checkpoint's converted), else F32; with ``post_ln``,
    a LayerNorm after the ViT (Megatron's ``vision_final_layernorm``, which cllm's converter writes
    and llama.cpp's drops)."""
    v = VISION
    t = projector_header(path, v, "nemotron_v2_vl", n_embd_text, seed)
    if f16:
        t = dataclasses.replace(t, qtype=gguf.GGMLQuantizationType.F16)
    if audio:
        del t.w.kv_data[0]["clip.projector_type"]
        t.w.add_clip_vision_projector_type("nemotron_v2_vl")
        write_parakeet(t, n_embd_text)
    t.w.add_vision_projector_scale_factor(v.merge)
    n, side = v.n_embd, v.image_size // v.patch_size
    t.f32("v.patch_embd.weight", f16_exact(t, (n, 3, v.patch_size, v.patch_size)))
    t.f32("v.class_embd", f16_exact(t, (N_REGISTERS, n)))
    grid = source_positions(seed)
    step = (SOURCE_GRID - 1) // (side - 1)
    t.f32("v.position_embd.weight", grid[::step, ::step].reshape(1, side * side, n))

    vit_blocks(t, v.n_layer, n, v.n_ff)
    if post_ln:
        layer_norm(t, "v.post_ln", n)
    merged = n * v.merge * v.merge
    t.f32("mm.model.mlp.0.weight", 1 + t.rng.standard_normal(merged) * 0.1)
    t.matrix("mm.model.mlp.1.weight", PROJECTOR_HIDDEN, merged)
    t.matrix("mm.model.mlp.3.weight", n_embd_text, PROJECTOR_HIDDEN)
    finish(t.w)
    return path


def write_parakeet(t: Tensors, n_embd_text: int, a: ParakeetShape = PARAKEET) -> None:
    """Parakeet's keys and tensors as ``NemotronNanoV2VLModel`` writes them: the subsampling
    convolutions as ``a.conv1d.{0,2,3,5,6}`` with ``[1, C, 1, 1]`` biases, the depthwise kernel
    ``[1, 1, n, k]``, the batch norm's running statistics as ``conv_norm_mean``/``_var``, biases,
    norms and convolutions in F32, the other matrices in F16 (its ``--outtype f16``; F16-exact values)
    but the subsampling's output projection, F32 as Ollama's converter keeps it."""
    w, n, c, rng = t.w, a.n_embd, a.channels, t.rng
    w.add_clip_has_audio_encoder(True)
    w.add_clip_audio_projector_type("parakeet")
    w.add_audio_projection_dim(n_embd_text)
    w.add_audio_embedding_length(n)
    w.add_audio_feed_forward_length(a.n_ff)
    w.add_audio_block_count(a.n_layer)
    w.add_audio_head_count(a.n_head)
    w.add_audio_num_mel_bins(a.n_mel)
    w.add_audio_attention_layernorm_eps(1e-5)
    w.add_uint32("clip.audio.subsampling_factor", a.subsampling)  # no writer method in this gguf-py
    w.add_audio_conv_kernel_size(a.conv_kernel)

    def f16(name: str, *shape: int, std: float = 0.3) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * std).astype(np.float16))

    def f32(name: str, *shape: int, std: float = 0.3, mean: float = 0.0) -> None:
        t.f32(name, f16_exact(t, shape, std) + mean)

    # The release's mel filterbank (Slaney's, as NeMo computes it) and its symmetric Hann window.
    t.f32("a.mel_filters", mel_filterbank(a.n_mel))
    t.f32("a.window", np.hanning(_WINDOW))
    for i, (c_in, k) in {0: (1, 3), 2: (1, 3), 3: (c, 1), 5: (1, 3), 6: (c, 1)}.items():
        f32(f"a.conv1d.{i}.weight", c, c_in, k, k, std=0.5)
        f32(f"a.conv1d.{i}.bias", 1, c, 1, 1, std=0.1)
    freq = a.n_mel // a.subsampling
    t.f32("a.pre_encode.out.weight", rng.standard_normal((n, c * freq)) * 0.2)
    f32("a.pre_encode.out.bias", n, std=0.1)
    for i in range(a.n_layer):
        p = f"a.blk.{i}."
        for norm in ("ffn_norm", "ln1", "norm_conv", "conv_norm", "ffn_norm_1", "ln2"):
            f32(f"{p}{norm}.weight", n, std=0.1, mean=1.0)
            f32(f"{p}{norm}.bias", n, std=0.1)
        for up, down in (("ffn_up", "ffn_down"), ("ffn_up_1", "ffn_down_1")):
            f16(f"{p}{up}.weight", a.n_ff, n)
            f16(f"{p}{down}.weight", n, a.n_ff)
        for name in ("attn_q", "attn_k", "attn_v", "attn_out", "linear_pos"):
            f16(f"{p}{name}.weight", n, n)
        f32(p + "pos_bias_u", a.n_head, n // a.n_head, std=1.0)
        f32(p + "pos_bias_v", a.n_head, n // a.n_head, std=1.0)
        f32(p + "conv_pw1.weight", 2 * n, n)
        f32(p + "conv_pw1.bias", 1, 2 * n, 1, 1, std=0.1)  # written, never read by clip.cpp's graph
        f32(p + "conv_dw.weight", 1, 1, n, a.conv_kernel, std=0.5)
        f32(p + "conv_norm_mean", n, std=0.1)
        t.f32(p + "conv_norm_var", 1 + rng.uniform(0.0, 0.5, n))
        f32(p + "conv_pw2.weight", n, n)
    f32("mm.a.norm_pre.weight", n, std=0.1, mean=1.0)
    f16("mm.a.mlp.1.weight", a.hidden, n)
    f16("mm.a.mlp.2.weight", n_embd_text, a.hidden)


def source_positions(seed: int) -> np.ndarray:
    """RADIO's position table at ``SOURCE_GRID`` (``[rows, columns, n]``), F16-exact, from ``seed``."""
    grid = np.random.default_rng([seed, SOURCE_GRID]).standard_normal((SOURCE_GRID, SOURCE_GRID, VISION.n_embd))
    return (grid * 0.2).astype(np.float16).astype(np.float32)


def write_nemotron_omni_vision(
    folder: Path, *, seed: int = 0, audio: bool = True, f16: bool = False, post_ln: bool = False
) -> tuple[Path, Path]:
    """``folder/text.gguf`` and ``folder/mmproj.gguf``: Nemotron Omni's text half (F16 matrices with
    ``f16``) and its towers (its vision tower alone without ``audio``; a norm after the ViT with
    ``post_ln``) in llama.cpp's layout."""
    folder.mkdir(parents=True, exist_ok=True)
    text = write_nemotron_h(folder / "text.gguf", seed=seed, f16=f16)
    mmproj = write_nemotron_projector(folder / "mmproj.gguf", seed=seed, audio=audio, f16=f16, post_ln=post_ln)
    return text, mmproj


# clip.cpp's names -> Ollama's (convert_nemotron_h.go's replacements of the Hugging Face names).
_OLLAMA_NAMES = {
    "mm.model.mlp.0.weight": "mm.norm.weight",
    "mm.model.mlp.1.weight": "mm.1.weight",
    "mm.model.mlp.3.weight": "mm.2.weight",
}
_SUBSAMPLING = ((0, "conv0"), (2, "dw1"), (3, "pw1"), (5, "dw2"), (6, "pw2"))  # a.conv1d.<i> is Ollama's <name>
# clip.cpp's Parakeet names -> Ollama's (convert_nemotron_h.go's replacements of the Hugging Face names).
_OLLAMA_AUDIO = {
    "a.mel_filters": "a.feature_extractor.fb",
    "a.window": "a.feature_extractor.window",
    "a.pre_encode.out.": "a.subsampling.linear.",
    "mm.a.norm_pre.": "mm.a.norm.",
    "mm.a.mlp.": "mm.a.",
    **{
        f"a.conv1d.{i}.": f"a.subsampling.{name}."
        for i, name in ((0, "conv0"), (2, "dw1"), (3, "pw1"), (5, "dw2"), (6, "pw2"))
    },
}
_OLLAMA_AUDIO_LEAVES = {
    "ffn_up_1": "ffn2_up",
    "ffn_down_1": "ffn2_down",
    "ffn_norm_1": "ffn2_norm",
    "ffn_up": "ffn1_up",
    "ffn_down": "ffn1_down",
    "ffn_norm": "ffn1_norm",
    "ln1": "attn_norm",
    "ln2": "out_norm",
    "norm_conv": "conv_norm",
    "linear_pos": "attn_rel_k",
    "pos_bias_u": "attn_bias_u",
    "pos_bias_v": "attn_bias_v",
    "conv_norm_mean": "conv_bn.running_mean",
    "conv_norm_var": "conv_bn.running_var",
    "conv_norm": "conv_bn",
}


def ollama_audio(name: str, data: np.ndarray) -> tuple[str, np.ndarray]:
    """A Parakeet tensor of llama.cpp's projector as Ollama's converter writes it: its name, the
    convolution biases and depthwise kernel squeezed to the Hugging Face shapes (the pointwise
    kernels' trailing 1 too), in F32 where its ``Kind`` says (biases, 1-D tensors, the feature
    extractor, the subsampling, the depthwise kernel) and F16 elsewhere."""
    for old, new in _OLLAMA_AUDIO.items():
        if name.startswith(old):
            name = new + name.removeprefix(old)
            break
    else:
        block, _, leaf = name.partition(".blk.")
        index, _, rest = leaf.partition(".")
        stem, dot, suffix = rest.partition(".")
        name = f"{block}.blk.{index}.{_OLLAMA_AUDIO_LEAVES.get(stem, stem)}{dot}{suffix}"
    if name.endswith(".bias") or ".conv_dw." in name:
        data = data.reshape(-1, data.shape[-1]) if ".conv_dw." in name else data.reshape(-1)
    f32 = name.endswith(".bias") or data.ndim == 1 or name.startswith(("a.feature_extractor.", "a.subsampling."))
    return name, data.astype(np.float32 if f32 or ".conv_dw." in name else np.float16)


def write_ollama_nemotron_omni(path: Path, *, seed: int = 0, audio: bool = True) -> Path:
    """``write_nemotron_omni_vision``'s model as one GGUF laid out as Ollama's converter writes
    Nemotron 3 Nano Omni: architecture ``nemotron_h_omni``, the tower's hyperparameters as
    ``nemotron_h_omni.vision.*`` (and audio's as ``.audio.*``), RADIO's linear patch embedding
    ``[n, 3*p*p]``, its class and register tokens and its position table at its largest grid
    ``[cells, n]`` (all F16), Q/K/V
    split, the projector under Ollama's names, and the Parakeet tower (``_ollama_audio``; without it
    when not ``audio``), its keys as ``nemotron_h_omni.audio.*``. llama.cpp cannot load it as it is."""
    v = VISION
    with tempfile.TemporaryDirectory() as tmp:
        text_path, clip_path = write_nemotron_omni_vision(Path(tmp), seed=seed, audio=audio)
        text, clip = gguf.GGUFReader(text_path), gguf.GGUFReader(clip_path)
        w = gguf.GGUFWriter(str(path), "nemotron_h_omni")
        copy_fields(text, w, key=lambda k: k.replace("nemotron_h.", "nemotron_h_omni.", 1))
        arch = "nemotron_h_omni.vision."
        for key, value in (
            ("block_count", v.n_layer),
            ("embedding_length", v.n_embd),
            ("feed_forward_length", v.n_ff),
            ("attention.head_count", v.n_head),
            ("patch_size", v.patch_size),
            ("image_size", v.image_size),
            ("max_tiles", 12),
            ("num_channels", 3),
            ("projector.scale_factor", v.merge),
        ):
            w.add_uint32(arch + key, value)
        w.add_float32(arch + "attention.layer_norm_epsilon", 1e-6)
        w.add_bool(arch + "use_thumbnail", True)
        w.add_array(arch + "image_mean", [0.5, 0.5, 0.5])
        w.add_array(arch + "image_std", [0.5, 0.5, 0.5])
        if audio:
            _ollama_audio_keys(w)
        for t in text.tensors:
            w.add_tensor(t.name, np.array(t.data))
        for t in clip.tensors:
            data = np.array(t.data)
            if t.name.startswith(("a.", "mm.a.")):
                w.add_tensor(*ollama_audio(t.name, data))
            elif t.name == "v.patch_embd.weight":
                w.add_tensor(t.name, data.reshape(data.shape[0], -1).astype(np.float16))
            elif t.name == "v.position_embd.weight":
                w.add_tensor("v.position_embd", source_positions(seed).reshape(-1, v.n_embd).astype(np.float16))
            elif t.name == "v.class_embd":
                w.add_tensor("v.cls_embd", data.astype(np.float16))
            elif ".attn_qkv." in t.name:
                for part, which in zip(np.split(data, 3), "qkv", strict=True):
                    w.add_tensor(t.name.replace("attn_qkv", f"attn_{which}"), part)
            else:
                w.add_tensor(_OLLAMA_NAMES.get(t.name, t.name), data)
        finish(w)
    return path


def _ollama_audio_keys(w: gguf.GGUFWriter, a: ParakeetShape = PARAKEET) -> None:
    """The Parakeet tower's keys as ``nemotronHNanoVLModel.KV`` writes them."""
    arch = "nemotron_h_omni.audio."
    for key, value in (
        ("block_count", a.n_layer),
        ("embedding_length", a.n_embd),
        ("feed_forward_length", a.n_ff),
        ("attention.head_count", a.n_head),
        ("conv_kernel_size", a.conv_kernel),
        ("num_mel_bins", a.n_mel),
        ("sample_rate", 16000),
        ("subsampling_factor", a.subsampling),
        ("subsampling_conv_channels", a.channels),
        ("subsampling_conv_kernel_size", 3),
        ("subsampling_conv_stride", 2),
        ("projection_hidden_size", a.hidden),
        ("sound_token_id", 5),
    ):
        w.add_uint32(arch + key, value)
    w.add_float32(arch + "attention.layer_norm_epsilon", 1e-5)
    w.add_bool(arch + "scale_input", False)


# Ollama's Parakeet names -> the release's (NeMo's), undoing ``convert_nemotron_h.go``'s replacements.
_RELEASE_AUDIO = (
    ("a.feature_extractor.", "sound_encoder.encoder.feature_extractor.featurizer."),
    ("a.subsampling.linear.", "sound_encoder.encoder.subsampling.linear."),
    *((f"a.subsampling.{name}.", f"sound_encoder.encoder.subsampling.layers.{i}.") for i, name in _SUBSAMPLING),
    ("mm.a.norm.", "sound_projection.norm."),
    ("mm.a.1.", "sound_projection.linear1."),
    ("mm.a.2.", "sound_projection.linear2."),
)
_RELEASE_AUDIO_LEAVES = {
    "ffn1_up": "feed_forward1.linear1",
    "ffn1_down": "feed_forward1.linear2",
    "ffn2_up": "feed_forward2.linear1",
    "ffn2_down": "feed_forward2.linear2",
    "ffn1_norm": "norm_feed_forward1",
    "ffn2_norm": "norm_feed_forward2",
    "attn_norm": "norm_self_att",
    "conv_norm": "norm_conv",
    "out_norm": "norm_out",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_out": "self_attn.o_proj",
    "attn_rel_k": "self_attn.relative_k_proj",
    "attn_bias_u": "self_attn.bias_u",
    "attn_bias_v": "self_attn.bias_v",
    "conv_pw1": "conv.pointwise_conv1",
    "conv_pw2": "conv.pointwise_conv2",
    "conv_dw": "conv.depthwise_conv",
    "conv_bn": "conv.norm",
}
# clip.cpp's RADIO names -> the release's (``vision_model.radio_model.model.`` before them).
_RELEASE_VISION = {"ln1": "norm1", "attn_qkv": "attn.qkv", "attn_out": "attn.proj", "ln2": "norm2"}
_RELEASE_VISION |= {"ffn_up": "mlp.fc1", "ffn_down": "mlp.fc2"}


def release_tower(mmproj: Path, *, seed: int = 0, grid: int = SOURCE_GRID) -> dict[str, tuple[str, np.ndarray]]:
    """The towers of ``write_nemotron_projector``'s GGUF as Nemotron Omni's release keeps them (safetensors
    dtype and values by name): RADIO's under ``vision_model.radio_model.``, its linear patch embedding
    ``[n, 3*p*p]``, its class and register tokens, its position table ``[1, cells, n]`` at ``grid``
    (RADIO's larger table at ``SOURCE_GRID``, or the picture's own), its input conditioner's pixel
    statistics, summary indices and video embedder; a norm after it as Megatron's
    ``vision_projector.vision_final_layernorm``; the MLP as ``mlp1.{0,1,3}``; the Parakeet's under
    NeMo's names (``sound_encoder.``, ``sound_projection.``), its kernels in their convolutions'
    shapes, its batch norm's step count. Matrices F16, vectors F32."""
    v = VISION
    reader = gguf.GGUFReader(mmproj)
    mean = reader.fields["clip.vision.image_mean"].contents()
    std = reader.fields["clip.vision.image_std"].contents()
    out: dict[str, tuple[str, np.ndarray]] = {}
    radio = "vision_model.radio_model."
    for t in reader.tensors:
        data = np.array(t.data)
        if t.name.startswith(("a.", "mm.a.")):
            name, data = ollama_audio(t.name, data)
            out[_release_audio(name)] = _audio_shaped(name, data)
        elif t.name == "v.patch_embd.weight":
            out[radio + "model.patch_generator.embedder.weight"] = _typed(data.reshape(v.n_embd, -1))
        elif t.name == "v.position_embd.weight":
            table = source_positions(seed) if grid == SOURCE_GRID else data.reshape(grid, grid, v.n_embd)
            out[radio + "model.patch_generator.pos_embed"] = ("F32", table.reshape(1, grid * grid, v.n_embd))
        elif t.name == "v.class_embd":
            out[radio + "model.patch_generator.cls_token.token"] = ("F16", data.astype(np.float16))
        elif t.name.startswith("v.post_ln."):
            out[f"vision_projector.vision_final_layernorm.{t.name.split('.')[2]}"] = _typed(data)
        elif t.name.startswith("v.blk."):
            _, _, index, part, kind = t.name.split(".")
            out[f"{radio}model.blocks.{index}.{_RELEASE_VISION[part]}.{kind}"] = _typed(data)
        else:
            out[f"mlp1.{t.name.split('.')[3]}.weight"] = _typed(data)
    out[radio + "input_conditioner.norm_mean"] = ("F32", np.array(mean, np.float32).reshape(3, 1, 1))
    out[radio + "input_conditioner.norm_std"] = ("F32", np.array(std, np.float32).reshape(3, 1, 1))
    # What libmtmd has no use for: RADIO's summary indices, its video embedder, a batch norm's steps.
    out[radio + "summary_idxs"] = ("I64", np.array([0, 1], np.int64))
    video = np.random.default_rng([seed, 2]).standard_normal((v.n_embd, 2 * 3 * v.patch_size**2)) * 0.1
    out[radio + "model.patch_generator.video_embedder.weight"] = _typed(video)
    if any(name.startswith("sound_encoder.") for name in out):
        out["sound_encoder.encoder.layers.0.conv.norm.num_batches_tracked"] = ("I64", np.array(1000, np.int64))
    return out


def _typed(data: np.ndarray) -> tuple[str, np.ndarray]:
    """A matrix in F16 (a twin's are F16-exact), a vector in F32."""
    return ("F16", data.astype(np.float16)) if data.ndim > 1 else ("F32", data.astype(np.float32))


def _release_audio(name: str) -> str:
    for old, new in _RELEASE_AUDIO:
        if name.startswith(old):
            return new + name.removeprefix(old)
    _, _, index, rest = name.split(".", 3)
    stem, dot, suffix = rest.partition(".")
    return f"sound_encoder.encoder.layers.{index}.{_RELEASE_AUDIO_LEAVES[stem]}{dot}{suffix}"


def _audio_shaped(name: str, data: np.ndarray) -> tuple[str, np.ndarray]:
    """An Ollama-shaped Parakeet tensor in the release's shape: the depthwise kernel ``[C, 1, K]``, the
    pointwise ones ``[O, I, 1]``; in Ollama's type."""
    if ".conv_dw.weight" in name:
        data = data.reshape(data.shape[0], 1, data.shape[1])
    elif ".conv_pw" in name and name.endswith(".weight"):
        data = data.reshape(*data.shape, 1)
    return ("F16" if data.dtype == np.float16 else "F32", data)
