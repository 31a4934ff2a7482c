"""Ollama's single-file Nemotron Omni, mapped when it enters the store into what llama.cpp's converter
writes for the same weights (``convert/nemotron.py`` and ``convert/parakeet.py``): a ``nemotron_h`` text GGUF and one
projector (``nemotron_v2_vl`` vision, ``parakeet`` audio), tensor for tensor, bit for bit, key for key.

(Served end to end in ``tests/api/test_ollama_ocr_omni_layouts.py``.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_layouts_vision import assert_split_as_llama_cpp_writes, created, fields, header

from cllm_ollama.convert import nemotron, parakeet
from cllm_ollama.convert.dispatch import plan
from cllm_ollama.convert.framework import Header, LayoutRefused
from cllm_ollama.store import manifests as mt
from cllm_ollama.store.gguf_info import gguf_info
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.omni_ggufs import write_nemotron_omni_vision, write_ollama_nemotron_omni


@pytest.mark.parametrize("audio", [True, False], ids=["hears", "vision-only"])
def test_an_ollama_nemotron_omni_is_stored_as_llama_cpp_s_text_and_projector(
    model_store: ModelStore, tmp_path: Path, audio: bool
) -> None:
    """The text model as ``nemotron_h`` (keys renamed, towers' keys and tensors gone); RADIO's patch
    embedding as a convolution kernel, its position table resized to the image's grid, Q/K/V fused,
    the class token and projector renamed; the Parakeet tower beside it under clip.cpp's names, its
    convolution biases and depthwise kernel reshaped, its norms, biases and kernels in F32 (Ollama
    wrote the pointwise kernels and position biases in F16), the two sides' types under their
    modality's key. Without an audio tower, the vision projector alone, as Nano VL's."""
    data = write_ollama_nemotron_omni(tmp_path / "ollama.gguf", audio=audio).read_bytes()
    text, clip = write_nemotron_omni_vision(tmp_path / "llama.cpp", audio=audio)
    stored = created(model_store, data, "omni")
    assert_split_as_llama_cpp_writes(stored, text, clip)
    assert ("clip.has_audio_encoder" in fields(stored[mt.PROJECTOR], "clip.")) is audio


def test_the_position_table_is_resized_bilinearly_with_corners_aligned() -> None:
    """Against the definition (PyTorch's ``F.interpolate(..., "bilinear", align_corners=True)``):
    output point i samples the source at i * (s - 1) / (side - 1)."""
    grid = np.random.default_rng(0).standard_normal((5, 5, 3)).astype(np.float32)
    got = nemotron._bilinear(grid, 3)  # the source at 0, 2 and 4: the corners and the middle, exactly
    np.testing.assert_array_equal(got, grid[::2, ::2])
    got = nemotron._bilinear(grid, 4)  # at 0, 4/3, 8/3, 4
    at = np.arange(4) * 4 / 3
    want = np.empty((4, 4, 3))
    for y, sy in enumerate(at):
        for x, sx in enumerate(at):
            y0, x0 = int(sy), int(sx)
            y1, x1 = min(y0 + 1, 4), min(x0 + 1, 4)
            wy, wx = sy - y0, sx - x0
            top = grid[y0, x0] * (1 - wx) + grid[y0, x1] * wx
            bottom = grid[y1, x0] * (1 - wx) + grid[y1, x1] * wx
            want[y, x] = top * (1 - wy) + bottom * wy
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_the_files_llama_cpp_s_converter_writes_are_kept_as_they_are(tmp_path: Path) -> None:
    for path in write_nemotron_omni_vision(tmp_path):
        assert plan(Header.of(gguf_info(path, verbose=True))) is None


VISION_KEYS = {
    f"nemotron_h_omni__vision__{key}": value
    for key, value in (
        ("block_count", 1),
        ("embedding_length", 8),
        ("feed_forward_length", 16),
        ("attention__head_count", 2),
        ("patch_size", 16),
        ("image_size", 64),
    )
}


HEARS = {"v.position_embd": [8, 256], "a.blk.0.attn_q.weight": [4, 4]}
AUDIO_KEYS = {
    f"nemotron_h_omni__audio__{key}": value
    for key, value in (
        ("block_count", 1),
        ("embedding_length", 4),
        ("feed_forward_length", 16),
        ("attention__head_count", 2),
        ("num_mel_bins", 128),
        ("subsampling_factor", 8),
        ("conv_kernel_size", 9),
    )
}


def test_ollama_s_parakeet_names_are_clip_cpp_s() -> None:
    """Each of Ollama's names for a Parakeet tensor (``convert_nemotron_h.go``) under the name
    clip.cpp loads (``tensor_mapping.py`` for the same Hugging Face tensor); two norms swap names."""
    for ollama_name, clip_name in (
        ("a.subsampling.conv0.bias", "a.conv1d.0.bias"),
        ("a.subsampling.pw2.weight", "a.conv1d.6.weight"),
        ("a.subsampling.linear.weight", "a.pre_encode.out.weight"),
        ("a.feature_extractor.fb", "a.mel_filters"),
        ("a.blk.11.ffn2_norm.bias", "a.blk.11.ffn_norm_1.bias"),
        ("a.blk.0.conv_norm.weight", "a.blk.0.norm_conv.weight"),
        ("a.blk.0.conv_bn.weight", "a.blk.0.conv_norm.weight"),
        ("a.blk.0.conv_bn.running_var", "a.blk.0.conv_norm_var"),
        ("a.blk.0.attn_bias_u", "a.blk.0.pos_bias_u"),
        ("a.blk.0.attn_rel_k.weight", "a.blk.0.linear_pos.weight"),
        ("a.blk.0.attn_out.weight", "a.blk.0.attn_out.weight"),
        ("mm.a.norm.weight", "mm.a.norm_pre.weight"),
        ("mm.a.2.weight", "mm.a.mlp.2.weight"),
    ):
        assert parakeet.parakeet_name(ollama_name) == clip_name


def test_with_experts_it_is_a_nemotron_h_moe_with_that_map_s_fixes() -> None:
    """Experts make it ``nemotron_h_moe``: its latent FFN renamed, the MTP head dropped (as the
    text-only map does), besides the towers."""
    h = header(
        "nemotron_h_omni",
        {"v.position_embd": [8, 256], "blk.1.ffn_latent_in.weight": [8, 4], "mtp.0.weight": [4]},
        nemotron_h_omni__expert_count=4,
        nemotron_h_omni__embedding_length=8,
        **VISION_KEYS,
    )
    text, clip = plan(h) or []
    assert (text.arch, clip.arch) == ("nemotron_h_moe", "clip")
    assert text.key_name("nemotron_h_omni.expert_count") == "nemotron_h_moe.expert_count"
    assert text.set_kv["nemotron_h_moe.moe_latent_size"][0] == 4
    assert not any(text.keep_tensor(n) for n in ("mtp.0.weight", "v.blk.0.ln1.weight", "a.blk.0.x", "mm.a.1.weight"))
    assert not text.keep_key("nemotron_h_omni.vision.block_count")
    assert not text.keep_key("nemotron_h_omni.audio.block_count")
    assert not clip.keep_tensor("mm.a.1.weight") and not clip.keep_tensor("a.blk.0.x")
    assert clip.set_kv["clip.projector_type"][0] == "nemotron_v2_vl"


@pytest.mark.parametrize(
    ("h", "why"),
    [
        (header("nemotron_h_omni", {"a.blk.0.attn_q.weight": [4, 4]}), "no vision tower (v.*)"),
        (header("nemotron_h_omni", {"v.position_embd": [8, 250]}, **VISION_KEYS), "no square position table"),
        (header("nemotron_h_omni", {"v.position_embd": [8, 256]}), "states no nemotron_h_omni.vision.patch_size"),
        (header("nemotron_h_omni", HEARS, **VISION_KEYS), "states no nemotron_h_omni.audio.subsampling_factor"),
        (
            header(
                "nemotron_h_omni",
                HEARS,
                **VISION_KEYS,
                **{**AUDIO_KEYS, "nemotron_h_omni__audio__subsampling_factor": 4},
            ),
            "subsampling factor 4 or kernel 9 (llama.cpp runs 8 and odd)",
        ),
    ],
    ids=["audio-only", "positions", "no-keys", "no-audio-keys", "subsampling"],
)
def test_a_nemotron_omni_that_cannot_be_mapped_is_refused_with_why(h: Header, why: str) -> None:
    with pytest.raises(LayoutRefused, match=r'^architecture "nemotron_h_omni" written by Ollama\'s converter') as no:
        plan(h)
    assert why in str(no.value)
