"""Hugging Face checkpoints converted as ``ollama create`` converts a model folder (``convert/hf``):
the GGUF written is the tiny twin the checkpoint was exported from, tensor for tensor."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from cllm_ollama.convert.hf import Checkpoint, Converted, ImportRefused, convert, mxfp4, safetensors
from cllm_ollama.convert.hf.families import AUDIO_LEFT_OUT, TOWER_LEFT_OUT, Family, permute
from cllm_ollama.convert.hf.tokenizer import tokenizer_kv
from cllm_ollama.errors import InvalidRequest
from cllm_ollama.store import manifests as mt
from cllm_ollama.store.create import CreateRequest, create_model
from cllm_ollama.store.modelfile import create_body, model_folder_files, parse_modelfile
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.hf_folders import (
    SPLIT_PATTERNS,
    export,
    read_safetensors,
    to_bf16,
    write_hf_bert,
    write_hf_command_r,
    write_hf_deepseek2,
    write_hf_embeddinggemma,
    write_hf_gemma,
    write_hf_gemma2,
    write_hf_gemma3,
    write_hf_gemma3_vision,
    write_hf_gemma3n,
    write_hf_gemma4,
    write_hf_gemma4_vision,
    write_hf_glm4,
    write_hf_glm4v,
    write_hf_glmocr,
    write_hf_gptoss,
    write_hf_laguna,
    write_hf_lfm2,
    write_hf_lfm2_vision,
    write_hf_lfm2moe,
    write_hf_llama,
    write_hf_llama4,
    write_hf_llama4_text,
    write_hf_ministral3,
    write_hf_mistral,
    write_hf_mistral3_vision,
    write_hf_mixtral,
    write_hf_nemotron_h,
    write_hf_nemotron_omni,
    write_hf_olmo3,
    write_hf_phi3,
    write_hf_qwen2vl_vision,
    write_hf_qwen3,
    write_hf_qwen3moe,
    write_hf_qwen3next,
    write_hf_qwen3vl_vision,
    write_hf_qwen25vl_vision,
    write_hf_qwen35,
    write_hf_qwen35_vision,
    write_hf_qwen35moe,
    write_safetensors,
)

# Keys the twin states that a converter need not (llama.cpp defaults them from the others).
_TWIN_ONLY = {"general.name", "general.file_type", "tokenizer.ggml.tokens"}


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    root = tmp_path_factory.mktemp("twins")
    return {
        "qwen3": write_hf_qwen3(root / "qwen3"),
        "llama": write_hf_llama(root / "llama"),
        "gemma3": write_hf_gemma3(root / "gemma3"),
        "gemma": write_hf_gemma(root / "gemma"),
        "gemma2": write_hf_gemma2(root / "gemma2"),
        "phi3": write_hf_phi3(root / "phi3"),
        "mixtral": write_hf_mixtral(root / "mixtral"),
        "phi3-longrope": write_hf_phi3(root / "phi3-longrope", longrope=True),
        "mistral": write_hf_mistral(root / "mistral"),
        "qwen3moe": write_hf_qwen3moe(root / "qwen3moe"),
    }


def _fields(path: Path) -> dict[str, Any]:
    return {f.name: f.contents() for f in gguf.GGUFReader(path).fields.values() if not f.name.startswith("GGUF.")}


def _tensors(path: Path) -> dict[str, tuple[gguf.GGMLQuantizationType, np.ndarray]]:
    out = {}
    for t in gguf.GGUFReader(path).tensors:
        data = np.asarray(t.data)
        if t.tensor_type == gguf.GGMLQuantizationType.BF16:
            data = data.view(np.uint16).reshape([int(d) for d in reversed(t.shape)])
        out[t.name] = (t.tensor_type, data)
    return out


@pytest.mark.parametrize(
    ("family", "dtype", "shards", "template_file"),
    [
        ("qwen3", "F16", 1, False),
        ("llama", "F32", 3, True),
        ("qwen3", "BF16", 2, False),
        ("llama", "BF16", 1, False),
        ("gemma3", "BF16", 1, False),
        ("gemma2", "F16", 2, False),
        ("gemma", "BF16", 1, True),
        ("phi3", "BF16", 1, False),
        ("mixtral", "BF16", 2, False),
        ("phi3-longrope", "F16", 1, True),
        ("mistral", "F16", 2, True),
        ("qwen3moe", "BF16", 3, False),
    ],
)
def test_a_checkpoint_converts_to_its_twin(
    twins: dict[str, tuple[Path, Path]], tmp_path: Path, family: str, dtype: str, shards: int, template_file: bool
) -> None:
    """Every tensor under llama.cpp's name with the checkpoint's values (matrices F16, or BF16 from
    BF16; vectors F32; a Llama's Q and K rows reordered, Gemma's norms +1), and the twin's
    hyperparameters and tokenizer (BPE, or Mistral's SentencePiece pieces, scores and types)."""
    original, twin = twins[family]
    spm = (original / "tokenizer.model").read_bytes() if (original / "tokenizer.model").exists() else None
    folder = export(twin, tmp_path / "hf", dtype=dtype, shards=shards, template_file=template_file, sentencepiece=spm)
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    want, got = _tensors(twin), _tensors(tmp_path / "out.gguf")
    assert set(got) == set(want)
    for name, (kind, data) in got.items():
        source = want[name][1].astype(np.float32)
        if data.ndim == 1:
            assert kind == gguf.GGMLQuantizationType.F32 and np.array_equal(data, source), name
        elif name.endswith("ffn_gate_inp.weight"):  # a router: F32 whatever the checkpoint's type
            stored = (to_bf16(source).astype(np.uint32) << 16).view(np.float32) if dtype == "BF16" else source
            assert kind == gguf.GGMLQuantizationType.F32 and np.array_equal(data, stored), name
        elif dtype == "BF16":
            assert kind == gguf.GGMLQuantizationType.BF16 and np.array_equal(data, to_bf16(source)), name
        else:
            assert kind == gguf.GGMLQuantizationType.F16 and np.array_equal(data, source.astype(np.float16)), name
    expected, written = _fields(twin), _fields(tmp_path / "out.gguf")
    for key, value in expected.items():
        if key not in _TWIN_ONLY and key in written:
            assert written[key] == value, key
    arch = expected["general.architecture"]
    for key in ("context_length", "embedding_length", "block_count", "feed_forward_length", "attention.head_count"):
        assert written[f"{arch}.{key}"] == expected[f"{arch}.{key}"]
    assert written["tokenizer.chat_template"] == expected["tokenizer.chat_template"]
    assert written["general.file_type"] == (
        gguf.LlamaFileType.MOSTLY_BF16 if dtype == "BF16" else gguf.LlamaFileType.MOSTLY_F16
    )
    # The vocabulary's padding rows, which a checkpoint leaves untokenized, are unused tokens.
    tokens, types = written["tokenizer.ggml.tokens"], written["tokenizer.ggml.token_type"]
    for i, (token, kind) in enumerate(
        zip(expected["tokenizer.ggml.tokens"], expected["tokenizer.ggml.token_type"], strict=True)
    ):
        assert types[i] == kind and (tokens[i] == token if kind != gguf.TokenType.UNUSED else tokens[i] == f"[PAD{i}]")


def _rope(x: np.ndarray, pairs: Callable[[int], tuple[np.ndarray, np.ndarray]], pos: int) -> np.ndarray:
    """Rotate each head's dimension pairs ``pairs(d)`` (index arrays) by their frequency at ``pos``."""
    out = x.copy()
    d = x.shape[-1]
    first, second = pairs(d)
    theta = pos * 10000.0 ** (-np.arange(d // 2) * 2 / d)
    out[..., first] = x[..., first] * np.cos(theta) - x[..., second] * np.sin(theta)
    out[..., second] = x[..., first] * np.sin(theta) + x[..., second] * np.cos(theta)
    return out


def test_llama_q_and_k_rows_rotate_as_hugging_face_rotates_them() -> None:
    """Attention scores are the same from the checkpoint's rows under Hugging Face's rotation (a
    head's halves paired) as from the converted rows under llama.cpp's (neighbours paired)."""
    rng = np.random.default_rng(0)
    heads, d, n_in = 4, 16, 32
    wq, wk, x, y = (rng.standard_normal(s) for s in ((heads * d, n_in), (heads * d, n_in), n_in, n_in))
    halves = lambda d: (np.arange(d // 2), np.arange(d // 2) + d // 2)  # noqa: E731
    neighbours = lambda d: (np.arange(0, d, 2), np.arange(1, d, 2))  # noqa: E731

    def scores(
        q_rows: np.ndarray, k_rows: np.ndarray, pairs: Callable[[int], tuple[np.ndarray, np.ndarray]]
    ) -> np.ndarray:
        q = _rope((q_rows @ x).reshape(heads, d), pairs, 7)
        k = _rope((k_rows @ y).reshape(heads, d), pairs, 3)
        return (q * k).sum(-1)

    hugging_face = scores(wq, wk, halves)
    assert np.allclose(scores(permute(wq, heads), permute(wk, heads), neighbours), hugging_face)
    assert not np.allclose(scores(wq, wk, neighbours), hugging_face)  # unpermuted rows would not do


@pytest.mark.parametrize("prefix", ["language_model.model.", "model.language_model."])
def test_a_gemma3_that_sees_converts_to_its_text_model_and_projector(
    tmp_path: Path, model_store: ModelStore, prefix: str
) -> None:
    """``Gemma3ForConditionalGeneration`` (Gemma 3 4B and up, and their fine-tunes), under either
    transformers' prefix: the text model from ``text_config``, and the SigLIP tower and projector
    as the GGUF libmtmd reads (llama.cpp's names, types and keys); created, a projector layer."""
    folder, text, mmproj = write_hf_gemma3_vision(tmp_path, prefix=prefix)
    _assert_sees_as_twins(folder, text, mmproj, tmp_path)
    for key in ("block_count", "attention.head_count_kv", "rope.freq_base"):
        assert _fields(tmp_path / "out.gguf")[f"gemma3.{key}"] == _fields(text)[f"gemma3.{key}"]
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf") == Converted([TOWER_LEFT_OUT])  # nowhere to put it
    files = {name: _upload(model_store, path) for name, path in model_folder_files(folder, "./hf").items()}
    assert "preprocessor_config.json" in files
    events: list[dict[str, Any]] = []
    create_model(model_store, CreateRequest.from_json({"model": "sees", "files": files}), events.append)
    layers = model_store.get("sees").manifest.layers
    assert [layer.media_type for layer in layers] == [mt.MODEL, mt.PROJECTOR]
    assert [e["status"] for e in events][:3] == [
        "converting model",
        *(f"creating new layer {x.digest}" for x in layers),
    ]
    assert not [p for p in model_store.blobs_dir.iterdir() if p.name.startswith(".tmp-")]


def test_a_mistral3_that_sees_converts_to_its_text_model_and_projector(tmp_path: Path, model_store: ModelStore) -> None:
    """``Mistral3ForConditionalGeneration`` (Mistral Small 3.1 and 3.2): the text model, and the
    Pixtral tower and projector as llama.cpp's converter writes them (the tower's Q and K rows
    reordered, the text model's [IMG_BREAK] row beside them); created, a projector layer."""
    folder, text, mmproj = write_hf_mistral3_vision(tmp_path)
    _assert_sees_as_twins(folder, text, mmproj, tmp_path)
    _assert_created_with_projector(folder, model_store)


_QWEN_VL: dict[str, Callable[..., tuple[Path, Path, Path]]] = {
    "qwen2vl": write_hf_qwen2vl_vision,
    "qwen2.5vl": write_hf_qwen25vl_vision,
    "qwen3vl": write_hf_qwen3vl_vision,
    "qwen3vlmoe": functools.partial(write_hf_qwen3vl_vision, moe=True),
    "qwen35": write_hf_qwen35_vision,
    "qwen35moe": functools.partial(write_hf_qwen35_vision, moe=True),
}


@pytest.mark.parametrize("prefix", ["model.", "model.language_model."])
@pytest.mark.parametrize("family", list(_QWEN_VL))
def test_a_qwen_vl_converts_to_its_text_model_and_projector(
    tmp_path: Path, model_store: ModelStore, family: str, prefix: str
) -> None:
    """Qwen2-VL, Qwen2.5-VL, Qwen3-VL and Qwen 3.5 (and their fine-tunes) as the Qwen releases and
    every transformers since 4.45 save them: the text model with its M-RoPE sections (and Qwen3-VL's
    deepstack layers, Qwen 3.5's delta nets), and the tower as llama.cpp's converter writes it (the
    Conv3D kernel a kernel per frame, Qwen 2's and 2.5's Q/K/V split, Qwen 3's deepstack mergers
    under their blocks); created, a projector layer."""
    folder, text, mmproj = _QWEN_VL[family](tmp_path, prefix=prefix)
    _assert_sees_as_twins(folder, text, mmproj, tmp_path)
    _assert_twin_keys(text, tmp_path / "out.gguf")
    _assert_created_with_projector(folder, model_store)


@pytest.mark.parametrize("layernorm", [True, False], ids=["lfm2-vl", "lfm2.5-vl"])
def test_an_lfm2_vl_converts_to_its_text_model_and_projector(
    tmp_path: Path, model_store: ModelStore, layernorm: bool
) -> None:
    """LFM2-VL (``Lfm2VlForConditionalGeneration``): its LFM2 text model, and SigLIP2 and its
    projector as llama.cpp's ``lfm2`` (the patch linear as a convolution's kernel, the position
    table as it is, the layer norm, which LFM2.5-VL has not, and MLP after 2x2 patches unshuffled);
    created, a projector layer. A tower libmtmd would compute otherwise, abort on, or tile without
    its marks is left out, saying why."""
    folder, text, mmproj = write_hf_lfm2_vision(tmp_path, layernorm=layernorm)
    _assert_sees_as_twins(folder, text, mmproj, tmp_path)
    _assert_twin_keys(text, tmp_path / "out.gguf")
    _assert_created_with_projector(folder, model_store)
    sound, tokenizer = (folder / "config.json").read_text(), (folder / "tokenizer.json").read_text()

    def without_thumbnail(spec: dict[str, Any]) -> None:
        spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] != "<|img_thumbnail|>"]

    for name, damage, why in (
        ("config.json", {"projector_hidden_act": "silu"}, "projector is not a GELU MLP with biases"),
        ("config.json", {"projector_bias": False}, "projector is not a GELU MLP with biases"),
        ("config.json", {"projector_use_layernorm": not layernorm}, "projector_use_layernorm and the projector's"),
        ("config.json", {"downsample_factor": 1}, "downsample_factor 1 does not merge patches"),
        ("config.json", {"downsample_factor": 4}, "downsample_factor 4 does not merge patches"),
        ("tokenizer.json", without_thumbnail, "the vocabulary lacks <|img_thumbnail|>"),
    ):
        (folder / "config.json").write_text(sound)
        (folder / "tokenizer.json").write_text(tokenizer)
        change = damage if callable(damage) else lambda c, damage=damage: c.update(damage)
        _edit(folder, name, change)
        notes = convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf").notes
        assert len(notes) == 1 and notes[0].startswith(TOWER_LEFT_OUT) and why in notes[0], notes


def _assert_sees_as_twins(folder: Path, text: Path, mmproj: Path, tmp_path: Path) -> None:
    """``folder`` converted (to ``tmp_path/out.gguf`` and ``proj.gguf``) into its text model's twin
    and its projector's, tensor for tensor and ``clip.*`` key for key."""
    converted = convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf")
    assert converted == Converted([], sees=True)
    for twin, out in ((text, tmp_path / "out.gguf"), (mmproj, tmp_path / "proj.gguf")):
        _assert_twin_tensors(twin, out)
    clip = {k: v for k, v in _fields(tmp_path / "proj.gguf").items() if k.startswith("clip.")}
    assert clip == {k: v for k, v in _fields(mmproj).items() if k.startswith("clip.")}


def _assert_pair_created(
    folder: Path, text: Path, mmproj: Path, tmp_path: Path, model_store: ModelStore, pre: str
) -> None:
    """``folder`` converted into its twins (``_assert_sees_as_twins``), their architecture's keys,
    the pre-tokenizer ``pre``; created, a projector layer."""
    _assert_sees_as_twins(folder, text, mmproj, tmp_path)
    _assert_twin_keys(text, tmp_path / "out.gguf")
    assert _fields(tmp_path / "out.gguf")["tokenizer.ggml.pre"] == pre
    _assert_created_with_projector(folder, model_store)


def _assert_created_with_projector(folder: Path, model_store: ModelStore, *also: str) -> None:
    """``folder`` created as the CLI uploads it: a model layer and a projector layer (and ``also``)."""
    files = {name: _upload(model_store, path) for name, path in model_folder_files(folder, "./hf").items()}
    create_model(model_store, CreateRequest.from_json({"model": "sees", "files": files}), lambda e: None)
    layers = [layer.media_type for layer in model_store.get("sees").manifest.layers]
    assert layers == [mt.MODEL, mt.PROJECTOR, *also]


def _assert_twin_tensors(twin: Path, out: Path) -> None:
    """Every tensor of ``twin`` in ``out``, of its type and values; Qwen 3.5's ``A`` and Gemma 4's
    per-dimension scale, computed from their logarithm and softplus, to within F32's rounding."""
    want, got = _tensors(twin), _tensors(out)
    assert set(got) == set(want)
    for name, (kind, data) in got.items():
        same = np.allclose if name.endswith((".ssm_a", ".per_dim_scale.weight")) else np.array_equal
        assert kind == want[name][0] and same(data, want[name][1]), name


def _assert_twin_keys(twin: Path, out: Path) -> None:
    """The keys of ``twin``'s architecture that say how it computes, the same in ``out``."""
    arch = _fields(twin)["general.architecture"]
    want, got = _fields(twin), _fields(out)
    for key in [k for k in want if k.startswith(f"{arch}.") and k != f"{arch}.context_length"]:
        assert got.get(key) == want[key], key


@pytest.mark.parametrize("write", [write_hf_qwen35, write_hf_qwen3next], ids=["qwen35", "qwen3next"])
def test_a_delta_net_converts_to_its_twin(tmp_path: Path, write: Callable[[Path], tuple[Path, Path]]) -> None:
    """Qwen 3.5 (``Qwen3_5ForCausalLM``): a gated delta net's parameters as llama.cpp keeps them
    (``A`` as ``-exp(A_log)``, the convolution in F32 without its unit axis, the value heads tiled
    rather than grouped by key head: two key heads of two value heads here), norms with their +1 but
    the delta net's own, the multi-token-prediction block left out, and llama.cpp's ``ssm`` keys.
    Qwen3-Next (``Qwen3NextForCausalLM``): the same with its delta net's Q, K, V and gate in one
    projection per key head and its betas and alphas in another, written as llama.cpp's qwen3next
    reads them (``ssm_in``, ``ssm_ba``), its value heads left grouped, no M-RoPE sections."""
    folder, twin = write(tmp_path)
    path = folder / "model.safetensors"
    tensors = read_safetensors(path)
    tensors["mtp.fc.weight"] = ("F16", np.zeros((64, 128), np.float16))  # as the releases carry it
    write_safetensors(path, tensors)
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf") == Converted([])
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    _assert_twin_keys(twin, tmp_path / "out.gguf")
    arch = _fields(twin)["general.architecture"]  # Qwen 3.5's positions are M-RoPE's, Qwen3-Next's not
    assert (f"{arch}.rope.dimension_sections" in _fields(tmp_path / "out.gguf")) == (arch != "qwen3next")


@pytest.mark.parametrize("fused", [False, True], ids=["apart", "fused"])
def test_a_qwen35_mixture_converts_to_its_twin(tmp_path: Path, fused: bool) -> None:
    """Qwen 3.5's mixture of experts (``Qwen3_5MoeForCausalLM``): the routed experts stacked per
    layer, from each expert's tensors (as transformers 5 saves a fine-tune) or from the layer's
    fused ``gate_up_proj`` and ``down_proj`` (transformers 5's own layout, as the releases keep
    them); the router and the shared expert's gate (a vector) in F32, the shared expert's
    projections, and llama.cpp's expert keys (no dense FFN width)."""
    folder, twin = write_hf_qwen35moe(tmp_path)
    if fused:
        path = folder / "model.safetensors"
        tensors = read_safetensors(path)
        for layer in range(2):
            stem = f"model.layers.{layer}.mlp.experts"
            take = {
                p: [tensors.pop(f"{stem}.{e}.{p}_proj.weight")[1] for e in range(4)] for p in ("gate", "up", "down")
            }
            gate_up = [np.concatenate([g, u]) for g, u in zip(take["gate"], take["up"], strict=True)]
            tensors[f"{stem}.gate_up_proj"] = ("F16", np.stack(gate_up))
            tensors[f"{stem}.down_proj"] = ("F16", np.stack(take["down"]))
        write_safetensors(path, tensors)
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf") == Converted([])
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    _assert_twin_keys(twin, tmp_path / "out.gguf")
    assert "qwen35moe.feed_forward_length" not in _fields(tmp_path / "out.gguf")


def test_a_qwen3vl_moe_as_released_converts_to_its_twin(tmp_path: Path) -> None:
    """Qwen3-VL-MoE as its releases (saved by transformers 4) keep a layer's experts: ``gate_up_proj``
    as ``(experts, hidden, 2 x width)`` and ``down_proj`` as ``(experts, width, hidden)``, the
    transpose of transformers 5's; llama.cpp's stacked experts all the same."""
    folder, text, _ = write_hf_qwen3vl_vision(tmp_path, moe=True)
    path = folder / "model.safetensors"
    tensors = read_safetensors(path)
    for name, (dtype, data) in list(tensors.items()):
        if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            tensors[name] = (dtype, np.ascontiguousarray(data.swapaxes(1, 2)))
    write_safetensors(path, tensors)
    _edit(folder, "config.json", lambda c: c.update(transformers_version="4.57.1"))
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf").sees
    _assert_twin_tensors(text, tmp_path / "out.gguf")


@pytest.mark.parametrize("dequantized", [False, True], ids=["mxfp4", "16bit"])
def test_a_gptoss_converts_to_its_twin(tmp_path: Path, dequantized: bool) -> None:
    """gpt-oss (``GptOssForCausalLM``): a layer's experts in one tensor per projection, gate's and
    up's outputs interleaved, split into llama.cpp's stacked gate, up and down experts with their
    biases (F32); as released, MXFP4 blocks and scales repacked byte for byte into ggml's MXFP4 (the
    file then MXFP4_MOE); dequantized (a 16-bit fine-tune), ``(experts, in, out)`` transposed; the
    attention sinks, the router, the window and YaRN's keys."""
    folder, twin = write_hf_gptoss(tmp_path, dequantized=dequantized)
    out = tmp_path / "out.gguf"
    assert convert(Checkpoint.folder(folder), out) == Converted([])
    _assert_twin_keys(twin, out)
    written = _fields(out)
    assert written["gpt-oss.rope.scaling.yarn_beta_fast"] == 32.0
    if not dequantized:
        _assert_twin_tensors(twin, out)
        assert written["general.file_type"] == gguf.LlamaFileType.MOSTLY_MXFP4_MOE
        return
    want, got = _tensors(twin), _tensors(out)
    assert set(got) == set(want)
    for name, (kind, data) in got.items():
        if name.endswith("_exps.weight"):
            values = gguf.quants.dequantize(want[name][1], want[name][0])
            assert kind == gguf.GGMLQuantizationType.F16 and np.array_equal(data, values.astype(np.float16)), name
        else:
            assert kind == want[name][0] and np.array_equal(data, want[name][1]), name
    assert written["general.file_type"] == gguf.LlamaFileType.MOSTLY_F16


def test_mxfp4_blocks_mean_in_ggml_what_they_mean_in_the_checkpoint() -> None:
    """A checkpoint's MXFP4 block (value ``2i`` in byte ``i``'s low nibble, ``2i + 1`` in its high
    one, times two to its E8M0 exponent less 127, as transformers decodes it) decodes in ggml, once
    repacked, to the same values."""
    rng = np.random.default_rng(0)
    blocks = rng.integers(0, 256, (3, 5, 2, 16), dtype=np.uint8)
    scales = rng.integers(120, 135, (3, 5, 2), dtype=np.uint8)
    fp4 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)
    codes = np.stack([blocks & 0x0F, blocks >> 4], axis=-1).reshape(3, 5, 2, 32)
    meant = fp4[codes] * np.exp2(scales.astype(np.float32) - 127)[..., None]
    ggml = mxfp4.to_ggml(blocks, scales)
    assert ggml.shape == (3, 5, 2 * 17)
    decoded = gguf.quants.dequantize(ggml, gguf.GGMLQuantizationType.MXFP4)
    assert np.array_equal(decoded.reshape(3, 5, 64), meant.reshape(3, 5, 64))


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ({"layer_types": ["full_attention", "sliding_attention"]}, "config.json's layer_types do not alternate"),
        ({"swiglu_limit": 10.0}, "config.json's swiglu_limit is 10.0; llama.cpp's gpt-oss has 7.0"),
        ({"swiglu_limit": "x"}, "config.json's swiglu_limit is 'x'"),
        (
            {"intermediate_size": 32},
            "down_proj_blocks of U8[4, 64, 2, 16] is not 4 experts' down blocks (U8[4, 64, 1, 16])",
        ),
    ],
)
def test_a_gptoss_llama_cpp_would_run_otherwise_is_refused(tmp_path: Path, damage: dict[str, Any], why: str) -> None:
    """What llama.cpp's gpt-oss computes otherwise (windows on other layers, another clamp on the
    activation) or experts of other shapes than config.json says are refused with why."""
    folder, _ = write_hf_gptoss(tmp_path)
    _edit(folder, "config.json", lambda c: c.update(damage))
    with pytest.raises(ImportRefused, match=re.escape(why)):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


def test_a_command_r_converts_to_its_twin(tmp_path: Path) -> None:
    """Command R (``CohereForCausalLM``): llama.cpp's ``command-r``, its layer norms' epsilon, its
    logit scale, its context from ``model_max_length``, Cohere's digits-apart pre-tokenizer named
    (it has no Split pattern to name it by); Q and K norms where llama.cpp has them (64 layers or
    more) and nowhere else."""
    folder, twin = write_hf_command_r(tmp_path)
    _edit(folder, "config.json", lambda c: c.update(model_max_length=131072))
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf") == Converted([])
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    _assert_twin_keys(twin, tmp_path / "out.gguf")
    written = _fields(tmp_path / "out.gguf")
    assert written["command-r.context_length"] == 131072 and written["tokenizer.ggml.pre"] == "command-r"
    _edit(folder, "config.json", lambda c: c.update(use_qk_norm=True))
    with pytest.raises(
        ImportRefused, match=re.escape("llama.cpp's command-r norms Q and K exactly in models of 64 layers")
    ):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


def test_a_ministral3_converts_to_its_twin(tmp_path: Path) -> None:
    """Ministral 3 (``Ministral3ForCausalLM``, and a ``Mistral3ForConditionalGeneration`` whose text
    model is ``ministral3``): llama.cpp's ``mistral3``, a Llama's reordered Q and K rows, YaRN with
    transformers' attention factor (``mscale_all_dim`` as the log multiplier) and the query
    temperature (``llama_4_scaling_beta``), which llama.cpp's ``llama`` would both ignore."""
    folder, twin = write_hf_ministral3(tmp_path)
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf") == Converted([])
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    _assert_twin_keys(twin, tmp_path / "out.gguf")
    config = json.loads((folder / "config.json").read_text())
    seeing = {"architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3", "text_config": config}
    assert Family.of(seeing).kv() == Family.of(config).kv()
    mistral_small = seeing | {"text_config": config | {"model_type": "mistral", "rope_parameters": None}}
    assert Family.of(mistral_small).arch == "llama"
    # Without mscale, transformers scales by YaRN's own factor, as llama.cpp does without the multiplier.
    config["rope_parameters"].pop("mscale")
    assert "mistral3.rope.scaling.yarn_log_multiplier" not in Family.of(config).kv()


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ({"mscale": 2.0}, "config.json's rope mscale is not 1, which llama.cpp's mistral3 assumes"),
        ({"rope_type": "default"}, "config.json's llama_4_scaling_beta needs YaRN's original_max_position_embeddings"),
    ],
)
def test_a_ministral3_llama_cpp_would_run_otherwise_is_refused(
    tmp_path: Path, damage: dict[str, Any], why: str
) -> None:
    folder, _ = write_hf_ministral3(tmp_path)
    _edit(folder, "config.json", lambda c: c["rope_parameters"].update(damage))
    with pytest.raises(ImportRefused, match=re.escape(why)):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


def test_an_olmo3_converts_to_its_twin_and_an_olmo2_without_a_window(tmp_path: Path) -> None:
    """OLMo 3 (``Olmo3ForCausalLM``): llama.cpp's ``olmo2``, norms after attention and the FFN,
    Q and K normed across all heads, its window on the layers ``layer_types`` says; OLMo 2 the
    same without a window."""
    folder, twin = write_hf_olmo3(tmp_path)
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf") == Converted([])
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    _assert_twin_keys(twin, tmp_path / "out.gguf")
    assert _fields(tmp_path / "out.gguf")["olmo2.attention.sliding_window_pattern"] == [True, True]
    olmo2 = {"architectures": ["Olmo2ForCausalLM"], "model_type": "olmo2", "sliding_window": None, "layer_types": None}
    _edit(folder, "config.json", lambda c: c.update(olmo2))
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    assert not [k for k in _fields(tmp_path / "out.gguf") if k.startswith("olmo2.attention.sliding_window")]
    # Tied (no lm_head): llama.cpp's olmo2 loads no model without an output, so it is the embedding;
    # untied without one, something is missing.
    path = folder / "model.safetensors"
    tensors = read_safetensors(path)
    del tensors["lm_head.weight"]
    write_safetensors(path, tensors)
    with pytest.raises(
        ImportRefused, match=re.escape("the checkpoint has no lm_head.weight, and config.json does not tie it")
    ):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    _edit(folder, "config.json", lambda c: c.update(tie_word_embeddings=True))
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    got = _tensors(tmp_path / "out.gguf")
    assert np.array_equal(got["output.weight"][1], got["token_embd.weight"][1])


def test_an_lfm2_converts_to_its_twin(tmp_path: Path) -> None:
    """LFM2 (``Lfm2ForCausalLM``): a short convolution's block (its kernel in F32 without the
    Conv1d's unit axis) and an attention block, which llama.cpp tells apart by their KV heads (0
    for the convolution's), the FFN's width as transformers derives it from ``block_*``, the final
    norm as ``token_embd_norm``."""
    folder, twin = write_hf_lfm2(tmp_path)
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf") == Converted([])
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    _assert_twin_keys(twin, tmp_path / "out.gguf")
    # The layers named by index (older configs), the same model.
    _edit(folder, "config.json", lambda c: c.update(layer_types=None, full_attn_idxs=[1]))
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    _assert_twin_keys(twin, tmp_path / "out.gguf")
    sound = (folder / "config.json").read_text()
    for damage, why in (
        ({"conv_L_cache": 1}, "config.json's conv_L_cache is not 2 or more"),  # llama.cpp would assert
        ({"conv_L_cache": "3"}, "config.json's conv_L_cache is not 2 or more"),
        (
            {"layer_types": [["conv"], "full_attention"], "full_attn_idxs": None},
            "config.json has neither layer_types nor full_attn_idxs",
        ),
        ({"conv_bias": True}, "config.json sets conv_bias, which llama.cpp's lfm2 has not"),
    ):
        (folder / "config.json").write_text(sound)
        _edit(folder, "config.json", lambda c, damage=damage: c.update(damage))
        with pytest.raises(ImportRefused, match=re.escape(why)):
            convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


def test_an_lfm2_mixture_converts_to_its_twin(tmp_path: Path) -> None:
    """LFM2's mixture (``Lfm2MoeForCausalLM``): its leading dense layer, then experts each apart
    (w1, w3, w2) stacked, the router in F32, the bias its sigmoid scores are chosen by, and
    llama.cpp's keys for them; a router llama.cpp computes otherwise is refused."""
    folder, twin = write_hf_lfm2moe(tmp_path)
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf") == Converted([])
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    _assert_twin_keys(twin, tmp_path / "out.gguf")
    _edit(folder, "config.json", lambda c: c.update(routed_scaling_factor=2.5))
    with pytest.raises(ImportRefused, match=re.escape("config.json's routed_scaling_factor is 2.5")):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


@pytest.mark.parametrize("moe", [False, True], ids=["e2b", "moe"])
def test_a_gemma4_converts_to_its_twin(tmp_path: Path, moe: bool) -> None:
    """Gemma 4 (``Gemma4ForCausalLM``): full-attention layers with wider heads whose keys are their
    values and a proportional rotation (as llama.cpp's ``rope_freqs``), and E2B's per-layer
    embeddings and shared KV (those layers' FFN twice as wide), or 26B-A4B's mixture beside the
    dense FFN (a layer's experts fused, the router's scales); its tokenizer as llama.cpp's
    ``gemma4`` (BPE over ``▁``-spaced text with byte tokens). A config.json that transformers 5
    saved (``per_layer_config`` for each full-attention layer) is the same model."""
    folder, twin = write_hf_gemma4(tmp_path, moe=moe)
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf") == Converted([])
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    _assert_twin_keys(twin, tmp_path / "out.gguf")
    want, got = _fields(twin), _fields(tmp_path / "out.gguf")
    for key in [k for k in want if k.startswith("tokenizer.")]:
        assert got[key] == want[key], key

    def saved_by_transformers_5(config: dict[str, Any]) -> None:
        full = {
            "head_dim": config.pop("global_head_dim"),
            "num_key_value_heads": config.pop("num_global_key_value_heads"),
        }
        types = config["layer_types"]
        # Its keys padded with zeros to the widest index's digits ("05" of a 60-layer model's).
        config["per_layer_config"] = {f"{i:02d}": full for i, kind in enumerate(types) if kind == "full_attention"}

    _edit(folder, "config.json", saved_by_transformers_5)
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    _assert_twin_keys(twin, tmp_path / "out.gguf")
    # Without rope_parameters: transformers' default, Gemma 4's rotation (the twin's).
    _edit(folder, "config.json", lambda c: c.pop("rope_parameters"))
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    _assert_twin_keys(twin, tmp_path / "out.gguf")
    _assert_twin_tensors(twin, tmp_path / "out.gguf")


def test_a_gemma4_whose_per_layer_embeddings_lack_tokens_is_refused(tmp_path: Path) -> None:
    """Per-layer embeddings with fewer rows than the vocabulary, which llama.cpp would not load."""
    folder, _ = write_hf_gemma4(tmp_path)
    (path,) = folder.glob("*.safetensors")
    tensors = {t.name: (t.dtype, np.asarray(t.data)) for t in safetensors.read(path, path.name)}
    dtype, table = tensors["model.embed_tokens_per_layer.weight"]
    tensors["model.embed_tokens_per_layer.weight"] = (dtype, table[:-1])
    path.unlink()  # the tensors are views of the file mapped: a new file, not this one rewritten
    write_safetensors(path, tensors)
    with pytest.raises(
        ImportRefused, match=re.escape("per_layer_token_embd.weight has fewer rows than the vocabulary's")
    ):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


def test_a_gemma4_that_sees_and_hears_converts_to_its_text_model_and_projector(
    tmp_path: Path, model_store: ModelStore
) -> None:
    """``Gemma4ForConditionalGeneration``, as Google releases Gemma 4 and fine-tunes save it: the
    text model from ``text_config``, and one projector as libmtmd reads it: the ViT and
    ``embed_vision`` as its ``gemma4v`` side (the patch projection a convolution's kernel), the
    Conformer and ``embed_audio`` as its ``gemma4a`` side (the depthwise kernel without its unit
    axis, the per-dimension scale after a softplus, llama.cpp's swapped convolution norms); the
    clamps beside their weights, the infinite ones left out. An audio tower libmtmd would compute
    otherwise is left out, and the stream says so. Created, a projector layer."""
    folder, text, mmproj = write_hf_gemma4_vision(tmp_path)
    _assert_sees_as_twins(folder, text, mmproj, tmp_path)
    assert any(name.startswith("a.blk.") for name in _tensors(tmp_path / "proj.gguf"))
    _assert_created_with_projector(folder, model_store, mt.PARAMS)  # Gemma 4's stop word, as Ollama's create adds
    _edit(folder, "config.json", lambda c: c["audio_config"].update(attention_chunk_size=16))
    converted = convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf")
    why = "config.json's audio_config attention_chunk_size is 16; libmtmd's gemma4a has 12"
    assert converted == Converted([f"{AUDIO_LEFT_OUT} ({why})"], sees=True)
    assert not any(name.startswith(("a.", "mm.a.")) for name in _tensors(tmp_path / "proj.gguf"))


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (
            {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}},
            "rotates by another base than libmtmd's 100",
        ),
        ({"num_key_value_heads": 1}, "has grouped or narrower heads"),
        ({"hidden_activation": "gelu"}, "activation is not gelu_pytorch_tanh"),
    ],
)
def test_a_gemma4_tower_libmtmd_would_run_otherwise_is_left_out(
    tmp_path: Path, damage: dict[str, Any], why: str
) -> None:
    """A Gemma 4 tower libmtmd's gemma4v would compute otherwise is left out with the reason; the
    text model is converted all the same."""
    folder, text, _ = write_hf_gemma4_vision(tmp_path)
    _edit(folder, "config.json", lambda c: c["vision_config"].update(damage))
    converted = convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf")
    assert len(converted.notes) == 1 and converted.notes[0].startswith(TOWER_LEFT_OUT) and why in converted.notes[0]
    _assert_twin_tensors(text, tmp_path / "out.gguf")


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ({"hidden_activation": "gelu"}, "config.json's hidden_activation is 'gelu'"),
        ({"use_bidirectional_attention": "all"}, "makes every layer attend both ways"),
        ({"num_kv_shared_layers": 3}, "num_kv_shared_layers must leave two layers of their own KV"),
        ({"num_kv_shared_layers": 1}, "last layers of their own KV are not a sliding then a full-attention one"),
        ({"layer_types": ["sliding_attention"] * 3}, "layer_types are not one sliding or full attention per layer"),
        (
            {"per_layer_config": {"1": {"head_dim": 32}, "3": {"head_dim": 64}}},
            "varies heads within one kind of layer",
        ),
        ({"per_layer_config": {"1": {"num_attention_heads": 2}}}, "per_layer_config changes ['num_attention_heads']"),
        (
            {"rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 2.0}}},
            "full-attention rope 'yarn' is not Gemma 4's proportional one",
        ),
        (
            {"rope_parameters": {"sliding_attention": {"rope_type": "default", "partial_rotary_factor": 0.5}}},
            "sliding layers rotate otherwise than whole heads",
        ),
    ],
)
def test_a_gemma4_llama_cpp_would_run_otherwise_is_refused(tmp_path: Path, damage: dict[str, Any], why: str) -> None:
    """Settings llama.cpp's gemma4 computes otherwise (another activation, attention both ways,
    heads that vary within a kind of layer, another rotation) or could not load are refused."""
    folder, _ = write_hf_gemma4(tmp_path)

    def damaged(config: dict[str, Any]) -> None:
        for key, value in damage.items():
            if key == "rope_parameters":
                config[key] |= value
            else:
                config[key] = value

    _edit(folder, "config.json", damaged)
    with pytest.raises(ImportRefused, match=re.escape(why)):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


@pytest.mark.parametrize("kind", ["glm4-moe-lite", "deepseek-v3", "deepseek-v2"])
def test_a_latent_attention_mixture_converts_to_its_twin(tmp_path: Path, kind: str) -> None:
    """GLM-4.7-Flash (``Glm4MoeLiteForCausalLM``, its experts fused as transformers 5 saves them),
    DeepSeek V3 (``DeepseekV3ForCausalLM``, each expert apart, YaRN) and DeepSeek-V2-Lite
    (``DeepseekV2ForCausalLM``: Q in one projection, a softmax router whose choice is not
    normalized) as llama.cpp's ``deepseek2``: ``kv_b_proj`` split into each head's K (transposed)
    and V, the router's bias, the shared expert, the leading dense layer, and the keys of the latent
    attention and its router; the family's pre-tokenizer and GLM's turn ends. A
    multi-token-prediction layer past ``num_hidden_layers`` is left out, as Ollama leaves it."""
    folder, twin = write_hf_deepseek2(tmp_path, glm=kind == "glm4-moe-lite", v2=kind == "deepseek-v2")
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf") == Converted([])
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    _assert_twin_keys(twin, tmp_path / "out.gguf")
    want, got = _fields(twin), _fields(tmp_path / "out.gguf")
    ends = ("tokenizer.ggml.pre", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")
    assert {k: got.get(k) for k in ends} == {k: want.get(k) for k in ends}
    weights = folder / "model.safetensors"
    tensors = read_safetensors(weights)
    ahead = {n.replace("layers.2.", "layers.3.", 1): v for n, v in tensors.items() if n.startswith("model.layers.2.")}
    weights.unlink()  # mapped while read: written anew, not over
    write_safetensors(
        weights, tensors | ahead | {"model.layers.3.eh_proj.weight": ("F16", np.zeros((4, 128), np.float16))}
    )
    _edit(folder, "config.json", lambda c: c.update(num_nextn_predict_layers=1))
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    # A layer past those (num_hidden_layers stated short) would be dropped: refused instead.
    _edit(folder, "config.json", lambda c: c.update(num_nextn_predict_layers=0))
    with pytest.raises(ImportRefused, match=r"model\.layers\.3\.\S+ is past the model's 3 layers"):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


def test_a_glm_s_settings_are_read_as_transformers_reads_them(tmp_path: Path) -> None:
    """GLM-4.7-Flash's: one dense layer where config.json names none (transformers'
    ``mlp_layer_types``), no bos added (llama.cpp runs its vocabulary without one, and would abort
    adding none), and a stated YaRN attention factor of 1 as llama.cpp's deepseek2 computes it."""
    folder, _ = write_hf_deepseek2(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config.pop("mlp_layer_types")
    assert Family.of(config).kv()["deepseek2.leading_dense_block_count"][0] == 1
    yarn = {"rope_type": "yarn", "factor": 4.0, "mscale": 1.0, "mscale_all_dim": 1.0, "attention_factor": 1.0}
    assert "deepseek2.rope.scaling.attn_factor" not in Family.of(config | {"rope_parameters": yarn}).kv()
    _edit(folder, "tokenizer_config.json", lambda c: c.update(add_bos_token=True))
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    assert _fields(tmp_path / "out.gguf")["tokenizer.ggml.add_bos_token"] is False


def test_a_latent_attention_choosing_every_group_states_none(tmp_path: Path) -> None:
    """Experts in groups of which every one is chosen (``topk_group`` = ``n_group``) are chosen as
    if ungrouped; llama.cpp, which asserts fewer groups chosen than there are, is told so."""
    folder, _ = write_hf_deepseek2(tmp_path, glm=False)
    config = json.loads((folder / "config.json").read_text())
    kv = Family.of(config | {"n_group": 4, "topk_group": 4}).kv()
    assert (kv["deepseek2.expert_group_count"][0], kv["deepseek2.expert_group_used_count"][0]) == (1, 1)
    kv = Family.of(config).kv()
    assert (kv["deepseek2.expert_group_count"][0], kv["deepseek2.expert_group_used_count"][0]) == (4, 2)


def test_a_latent_attention_without_q_compression_states_rank_0(tmp_path: Path) -> None:
    """``q_lora_rank: null`` (DeepSeek-V2-Lite's Q in one projection) is written as rank 0, which
    tells llama.cpp to read ``attn_q``; transformers' default rank applies only where it is unstated."""
    folder, _ = write_hf_deepseek2(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    assert Family.of(config | {"q_lora_rank": None}).kv()["deepseek2.attention.q_lora_rank"][0] == 0
    assert Family.of(config | {"q_lora_rank": 16}).kv()["deepseek2.attention.q_lora_rank"][0] == 16
    config.pop("q_lora_rank")
    assert Family.of(config).kv()["deepseek2.attention.q_lora_rank"][0] == 768  # GLM-4.7-Flash's


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ({"rope_interleave": False}, "config.json's rope_interleave is False"),
        ({"attention_bias": True}, "config.json's attention_bias is True"),
        ({"hidden_act": "gelu"}, "config.json's hidden_act is 'gelu'"),
        (
            {"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}},
            "rotates part of qk_rope_head_dim",
        ),
        (
            {"rope_scaling": {"type": "yarn", "factor": 4.0, "mscale": 0.707, "mscale_all_dim": 1.0}},
            "mscale and mscale_all_dim unequal or unstated",
        ),
        ({"n_group": 3}, "8 experts in n_group 3"),
        ({"n_group": 2, "topk_group": 3}, "topk_group 3"),
        ({"n_shared_experts": 0}, "has no shared experts"),
        ({"num_experts_per_tok": 9}, "num_experts_per_tok is more than its 8 experts"),
        ({"mlp_layer_types": ["sparse", "dense", "sparse"]}, "mlp_layer_types are not dense layers, then sparse ones"),
        ({"mlp_layer_types": None, "first_k_dense_replace": "1"}, "first_k_dense_replace is not a number"),
        ({"q_lora_rank": 1.5}, "q_lora_rank is neither a whole number nor null"),
        (
            {"architectures": ["DeepseekV2ForCausalLM"], "topk_method": "group_limited_greedy", "n_group": 4},
            "chooses DeepSeek-V2's expert groups by their best expert",
        ),
        ({"architectures": ["DeepseekV2ForCausalLM"], "topk_method": "noaux"}, "topk_method 'noaux' is not one"),
        ({"num_hidden_layers": 27}, "takes a deepseek2 of 27 layers for DeepSeek-V2-Lite"),
        ({"partial_rotary_factor": 0.5}, "rotates part of qk_rope_head_dim"),
        (
            {"rope_scaling": {"type": "yarn", "factor": 4.0, "mscale": 0, "mscale_all_dim": 0}},
            "mscale and mscale_all_dim unequal or unstated",
        ),
    ],
)
def test_a_latent_attention_llama_cpp_would_run_otherwise_is_refused(
    tmp_path: Path, damage: dict[str, Any], why: str
) -> None:
    """Settings llama.cpp's deepseek2 computes otherwise (rotation in halves, biases, another
    activation or rotary width, YaRN's attention factor, groups it cannot choose among, no shared
    expert, dense layers between mixtures) are refused before a tensor is read."""
    folder, _ = write_hf_deepseek2(tmp_path)
    _edit(folder, "config.json", lambda c: c.update(damage))
    with pytest.raises(ImportRefused, match=re.escape(why)):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


@pytest.mark.parametrize(
    ("shape", "transformers_5"),
    [("nano2", False), ("nano3", True), ("super", False)],
    ids=["nano2", "nano3-transformers5", "super"],
)
def test_a_nemotron_h_converts_to_its_twin(tmp_path: Path, shape: str, transformers_5: bool) -> None:
    """Nemotron-H (``NemotronHForCausalLM``) as llama.cpp's ``nemotron_h``, or ``nemotron_h_moe`` for
    Nemotron 3's mixtures: its Mamba-2 layers (``A`` from its logarithm, ``A`` and ``D`` a column
    per head, the convolution without its unit axis, the gated norm a row per group), its layers'
    kinds as per-layer KV heads and FFN widths, the experts (each apart under the releases'
    ``backbone.``, or fused under ``model.`` as transformers 5 saves them), the router's bias, the
    shared expert and Nemotron 3 Super's latent projections. The layers' kinds stated as
    transformers 5's ``layers_block_type`` are the same model, and the multi-token-prediction
    block (``mtp.``) is left out."""
    folder, twin = write_hf_nemotron_h(tmp_path, shape=shape, transformers_5=transformers_5)
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf") == Converted([])
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    _assert_twin_keys(twin, tmp_path / "out.gguf")
    names = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}

    def saved_by_transformers_5(config: dict[str, Any]) -> None:
        kinds = config.pop("hybrid_override_pattern")
        config["layers_block_type"] = [names[k].replace("mamba", "linear_attention") for k in kinds]
        config.pop("num_hidden_layers")

    _edit(folder, "config.json", saved_by_transformers_5)
    weights = folder / "model.safetensors"
    tensors = read_safetensors(weights)
    weights.unlink()  # mapped while read: written anew, not over
    write_safetensors(weights, tensors | {"mtp.layers.0.eh_proj.weight": ("F16", np.zeros((4, 8), np.float16))})
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    _assert_twin_keys(twin, tmp_path / "out.gguf")


def test_a_nemotron_h_s_older_settings_are_read_as_transformers_reads_them(tmp_path: Path) -> None:
    """Nemotron-H's configs as its earlier releases state them: the attention heads' width as
    ``attention_head_dim`` (Nemotron-H 8B's), the Mamba-2 groups and convolution as ``mamba_n_groups``
    and ``mamba_d_conv``; what a config leaves out, transformers' defaults (a mixture's config
    needs no ``intermediate_size``)."""
    folder, twin = write_hf_nemotron_h(tmp_path, shape="nano3")
    config = json.loads((folder / "config.json").read_text())
    older = {k: v for k, v in config.items() if k not in ("head_dim", "n_groups", "conv_kernel", "intermediate_size")}
    older |= {"attention_head_dim": 16, "mamba_n_groups": 2, "mamba_d_conv": 4}
    want = {k: v for k, v in _fields(twin).items() if k.startswith("nemotron_h_moe.") and "context" not in k}
    assert {k: v for k, v in Family.of(older).kv().items() if k in want} == {
        k: (pytest.approx(v) if isinstance(v, float) else v) for k, v in Family.of(config).kv().items() if k in want
    }


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ({"mlp_hidden_act": "gelu"}, "config.json's mlp_hidden_act is 'gelu'"),
        ({"mamba_hidden_act": "relu"}, "config.json's mamba_hidden_act is 'relu'"),
        ({"attention_bias": True}, "config.json's attention_bias is True"),
        ({"use_bias": True}, "config.json's use_bias is True"),
        ({"sliding_window": 1024}, "sets a sliding_window"),
        ({"hybrid_override_pattern": "M*X-"}, "hybrid_override_pattern (or layers_block_type) is not Nemotron-H's"),
        ({"mamba_num_heads": 7, "mamba_head_dim": 16}, "mamba_num_heads 7 do not split into its n_groups 2"),
        ({"n_group": 2, "topk_group": 1}, "chooses experts among n_group 2"),
        ({"use_conv_bias": False}, "config.json's use_conv_bias is False"),
        ({"mamba_conv_bias": False}, "config.json's use_conv_bias is False"),  # its older name
        ({"hybrid_override_pattern": "M*E-"}, "mixes MLP and mixture layers"),
        ({"num_experts_per_tok": 9}, "8 experts, 9 a token, are not a mixture llama.cpp runs"),
        ({"n_routed_experts": 2048}, "2048 experts, 2 a token"),
    ],
)
def test_a_nemotron_h_llama_cpp_would_run_otherwise_is_refused(
    tmp_path: Path, damage: dict[str, Any], why: str
) -> None:
    """Settings llama.cpp's nemotron_h computes otherwise (other activations, biases, a window, a
    layer kind it lacks, Mamba heads its groups cannot share, experts chosen in groups) are refused."""
    folder, _ = write_hf_nemotron_h(tmp_path, shape="nano3")
    _edit(folder, "config.json", lambda c: c.update(damage))
    with pytest.raises(ImportRefused, match=re.escape(why)):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


def test_a_laguna_converts_to_its_twin(tmp_path: Path) -> None:
    """Laguna (``LagunaForCausalLM``) as llama.cpp's ``laguna``: each layer's heads, the sliding
    layers (their own rotary base and width) beside full ones (partial rotation, YaRN), the gated
    attention output, the leading dense layer, the experts apart, the router's bias and the shared
    expert; ``</assistant>``, the end of its turn, a control token (llama.cpp's converter promotes
    it: the releases save it as no special token, and its text would show)."""
    folder, twin = write_hf_laguna(tmp_path)

    def unspecial(spec: dict[str, Any]) -> None:
        for token in spec["added_tokens"]:
            if token["content"] == "</assistant>":
                token["special"] = False

    _edit(folder, "tokenizer.json", unspecial)
    # Its template kept beside the config, which only includes it (llama.cpp's converter resolves it).
    template = (folder / "tokenizer_config.json").read_text()
    (folder / "chat_template.jinja").write_text(json.loads(template)["chat_template"])
    _edit(folder, "tokenizer_config.json", lambda c: c.update(chat_template="{% include 'chat_template.jinja' %}"))
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf") == Converted([])
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    _assert_twin_keys(twin, tmp_path / "out.gguf")
    got = _fields(tmp_path / "out.gguf")
    end = got["tokenizer.ggml.tokens"].index("</assistant>")
    assert got["tokenizer.ggml.eot_token_id"] == end
    assert got["tokenizer.ggml.token_type"][end] == gguf.TokenType.CONTROL
    assert got["tokenizer.chat_template"] == (folder / "chat_template.jinja").read_text()
    # As transformers 5 saves it: the shared expert plural, the router's bias on the gate.
    weights = folder / "model.safetensors"
    tensors = {
        t.name.replace("shared_expert.", "shared_experts.").replace("experts.e_score", "gate.e_score"): (
            t.dtype,
            np.array(t.data),
        )
        for t in safetensors.read(weights, weights.name)
    }
    weights.unlink()  # mapped while read: written anew, not over
    write_safetensors(weights, tensors)
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    _assert_twin_tensors(twin, tmp_path / "out.gguf")


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ({"moe_router_logit_softcapping": 30.0}, "config.json's moe_router_logit_softcapping is 30.0"),
        ({"moe_apply_router_weight_on_input": True}, "moe_apply_router_weight_on_input is True"),
        ({"attention_bias": True}, "config.json's attention_bias is True"),
        ({"mlp_layer_types": ["sparse", "dense", "sparse", "sparse"]}, "mlp_layer_types are not dense layers"),
        ({"num_attention_heads_per_layer": [4, 3, 4, 2]}, "num_attention_heads_per_layer are not a multiple"),
        ({"layer_types": ["full_attention", "chunked"] * 2}, "layer_types are not full or sliding attention"),
        ({"gating": "per-element"}, "blk.0.attn_gate.weight gates 4 outputs; config.json's gating 'per-element'"),
        (
            {"gating_types": ["per_head", "per_element", "per_head", "per_head"]},
            "gating_types say per-element at layer 1",
        ),
        ({"num_experts_per_tok": 9}, "config.json's 8 experts, 9 a token, are not a mixture llama.cpp runs"),
    ],
)
def test_a_laguna_llama_cpp_would_run_otherwise_is_refused(tmp_path: Path, damage: dict[str, Any], why: str) -> None:
    """Settings llama.cpp's laguna computes otherwise (a capped or input-weighing router, biases,
    dense layers between mixtures, heads its KV heads cannot share, another kind of layer) or would
    abort on (an output gate of the other width than ``gating`` says) are refused."""
    folder, _ = write_hf_laguna(tmp_path)
    _edit(folder, "config.json", lambda c: c.update(damage))
    with pytest.raises(ImportRefused, match=re.escape(why)):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


@pytest.mark.parametrize(
    ("options", "notes"),
    [({}, []), ({"sees": True}, [TOWER_LEFT_OUT]), ({"transformers_5": True}, [])],
    ids=["causal", "release", "transformers-5"],
)
def test_a_gemma3n_converts_to_its_twin(tmp_path: Path, options: dict[str, bool], notes: list[str]) -> None:
    """Gemma 3n as llama.cpp's ``gemma3n``: its AltUp projections stacked, each layer's AltUp router,
    coefficients and correction scale, LAuReL's residual, the per-layer embeddings padded past
    ``vocab_size_per_layer_input`` with their first row (as transformers reads them), its keys; as
    ``Gemma3nForCausalLM``, as the releases are (``Gemma3nForConditionalGeneration``: its towers
    left out, and said so), and as transformers 5 saves it (no K, V or K norm in the layers that
    reuse KV, which llama.cpp loads all the same: written as stand-ins it never reads)."""
    folder, twin = write_hf_gemma3n(tmp_path, **options)
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf") == Converted(notes)
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    _assert_twin_keys(twin, tmp_path / "out.gguf")


def test_a_gemma3n_without_its_altup_correction_scale_is_unscaled(tmp_path: Path) -> None:
    """``altup_correct_scale: false`` (transformers then leaves the corrected stream unscaled, where
    llama.cpp always multiplies by the scale) is written as a scale of ones."""
    folder, _ = write_hf_gemma3n(tmp_path)
    _edit(folder, "config.json", lambda c: c.update(altup_correct_scale=False))
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    scale = next(
        t for t in gguf.GGUFReader(tmp_path / "out.gguf").tensors if t.name == "blk.3.altup_correct_scale.weight"
    )
    assert np.array_equal(np.asarray(scale.data), np.ones(64, np.float32))


_GEMMA3N_TYPES = ["sliding_attention"] * 4 + ["full_attention"]


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ({"laurel_rank": 32}, "config.json's laurel_rank is 32; llama.cpp's gemma3n has 64"),
        ({"altup_num_inputs": 2}, "config.json's altup_num_inputs is 2; llama.cpp's gemma3n has 4"),
        ({"hidden_size_per_layer_input": 128}, "hidden_size_per_layer_input is 128; llama.cpp's gemma3n has 256"),
        ({"hidden_activation": "silu"}, "config.json's hidden_activation is 'silu'"),
        ({"num_kv_shared_layers": 10}, "num_kv_shared_layers (10 of 25 layers) does not leave 20 layers"),
        ({"num_kv_shared_layers": 25}, "num_kv_shared_layers is not a number of its 25 layers"),
        # layer 19 sliding: transformers' shared sliding layers reuse 19's KV, llama.cpp's 18's
        (
            {"layer_types": _GEMMA3N_TYPES * 3 + ["sliding_attention"] * 5 + _GEMMA3N_TYPES},
            "make layer 20 reuse layer 19's KV; llama.cpp's gemma3n reuses layer 18's",
        ),
        ({"activation_sparsity_pattern": [0.95] * 5 + [0.0] * 20}, "activation_sparsity_pattern is not 0.95 on the"),
        ({"intermediate_size": [1024] * 24 + [2048]}, "intermediate_size differs by layer"),
        ({"final_logit_softcapping": None}, "final_logit_softcapping is 0; llama.cpp's gemma3n has 30.0"),
        ({"final_logit_softcapping": 50.0}, "final_logit_softcapping is 50.0; llama.cpp's gemma3n has 30.0"),
        ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "scales the rotation"),
    ],
)
def test_a_gemma3n_llama_cpp_would_run_otherwise_is_refused(tmp_path: Path, damage: dict[str, Any], why: str) -> None:
    """What llama.cpp's gemma3n fixes (AltUp's four streams, LAuReL's rank, the per-layer width, KV
    reused from layer 20 on and from which layer, the sparse layers, one FFN width, capped logits,
    no rope scaling), stated otherwise, is refused; intermediate sizes per layer, all equal, convert."""
    folder, _ = write_hf_gemma3n(tmp_path)
    _edit(folder, "config.json", lambda c: c.update(intermediate_size=[1024] * 25))
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    _edit(folder, "config.json", lambda c: c.update(damage))
    with pytest.raises(ImportRefused, match=re.escape(why)):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


def test_a_glm4_converts_to_its_twin(tmp_path: Path) -> None:
    """GLM-4-0414 (``Glm4ForCausalLM``) as llama.cpp's ``glm4``: Q, K and V with their biases, the
    first half of each head rotating (transformers' default where config.json says nothing), the
    norms after attention and the FFN, gate and up in one tensor, GLM's turn ends; another
    activation or M-RoPE sections (GLM-4.1V's text model) are refused."""
    folder, twin = write_hf_glm4(tmp_path)
    _edit(folder, "config.json", lambda c: c.pop("partial_rotary_factor"))
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf") == Converted([])
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    _assert_twin_keys(twin, tmp_path / "out.gguf")
    got = _fields(tmp_path / "out.gguf")
    assert got["tokenizer.ggml.eot_token_id"] == got["tokenizer.ggml.tokens"].index("<|user|>")
    _edit(folder, "config.json", lambda c: c.update(hidden_act="gelu"))
    with pytest.raises(
        ImportRefused, match=re.escape("config.json's hidden_act is 'gelu'; llama.cpp's glm4 has 'silu'")
    ):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    _edit(folder, "config.json", lambda c: c.update(hidden_act="silu", rope_scaling={"mrope_section": [2, 3, 3]}))
    with pytest.raises(ImportRefused, match="M-RoPE"):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


def test_a_glmocr_converts_to_the_pair_llama_cpp_runs_ollama_s_files_as(
    tmp_path: Path, model_store: ModelStore
) -> None:
    """GLM-OCR (``GlmOcrForConditionalGeneration``) as transformers 5 saves it converts to the pair
    Ollama's library files become (``glm4_ggufs.write_glmocr_vision``): its text model as llama.cpp's
    ``glm4`` with M-RoPE over the whole head (Q and K rows from pairs to halves), heads wider than
    its width over their count, its multi-token-prediction layer left out; its tower as a ``glm4v``
    projector (the Conv3D kernel a kernel per frame, the merging convolution in F32); created, a
    projector layer, whatever order the checkpoint keeps its tensors in. Sections that miss the
    rotating pairs are refused; a tower libmtmd would compute otherwise is left out, saying why."""
    folder, text, mmproj = write_hf_glmocr(tmp_path)
    path = folder / "model.safetensors"  # the MTP layer's first, as torch saves F32 before F16
    tensors = read_safetensors(path)
    write_safetensors(path, {n: v for n, v in tensors.items() if ".layers.2." in n} | tensors)
    _assert_sees_as_twins(folder, text, mmproj, tmp_path)
    _assert_twin_keys(text, tmp_path / "out.gguf")
    got = _fields(tmp_path / "out.gguf")
    assert got["tokenizer.ggml.pre"] == "chatglm-bpe" and got["tokenizer.ggml.add_bos_token"] is False
    _assert_created_with_projector(folder, model_store)
    sound = (folder / "config.json").read_text()

    def rope(**given: Any) -> Callable[[dict[str, Any]], None]:
        return lambda c: c["text_config"]["rope_parameters"].update(given)

    for change, why in (
        (rope(mrope_section=[4, 6, 4]), "mrope_section [4, 6, 4] does not cover a head's 16 rotating pairs"),
        (rope(partial_rotary_factor=0.5), "mrope_section [4, 6, 6] does not cover a head's 8 rotating pairs"),
        (rope(partial_rotary_factor=1.5), "rotation is of an odd width or wider than a head"),
        (lambda c: c["text_config"]["rope_parameters"].pop("mrope_section"), "has no mrope_section"),
    ):
        (folder / "config.json").write_text(sound)
        _edit(folder, "config.json", change)
        with pytest.raises(ImportRefused, match=re.escape(why)):
            convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf")
    for change, why in (
        (lambda c: c["vision_config"].update(hidden_act="gelu"), "vision_config activation is not silu"),
        (lambda c: c["vision_config"].update(out_hidden_size=32), "out_hidden_size is not the text model's"),
        (lambda c: c["vision_config"].update(temporal_patch_size=1), "merges other than 2x2 patches of 2 frames"),
        (lambda c: c["vision_config"].update(spatial_merge_size=4), "merges other than 2x2 patches of 2 frames"),
        (lambda c: c["vision_config"].update(rope_parameters={"rope_theta": 1e4 + 1}), "another base than libmtmd's"),
    ):
        (folder / "config.json").write_text(sound)
        _edit(folder, "config.json", change)
        notes = convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf").notes
        assert len(notes) == 1 and notes[0].startswith(TOWER_LEFT_OUT) and why in notes[0], notes


@pytest.mark.parametrize(
    ("audio", "final_norm"), [(True, False), (False, False), (True, True)], ids=["omni", "nano-vl", "norm"]
)
def test_a_nemotron_omni_converts_to_llama_cpp_s_text_model_and_projector(
    tmp_path: Path, model_store: ModelStore, audio: bool, final_norm: bool
) -> None:
    """Nemotron 3 Nano Omni (``NemotronH_Nano_Omni_Reasoning_V3``) and Nemotron Nano VL
    (``NemotronH_Nano_VL_V2``) as their releases keep them convert to the files llama.cpp's converter
    writes: the Nemotron-H text model from under ``language_model.backbone.`` with ``llm_config``'s
    settings; RADIO as a ``nemotron_v2_vl`` projector (its linear patch embedding a kernel, its
    position table resized to the picture's grid with corners aligned, its class and register
    tokens, Q/K/V fused, the norm Megatron adds after it as the ViT's last, what libmtmd has no use
    for left out) and Omni's Parakeet as its ``parakeet`` side, each side's type under its
    modality; created, a projector layer. A tower libmtmd would compute otherwise is left out, and
    the stream says why."""
    folder, text, mmproj = write_hf_nemotron_omni(tmp_path, audio=audio, final_norm=final_norm)
    _assert_sees_as_twins(folder, text, mmproj, tmp_path)
    _assert_twin_keys(text, tmp_path / "out.gguf")
    _assert_created_with_projector(folder, model_store)
    processor = (folder / "preprocessor_config.json").read_text()
    _edit(folder, "preprocessor_config.json", lambda c: c.update(norm_mean=[0.25] * 3, norm_std=[0.75] * 3))
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf")  # what its processor applies
    got = _fields(tmp_path / "proj.gguf")
    assert (got["clip.vision.image_mean"], got["clip.vision.image_std"]) == ([0.25] * 3, [0.75] * 3)
    (folder / "preprocessor_config.json").write_text(processor)
    sound = (folder / "config.json").read_text()
    weights = folder / "model.safetensors"
    tensors = read_safetensors(weights)
    for change, why in (
        (lambda c: c["vision_config"].update(version="radio_v2.5-g"), "RADIO 'radio_v2.5-g'"),
        (lambda c: c.update(downsample_ratio=0.25), "libmtmd's nemotron_v2_vl merges 2x2 patches"),
        (lambda c: c["vision_config"].update(hidden_act="silu"), "FFN is not a GELU MLP"),
    ):
        (folder / "config.json").write_text(sound)
        _edit(folder, "config.json", change)
        notes = convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf").notes
        assert len(notes) == 1 and notes[0].startswith(TOWER_LEFT_OUT) and why in notes[0], notes
    (folder / "config.json").write_text(sound)
    block, ones = "vision_model.radio_model.model.blocks.0.", ("F32", np.ones(32, np.float32))
    write_safetensors(weights, tensors | {block + "ls1.gamma": ones})  # a LayerScale that scales nothing
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf").notes == []
    write_safetensors(weights, tensors | {block + "ls2.gamma": ("F32", np.full(32, 0.5, np.float32))})
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf").notes == []
    scale = {t.name: np.array(t.data) for t in gguf.GGUFReader(tmp_path / "proj.gguf").tensors}["v.blk.0.ls2.weight"]
    assert np.array_equal(scale, np.full(32, 0.5, np.float32))  # a LayerScale that scales: libmtmd's ViT applies it
    for extra, why in (
        ({"vision_model.radio_model.model.norm.weight": ones}, "not one cllm's converter knows for RADIO's"),
        ({"vision_model.radio_model.feature_normalizer.mean": ones}, "not one cllm's converter knows for RADIO's"),
    ):
        write_safetensors(weights, tensors | extra)
        notes = convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf").notes
        assert len(notes) == 1 and why in notes[0], notes
    write_safetensors(weights, tensors)
    if not audio:
        return
    for change, why in (
        (lambda c: c["sound_config"].update(subsampling_factor=4), "subsampling factor 4 or kernel 3"),
        (lambda c: c["sound_config"].update(model_type="whisper"), "sound_config is a 'whisper'"),
        (lambda c: c["sound_config"].pop("num_hidden_layers"), "sound_config has no num_hidden_layers"),
    ):
        (folder / "config.json").write_text(sound)
        _edit(folder, "config.json", change)
        converted = convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf")
        assert converted.sees and len(converted.notes) == 1, converted
        assert converted.notes[0].startswith(AUDIO_LEFT_OUT) and why in converted.notes[0], converted
        assert _fields(tmp_path / "proj.gguf")["clip.projector_type"] == "nemotron_v2_vl"


def test_a_glm4v_converts_to_its_text_model_and_projector(tmp_path: Path, model_store: ModelStore) -> None:
    """GLM-4.1V (``Glm4vForConditionalGeneration``, or ``Glm46VForConditionalGeneration`` over its
    text model; Ollama's converter has neither): GLM-OCR's
    conversion with GLM-4's Q, K and V biases and half of each head rotating in M-RoPE sections,
    GLM-4's pre-tokenizer, and its tower's norm after the patches and learned position table as
    libmtmd's glm4v reads them; created, a projector layer. A position table other than the
    tower's image_size says leaves the tower out."""
    folder, text, mmproj = write_hf_glm4v(tmp_path)
    _assert_pair_created(folder, text, mmproj, tmp_path, model_store, "glm4")
    sound = (folder / "config.json").read_text()
    _edit(
        folder, "config.json", lambda c: c.update(architectures=["Glm46VForConditionalGeneration"], model_type="glm46v")
    )
    _assert_sees_as_twins(folder, text, mmproj, tmp_path)  # transformers' GLM-4.6V class: the same model
    _edit(folder, "config.json", lambda c: c["text_config"].update(model_type="glm4v_moe_text"))
    with pytest.raises(ImportRefused, match="text model is 'glm4v_moe_text'"):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf")
    (folder / "config.json").write_text(sound)

    def flat(config: dict[str, Any]) -> None:  # the first releases' (transformers 4.53): text settings on top
        text = config.pop("text_config")
        rope = text.pop("rope_parameters")
        config |= {k: v for k, v in text.items() if k != "model_type"}
        config |= {"partial_rotary_factor": rope["partial_rotary_factor"], "rope_theta": rope["rope_theta"]}
        config["rope_scaling"] = {"type": "default", "mrope_section": rope["mrope_section"]}

    _edit(folder, "config.json", flat)
    _assert_sees_as_twins(folder, text, mmproj, tmp_path)
    (folder / "config.json").write_text(sound)
    _edit(folder, "config.json", lambda c: c["vision_config"].update(image_size=32))
    notes = convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf").notes
    assert len(notes) == 1 and "position table of 64 patches is not 4x4" in notes[0], notes


def test_a_llama4_converts_to_llama_cpp_s_text_model_and_projector(tmp_path: Path, model_store: ModelStore) -> None:
    """Llama 4 (``Llama4ForConditionalGeneration``, as Ollama's converter takes it) converts to the
    files llama.cpp's converter writes: the text model from under ``language_model.`` with
    ``text_config``'s settings (the dense layers' width ``intermediate_size_mlp``, an expert's
    ``intermediate_size``), Q and K rows as stored, each mixture layer's fused, transposed experts
    split into gate, up and down; the tower renamed into a ``llama4`` projector. Created, a
    projector layer. A text model llama.cpp's llama4 would compute otherwise is refused; a tower
    libmtmd would, left out with the reason."""
    folder, text, mmproj = write_hf_llama4(tmp_path)
    _assert_pair_created(folder, text, mmproj, tmp_path, model_store, "llama4")
    sound = (folder / "config.json").read_text()

    def as_scout_states_it(config: dict[str, Any]) -> None:  # what transformers derives, left to it
        text = config["text_config"]
        text |= {"no_rope_layers": [], "attn_temperature_tuning": 4}
        del text["interleave_moe_layer_step"]  # moe_layers alone say it

    _edit(folder, "config.json", as_scout_states_it)
    _assert_sees_as_twins(folder, text, mmproj, tmp_path)
    _assert_twin_keys(text, tmp_path / "out.gguf")
    not_every_other = "moe_layers or interleave_moe_layer_step are not the last of every so many layers"
    for change, why in (
        (lambda c: c["text_config"].update(attention_chunk_size=4096), "attention_chunk_size is 4096"),
        (lambda c: c["text_config"].update(attention_chunk_size=None), "attention_chunk_size is 0"),
        (lambda c: c["text_config"].update(use_qk_norm=False), "use_qk_norm is False"),
        (lambda c: c["text_config"].update(no_rope_layers=[1, 1, 1, 1]), "rotate and attend in chunks otherwise"),
        (lambda c: c["text_config"].update(moe_layers=[0, 2]), not_every_other),
        (lambda c: c["text_config"].update(moe_layers=[1], interleave_moe_layer_step=2), not_every_other),
        (lambda c: c["text_config"].update(moe_layers=None, interleave_moe_layer_step=0), not_every_other),
        (lambda c: c["text_config"].update(num_experts_per_tok=5), "4 experts, 5 a token, are not a mixture"),
        (lambda c: c["text_config"].update(attn_temperature_tuning=False), "turns off attn_temperature_tuning"),
        (lambda c: c["text_config"].update(hidden_act="gelu"), "hidden_act is 'gelu'"),
    ):
        (folder / "config.json").write_text(sound)
        _edit(folder, "config.json", change)
        with pytest.raises(ImportRefused, match=why):
            convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf")
    for change, why in (
        (lambda c: c["vision_config"].update(pixel_shuffle_ratio=0.3), "pixel_shuffle_ratio 0.3"),
        (lambda c: c["vision_config"].update(pixel_shuffle_ratio=1 / 3), "does not merge the tower's patches whole"),
        (lambda c: c["vision_config"].update(rope_theta=20000), "rotating at base 10000"),
        (lambda c: c["vision_config"].update(rope_parameters={"rope_theta": 20000}), "rotating at base 10000"),
        (lambda c: c["vision_config"].update(image_size=64), "position table of 17 rows is not its 8x8"),
    ):
        (folder / "config.json").write_text(sound)
        _edit(folder, "config.json", change)
        notes = convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf").notes
        assert len(notes) == 1 and notes[0].startswith(TOWER_LEFT_OUT) and why in notes[0], notes
    (folder / "config.json").write_text(sound)
    alone, twin = write_hf_llama4_text(tmp_path / "text-alone")  # Llama4ForCausalLM: the same text model
    assert convert(Checkpoint.folder(alone), tmp_path / "alone.gguf") == Converted([])
    _assert_twin_tensors(twin, tmp_path / "alone.gguf")
    _assert_twin_keys(twin, tmp_path / "alone.gguf")
    maverick = json.loads(sound)["text_config"] | {"num_local_experts": 128, "use_qk_norm": False}
    config = {"architectures": ["Llama4ForConditionalGeneration"], "text_config": maverick}
    assert Family.of(config).kv()["llama4.expert_count"][0] == 128  # Maverick's: no Q and K norms
    with pytest.raises(ImportRefused, match="use_qk_norm is True"):
        Family.of({**config, "text_config": maverick | {"use_qk_norm": True}}).kv()


def test_a_release_folder_s_other_formats_are_not_read(tmp_path: Path) -> None:
    """A folder downloaded whole (gpt-oss's carries its original release in ``original/``): only the
    folder's own safetensors are the model, and the CLI does not upload the others; a
    sentence-transformers module's (named by ``modules.json``) it does."""
    folder, twin = write_hf_gptoss(tmp_path)
    (folder / "original").mkdir()
    write_safetensors(folder / "original" / "model.safetensors", {"block.0.attn.qkv.weight": ("F16", np.zeros((2, 2)))})
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    assert "original/model.safetensors" not in model_folder_files(folder, "./gptoss")
    embedder, _ = write_hf_embeddinggemma(tmp_path / "embeddinggemma")
    uploaded = model_folder_files(embedder, "./embeddinggemma")
    assert {"model.safetensors", "2_Dense/model.safetensors", "3_Dense/model.safetensors"} <= set(uploaded)


def test_an_embeddinggemma_converts_to_its_twin(tmp_path: Path) -> None:
    """EmbeddingGemma as sentence-transformers saves it (``Gemma3TextModel``, its names without
    ``model.``): llama.cpp's ``gemma-embedding``, norms +1, no output of its own, mean pooling, and
    its ``2_Dense`` and ``3_Dense`` modules as ``dense_2`` and ``dense_3`` with their widths."""
    folder, twin = write_hf_embeddinggemma(tmp_path)
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf") == Converted([])
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    want, got = _fields(twin), _fields(tmp_path / "out.gguf")
    keys = [k for k in want if k.startswith("gemma-embedding.") and k != "gemma-embedding.rope.dimension_count"]
    assert {k: got.get(k) for k in keys} == {k: want[k] for k in keys}
    assert got["gemma-embedding.pooling_type"] == gguf.PoolingType.MEAN


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ("no-module", "EmbeddingGemma needs its sentence-transformers modules 2_Dense and 3_Dense"),
        ("bias", "2_Dense has a bias or an activation, which llama.cpp's gemma-embedding does not apply"),
        ("width", "2_Dense and 3_Dense must take the model's 64 dimensions back to 64"),
        ("shape", "3_Dense has no linear.weight of its config.json's in_features and out_features"),
        ("causal", "config.json's use_bidirectional_attention is false"),
    ],
)
def test_an_embeddinggemma_llama_cpp_would_run_otherwise_is_refused(tmp_path: Path, damage: str, why: str) -> None:
    """A head llama.cpp would not apply as sentence-transformers does (a module missing, a bias or
    activation), or one whose widths would trip llama.cpp's asserts (which end the process), is refused."""
    folder, _ = write_hf_embeddinggemma(tmp_path)
    if damage == "no-module":
        modules = json.loads((folder / "modules.json").read_text())
        (folder / "modules.json").write_text(json.dumps([m for m in modules if m["path"] != "3_Dense"]))
    elif damage == "bias":
        _edit(folder, "2_Dense/config.json", lambda c: c.update(bias=True))
    elif damage == "width":
        _edit(folder, "2_Dense/config.json", lambda c: c.update(in_features=128, out_features=64))
        path = folder / "2_Dense" / "model.safetensors"
        write_safetensors(path, {"linear.weight": ("F16", np.zeros((64, 128), np.float16))})
    elif damage == "shape":
        write_safetensors(
            folder / "3_Dense" / "model.safetensors", {"linear.weight": ("F16", np.zeros((2, 2), np.float16))}
        )
    else:
        _edit(folder, "config.json", lambda c: c.update(use_bidirectional_attention=False))
    with pytest.raises(ImportRefused, match=re.escape(why)):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


def test_yarn_s_stated_attention_factor_is_kept_as_its_ratio_to_llama_cpp_s(tmp_path: Path) -> None:
    """transformers scales YaRN's attention by a stated ``attention_factor`` in place of its own,
    where llama.cpp computes ``0.1 ln(factor) + 1`` (or Ministral 3's ratio): the converter writes
    the stated one's ratio to llama.cpp's as the ``attn_factor`` llama.cpp multiplies it by."""
    folder, _ = write_hf_gptoss(tmp_path / "gptoss")
    _edit(folder, "config.json", lambda c: c["rope_scaling"].update(attention_factor=1.0))
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    written = _fields(tmp_path / "out.gguf")["gpt-oss.rope.scaling.attn_factor"]
    assert written == pytest.approx(1 / (0.1 * np.log(32) + 1), rel=1e-6)
    folder, _ = write_hf_ministral3(tmp_path / "ministral3")  # its log multiplier makes llama.cpp's 1
    _edit(folder, "config.json", lambda c: c["rope_parameters"].update(attention_factor=1.0))
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    assert "mistral3.rope.scaling.attn_factor" not in _fields(tmp_path / "out.gguf")


@pytest.mark.parametrize(
    ("family", "damage"),
    [("llama", {"rms_norm_eps": "x"}), ("llama", {"rope_scaling": {"rope_type": "llama3", "low_freq_factor": "x"}})],
)
def test_a_setting_of_the_wrong_type_is_refused(
    twins: dict[str, tuple[Path, Path]], tmp_path: Path, family: str, damage: dict[str, Any]
) -> None:
    folder = export(twins[family][1], tmp_path / "hf")
    _edit(folder, "config.json", lambda c: c.update(damage))
    with pytest.raises(ImportRefused, match=r"^config\.json has a setting of the wrong type: "):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


def test_a_qwen3_mixture_that_would_not_normalize_its_experts_is_refused(
    twins: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    """transformers weighs Qwen3-MoE's chosen experts unnormalized unless told; llama.cpp always
    normalizes them."""
    folder = export(twins["qwen3moe"][1], tmp_path / "hf")
    _edit(folder, "config.json", lambda c: c.pop("norm_topk_prob"))
    with pytest.raises(
        ImportRefused, match=re.escape("config.json's norm_topk_prob is not true; llama.cpp's qwen3moe normalizes")
    ):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


def test_a_folder_missing_a_shard_its_index_names_is_refused(tmp_path: Path) -> None:
    """A folder uploaded without one of its shards is refused by name, whatever the shard held."""
    _, twin = write_hf_llama(tmp_path)
    folder = export(twin, tmp_path / "sharded", shards=3)
    (folder / "model-00002-of-00003.safetensors").unlink()
    why = "the checkpoint lacks model-00002-of-00003.safetensors, which its index names: is a shard missing?"
    with pytest.raises(ImportRefused, match=re.escape(why)):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    # A stale index beside the tensors all merged in one file is no matter.
    merged = export(twin, tmp_path / "merged")
    (merged / "model.safetensors.index.json").write_text((folder / "model.safetensors.index.json").read_text())
    convert(Checkpoint.folder(merged), tmp_path / "out.gguf")


def test_a_gptoss_with_blocks_but_no_scales_is_refused(tmp_path: Path) -> None:
    folder, _ = write_hf_gptoss(tmp_path)
    path = folder / "model.safetensors"
    tensors = read_safetensors(path)
    del tensors["model.layers.1.mlp.experts.down_proj_scales"]
    write_safetensors(path, tensors)
    with pytest.raises(
        ImportRefused, match=r"model\.layers\.1\.mlp\.experts\.down_proj: MXFP4 needs its _blocks and _scales"
    ):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ({"layer_types": ["full_attention", "linear_attention"]}, "config.json's layer_types are not a full-attention"),
        ({"linear_value_head_dim": 8}, "config.json's linear_key_head_dim and linear_value_head_dim differ"),
        ({"linear_num_value_heads": 3}, "config.json's linear_num_value_heads is not a multiple"),
    ],
)
def test_a_qwen35_llama_cpp_would_run_otherwise_is_refused(tmp_path: Path, damage: dict[str, Any], why: str) -> None:
    """What llama.cpp's qwen35 cannot say (full attention off its interval, value heads of
    another width than key heads, or not a whole number per key head) is refused with why."""
    folder, _ = write_hf_qwen35(tmp_path)
    _edit(folder, "config.json", lambda c: c.update(damage))
    with pytest.raises(ImportRefused, match=re.escape(why)):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


@pytest.mark.parametrize(
    ("family", "damage", "why"),
    [
        (
            "qwen2.5vl",
            {"window_size": 64},
            "config.json's window_size is 64; llama.cpp's Qwen2.5-VL attends in windows",
        ),
        ("qwen2.5vl", {"fullatt_block_indexes": [0]}, "config.json's fullatt_block_indexes [0] are not 0, 1, ..."),
        ("qwen2.5vl", {"fullatt_block_indexes": None}, "config.json's vision_config has no fullatt_block_indexes"),
        ("qwen2vl", {"spatial_merge_size": 4}, "config.json's vision_config merges other than 2x2 patches"),
        ("qwen3vl", {"deepstack_visual_indexes": [5]}, "config.json's deepstack_visual_indexes [5] are not blocks"),
        (
            "qwen3vl",
            {"deepstack_visual_indexes": []},
            "tensor model.visual.deepstack_merger_list.0.linear_fc1.bias has no",
        ),
    ],
)
def test_a_qwen_vl_tower_that_cannot_be_converted_says_why(
    tmp_path: Path, family: str, damage: dict[str, Any], why: str
) -> None:
    """What libmtmd's Qwen-VL graphs would compute otherwise than transformers (windows of another
    size, full attention off the pattern, another merger) or a tower its settings do not describe:
    the text model is converted, and the note says why the tower was left out."""
    folder, _, _ = _QWEN_VL[family](tmp_path)
    _edit(folder, "config.json", lambda c: c["vision_config"].update(damage))
    converted = convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf")
    assert not converted.sees and converted.notes[0].startswith(f"{TOWER_LEFT_OUT} ({why}")


def test_a_seeing_mixture_whose_experts_come_first_converts(tmp_path: Path) -> None:
    """A shard order that puts a mixture's experts before the token embedding: the converter looks
    for the embedding without asking an expert's name what it is (a Qwen 3.5 mixture that sees)."""
    folder, text, _ = write_hf_qwen35_vision(tmp_path, moe=True)
    path = folder / "model.safetensors"
    tensors = read_safetensors(path)
    write_safetensors(path, dict(sorted(tensors.items(), key=lambda item: ".experts." not in item[0])))
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf").sees
    _assert_twin_tensors(text, tmp_path / "out.gguf")


def test_a_qwen_vl_processor_is_read_where_transformers_5_saves_it(tmp_path: Path) -> None:
    """The pixel statistics from ``processor_config.json``'s ``image_processor`` where there is no
    ``preprocessor_config.json`` (transformers 5's save); with neither, Qwen3-VL's own halves, not
    CLIP's."""
    folder, _, mmproj = write_hf_qwen3vl_vision(tmp_path)
    processor = json.loads((folder / "preprocessor_config.json").read_text())
    (folder / "preprocessor_config.json").unlink()
    (folder / "processor_config.json").write_text(json.dumps({"image_processor": processor}))
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf")
    for key in ("clip.vision.image_mean", "clip.vision.image_std"):
        assert _fields(tmp_path / "proj.gguf")[key] == _fields(mmproj)[key]
    (folder / "processor_config.json").unlink()
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf")
    assert _fields(tmp_path / "proj.gguf")["clip.vision.image_mean"] == [0.5, 0.5, 0.5]


def test_a_qwen3vl_tower_without_what_libmtmd_asserts_is_left_out(tmp_path: Path) -> None:
    """A Qwen3-VL tower without its Q/K/V bias (or patch bias, or position table), which libmtmd's
    graph asserts rather than refuses: left out with why, not a projector that aborts the server."""
    folder, _, _ = write_hf_qwen3vl_vision(tmp_path)
    path = folder / "model.safetensors"
    tensors = read_safetensors(path)
    del tensors["model.visual.blocks.1.attn.qkv.bias"]
    write_safetensors(path, tensors)
    converted = convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf")
    why = "the vision tower has no v.blk.1.attn_qkv.bias, which llama.cpp's Qwen3-VL needs"
    assert converted == Converted([f"{TOWER_LEFT_OUT} ({why})"])


@pytest.mark.parametrize(
    ("rope", "why"),
    [
        ({"rope_type": "default"}, "config.json's rope scaling has no mrope_section"),
        ({"rope_type": "default", "mrope_section": [4, 4, 4]}, "config.json's mrope_section [4, 4, 4] does not cover"),
    ],
)
def test_a_qwen_vl_without_its_m_rope_sections_is_refused(tmp_path: Path, rope: dict[str, Any], why: str) -> None:
    """Without the sections (or with ones that are not a head's), llama.cpp could not place a
    picture's tokens: the whole model is refused, with why."""
    folder, _, _ = write_hf_qwen3vl_vision(tmp_path)
    _edit(folder, "config.json", lambda c: c["text_config"].update(rope_scaling=rope))
    with pytest.raises(ImportRefused, match=re.escape(why)):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf")


def test_a_tower_it_cannot_convert_leaves_a_text_model_and_says_why(
    twins: dict[str, tuple[Path, Path]], tmp_path: Path, model_store: ModelStore
) -> None:
    """A tower whose tensors are not ones cllm knows: the text model is converted all the same,
    and the create's stream says the tower was left out, and why."""
    twin = twins["llama"][1]
    folder = export(twin, tmp_path / "hf", sees="language_model.model.")  # a stand-in tower
    converted = convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf")
    assert not converted.sees
    (note,) = converted.notes
    assert note == f"{TOWER_LEFT_OUT} (config.json's vision_config has no num_attention_heads)"
    want, got = _tensors(twin), _tensors(tmp_path / "out.gguf")
    assert set(got) == set(want)
    for name, (_, data) in got.items():
        assert np.array_equal(data.astype(np.float32), want[name][1].astype(np.float32)), name
    files = {name: _upload(model_store, path) for name, path in model_folder_files(folder, "./hf").items()}
    events: list[dict[str, Any]] = []
    create_model(model_store, CreateRequest.from_json({"model": "sees", "files": files}), events.append)
    assert [e["status"] for e in events][:2] == ["converting model", note]
    assert [layer.media_type for layer in model_store.get("sees").manifest.layers] == [mt.MODEL]


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ("block", "the vision tower has no v.blk.0.attn_q.weight: is a shard missing?"),
        ("unknown", "tensor vision_tower.vision_model.encoder.gate.weight is not one cllm's converter knows"),
        ("tokens", "an image of 5 tokens is not a square pooling of the tower's patches"),
    ],
)
def test_a_gemma3_tower_that_cannot_be_converted_says_why(tmp_path: Path, damage: str, why: str) -> None:
    folder, _, _ = write_hf_gemma3_vision(tmp_path, prefix="language_model.model.")
    path = folder / "model.safetensors"
    tensors = read_safetensors(path)
    if damage == "block":
        del tensors["vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.weight"]
    elif damage == "unknown":
        tensors["vision_tower.vision_model.encoder.gate.weight"] = ("F32", np.zeros(2, np.float32))
    write_safetensors(path, tensors)
    if damage == "tokens":
        _edit(folder, "preprocessor_config.json", lambda c: c.update(image_seq_length=5))
    converted = convert(Checkpoint.folder(folder), tmp_path / "out.gguf", tmp_path / "proj.gguf")
    assert not converted.sees and converted.notes[0].startswith(f"{TOWER_LEFT_OUT} ({why}")


def _edit(folder: Path, name: str, change: Callable[[dict[str, Any]], None]) -> None:
    value = json.loads((folder / name).read_text())
    change(value)
    (folder / name).write_text(json.dumps(value))


def _sentencepiece_json(tmp_path: Path, pieces: list[str], merges: list[str], added: list[dict[str, Any]]) -> Path:
    """A folder with a SentencePiece BPE tokenizer.json alone (as transformers 5 saves one): the
    unknown, bos and eos pieces, the 256 byte pieces, then ``pieces``."""
    vocab = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *pieces]
    spec = {
        "added_tokens": [{"id": i, "content": t, "special": True} for i, t in enumerate(("<unk>", "<s>", "</s>"))]
        + added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious"},
        "model": {
            "type": "BPE",
            "byte_fallback": True,
            "unk_token": "<unk>",
            "vocab": {t: i for i, t in enumerate(vocab)},
            "merges": merges,
        },
    }
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec))
    return tmp_path


def test_a_sentencepiece_tokenizer_json_alone_is_the_vocabulary_its_model_file_would_be(tmp_path: Path) -> None:
    """From tokenizer.json alone (transformers 5 saves no tokenizer.model): bytes and the unknown
    piece typed as SentencePiece types them, each merged piece scored by its merge's rank and the
    rest below them all, a user-defined run of spaces written with spaces (Gemma's: llama.cpp prints
    it as stored), an added token past the embedding's rows left out (Gemma 3 1B's image token), no
    space put before the text without a Metaspace or Prepend; Llama 2's "▁▁" (id 259, scored last
    in its tokenizer.model) scored last where transformers 5 ranked its merge first; a pre-tokenizer
    SentencePiece does not have is refused."""
    added = [
        {"id": 263, "content": "\u2581\u2581", "special": False},
        {"id": 264, "content": "<image>", "special": True},
    ]
    folder = _sentencepiece_json(tmp_path / "gemma", ["\u2581a", "ab", "a", "b"], ["\u2581 a", "a b"], added)
    kv = tokenizer_kv(Checkpoint.folder(folder), {}, 264, pad=False)
    tokens, scores, types = (kv[f"tokenizer.ggml.{k}"][0] for k in ("tokens", "scores", "token_type"))
    assert tokens[259:] == ["\u2581a", "ab", "a", "b", "  "]
    assert scores[259:] == [0.0, -1.0, -3.0, -4.0, -1000.0]
    assert types[0] == gguf.TokenType.UNKNOWN and types[3] == types[258] == gguf.TokenType.BYTE
    assert types[263] == gguf.TokenType.USER_DEFINED and kv["tokenizer.ggml.add_space_prefix"][0] is False
    llama2 = ["\u2581\u2581", "\u2581t", "\u2581", "t", *(f"p{i}" for i in range(32000 - 263))]
    folder = _sentencepiece_json(tmp_path / "llama2", llama2, ["\u2581 \u2581", "\u2581 t"], [])
    scores = tokenizer_kv(Checkpoint.folder(folder), {}, 32000, pad=False)["tokenizer.ggml.scores"][0]
    assert scores[259:261] == [-2.0, -1.0]  # "▁▁" after "▁t", as in its tokenizer.model
    _edit(folder, "tokenizer.json", lambda spec: spec.update(pre_tokenizer={"type": "Digits"}))
    with pytest.raises(ImportRefused, match="pre-tokenizer 'Digits' splits text before its SentencePiece merges"):
        tokenizer_kv(Checkpoint.folder(folder), {}, 32000, pad=False)


def test_the_tokenizer_says_what_llama_cpp_needs(twins: dict[str, tuple[Path, Path]], tmp_path: Path) -> None:
    """Llama 3's pre-tokenizer named by its pattern, merges written as pairs, a bos added where the
    post-processor adds one, special tokens by text, else by config.json's ids."""
    folder = export(twins["llama"][1], tmp_path / "hf")
    llama3 = SPLIT_PATTERNS["llama-bpe"]

    def llama3_tokenizer(spec: dict[str, Any]) -> None:
        spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = llama3
        spec["post_processor"] = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|endoftext|>"}}]}

    _edit(folder, "tokenizer.json", llama3_tokenizer)

    def settings(config: dict[str, Any]) -> None:  # nothing said of a bos: the post-processor's
        config.pop("add_bos_token")
        config.update(pad_token={"content": "<|im_start|>"}, eos_token=None)

    _edit(folder, "tokenizer_config.json", settings)
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    got, twin = _fields(tmp_path / "out.gguf"), _fields(twins["llama"][1])
    ids = {t: i for i, t in enumerate(twin["tokenizer.ggml.tokens"])}
    assert got["tokenizer.ggml.pre"] == "llama-bpe" and got["tokenizer.ggml.add_bos_token"] is True
    assert got["tokenizer.ggml.merges"] == twin["tokenizer.ggml.merges"]
    assert got["tokenizer.ggml.padding_token_id"] == ids["<|im_start|>"]
    assert got["tokenizer.ggml.eos_token_id"] == twin["tokenizer.ggml.eos_token_id"]  # config.json's id
    assert got["tokenizer.ggml.bos_token_id"] == twin["tokenizer.ggml.bos_token_id"]
    # A pattern llama.cpp has no name for: GPT-2's, as Ollama converts it.
    _edit(folder, "tokenizer.json", lambda spec: spec["pre_tokenizer"]["pretokenizers"][0]["pattern"].update(Regex="x"))
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    assert _fields(tmp_path / "out.gguf")["tokenizer.ggml.pre"] == "default"
    # Mistral's Tekken and GPT-4o's (Phi-4-mini's), as llama.cpp's llama-vocab.cpp quotes them from
    # tokenizer.json (Ollama's table lacks both).
    tekken = (
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?"
        r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|"
        r"\s*[\r\n]+|\s+(?!\S)|\s+"
    )
    gpt4o = (
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
        r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    )
    for pattern, name in ((tekken, "tekken"), (gpt4o, "gpt-4o")):
        _edit(
            folder,
            "tokenizer.json",
            lambda spec, p=pattern: spec["pre_tokenizer"]["pretokenizers"][0]["pattern"].update(Regex=p),
        )
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
        assert _fields(tmp_path / "out.gguf")["tokenizer.ggml.pre"] == name


def _break(folder: Path, what: str) -> None:
    """One way a checkpoint cannot be converted, made in ``folder``."""
    if what == "architecture":
        _edit(folder, "config.json", lambda c: c.update(architectures=["GPT2LMHeadModel"]))
    elif what == "config":
        (folder / "config.json").unlink()
    elif what == "sentencepiece":
        (folder / "tokenizer.json").unlink()
        (folder / "tokenizer.model").write_bytes(b"\n\x05\n\x01")
    elif what == "no-tokenizer":
        (folder / "tokenizer.json").unlink()
    elif what == "byte-fallback":
        _edit(folder, "tokenizer.json", lambda spec: spec["model"].update(byte_fallback=True))
    elif what == "fp8":
        write_safetensors(folder / "model-extra.safetensors", {"model.norm.weight": ("F8_E4M3", np.zeros(4, np.uint8))})
    elif what == "truncated":
        data = (folder / "model.safetensors").read_bytes()
        (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    elif what == "not-safetensors":
        (folder / "model.safetensors").write_bytes(b"GGUF" + bytes(60))
    elif what == "unknown-tensor":
        write_safetensors(
            folder / "model-extra.safetensors", {"model.layers.0.mlp.experts.weight": ("F32", np.zeros(4, np.float32))}
        )
    elif what == "missing-layer":
        _edit(folder, "config.json", lambda c: c.update(num_hidden_layers=3))
    elif what == "small-embedding":
        _edit(
            folder,
            "tokenizer.json",
            lambda spec: spec["added_tokens"].append({"id": 9999, "content": "x", "special": True}),
        )
    elif what == "heads":
        _edit(folder, "config.json", lambda c: c.update(num_attention_heads=3))
    elif what == "big-embedding":
        path = folder / "model.safetensors"
        tensors = read_safetensors(path)
        tensors["model.embed_tokens.weight"] = ("F16", np.zeros((9000, 64), np.float16))
        write_safetensors(path, tensors)
    elif what == "expert-missing":
        path = folder / "model.safetensors"
        tensors = read_safetensors(path)
        del tensors["model.layers.1.mlp.experts.3.up_proj.weight"]
        write_safetensors(path, tensors)
    elif what == "attention-scale":
        _edit(folder, "config.json", lambda c: c.update(query_pre_attn_scalar=144))
    elif what == "longrope":
        _edit(folder, "config.json", lambda c: c["rope_scaling"]["short_factor"].pop())
    elif what == "rope-scaling":
        _edit(folder, "config.json", lambda c: c.update(rope_scaling={"rope_type": "longrope", "factor": 4.0}))


@pytest.mark.parametrize(
    ("what", "error"),
    [
        (
            "architecture",
            r"^unsupported architecture 'GPT2LMHeadModel': cllm converts BertModel, .*, "
            "LlamaForCausalLM, .*, Qwen3_5MoeForConditionalGeneration$",
        ),
        ("config", "^the model folder has no config.json$"),
        ("sentencepiece", r"^tokenizer.model is not a SentencePiece model \(it ends inside a field\)$"),
        ("no-tokenizer", "^the model folder has neither tokenizer.json nor tokenizer.model$"),
        ("byte-fallback", "with byte fallback"),
        ("fp8", r"^model-extra.safetensors: tensor model.norm.weight is F8_E4M3; cllm converts F32, F16 and BF16"),
        ("truncated", "^model.safetensors: tensor .* data_offsets do not fit its shape or the file$"),
        ("not-safetensors", "^model.safetensors: not a safetensors file"),
        ("unknown-tensor", r"^tensor model.layers.0.mlp.experts.weight is not one cllm's converter knows for qwen3$"),
        ("missing-layer", r"^the checkpoint has no model.layers.2: is a shard missing\?$"),
        ("small-embedding", "^the tokenizer has 10000 tokens, the model's embedding only 384 rows$"),
        ("rope-scaling", "rope scaling 'longrope' is not one cllm converts"),
        ("big-embedding", "^the model's embedding has 9000 rows for a tokenizer of 368 tokens$"),
        ("expert-missing", r"^blk.1.ffn_up_exps.weight: the checkpoint has 3 of the layer's 4 experts$"),
        ("heads", "^blk.0.attn_q.weight has 64 rows, which 3 heads cannot share in pairs$"),
        ("attention-scale", "^config.json's query_pre_attn_scalar is 144; llama.cpp's gemma2 scales by 16 here$"),
        ("longrope", "^config.json's longrope needs long_factor and short_factor of 6 values$"),
    ],
)
def test_what_cannot_be_converted_says_why(
    twins: dict[str, tuple[Path, Path]], tmp_path: Path, what: str, error: str
) -> None:
    families = {
        "heads": "llama",
        "expert-missing": "qwen3moe",
        "attention-scale": "gemma2",
        "longrope": "phi3-longrope",
    }
    family = families.get(what, "qwen3")
    folder = export(twins[family][1], tmp_path / "hf")
    _break(folder, what)
    with pytest.raises(ImportRefused, match=error):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")


def test_a_name_that_would_make_llama_cpp_want_phi3_tokens_is_left_out(
    twins: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    """llama.cpp looks for Phi-3's special tokens in a model whose name says Phi-3, and fails to load
    one without them: a Qwen folder created as "phi3-tuned" is written without its name."""
    folder = export(twins["qwen3"][1], tmp_path / "phi3-tuned")
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    assert _fields(tmp_path / "out.gguf")["general.name"] == ""
    folder = export(twins["qwen3"][1], tmp_path / "qwen-tuned")
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    assert _fields(tmp_path / "out.gguf")["general.name"] == "qwen-tuned"


def test_a_gemma2_lm_head_is_left_to_the_embedding(twins: dict[str, tuple[Path, Path]], tmp_path: Path) -> None:
    """Gemma 2's output is always its embedding in llama.cpp (which would refuse an extra tensor):
    an lm_head some checkpoints carry (AutoAWQ's) is not written, as llama.cpp's converter skips it."""
    folder = export(twins["gemma2"][1], tmp_path / "hf")
    path = folder / "model.safetensors"
    tensors = read_safetensors(path)
    write_safetensors(path, tensors | {"lm_head.weight": tensors["model.embed_tokens.weight"]})
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    assert set(_tensors(tmp_path / "out.gguf")) == set(_tensors(twins["gemma2"][1]))


def _upload(store: ModelStore, path: Path) -> str:
    with open(path, "rb") as f:
        return store.write_blob_from(f)


def test_create_converts_a_folder_as_ollama_does(
    model_store: ModelStore, twins: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    """``FROM ./folder``: the client uploads what the ollama CLI uploads, the store converts it
    ("converting model"), keeps the GGUF as the model layer and lets the uploads go."""
    folder, twin = twins["qwen3"]
    (folder / "README.md").write_text("not uploaded")
    (folder / "nested").mkdir(exist_ok=True)
    (folder / "nested" / "preprocessor_config.json").write_text("{}")
    files = model_folder_files(folder, "./hf-qwen3")
    assert sorted(files) == [
        "config.json",
        "model.safetensors",
        "nested/preprocessor_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    body = create_body(
        "hf", parse_modelfile(f"FROM {folder}\nPARAMETER temperature 0"), tmp_path, lambda p: _upload(model_store, p)
    )
    events: list[dict[str, Any]] = []
    create_model(model_store, CreateRequest.from_json(body), events.append)
    statuses = [e["status"] for e in events]
    assert statuses[0] == "converting model" and statuses[-2:] == ["writing manifest", "success"]
    record = model_store.get("hf")
    model = next(layer for layer in record.manifest.layers if layer.media_type == mt.MODEL)
    assert statuses[1] == f"creating new layer {model.digest}"
    assert record.config == {
        "model_format": "gguf",
        "model_family": "qwen3",
        "model_families": ["qwen3"],
        "model_type": "99K",
        "file_type": "F16",
    }
    assert _tensors(model_store.blob_path(model.digest)).keys() == _tensors(twin).keys()
    assert record.params == {"temperature": 0}
    for digest in body["files"].values():  # converted: no model's layers, so not kept
        assert not model_store.blob_path(digest).exists()
    assert not [p for p in model_store.blobs_dir.iterdir() if p.name.startswith(".tmp-")]


def test_create_refuses_what_it_cannot_convert_with_a_400(
    model_store: ModelStore, twins: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    folder = export(twins["qwen3"][1], tmp_path / "hf")
    _break(folder, "architecture")
    files = {name: _upload(model_store, path) for name, path in model_folder_files(folder, "./hf").items()}
    with pytest.raises(InvalidRequest, match=r"^unsupported architecture 'GPT2LMHeadModel'"):
        create_model(model_store, CreateRequest.from_json({"model": "bad", "files": files}), lambda e: None)
    assert not [p for p in model_store.blobs_dir.iterdir() if p.name.startswith(".tmp-")]
    assert all(model_store.blob_path(d).exists() for d in files.values())  # kept for a retry
    with pytest.raises(InvalidRequest, match="not found: upload it"):
        create_model(
            model_store,
            CreateRequest.from_json({"model": "bad", "files": {"model.safetensors": "sha256:" + "0" * 64}}),
            lambda e: None,
        )


def test_a_folder_of_pytorch_pickles_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pytorch_model.bin").write_bytes(b"PK")
    with pytest.raises(
        InvalidRequest, match=r"^FROM \./m: PyTorch checkpoints are not supported: save it as safetensors$"
    ):
        model_folder_files(tmp_path, "./m")


def test_a_nomic_bert_converts_to_its_twin(tmp_path: Path) -> None:
    """nomic-embed-text's ``NomicBertModel`` as its own code saves it (GPT-2's names for its
    settings, ``encoder.layers``, fused Wqkv, fc11 and fc12 for the SwiGLU's value and gate):
    llama.cpp's ``nomic-bert``, its rotary base and trained context, mean pooling. Settings
    llama.cpp fixes otherwise are refused."""
    folder, twin = write_hf_bert(tmp_path, nomic=True)
    # As nomic-embed-text's config.json states them: its own names only (the tiny folder carries
    # transformers' beside them for the oracle).
    transformers_names = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    native = (*transformers_names, "max_position_embeddings", "layer_norm_eps", "rope_theta")
    _edit(folder, "config.json", lambda c: [c.pop(k) for k in native])
    assert convert(Checkpoint.folder(folder), tmp_path / "out.gguf") == Converted([])
    _assert_twin_tensors(twin, tmp_path / "out.gguf")
    written, expected = _fields(tmp_path / "out.gguf"), _fields(twin)
    assert {k: written.get(k) for k in expected if k != "general.name"} == {
        k: v for k, v in expected.items() if k != "general.name"
    }
    # transformers 5's own save: its rotary base under rope_parameters.
    _edit(folder, "config.json", lambda c: [c.pop("rotary_emb_base"), c.update(rope_parameters={"rope_theta": 1e4})])
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    assert _fields(tmp_path / "out.gguf")["nomic-bert.rope.freq_base"] == 1e4
    for damage, why in (
        ({"moe_every_n_layers": 2}, "config.json makes a Nomic BERT of experts (v2-moe)"),
        (
            {"rotary_emb_interleaved": True},
            "config.json's rotary_emb_interleaved is True; llama.cpp's nomic-bert has False",
        ),
        ({"use_rms_norm": True}, "config.json's use_rms_norm is True; llama.cpp's nomic-bert has False"),
        ({"hidden_act": "gelu"}, "config.json's hidden_act is not SwiGLU's"),
    ):
        _edit(folder, "config.json", lambda c, damage=damage: c.update(damage))
        with pytest.raises(ImportRefused, match=re.escape(why)):
            convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
        _edit(folder, "config.json", lambda c, damage=damage: [c.pop(k) for k in damage])


def test_a_sentence_transformers_folder_converts_to_its_twin(tmp_path: Path) -> None:
    """A BERT embedding model as sentence-transformers saves it (all-MiniLM and its fine-tunes):
    llama.cpp's ``bert`` with its WordPiece vocabulary in phantom-space form, the position and
    token-type embeddings in F32, the pooling modules.json names, the position_ids buffer and the
    pooler left out."""
    folder, twin = write_hf_bert(tmp_path)
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    want, got = _tensors(twin), _tensors(tmp_path / "out.gguf")
    assert set(got) == set(want)
    for name, (kind, data) in got.items():
        assert kind == want[name][0] and np.array_equal(data, want[name][1]), name
    written, expected = _fields(tmp_path / "out.gguf"), _fields(twin)
    assert {k: written.get(k) for k in expected if k != "general.name"} == {
        k: v for k, v in expected.items() if k != "general.name"
    }
    # Another pooling than llama.cpp's is refused; a folder that states none gets none.
    _edit(
        folder,
        "1_Pooling/config.json",
        lambda c: c.update(pooling_mode_mean_tokens=False, pooling_mode_max_tokens=True),
    )
    with pytest.raises(ImportRefused, match=r"^1_Pooling/config.json pools otherwise than by mean, CLS or last token"):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    (folder / "modules.json").unlink()
    convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
    assert "bert.pooling_type" not in _fields(tmp_path / "out.gguf")
    # An integer tensor the model would need is refused, not written as garbage.
    path = folder / "model.safetensors"
    tensors = read_safetensors(path)
    tensors["embeddings.LayerNorm.bias"] = ("I64", np.zeros(64, np.int64))
    write_safetensors(path, tensors)
    with pytest.raises(
        ImportRefused, match=r"^tensor embeddings.LayerNorm.bias is I64; cllm converts F32, F16 and BF16"
    ):
        convert(Checkpoint.folder(folder), tmp_path / "out.gguf")
