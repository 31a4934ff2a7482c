"""Tiny models that see, laid out as Ollama's converter wrote them with the vision tower inside,
from the same weights that ``vision_ggufs.py`` and ``tower_ggufs.py`` write in llama.cpp's layout:
Mistral Small 3.1 (Pixtral), Qwen3-VL, Llama 4, Gemma 4 (its audio tower too) and Qwen 3.5.
``cllm_ollama.convert`` maps them back at pull or create.
"""

from __future__ import annotations

import functools
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import gguf
import numpy as np

from .gguf_base import TINY_VISION, copy_fields, finish
from .tower_ggufs import GEMMA4_AUDIO, GEMMA4_CONV_KERNEL, GEMMA4_VISION, write_gemma4_vision, write_qwen35_vision
from .vision_ggufs import (
    DEEPSTACK,
    QWEN3VL_VISION,
    pixtral_vocab,
    write_llama4_vision,
    write_mistral3_vision,
    write_qwen3vl_vision,
)


@contextmanager
def _one_file(
    path: Path,
    arch: str,
    pair: Callable[..., tuple[Path, Path]],
    seed: int,
    vision: dict[str, int],
    skip: tuple[str, ...] = (),
    text_name: Callable[[str], str] = lambda name: name,
) -> Iterator[tuple[gguf.GGUFReader, gguf.GGUFWriter]]:
    """``path``, one GGUF of ``arch`` made from the llama.cpp-layout ``pair`` of files: the text
    model's keys (but ``skip``) and tensors (named by ``text_name``), the tower's ``vision`` keys as
    ``<arch>.vision.*``; the caller adds the rest from the projector it is given, then the file is finished."""
    with tempfile.TemporaryDirectory() as tmp:
        text_path, clip_path = pair(Path(tmp), seed=seed)
        text = gguf.GGUFReader(text_path)
        w = gguf.GGUFWriter(str(path), arch)
        copy_fields(text, w, skip=skip)
        for key, value in vision.items():
            w.add_uint32(f"{arch}.vision.{key}", value)
        for t in text.tensors:
            w.add_tensor(text_name(t.name), np.array(t.data))
        yield gguf.GGUFReader(clip_path), w
        finish(w)


# clip.cpp's Pixtral tensor names -> the Hugging Face names Ollama's converter kept (convert_mistral.go).
_OLLAMA_PIXTRAL_NAMES = (
    ("v.patch_embd", "v.patch_conv"),
    ("v.pre_ln", "v.encoder_norm"),
    (".attn_out.", ".attn_output."),
    (".ln1", ".attn_norm"),
    (".ln2", ".ffn_norm"),
    ("mm.input_norm", "mm.norm"),
    ("mm.patch_merger", "mm.patch_merger.merging_layer"),
    ("mm.1.", "mm.linear_1."),
    ("mm.2.", "mm.linear_2."),
)
_VIT_QK = re.compile(r"v\.blk\.\d+\.attn_[qk]\.(weight|bias)")


def _hf_rope_order(data: np.ndarray, n_head: int) -> np.ndarray:
    """A Q or K projection's rows back in Hugging Face's order (each head's halves apart): the
    inverse of the permutation llama.cpp's converter applies."""
    heads = data.reshape(n_head, data.shape[0] // n_head // 2, 2, *data.shape[1:])
    return np.ascontiguousarray(heads.swapaxes(1, 2).reshape(data.shape))


def _renamed(name: str, names: tuple[tuple[str, str], ...]) -> str:
    for ours, theirs in names:
        name = name.replace(ours, theirs)
    return name


def write_ollama_mistral3_vision(path: Path, *, seed: int = 0) -> Path:
    """``write_mistral3_vision``'s model as one GGUF laid out as Ollama's converter writes Mistral
    Small 3.1: the Pixtral tower inside under Hugging Face's names, its Q/K rows in Hugging Face's
    order (Ollama's repack skips ``v.*``), its patch convolution in F16, its hyperparameters as
    ``mistral3.vision.*`` keys, an empty RoPE scaling type, and no [IMG_BREAK] tensor (the map
    takes it from the text embedding). llama.cpp cannot load it as it is."""
    v = TINY_VISION
    vision = {
        "block_count": v.n_layer,
        "embedding_length": v.n_embd,
        "feed_forward_length": v.n_ff,
        "attention.head_count": v.n_head,
        "attention.key_length": v.n_embd // v.n_head,
        "image_size": v.image_size,
        "patch_size": v.patch_size,
        "num_channels": 3,
    }
    with _one_file(path, "mistral3", write_mistral3_vision, seed, vision) as (clip, w):
        w.add_float32("mistral3.vision.rope.freq_base", 1e4)
        w.add_uint32("mistral3.image_token_index", pixtral_vocab().tokens.index("[IMG]"))
        w.add_uint32("mistral3.spatial_merge_size", v.merge)
        w.add_bool("mistral3.mm.projector_bias", False)
        w.add_string("mistral3.rope.scaling.type", "")
        for t in clip.tensors:
            if t.name == "v.token_embd.img_break":
                continue
            data = np.array(t.data)
            if _VIT_QK.fullmatch(t.name):
                data = _hf_rope_order(data, v.n_head)
            name = _renamed(t.name, _OLLAMA_PIXTRAL_NAMES)
            w.add_tensor(name, data.astype(np.float16) if name == "v.patch_conv.weight" else data)
    return path


# clip.cpp's Qwen3-VL tensor names -> those Ollama's first converter wrote (convert_qwen3vl.go).
_OLLAMA_QWEN3VL_NAMES = (
    ("v.post_ln.", "v.merger.norm."),
    ("mm.0.", "v.merger.linear_fc1."),
    ("mm.2.", "v.merger.linear_fc2."),
    ("v.patch_embd.bias", "v.patch_embed.bias"),
    ("v.position_embd.weight", "v.pos_embed.weight"),
    (".ln1.", ".norm1."),
    (".ln2.", ".norm2."),
    (".ffn_up.", ".mlp.linear_fc1."),
    (".ffn_down.", ".mlp.linear_fc2."),
)
_DEEPSTACK = re.compile(r"v\.deepstack\.(\d+)\.(norm|fc1|fc2)\.(weight|bias)")


def write_ollama_qwen3vl_vision(path: Path, *, seed: int = 0) -> Path:
    """``write_qwen3vl_vision``'s model as one GGUF laid out as Ollama's first Qwen3-VL converter
    wrote it: no M-RoPE sections nor deepstack count for the text model, the tower's keys as
    ``qwen3vl.vision.*``, and the tower inside with Q/K/V split, the two frames' patch kernels
    packed into one Conv3D tensor (ggml ``[pw, ph, 2, out*in]``, F16), the position table in F16,
    and the deepstack mergers numbered in order. llama.cpp cannot load it as it is."""
    v = QWEN3VL_VISION
    vision = {
        "block_count": v.n_layer,
        "embedding_length": v.n_embd,
        "attention.head_count": v.n_head,
        "num_channels": 3,
        "patch_size": v.patch_size,
        "spatial_merge_size": v.merge,
        "temporal_patch_size": 2,
        "shortest_edge": 65536,
        "longest_edge": 16777216,
    }
    ours = ("qwen3vl.rope.dimension_sections", "qwen3vl.n_deepstack_layers")
    with _one_file(path, "qwen3vl", write_qwen3vl_vision, seed, vision, ours) as (clip, w):
        w.add_float32("qwen3vl.vision.attention.layer_norm_epsilon", 1e-6)
        w.add_float32("qwen3vl.vision.rope.freq_base", 1e4)
        w.add_array("qwen3vl.vision.deepstack_visual_indexes", DEEPSTACK)
        w.add_array("qwen3vl.vision.image_mean", [0.5, 0.5, 0.5])
        w.add_array("qwen3vl.vision.image_std", [0.5, 0.5, 0.5])
        _ollama_qwen3vl_tower(clip, w)
    return path


def _ollama_qwen3vl_tower(clip: gguf.GGUFReader, w: gguf.GGUFWriter) -> None:
    """A ``qwen3vl_merger`` projector's tensors as Ollama's converter writes the tower (Qwen3-VL's
    first converter and Qwen 3.5's alike): Q/K/V split, the two frames' patch kernels packed into one
    Conv3D tensor (ggml ``[pw, ph, 2, out*in]``, F16), the position table in F16, the deepstack
    mergers numbered in order."""
    tensors = {t.name: np.array(t.data) for t in clip.tensors}
    frames = np.stack([tensors.pop("v.patch_embd.weight"), tensors.pop("v.patch_embd.weight.1")], axis=2)
    out, n_in, _, ph, pw = frames.shape
    w.add_tensor("v.patch_embed.weight", frames.reshape(out * n_in, 2, ph, pw).astype(np.float16))
    for name, data in tensors.items():
        if ".attn_qkv." in name:
            for part, which in zip(np.split(data, 3), "qkv", strict=True):
                w.add_tensor(name.replace("attn_qkv", f"attn_{which}"), part)
            continue
        if deepstack := _DEEPSTACK.fullmatch(name):
            block, leaf, kind = deepstack.groups()
            leaf = {"fc1": "linear_fc1", "fc2": "linear_fc2"}.get(leaf, leaf)
            name = f"v.deepstack_merger.{DEEPSTACK.index(int(block))}.{leaf}.{kind}"
        name = _renamed(name, _OLLAMA_QWEN3VL_NAMES)
        w.add_tensor(name, data.astype(np.float16) if name == "v.pos_embed.weight" else data)


def write_ollama_qwen35_vision(path: Path, arch: str = "qwen35", *, seed: int = 0) -> Path:
    """``write_qwen35_vision``'s model as one GGUF laid out as Ollama's converter writes Qwen 3.5
    (convert_qwen3next.go): per-layer KV heads, three M-RoPE sections and its marker keys for the
    text model, ``ssm_dt`` without ``.bias``, and Qwen3-VL's tower inside as Ollama writes it
    (``_ollama_qwen3vl_tower``), its keys as ``<arch>.vision.*``."""
    v = QWEN3VL_VISION
    vision = {
        "block_count": v.n_layer,
        "embedding_length": v.n_embd,
        "feed_forward_length": v.n_ff,
        "attention.head_count": v.n_head,
        "num_channels": 3,
        "patch_size": v.patch_size,
        "spatial_merge_size": v.merge,
        "temporal_patch_size": 2,
    }
    ours = (f"{arch}.attention.head_count_kv", f"{arch}.rope.dimension_sections")
    pair = functools.partial(write_qwen35_vision, arch=arch)
    dt = functools.partial(re.sub, r"\.ssm_dt\.bias$", ".ssm_dt")
    with _one_file(path, arch, pair, seed, vision, ours, text_name=dt) as (clip, w):
        w.add_array(f"{arch}.attention.head_count_kv", [0, 2])
        w.add_array(f"{arch}.rope.dimension_sections", [2, 3, 3])
        w.add_array(f"{arch}.rope.mrope_section", [2, 3, 3])
        w.add_bool(f"{arch}.rope.mrope_interleaved", True)
        w.add_uint32(f"{arch}.image_token_id", 7)
        w.add_float32(f"{arch}.vision.attention.layer_norm_epsilon", 1e-6)
        w.add_float32(f"{arch}.vision.rope.freq_base", 1e4)
        w.add_array(f"{arch}.vision.image_mean", [0.5, 0.5, 0.5])
        w.add_array(f"{arch}.vision.image_std", [0.5, 0.5, 0.5])
        _ollama_qwen3vl_tower(clip, w)
    return path


# llama.cpp's Gemma 4 audio names -> those Ollama's converter writes (convert_gemma4.go); its vision
# tower Ollama already names as clip.cpp does.
_OLLAMA_GEMMA4_AUDIO = {
    "a.input_projection.weight": "a.pre_encode.out.weight",
    "a.pre_encode.out.weight": "mm.a.fc.weight",
    "a.pre_encode.out.bias": "mm.a.fc.bias",
}
_AUDIO_BLOCK = re.compile(r"(a\.blk\.\d+\.)(attn_pre_norm|attn_post_norm|ln2|attn_k_rel)(\..+)")
_OLLAMA_AUDIO_LEAVES = {
    "attn_pre_norm": "ln1",
    "attn_post_norm": "ln2",
    "ln2": "layer_pre_norm",
    "attn_k_rel": "linear_pos",
}


def _ollama_gemma4_name(name: str) -> str:
    if name in _OLLAMA_GEMMA4_AUDIO:
        return _OLLAMA_GEMMA4_AUDIO[name]
    if block := _AUDIO_BLOCK.fullmatch(name):
        return block.group(1) + _OLLAMA_AUDIO_LEAVES[block.group(2)] + block.group(3)
    return name


def write_ollama_gemma4(path: Path, *, audio: bool = True, seed: int = 0) -> Path:
    """``write_gemma4_vision``'s model as one GGUF laid out as Ollama's converter writes Gemma 4:
    both towers inside (the vision one under clip.cpp's names, its patch embedding and position
    table in F16; the audio one with Ollama's names for the SSCP and output projections and for
    the attention norms and relative-position projection of each block), their hyperparameters
    as ``gemma4.vision.*`` and ``gemma4.audio.*`` keys. llama.cpp cannot load it as it is."""
    v, a = GEMMA4_VISION, GEMMA4_AUDIO
    vision = {
        "block_count": v.n_layer,
        "embedding_length": v.n_embd,
        "attention.head_count": v.n_head,
        "feed_forward_length": v.n_ff,
        "patch_size": v.patch_size,
        "num_channels": 3,
        "projector.scale_factor": v.merge,
    }
    with _one_file(path, "gemma4", functools.partial(write_gemma4_vision, audio=audio), seed, vision) as (clip, w):
        w.add_float32("gemma4.vision.attention.layer_norm_epsilon", 1e-6)
        if audio:
            for key, value in (
                ("block_count", a.n_layer),
                ("embedding_length", a.n_embd),
                ("feed_forward_length", a.n_ff),
                ("attention.head_count", a.n_head),
                ("conv_kernel_size", GEMMA4_CONV_KERNEL),
            ):
                w.add_uint32(f"gemma4.audio.{key}", value)
            w.add_float32("gemma4.audio.attention.layer_norm_epsilon", 1e-6)
        for t in clip.tensors:
            data = np.array(t.data)
            if t.name in ("v.patch_embd.weight", "v.position_embd.weight"):
                data = data.astype(np.float16)
            w.add_tensor(_ollama_gemma4_name(t.name), data)
    return path


# clip.cpp's Llama 4 tensor names -> those Ollama's converter wrote (convert_llama4.go).
_OLLAMA_LLAMA4_NAMES = (
    ("mm.model.mlp.1", "v.vision_adapter.mlp.fc1"),
    ("mm.model.mlp.2", "v.vision_adapter.mlp.fc2"),
    ("mm.model.fc", "mm.linear_1"),
    ("v.class_embd", "v.class_embedding"),
    ("v.post_ln", "v.layernorm_post"),
    ("v.pre_ln", "v.layernorm_pre"),
    ("v.patch_embd", "v.patch_embedding"),
    (".attn_out", ".attn_output"),
    (".ln1", ".attn_norm"),
    (".ln2", ".ffn_norm"),
    (".ffn_up", ".mlp.fc1"),
    (".ffn_down", ".mlp.fc2"),
)


def write_ollama_llama4_vision(path: Path, *, seed: int = 0) -> Path:
    """``write_llama4_vision``'s model as one GGUF laid out as Ollama's converter writes Llama 4:
    the tower inside under Hugging Face's names (the position table as
    ``v.positional_embedding_vlm``, in F16), its hyperparameters as ``llama4.vision.*`` keys, and
    the text keys llama.cpp does not read (``attention.chunk_size``, ``use_qk_norm``)."""
    v = TINY_VISION
    vision = {
        "block_count": v.n_layer,
        "embedding_length": v.n_embd,
        "feed_forward_length": v.n_ff,
        "attention.head_count": v.n_head,
        "image_size": v.image_size,
        "patch_size": v.patch_size,
    }
    with _one_file(path, "llama4", write_llama4_vision, seed, vision) as (clip, w):
        w.add_float32("llama4.vision.rope.freq_base", 1e4)
        w.add_float32("llama4.vision.layer_norm_epsilon", 1e-5)
        w.add_float32("llama4.vision.pixel_shuffle_ratio", 1 / v.merge)
        w.add_uint32("llama4.attention.chunk_size", 8192)
        w.add_bool("llama4.use_qk_norm", True)
        for t in clip.tensors:
            if t.name == "v.position_embd.weight":
                w.add_tensor("v.positional_embedding_vlm", np.array(t.data).astype(np.float16))
                continue
            w.add_tensor(_renamed(t.name, _OLLAMA_LLAMA4_NAMES), np.array(t.data))
    return path
