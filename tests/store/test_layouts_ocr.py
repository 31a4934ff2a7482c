"""Ollama's single-file DeepSeek-OCR, mapped when it enters the store into what llama.cpp's converter
writes for the same weights (``convert/deepseek.py``): a ``deepseek2-ocr`` text GGUF and a
``deepseekocr`` projector, tensor for tensor, bit for bit, key for key.

(Served end to end in ``tests/api/test_ollama_ocr_omni_layouts.py``.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gguf
import pytest
from fakeregistry import FakeRegistry, fake_registry, statuses
from test_layouts_vision import assert_split_as_llama_cpp_writes, created, header

from cllm_ollama.convert.dispatch import plan
from cllm_ollama.convert.framework import Header, LayoutRefused
from cllm_ollama.store import manifests as mt
from cllm_ollama.store.gguf_info import gguf_info
from cllm_ollama.store.pull import pull_model
from cllm_ollama.store.registry_pull import RegistryOptions
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.glm4_ggufs import write_glmocr_vision, write_ollama_glmocr
from cllm_ollama.testing.ocr_ggufs import write_deepseekocr_vision, write_ollama_deepseekocr

CONFIG = {"model_format": "gguf", "model_family": "deepseekocr", "model_families": ["deepseekocr"], "model_type": "3B"}


@pytest.fixture
def registry() -> Iterator[FakeRegistry]:
    with fake_registry() as state:
        yield state


def test_an_ollama_deepseekocr_is_stored_as_llama_cpp_s_text_and_projector(
    model_store: ModelStore, tmp_path: Path
) -> None:
    """The text model as ``deepseek2-ocr`` with the keys llama.cpp requires (RMS epsilon, RoPE base,
    the experts' width and shared count, from the tensors); SAM from ``s.*`` to ``v.sam.*``, CLIP's
    and the projector's names to clip.cpp's, the tensors llama.cpp keeps in F32 promoted, the view
    separator a one-row matrix."""
    data = write_ollama_deepseekocr(tmp_path / "ollama.gguf").read_bytes()
    text, clip = write_deepseekocr_vision(tmp_path / "llama.cpp")
    stored = created(model_store, data, "ocr")
    assert_split_as_llama_cpp_writes(stored, text, clip)
    projector = {t.name: t for t in gguf.GGUFReader(stored[mt.PROJECTOR]).tensors}
    assert projector["v.sam.pos_embd.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    assert list(projector["v.view_seperator"].shape) == [64, 1]


def test_an_ollama_deepseekocr_is_pulled_split(model_store: ModelStore, registry: FakeRegistry, tmp_path: Path) -> None:
    data = write_ollama_deepseekocr(tmp_path / "ollama.gguf").read_bytes()
    registry.add_model("library/deepseek-ocr", "tiny", [(mt.MODEL, data)], CONFIG)
    events: list[dict[str, Any]] = []
    pull_model(model_store, "deepseek-ocr:tiny", events.append, options=RegistryOptions(registry_url=registry.url))
    assert "converting deepseekocr from Ollama's layout" in statuses(events)
    record = model_store.get("deepseek-ocr:tiny")
    stored = {layer.media_type: model_store.blob_path(layer.digest) for layer in record.manifest.layers}
    assert_split_as_llama_cpp_writes(stored, *write_deepseekocr_vision(tmp_path / "llama.cpp"))
    assert "vision" in record.capabilities


def test_the_files_llama_cpp_s_converter_writes_are_kept_as_they_are(tmp_path: Path) -> None:
    for path in (*write_deepseekocr_vision(tmp_path / "deepseek"), *write_glmocr_vision(tmp_path / "glm")):
        assert plan(Header.of(gguf_info(path, verbose=True))) is None


def test_an_ollama_glmocr_is_pulled_as_llama_cpp_s_text_and_projector(
    model_store: ModelStore, registry: FakeRegistry, tmp_path: Path
) -> None:
    """As Ollama's shim maps its library's files for llama.cpp: ``glm4`` with the M-RoPE sections
    as four, the rotary width the whole head, ``chatglm-bpe``, llama.cpp's tensor names and the
    FFN's gate and up fused, gate first; the tower's keys as clip's and its two patch kernels
    renamed and in F32."""
    data = write_ollama_glmocr(tmp_path / "ollama.gguf").read_bytes()
    registry.add_model("library/glm-ocr", "tiny", [(mt.MODEL, data)], {**CONFIG, "model_family": "glmocr"})
    events: list[dict[str, Any]] = []
    pull_model(model_store, "glm-ocr:tiny", events.append, options=RegistryOptions(registry_url=registry.url))
    assert "converting glmocr from Ollama's layout" in statuses(events)
    record = model_store.get("glm-ocr:tiny")
    stored = {layer.media_type: model_store.blob_path(layer.digest) for layer in record.manifest.layers}
    assert_split_as_llama_cpp_writes(stored, *write_glmocr_vision(tmp_path / "llama.cpp"))
    assert "vision" in record.capabilities
    projector = {t.name: t for t in gguf.GGUFReader(stored[mt.PROJECTOR]).tensors}
    assert projector["v.patch_embd.weight.1"].tensor_type == gguf.GGMLQuantizationType.F32


def test_an_ollama_glmocr_as_ollama_s_converter_writes_it_today_maps_the_same(
    model_store: ModelStore, tmp_path: Path
) -> None:
    """llama.cpp's tensor names, gate and up already fused: nothing to rename or fuse."""
    data = write_ollama_glmocr(tmp_path / "ollama.gguf", current=True).read_bytes()
    assert_split_as_llama_cpp_writes(created(model_store, data, "ocr"), *write_glmocr_vision(tmp_path / "llama.cpp"))


def test_an_ollama_glmocr_without_its_tower_is_its_text_model_alone() -> None:
    keys = {"glmocr__attention__key_length": 128, "glmocr__rope__mrope_section": [8, 12]}
    (text,) = plan(header("glmocr", {"blk.0.ffn_gate.weight": [4, 8]}, **keys)) or []
    assert (text.role, text.arch, text.set_kv["glm4.rope.dimension_count"][0]) == ("model", "glm4", 128)
    assert text.set_kv["glm4.rope.dimension_sections"][0] == [8, 12, 0, 0]  # padded, as Ollama's TextKV pads
    assert not text.keep_key("glmocr.vision.block_count") and text.keep_key("glmocr.block_count")


MOE = {"blk.1.ffn_down_exps.weight": [32, 64, 4], "blk.1.ffn_down_shexp.weight": [64, 64]}
MOE_KEYS = {"deepseekocr__leading_dense_block_count": 1, "deepseekocr__embedding_length": 64}
CLIP_KEYS = {
    f"deepseekocr__vision__{key}": 1
    for key in ("block_count", "embedding_length", "head_count", "image_size", "patch_size")
}


def test_the_experts_width_and_shared_count_come_from_the_first_moe_block() -> None:
    (text,) = plan(header("deepseekocr", MOE, **MOE_KEYS)) or []  # no tower inside: the text model alone
    assert (text.role, text.arch) == ("model", "deepseek2-ocr")
    assert text.set_kv["deepseek2-ocr.expert_feed_forward_length"][0] == 32
    assert text.set_kv["deepseek2-ocr.expert_shared_count"][0] == 2
    assert text.key_name("deepseekocr.block_count") == "deepseek2-ocr.block_count"
    assert not text.keep_key("deepseekocr.sam.block_count") and not text.keep_tensor("s.neck.0.weight")


@pytest.mark.parametrize(
    ("h", "why"),
    [
        (header("deepseekocr", {"token_embd.weight": [4, 8]}), "no blk.0.ffn_down_exps"),
        (
            header("deepseekocr", {**MOE, "s.neck.0.weight": [1, 1, 4, 4]}, **MOE_KEYS, **CLIP_KEYS),
            "its SAM encoder states no deepseekocr.sam.block_count",
        ),
    ],
    ids=["no-experts", "no-sam-keys"],
)
def test_a_deepseekocr_that_cannot_be_mapped_is_refused_with_why(h: Header, why: str) -> None:
    with pytest.raises(LayoutRefused, match=r'^architecture "deepseekocr" written by Ollama\'s converter') as refused:
        plan(h)
    assert why in str(refused.value)
