"""Tiny GGUFs laid out as Ollama's own converter writes them (``convert/`` in ollama/ollama): one
file with the vision tower inside, keys and tensor names llama.cpp does not accept as they are.
``store/layouts.py`` maps them at pull or create; these are what its tests pull and create.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from .ggufs import TINY, TINY_VISION, _finish, _Tensors, _vit_block, write_gemma3, write_qwen2vl, write_vision


def _copy_fields(
    src: gguf.GGUFReader,
    w: gguf.GGUFWriter,
    *,
    skip: tuple[str, ...] = (),
    key: Callable[[str], str] = lambda name: name,
    value: Callable[[str, Any], Any] = lambda name, v: v,
) -> None:
    """Every metadata field of ``src`` but ``skip`` (and the architecture) into ``w``, renamed by ``key``."""
    for f in src.fields.values():
        if f.name.startswith("GGUF.") or f.name in ("general.architecture", *skip):
            continue
        sub_type = f.types[-1] if len(f.types) > 1 else None
        w.add_key_value(key(f.name), value(f.name, f.contents()), f.types[0], sub_type=sub_type)


# clip.cpp's projector tensor names -> the SigLIP names Ollama's converter writes (convert_gemma3.go).
_OLLAMA_GEMMA3_NAMES = (
    ("v.patch_embd", "v.patch_embedding"),
    ("v.position_embd", "v.position_embedding"),
    ("v.post_ln", "v.post_layernorm"),
    (".ln1", ".layer_norm1"),
    (".ln2", ".layer_norm2"),
    (".attn_out.", ".attn_output."),
    (".ffn_up", ".mlp.fc1"),
    (".ffn_down", ".mlp.fc2"),
    ("mm.input_projection", "mm.mm_input_projection"),
    ("mm.soft_emb_norm", "mm.mm_soft_emb_norm"),
)


def write_ollama_gemma3_vision(path: Path, *, seed: int = 0) -> Path:
    """``write_vision``'s gemma3 and projector as one GGUF laid out as Ollama's converter writes
    a Gemma 3 that sees: the vision tower inside (``v.*``/``mm.*`` under SigLIP names, patch
    embedding in F16), its hyperparameters as ``gemma3.vision.*`` and ``gemma3.mm.*`` keys, the
    RoPE bases as ``gemma3.rope.local.freq_base``, no RMS-norm epsilon, and an image token left in
    the vocabulary past the embedding's rows. llama.cpp cannot load it as it is."""
    with tempfile.TemporaryDirectory() as tmp:
        text_path, clip_path = write_vision(Path(tmp), kind="gemma3", seed=seed)
        text, clip = gguf.GGUFReader(text_path), gguf.GGUFReader(clip_path)
        w = gguf.GGUFWriter(str(path), "gemma3")

        def image_token(name: str, value: Any) -> Any:
            if name in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type"):
                return [*value, "<image_soft_token>" if name.endswith("tokens") else 3]
            return value

        dropped = ("gemma3.attention.layer_norm_rms_epsilon", "gemma3.rope.freq_base_swa")
        _copy_fields(text, w, skip=dropped, value=image_token)
        w.add_float32("gemma3.rope.local.freq_base", 1e4)
        v = TINY_VISION
        for key, value in (
            ("block_count", 1),
            ("embedding_length", v.n_embd),
            ("feed_forward_length", v.n_ff),
            ("image_size", v.image_size),
            ("patch_size", v.patch_size),
            ("num_channels", 3),
            ("attention.head_count", v.n_head),
        ):
            w.add_uint32(f"gemma3.vision.{key}", value)
        w.add_float32("gemma3.vision.attention.layer_norm_epsilon", 1e-6)
        w.add_uint32("gemma3.mm.tokens_per_image", (v.image_size // v.patch_size // v.merge) ** 2)
        for t in text.tensors:
            w.add_tensor(t.name, np.array(t.data))
        for t in clip.tensors:
            name = t.name
            for ours, theirs in _OLLAMA_GEMMA3_NAMES:
                name = name.replace(ours, theirs)
            data = np.array(t.data)
            w.add_tensor(name, data.astype(np.float16) if name == "v.patch_embedding.weight" else data)
        _finish(w)
    return path


def write_ollama_qwen25vl_vision(path: Path, *, seed: int = 0) -> Path:
    """A tiny Qwen2.5-VL as one GGUF laid out as Ollama's converter writes it (convert_qwen25vl.go):
    architecture ``qwen25vl`` (``write_qwen2vl``'s text model, its keys under ``qwen25vl.`` and its
    M-RoPE sections as a three-element ``rope.mrope_section``), and the vision tower inside: two
    RMS-normed SwiGLU blocks (the first with window attention), the Conv3D patch embedding split into
    ``v.patch_embd_0``/``_1`` (F16), and the merger as ``v.merger.*``. llama.cpp cannot load it as it is."""
    v = TINY_VISION
    with tempfile.TemporaryDirectory() as tmp:
        text = gguf.GGUFReader(write_qwen2vl(Path(tmp) / "text.gguf", seed=seed))
        t = _Tensors(
            gguf.GGUFWriter(str(path), "qwen25vl"), np.random.default_rng(seed + 1), 0.2, gguf.GGMLQuantizationType.F32
        )
        w = t.w
        ours = ("qwen2vl.rope.dimension_sections",)
        _copy_fields(text, w, skip=ours, key=lambda name: name.replace("qwen2vl.", "qwen25vl.", 1))
        w.add_array("qwen25vl.rope.mrope_section", [2, 3, 3])
        for key, value in (
            ("block_count", 2),
            ("embedding_length", v.n_embd),
            ("attention.head_count", v.n_head),
            ("num_channels", 3),
            ("patch_size", v.patch_size),
            ("spatial_merge_size", v.merge),
            ("window_size", 112),
            ("temporal_patch_size", 2),
        ):
            w.add_uint32(f"qwen25vl.vision.{key}", value)
        w.add_float32("qwen25vl.vision.attention.layer_norm_epsilon", 1e-6)
        w.add_array("qwen25vl.vision.fullatt_block_indexes", [1])
        for tensor in text.tensors:
            w.add_tensor(tensor.name, np.array(tensor.data))
        for half in ("v.patch_embd_0.weight", "v.patch_embd_1.weight"):
            w.add_tensor(
                half, (t.rng.standard_normal((v.n_embd, 3, v.patch_size, v.patch_size)) * 0.2).astype(np.float16)
            )
        _vit_block(t, replace(v, n_layer=2), gated=True, norm_bias=False, post_ln=False)
        merged = v.merge * v.merge * v.n_embd
        t.norm("v.merger.ln_q.weight", v.n_embd)
        t.matrix("v.merger.mlp.0.weight", merged, merged)
        t.f32("v.merger.mlp.0.bias", np.zeros(merged))
        t.matrix("v.merger.mlp.2.weight", TINY.n_embd, merged)
        t.f32("v.merger.mlp.2.bias", np.zeros(TINY.n_embd))
        _finish(w)
    return path


def write_ollama_embeddinggemma(path: Path, *, seed: int = 0) -> Path:
    """A tiny EmbeddingGemma as Ollama's older converter wrote it: architecture ``gemma3`` with the
    sentence-transformers head as ``dense.0``/``dense.1`` (n_embd -> 2 n_embd -> n_embd), the final
    norm as ``norm.weight``, and ``gemma3.pooling_type`` 1 (mean). llama.cpp cannot load it as it is."""
    with tempfile.TemporaryDirectory() as tmp:
        text = gguf.GGUFReader(write_gemma3(Path(tmp) / "text.gguf", seed=seed))
        t = _Tensors(
            gguf.GGUFWriter(str(path), "gemma3"), np.random.default_rng(seed + 2), 0.2, gguf.GGMLQuantizationType.F32
        )
        w = t.w
        _copy_fields(text, w)
        w.add_uint32("gemma3.pooling_type", 1)
        w.add_bool("gemma3.attention.causal", False)
        for tensor in text.tensors:
            if tensor.name == "output.weight":
                continue  # tied to the embeddings, as in EmbeddingGemma
            name = "norm.weight" if tensor.name == "output_norm.weight" else tensor.name
            w.add_tensor(name, np.array(tensor.data))
        t.matrix("dense.0.weight", 2 * TINY.n_embd, TINY.n_embd)
        t.matrix("dense.1.weight", TINY.n_embd, 2 * TINY.n_embd)
        _finish(w)
    return path


def write_ollama_gemma3_text(path: Path, *, seed: int = 0) -> Path:
    """``write_gemma3`` as Ollama's converter writes a text-only Gemma 3 (1B, 270M): the local RoPE
    base as ``gemma3.rope.local.freq_base`` (llama.cpp reads ``rope.freq_base_swa``) and the
    sliding-window pattern as one bool per layer."""
    with tempfile.TemporaryDirectory() as tmp:
        text = gguf.GGUFReader(write_gemma3(Path(tmp) / "text.gguf", seed=seed))
        w = gguf.GGUFWriter(str(path), "gemma3")
        renamed = {"gemma3.rope.freq_base_swa": "gemma3.rope.local.freq_base"}
        pattern = ("gemma3.attention.sliding_window_pattern",)
        _copy_fields(text, w, skip=pattern, key=lambda name: renamed.get(name, name))
        w.add_array("gemma3.attention.sliding_window_pattern", [True, False])  # write_gemma3's pattern 2
        for t in text.tensors:
            w.add_tensor(t.name, np.array(t.data))
        _finish(w)
    return path
