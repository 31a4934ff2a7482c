"""Ollama's single-file Mistral 3 (Pixtral), Qwen3-VL, Llama 4, Gemma 4 (vision and audio towers) and
Qwen 3.5, mapped when they enter the store into
what llama.cpp's converter writes for the same weights (``cllm_ollama/convert``): tensor for
tensor, bit for bit, and the projector's keys as it states them.

(Served end to end in ``tests/api/test_ollama_vision_layouts.py``.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
from fakeregistry import FakeRegistry, fake_registry, statuses

from cllm_ollama.convert import framework, mistral
from cllm_ollama.convert.dispatch import plan
from cllm_ollama.convert.framework import Header, LayoutRefused, Tensor
from cllm_ollama.store import manifests as mt
from cllm_ollama.store.create import CreateRequest, create_model
from cllm_ollama.store.names import parse_name
from cllm_ollama.store.pull import pull_model
from cllm_ollama.store.registry_pull import RegistryOptions
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ollama_vision_ggufs import (
    write_ollama_gemma4,
    write_ollama_llama4_vision,
    write_ollama_mistral3_vision,
    write_ollama_qwen3vl_vision,
    write_ollama_qwen35_vision,
)
from cllm_ollama.testing.tower_ggufs import write_gemma4_vision, write_qwen35_vision
from cllm_ollama.testing.vision_ggufs import write_llama4_vision, write_mistral3_vision, write_qwen3vl_vision

CONFIG = {"model_format": "gguf", "model_family": "qwen3vl", "model_families": ["qwen3vl"], "model_type": "1M"}


@pytest.fixture
def registry() -> Iterator[FakeRegistry]:
    with fake_registry() as state:
        yield state


def created(store: ModelStore, data: bytes, name: str) -> dict[str, Path]:
    """``data`` created as model ``name``: its stored model and projector files."""
    digest = store.write_blob_from([data])
    record = create_model(store, CreateRequest(model=parse_name(name), files={"model.gguf": digest}), print)
    return {layer.media_type: store.blob_path(layer.digest) for layer in record.manifest.layers}


def fields(path: Path, prefix: str = "") -> dict[str, tuple[list[int], Any]]:
    """A GGUF's keys (under ``prefix``) with their types and values."""
    return {
        f.name: (list(f.types), f.contents())
        for f in gguf.GGUFReader(path).fields.values()
        if f.name.startswith(prefix) and not f.name.startswith("GGUF.")
    }


def assert_same_tensors(got: Path, want: Path) -> None:
    """The same tensors: names, ggml types, shapes and bytes."""
    g = {t.name: t for t in gguf.GGUFReader(got).tensors}
    w = {t.name: t for t in gguf.GGUFReader(want).tensors}
    assert sorted(g) == sorted(w)
    for name, t in w.items():
        assert (g[name].tensor_type, list(g[name].shape)) == (t.tensor_type, list(t.shape)), name
        np.testing.assert_array_equal(np.array(g[name].data), np.array(t.data), err_msg=name)


def assert_keys_equal(got: dict[str, tuple[list[int], Any]], want: dict[str, tuple[list[int], Any]]) -> None:
    assert sorted(got) == sorted(want)
    for key, (types, value) in want.items():
        assert got[key][0] == types, key
        numbers = isinstance(value, float) or (isinstance(value, list) and value and isinstance(value[0], float))
        assert got[key][1] == (pytest.approx(value) if numbers else value), key


def assert_split_as_llama_cpp_writes(
    stored: dict[str, Path], text: Path, clip: Path, also: frozenset[str] = frozenset()
) -> None:
    """The model and projector layers (and ``also``'s) hold what llama.cpp's converter writes."""
    assert set(stored) == {mt.MODEL, mt.PROJECTOR, *also}
    assert_same_tensors(stored[mt.MODEL], text)
    assert_same_tensors(stored[mt.PROJECTOR], clip)
    assert_keys_equal(fields(stored[mt.MODEL]), fields(text))
    assert_keys_equal(fields(stored[mt.PROJECTOR], "clip."), fields(clip, "clip."))


def test_an_ollama_mistral3_with_its_pixtral_tower_is_stored_as_llama_cpp_s_text_and_projector(
    model_store: ModelStore, tmp_path: Path
) -> None:
    """Q/K rows permuted back for ggml's RoPE, [IMG_BREAK] taken from the text embedding, the
    tower's keys as clip's, the empty RoPE scaling type Ollama wrote (llama.cpp aborts on it) gone."""
    data = write_ollama_mistral3_vision(tmp_path / "ollama.gguf").read_bytes()
    text, clip = write_mistral3_vision(tmp_path / "llama.cpp")
    assert_split_as_llama_cpp_writes(created(model_store, data, "m3"), text, clip)


def test_an_ollama_qwen3vl_is_pulled_as_llama_cpp_s_text_and_projector(
    model_store: ModelStore, registry: FakeRegistry, tmp_path: Path
) -> None:
    """M-RoPE sections and the deepstack count stated, Q/K/V fused, the Conv3D patch kernel split
    into its two frames, the deepstack mergers named by their block."""
    data = write_ollama_qwen3vl_vision(tmp_path / "ollama.gguf").read_bytes()
    registry.add_model("library/qwen3-vl", "tiny", [(mt.MODEL, data)], CONFIG)
    events: list[dict[str, Any]] = []
    pull_model(model_store, "qwen3-vl:tiny", events.append, options=RegistryOptions(registry_url=registry.url))
    assert "converting qwen3vl from Ollama's layout" in statuses(events)
    record = model_store.get("qwen3-vl:tiny")
    stored = {layer.media_type: model_store.blob_path(layer.digest) for layer in record.manifest.layers}
    text, clip = write_qwen3vl_vision(tmp_path / "llama.cpp")
    assert_split_as_llama_cpp_writes(stored, text, clip)
    assert "vision" in record.capabilities


def test_an_ollama_llama4_with_its_tower_inside_is_stored_as_llama_cpp_s_text_and_projector(
    model_store: ModelStore, tmp_path: Path
) -> None:
    """Only names change (and the keys llama.cpp does not read go): the tower under clip's names,
    the position table promoted to F32."""
    data = write_ollama_llama4_vision(tmp_path / "ollama.gguf").read_bytes()
    text, clip = write_llama4_vision(tmp_path / "llama.cpp")
    assert_split_as_llama_cpp_writes(created(model_store, data, "l4"), text, clip)


@pytest.mark.parametrize("audio", [True, False], ids=["vision-audio", "vision"])
def test_an_ollama_gemma4_with_its_towers_is_stored_as_llama_cpp_s_text_and_projector(
    model_store: ModelStore, tmp_path: Path, audio: bool
) -> None:
    """One projector for both towers, as llama.cpp's converter writes it: the vision side's names
    kept, its patch embedding and position table in F32; the audio side's SSCP and output
    projections and its blocks' attention norms and relative-position projection renamed; each
    tower's keys under ``clip.vision.*`` / ``clip.audio.*`` with its own projector type."""
    data = write_ollama_gemma4(tmp_path / "ollama.gguf", audio=audio).read_bytes()
    text, clip = write_gemma4_vision(tmp_path / "llama.cpp", audio=audio)
    stored = created(model_store, data, "g4")
    assert_split_as_llama_cpp_writes(stored, text, clip, frozenset({mt.PARAMS}))  # Gemma 4's stop word
    assert any(name.startswith("a.") for name in fields_of_tensors(stored[mt.PROJECTOR])) == audio
    assert "vision" in model_store.get("g4").capabilities


def fields_of_tensors(path: Path) -> list[str]:
    return [t.name for t in gguf.GGUFReader(path).tensors]


@pytest.mark.parametrize("arch", ["qwen35", "qwen35moe"])
def test_an_ollama_qwen35_is_pulled_as_llama_cpp_s_text_and_projector(
    model_store: ModelStore, registry: FakeRegistry, tmp_path: Path, arch: str
) -> None:
    """The text model as the text map makes it, and the tower as Qwen3-VL's (``qwen3vl_merger``,
    Q/K/V fused, the Conv3D patch kernel split) without deepstack."""
    data = write_ollama_qwen35_vision(tmp_path / "ollama.gguf", arch).read_bytes()
    registry.add_model("library/qwen3.5", "tiny", [(mt.MODEL, data)], {**CONFIG, "model_family": arch})
    events: list[dict[str, Any]] = []
    pull_model(model_store, "qwen3.5:tiny", events.append, options=RegistryOptions(registry_url=registry.url))
    assert f"converting {arch} from Ollama's layout" in statuses(events)
    record = model_store.get("qwen3.5:tiny")
    stored = {layer.media_type: model_store.blob_path(layer.digest) for layer in record.manifest.layers}
    text, clip = write_qwen35_vision(tmp_path / "llama.cpp", arch)
    assert_split_as_llama_cpp_writes(stored, text, clip)
    assert "vision" in record.capabilities


def reader_of(path: Path, tensors: dict[str, tuple[np.ndarray, gguf.GGMLQuantizationType]]) -> gguf.GGUFReader:
    w = gguf.GGUFWriter(str(path), "clip")
    for name, (data, kind) in tensors.items():
        if kind in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, gguf.quants.quantize(data, kind), raw_dtype=kind)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return gguf.GGUFReader(path)


def test_q_k_and_v_of_different_types_are_fused_in_f32(tmp_path: Path) -> None:
    """Ollama's Qwen3-VL files can hold F16 Q and K beside a Q8_0 V: their bytes cannot be joined."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((32, 64), dtype=np.float32) for _ in range(3))
    f16, q8 = gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.Q8_0
    r = reader_of(
        tmp_path / "qkv.gguf", {"q": (q.astype(np.float16), f16), "k": (k.astype(np.float16), f16), "v": (v, q8)}
    )
    made = framework.stacked([Tensor.of(t.name, t.tensor_type, t.data) for t in r.tensors], "qkv")
    assert (made.kind, made.shape) == (gguf.GGMLQuantizationType.F32, (96, 64))
    want = np.concatenate([gguf.quants.dequantize(t.data, t.tensor_type) for t in r.tensors])
    np.testing.assert_array_equal(made.data(), want)


def test_a_quantized_projection_is_permuted_by_whole_rows(tmp_path: Path) -> None:
    """Pixtral's Q/K permutation moves rows, so a Q8_0 tensor keeps its blocks: dequantized, it is
    the permuted dequantized original."""
    data = np.random.default_rng(1).standard_normal((16, 64), dtype=np.float32)
    (t,) = reader_of(tmp_path / "q.gguf", {"v.blk.0.attn_q.weight": (data, gguf.GGMLQuantizationType.Q8_0)}).tensors
    made = mistral._rope_permuted(Tensor.of(t.name, t.tensor_type, t.data), n_head=2)
    got = gguf.quants.dequantize(made.data(), made.kind)
    rows = gguf.quants.dequantize(t.data, t.tensor_type)
    want = rows.reshape(2, 2, 4, 64).swapaxes(1, 2).reshape(16, 64)
    np.testing.assert_array_equal(got, want)


def header(arch: str, tensors: dict[str, list[int]], **kv: Any) -> Header:
    return Header(arch, {"general.architecture": arch, **{k.replace("__", "."): v for k, v in kv.items()}}, tensors)


@pytest.mark.parametrize(
    ("h", "why"),
    [
        (
            header("qwen3vl", {"v.blk.0.attn_q.weight": [4, 4]}, qwen3vl__attention__key_length=64),
            "no M-RoPE sections, and a head size of 64",
        ),
        (
            header(
                "mistral3",
                {"token_embd.weight": [4, 8], "v.blk.0.attn_q.weight": [4, 4]},
                tokenizer__ggml__tokens=["a", "[IMG]"],
            ),
            "no [IMG_BREAK] token",
        ),
        (
            header(
                "qwen3vl",
                {"v.patch_embed.weight": [8, 8, 3, 96]},
                qwen3vl__rope__mrope_section=[2, 3, 3],
                qwen3vl__vision__block_count=1,
            ),
            "no two-frame patch embedding",
        ),
        (
            header("gemma4", {"v.blk.0.attn_q.weight": [4, 4]}, gemma4__embedding_length=64),
            "its vision tower states no gemma4.vision.embedding_length",
        ),
        (
            header(
                "qwen35",
                {"v.blk.0.attn_q.weight": [4, 4]},
                qwen35__vision__block_count=1,
                qwen35__vision__embedding_length=4,
                qwen35__vision__attention__head_count=1,
                qwen35__vision__patch_size=2,
                qwen35__embedding_length=8,
            ),
            "no two-frame patch embedding",
        ),
    ],
    ids=["qwen3vl-head", "mistral3-img-break", "qwen3vl-patch", "gemma4-keys", "qwen35-patch"],
)
def test_a_vision_layout_that_cannot_be_mapped_is_refused_with_why(h: Header, why: str) -> None:
    with pytest.raises(LayoutRefused, match=rf'^architecture "{h.arch}" written by Ollama\'s converter') as refused:
        plan(h)
    assert why in str(refused.value)


LLAMA_CPP_PAIRS = [write_mistral3_vision, write_qwen3vl_vision, write_llama4_vision, write_gemma4_vision]


@pytest.mark.parametrize("write", [*LLAMA_CPP_PAIRS, write_qwen35_vision])
def test_the_files_llama_cpp_s_converter_writes_are_kept_as_they_are(write: Any, tmp_path: Path) -> None:
    for path in write(tmp_path):
        info = gguf.GGUFReader(path)
        h = Header(
            str(info.fields["general.architecture"].contents()),
            {f.name: f.contents() for f in info.fields.values()},
            {t.name: [int(n) for n in t.shape] for t in info.tensors},
        )
        assert plan(h) is None


def test_a_qwen3vl_moe_gets_its_sections_deepstack_count_and_experts_width() -> None:
    """The MoE maps as the dense model does; a stated ``rope.mrope_section`` is used (padded to four)."""
    h = header(
        "qwen3vlmoe",
        {"blk.0.ffn_gate_exps.weight": [64, 32, 4]},
        qwen3vlmoe__rope__mrope_section=[16, 24, 24],
        qwen3vlmoe__vision__deepstack_visual_indexes=[8, 16, 24],
    )
    (text,) = plan(h) or []
    assert (text.role, text.arch) == ("model", "qwen3vlmoe")
    assert {key: value for key, (value, _) in text.set_kv.items()} == {
        "qwen3vlmoe.rope.dimension_sections": [16, 24, 24, 0],
        "qwen3vlmoe.n_deepstack_layers": 3,
        "qwen3vlmoe.expert_feed_forward_length": 32,
    }
    assert not text.keep_key("qwen3vlmoe.vision.block_count") and not text.keep_key("qwen3vlmoe.rope.mrope_section")
