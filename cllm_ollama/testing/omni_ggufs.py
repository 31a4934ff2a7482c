"""A tiny random-weight Nemotron Omni in both layouts: llama.cpp's (a ``nemotron_h`` text GGUF and its
``nemotron_v2_vl`` projector) and Ollama's (one ``nemotron_h_omni`` GGUF with the RADIO vision
tower, its projector and a token Parakeet audio tower inside, as ``convert_nemotron_h.go`` writes
it), from the same weights. ``store/layouts_omni.py`` maps the second into the first.

The text model is a three-block Nemotron-H (a Mamba-2 block, an attention block, a ReLU² MLP
block); the ViT sees 32-pixel images in 8-pixel patches, after two register tokens, its 4 x 4
patches merged 2 x 2 into 4 image tokens. Ollama's file holds RADIO's position table at a 7 x 7
grid, which llama.cpp's converter resizes (bilinear, corners aligned) to the image's 4 x 4: every
other row and column, exactly.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import gguf
import numpy as np

from .ggufs import (
    TINY_VISION,
    _add_tokenizer,
    _finish,
    _model_header,
    _projector_header,
    _Tensors,
    synthetic_vocab,
)
from .ocr_ggufs import vit_blocks
from .ollama_ggufs import _copy_fields
from .vision_ggufs import _f16_exact

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


def write_nemotron_h(path: Path, *, shape: NemotronShape = NEMOTRON, seed: int = 0) -> Path:
    """A tiny ``nemotron_h`` as llama.cpp loads Ollama's Nemotron-H (per-block KV-head and FFN
    arrays: a Mamba-2 block has neither, an attention block no FFN, an MLP block no KV heads)."""
    t = _Tensors(gguf.GGUFWriter(str(path), "nemotron_h"), np.random.default_rng(seed), 0.5, _F32)
    w, s = t.w, shape
    _model_header(w, s, "tiny-nemotron-h", _F32)  # type: ignore[arg-type]
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
    _add_tokenizer(w, vocab, None)
    t.matrix("token_embd.weight", len(vocab.tokens), s.n_embd)
    t.norm("output_norm.weight", s.n_embd)
    conv = s.d_inner + 2 * s.n_group * s.d_state
    for i, kind in enumerate(s.pattern):
        p = f"blk.{i}."
        t.norm(p + "attn_norm.weight", s.n_embd)
        if kind == "M":
            t.matrix(p + "ssm_in.weight", 2 * s.d_inner + 2 * s.n_group * s.d_state + s.ssm_heads, s.n_embd)
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
    _finish(w)
    return path


def write_nemotron_projector(path: Path, *, n_embd_text: int = NEMOTRON.n_embd, seed: int = 0) -> Path:
    """The ``nemotron_v2_vl`` projector as llama.cpp's converter writes Nemotron Nano VL's: RADIO's
    patch embedding as a convolution kernel, its class and register tokens, the position table
    resized to the image's grid (``[1, patches, n]``), fused Q/K/V, and the RMS-normed ReLU² MLP
    that takes each 2 x 2 group of patches into the text model."""
    v = VISION
    t = _projector_header(path, v, "nemotron_v2_vl", n_embd_text, seed)
    t.w.add_vision_projector_scale_factor(v.merge)
    n, side = v.n_embd, v.image_size // v.patch_size
    t.f32("v.patch_embd.weight", _f16_exact(t, (n, 3, v.patch_size, v.patch_size)))
    t.f32("v.class_embd", _f16_exact(t, (N_REGISTERS, n)))
    grid = source_positions(seed)
    step = (SOURCE_GRID - 1) // (side - 1)
    t.f32("v.position_embd.weight", grid[::step, ::step].reshape(1, side * side, n))

    vit_blocks(t, v.n_layer, n, v.n_ff)
    merged = n * v.merge * v.merge
    t.f32("mm.model.mlp.0.weight", 1 + t.rng.standard_normal(merged) * 0.1)
    t.matrix("mm.model.mlp.1.weight", PROJECTOR_HIDDEN, merged)
    t.matrix("mm.model.mlp.3.weight", n_embd_text, PROJECTOR_HIDDEN)
    _finish(t.w)
    return path


def source_positions(seed: int) -> np.ndarray:
    """RADIO's position table at ``SOURCE_GRID`` (``[rows, columns, n]``), F16-exact, from ``seed``."""
    grid = np.random.default_rng([seed, SOURCE_GRID]).standard_normal((SOURCE_GRID, SOURCE_GRID, VISION.n_embd))
    return (grid * 0.2).astype(np.float16).astype(np.float32)


def write_nemotron_omni_vision(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """``folder/text.gguf`` and ``folder/mmproj.gguf``: Nemotron Omni's text and vision halves in
    llama.cpp's layout."""
    folder.mkdir(parents=True, exist_ok=True)
    text = write_nemotron_h(folder / "text.gguf", seed=seed)
    return text, write_nemotron_projector(folder / "mmproj.gguf", seed=seed)


# clip.cpp's names -> Ollama's (convert_nemotron_h.go's replacements of the Hugging Face names).
_OLLAMA_NAMES = {
    "mm.model.mlp.0.weight": "mm.norm.weight",
    "mm.model.mlp.1.weight": "mm.1.weight",
    "mm.model.mlp.3.weight": "mm.2.weight",
}
# A token of the Parakeet audio tower Ollama's file carries (the map leaves it out).
_AUDIO = {"a.blk.0.attn_q.weight": (8, 8), "a.blk.0.attn_q.bias": (8,), "mm.a.1.weight": (64, 8)}


def write_ollama_nemotron_omni(path: Path, *, seed: int = 0) -> Path:
    """``write_nemotron_omni_vision``'s model as one GGUF laid out as Ollama's converter writes
    Nemotron 3 Nano Omni: architecture ``nemotron_h_omni``, the tower's hyperparameters as
    ``nemotron_h_omni.vision.*`` (and audio's as ``.audio.*``), RADIO's linear patch embedding
    ``[n, 3*p*p]``, its class and register tokens and its position table at its largest grid
    ``[cells, n]`` (all F16), Q/K/V
    split, the projector under Ollama's names, and audio tensors. llama.cpp cannot load it as it is."""
    v = VISION
    with tempfile.TemporaryDirectory() as tmp:
        text_path, clip_path = write_nemotron_omni_vision(Path(tmp), seed=seed)
        text, clip = gguf.GGUFReader(text_path), gguf.GGUFReader(clip_path)
        w = gguf.GGUFWriter(str(path), "nemotron_h_omni")
        _copy_fields(text, w, key=lambda k: k.replace("nemotron_h.", "nemotron_h_omni.", 1))
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
        w.add_uint32("nemotron_h_omni.audio.block_count", 1)
        w.add_uint32("nemotron_h_omni.audio.embedding_length", 8)
        for t in text.tensors:
            w.add_tensor(t.name, np.array(t.data))
        rng = np.random.default_rng(seed)
        for t in clip.tensors:
            data = np.array(t.data)
            if t.name == "v.patch_embd.weight":
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
        for name, shape in _AUDIO.items():
            w.add_tensor(name, rng.standard_normal(shape).astype(np.float32))
        _finish(w)
    return path
