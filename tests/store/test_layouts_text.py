"""Text models in Ollama's converter layout, mapped when they enter the store (``store/layouts_text.py``).

Each architecture's tiny file in Ollama's layout, once rewritten, is key for key and tensor for
tensor (bytes included) the file llama.cpp's converter writes for the same weights; the file in
llama.cpp's layout is left as it is. (That the mapped gpt-oss, OLMo 3 and LFM2 load and generate as
their llama.cpp twins do is ``tests/api/test_ollama_layouts.py``.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
from fakeregistry import FakeRegistry, fake_registry, statuses

from cllm_ollama.convert.dispatch import plan
from cllm_ollama.convert.framework import Header, LayoutRefused, Rewrite, Tensor, rewrite
from cllm_ollama.store import manifests as mt
from cllm_ollama.store.gguf_info import gguf_info
from cllm_ollama.store.pull import pull_model
from cllm_ollama.store.registry_pull import RegistryOptions
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ollama_ggufs import (
    TEXT_TWINS,
    write_gptoss,
    write_lfm2,
    write_ollama_gptoss,
    write_ollama_lfm2,
    write_ollama_olmo3,
    write_olmo2,
    write_text_twins,
)


def header_of(path: Path) -> Header:
    return Header.of(gguf_info(path, verbose=True))


def fields_of(path: Path) -> dict[str, tuple[list[gguf.GGUFValueType], Any]]:
    return {
        f.name: (f.types, f.contents()) for f in gguf.GGUFReader(path).fields.values() if not f.name.startswith("GGUF.")
    }


def tensors_of(path: Path) -> dict[str, tuple[gguf.GGMLQuantizationType, list[int], bytes]]:
    return {
        t.name: (t.tensor_type, [int(n) for n in t.shape], np.asarray(t.data).tobytes())
        for t in gguf.GGUFReader(path).tensors
    }


def twins(kind: str, folder: Path) -> tuple[Path, Path]:
    """(llama.cpp's layout, Ollama's) of ``kind``."""
    folder.mkdir(parents=True, exist_ok=True)
    if kind.startswith("gptoss"):
        fused = kind == "gptoss-fused"
        return write_gptoss(folder / "llama.gguf"), write_ollama_gptoss(folder / "ollama.gguf", fused=fused)
    if kind in LOADABLE:
        llama, ollama = LOADABLE[kind]
        return llama(folder / "llama.gguf"), ollama(folder / "ollama.gguf")
    return write_text_twins(kind, folder)


LOADABLE = {"olmo3": (write_olmo2, write_ollama_olmo3), "lfm2": (write_lfm2, write_ollama_lfm2)}
KINDS = ["gptoss-fused", "gptoss-split", *LOADABLE, *TEXT_TWINS]


@pytest.mark.parametrize("kind", KINDS)
def test_a_text_model_in_ollamas_layout_becomes_what_llama_cpp_s_converter_writes(kind: str, tmp_path: Path) -> None:
    ours, theirs = twins(kind, tmp_path)
    assert plan(header_of(ours)) is None  # llama.cpp's layout loads as it is
    (rw,) = plan(header_of(theirs)) or []
    assert rw.role == "model"
    mapped = tmp_path / "mapped.gguf"
    rewrite(theirs, mapped, rw)
    assert fields_of(mapped) == fields_of(ours)
    want, got = tensors_of(ours), tensors_of(mapped)
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], name
    assert plan(header_of(mapped)) is None  # and the map is not applied twice


def test_the_gptoss_experts_split_from_their_interleaved_rows_stay_mxfp4(tmp_path: Path) -> None:
    """The fused experts are split row by row: MXFP4 blocks are copied, never re-quantized."""
    _, theirs = twins("gptoss-fused", tmp_path)
    (rw,) = plan(header_of(theirs)) or []
    rewrite(theirs, tmp_path / "mapped.gguf", rw)
    types = {name: kind for name, (kind, _, _) in tensors_of(tmp_path / "mapped.gguf").items()}
    for part in ("gate", "up", "down"):
        assert types[f"blk.0.ffn_{part}_exps.weight"] == gguf.GGMLQuantizationType.MXFP4
    assert not any("gate_up" in name for name in types)


def test_a_gptoss_in_the_go_engines_first_mxfp4_layout_is_refused() -> None:
    """Ollama's first gpt-oss conversion stored MXFP4 as ggml type 4, in its own nibble order."""
    name = "blk.0.ffn_down_exps"
    h = Header("gptoss", {"general.architecture": "gptoss"}, {name: [64, 4, 4]}, {name: "4"})
    with pytest.raises(LayoutRefused, match=r'^architecture "gptoss" written by .*\(ggml type 4\)'):
        plan(h)


def test_a_tensor_produced_unlike_its_declared_shape_fails_the_conversion(tmp_path: Path) -> None:
    """What a map produces is checked against the tensor info already written: a wrong map is a
    failed conversion (a clear refusal at pull or create), never a corrupt file."""
    ours, _ = twins("lfm2", tmp_path)

    def wrong(tensors: list[Tensor]) -> list[Tensor]:
        first = tensors[0]
        return [Tensor(first.name, first.kind, first.shape, first.dtype, lambda: np.zeros(3, dtype=np.float32))]

    rw = Rewrite(role="model", arch="lfm2", keep_tensor=lambda name: True, tensors=wrong)
    with pytest.raises(ValueError, match="was produced as"):
        rewrite(ours, tmp_path / "out.gguf", rw)


@pytest.fixture
def registry() -> Iterator[FakeRegistry]:
    with fake_registry() as state:
        yield state


def test_a_pulled_gptoss_is_stored_as_gpt_oss(model_store: ModelStore, registry: FakeRegistry, tmp_path: Path) -> None:
    _, theirs = twins("gptoss-fused", tmp_path)
    config = {"model_format": "gguf", "model_family": "gptoss", "model_families": ["gptoss"], "model_type": "20B"}
    config |= {"renderer": "harmony", "parser": "harmony"}  # as the registry's gpt-oss names them
    registry.add_model("library/gpt-oss", "tiny", [(mt.MODEL, theirs.read_bytes())], config)
    events: list[dict[str, Any]] = []
    pull_model(model_store, "gpt-oss:tiny", events.append, options=RegistryOptions(registry_url=registry.url))
    assert "converting gptoss from Ollama's layout" in statuses(events) and statuses(events)[-1] == "success"
    layer = next(layer for layer in model_store.get("gpt-oss:tiny").manifest.layers if layer.media_type == mt.MODEL)
    stored = model_store.blob_path(layer.digest)
    assert fields_of(stored)["general.architecture"][1] == "gpt-oss"
    assert tensors_of(stored) == tensors_of(tmp_path / "llama.gguf")
    # The rewritten model's config keeps the registry's renderer and parser names.
    pulled = model_store.get("gpt-oss:tiny")
    assert (pulled.renderer, pulled.parser, pulled.config["model_family"]) == ("harmony", "harmony", "gpt-oss")
