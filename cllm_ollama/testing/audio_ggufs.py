"""A tiny random-weight model that hears, in llama.cpp's layout: a text GGUF and its audio projector.

The projector is Qwen2-Audio's and Qwen2.5-Omni's (``qwen2a``), the smallest libmtmd takes: a
Whisper encoder (two 1-D convolutions, LayerNorm GELU blocks whose key projection has no bias, a
learned position table), 2x average pooling and one linear layer into the text model, written
with the keys and tensors ``clip.cpp`` requires (``load_hparams``, ``load_tensors``,
``models/whisper-enc.cpp``) and the conv kernels in F16, as llama.cpp's converter writes them.
libmtmd cuts audio into 30 s windows of 3000 mel frames (a shorter clip is padded to one), each
1500 encoder positions and ``AUDIO_TOKENS`` tokens in the text model; at these sizes a window
encodes in milliseconds. The text model is ``write_qwen3``'s, with a ChatML template that does
not think (an answer is content, as a transcript must be).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from .core_ggufs import write_qwen3
from .gguf_base import TINY, Tensors, finish

AUDIO_TOKENS = 750  # one 30 s window: 3000 mel frames, halved by the convolution and by the pooling
CHATML = (
    "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class AudioShape:
    n_layer: int = 1
    n_embd: int = 16
    n_head: int = 2
    n_ff: int = 32
    n_mel: int = 80  # Whisper's mel bins (v3 and Qwen2-Audio have 128)
    n_positions: int = 1500  # Whisper's: one 30 s window after the stride-2 convolution


TINY_AUDIO = AudioShape()


def _audio_projector(path: Path, kind: str, n_embd_text: int, a: AudioShape, seed: int) -> Tensors:
    """A CLIP GGUF's writer with the keys every Whisper-encoder audio projector states, and the
    encoder's tensors: the projection into the text model is the caller's (its type's)."""
    w = gguf.GGUFWriter(str(path), "clip")
    w.add_name(f"tiny-{kind}-mmproj")
    w.add_clip_has_audio_encoder(True)
    w.add_clip_projector_type(kind)
    w.add_audio_embedding_length(a.n_embd)
    w.add_audio_feed_forward_length(a.n_ff)
    w.add_audio_block_count(a.n_layer)
    w.add_audio_head_count(a.n_head)
    w.add_audio_projection_dim(n_embd_text)
    w.add_audio_attention_layernorm_eps(1e-5)
    w.add_audio_num_mel_bins(a.n_mel)
    t = Tensors(w, np.random.default_rng(seed), 0.2, gguf.GGMLQuantizationType.F32)
    n = a.n_embd
    for i, n_in in ((1, a.n_mel), (2, n)):
        w.add_tensor(f"a.conv1d.{i}.weight", (t.rng.standard_normal((n, n_in, 3)) * 0.2).astype(np.float16))
        t.f32(f"a.conv1d.{i}.bias", np.zeros((n, 1)))  # as a column: added to each frame
    t.f32("a.position_embd.weight", t.rng.standard_normal((a.n_positions, n)) * 0.2)

    def norm(name: str) -> None:
        t.norm(f"{name}.weight", n)
        t.f32(f"{name}.bias", np.zeros(n))

    for i in range(a.n_layer):
        p = f"a.blk.{i}."
        norm(p + "ln1")
        _linear(t, p + "attn_q", n, n)
        _linear(t, p + "attn_k", n, n, bias=False)  # Whisper's key projection has no bias
        _linear(t, p + "attn_v", n, n)
        _linear(t, p + "attn_out", n, n)
        norm(p + "ln2")
        _linear(t, p + "ffn_up", a.n_ff, n)
        _linear(t, p + "ffn_down", n, a.n_ff)
    norm("a.post_ln")
    return t


def _linear(t: Tensors, name: str, rows: int, cols: int, *, bias: bool = True) -> None:
    t.matrix(f"{name}.weight", rows, cols)
    if bias:
        t.f32(f"{name}.bias", t.rng.standard_normal(rows) * 0.1)


def write_qwen2a_projector(
    path: Path, *, n_embd_text: int = TINY.n_embd, shape: AudioShape = TINY_AUDIO, seed: int = 0
) -> Path:
    """Write a random-weight ``qwen2a`` audio projector (an ``mmproj`` GGUF, architecture ``clip``):
    the encoder, 2x average pooling (libmtmd's, for this type) and one linear layer."""
    t = _audio_projector(path, gguf.VisionProjectorType.QWEN2A, n_embd_text, shape, seed)
    _linear(t, "mm.a.fc", n_embd_text, shape.n_embd)
    finish(t.w)
    return path


def write_ultravox_projector(
    path: Path, *, stack_factor: int, n_embd_text: int = TINY.n_embd, shape: AudioShape = TINY_AUDIO, seed: int = 0
) -> Path:
    """Write a random-weight Ultravox projector: the encoder, ``stack_factor`` frames stacked into
    one token, RMS norms around a SwiGLU. Ultravox's own factor, 8, makes libmtmd abort on every
    window (it counts 187 tokens where the encoder makes 188): what the load's probe must catch."""
    a = shape
    t = _audio_projector(path, gguf.VisionProjectorType.ULTRAVOX, n_embd_text, a, seed)
    t.w.add_audio_stack_factor(stack_factor)
    stacked, hidden = a.n_embd * stack_factor, 2 * a.n_ff
    t.norm("mm.a.norm_pre.weight", stacked)
    t.matrix("mm.a.mlp.1.weight", 2 * hidden, stacked)  # SwiGLU: gate and value halves
    t.norm("mm.a.norm_mid.weight", hidden)
    t.matrix("mm.a.mlp.2.weight", n_embd_text, hidden)
    finish(t.w)
    return path


def write_audio(folder: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """A tiny model that hears: ``folder/text.gguf`` (``write_qwen3``, ChatML) and
    ``folder/mmproj.gguf``, its ``qwen2a`` projector."""
    folder.mkdir(parents=True, exist_ok=True)
    text = write_qwen3(folder / "text.gguf", chat_template=CHATML, name="tiny-qwen3-audio", seed=seed)
    return text, write_qwen2a_projector(folder / "mmproj.gguf", seed=seed)
