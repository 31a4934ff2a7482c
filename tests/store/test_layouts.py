"""GGUFs laid out by Ollama's own converter, decided when they enter the store (``cllm_ollama/convert``).

Tiny files in Ollama's layout are pulled through the loopback registry and created from uploads:
a gemma3 with its vision tower inside is split into a text GGUF and a CLIP projector (the store
holds the split files, not the original), and layouts cllm cannot run are refused naming the
architecture, with no manifest written and no blob left behind.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import orjson
import pytest
from fakeregistry import FakeRegistry, digest_of, fake_registry, statuses

from cllm_ollama.convert.dispatch import plan
from cllm_ollama.convert.framework import Header, LayoutRefused
from cllm_ollama.errors import InvalidRequest, PullError
from cllm_ollama.store import conversion, registry_pull
from cllm_ollama.store import manifests as mt
from cllm_ollama.store.create import CreateRequest, create_model
from cllm_ollama.store.names import parse_name
from cllm_ollama.store.pull import pull_model
from cllm_ollama.store.registry_pull import RegistryOptions
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_vision
from cllm_ollama.testing.ollama_ggufs import write_ollama_gemma3_vision, write_ollama_qwen25vl_vision

CONFIG = {"model_format": "gguf", "model_family": "gemma3", "model_families": ["gemma3"], "model_type": "1M"}


@pytest.fixture
def registry() -> Iterator[FakeRegistry]:
    with fake_registry() as state:
        yield state


@pytest.fixture(scope="module")
def ollama_gemma3(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return write_ollama_gemma3_vision(tmp_path_factory.mktemp("ollama-layout") / "model.gguf").read_bytes()


def tiny_gguf_of(path: Path, arch: str, tensors: dict[str, tuple[int, ...]], **kv: Any) -> bytes:
    """A minimal GGUF of ``arch`` with zero tensors of the given numpy shapes and extra keys."""
    w = gguf.GGUFWriter(str(path), arch)
    for key, value in kv.items():
        if isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        else:
            w.add_string(key, str(value))
    for name, shape in tensors.items():
        w.add_tensor(name, np.zeros(shape, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


def pull(store: ModelStore, registry: FakeRegistry, name: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    pull_model(store, name, events.append, options=RegistryOptions(registry_url=registry.url))
    return events


def tensors_of(path: Path) -> dict[str, np.ndarray]:
    return {t.name: np.array(t.data, dtype=np.float32) for t in gguf.GGUFReader(path).tensors}


def assert_split_like_llama_cpp_files(store: ModelStore, layers: list[mt.Layer], tmp_path: Path) -> None:
    """The model layer and projector layer hold what ``write_vision`` writes for llama.cpp: same tensors."""
    kinds = [layer.media_type for layer in layers]
    assert kinds.count(mt.MODEL) == 1 and kinds.count(mt.PROJECTOR) == 1
    text, clip = write_vision(tmp_path / "expected")
    model = next(layer for layer in layers if layer.media_type == mt.MODEL)
    projector = next(layer for layer in layers if layer.media_type == mt.PROJECTOR)
    for expected, layer in ((text, model), (clip, projector)):
        want, got = tensors_of(expected), tensors_of(store.blob_path(layer.digest))
        assert sorted(got) == sorted(want)
        for name in want:  # the F16 patch embedding was promoted back to F32
            np.testing.assert_allclose(got[name], want[name], atol=1e-3)
    fields = gguf.GGUFReader(store.blob_path(model.digest)).fields
    assert fields["gemma3.attention.layer_norm_rms_epsilon"].contents() == pytest.approx(1e-6)
    n_vocab = len(fields["tokenizer.ggml.tokens"].contents())
    assert n_vocab == len(gguf.GGUFReader(text).fields["tokenizer.ggml.tokens"].contents())
    assert not any(key.startswith(("gemma3.vision.", "gemma3.mm.")) for key in fields)
    clip_fields = gguf.GGUFReader(store.blob_path(projector.digest)).fields
    assert clip_fields["general.architecture"].contents() == "clip"
    assert clip_fields["clip.projector_type"].contents() == "gemma3"
    assert clip_fields["clip.vision.projection_dim"].contents() == fields["gemma3.embedding_length"].contents()


def test_a_pulled_gemma3_with_its_vision_tower_inside_is_stored_split(
    model_store: ModelStore,
    registry: FakeRegistry,
    ollama_gemma3: bytes,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry_pull, "HEADER_PROBE_MIN_BLOB", 0)  # its header is read first, and passes
    registry.add_model("library/gemma3", "tiny", [(mt.MODEL, ollama_gemma3), (mt.TEMPLATE, b"{{ .Prompt }}")], CONFIG)
    events = pull(model_store, registry, "gemma3:tiny")
    assert "converting gemma3 from Ollama's layout" in statuses(events)
    assert statuses(events)[-1] == "success"
    record = model_store.get("gemma3:tiny")
    layers = list(record.manifest.layers)
    assert_split_like_llama_cpp_files(model_store, layers, tmp_path)
    assert mt.TEMPLATE in [layer.media_type for layer in layers]  # the other layers are kept
    assert "vision" in record.capabilities
    # The original single file is not kept: the store holds (and would push) the split files.
    assert not any(p.name.startswith(".layout-") for p in model_store.blobs_dir.iterdir())
    original = "sha256-" + hashlib.sha256(ollama_gemma3).hexdigest()
    assert not (model_store.blobs_dir / original).exists()


@pytest.mark.parametrize("noprune", [False, True])
def test_a_created_gemma3_with_its_vision_tower_inside_is_stored_split(
    model_store: ModelStore, ollama_gemma3: bytes, tmp_path: Path, noprune: bool
) -> None:
    digest = model_store.write_blob_from([ollama_gemma3])
    req = CreateRequest(model=parse_name("eyes"), files={"model.gguf": digest})
    events: list[dict[str, Any]] = []
    record = create_model(model_store, req, events.append, noprune=noprune)
    assert_split_like_llama_cpp_files(model_store, list(record.manifest.layers), tmp_path)
    # As at pull, the upload goes once the split files are the model's (OLLAMA_NOPRUNE keeps it).
    assert model_store.has_blob(digest) is noprune


def test_a_pulled_qwen25vl_with_its_vision_tower_inside_is_stored_as_qwen2vl_and_a_projector(
    model_store: ModelStore, registry: FakeRegistry, tmp_path: Path
) -> None:
    data = write_ollama_qwen25vl_vision(tmp_path / "qwen25vl.gguf").read_bytes()
    registry.add_model("library/qwen2.5vl", "tiny", [(mt.MODEL, data)], CONFIG)
    assert "converting qwen25vl from Ollama's layout" in statuses(pull(model_store, registry, "qwen2.5vl:tiny"))
    layers = {layer.media_type: layer for layer in model_store.get("qwen2.5vl:tiny").manifest.layers}
    assert set(layers) == {mt.MODEL, mt.PROJECTOR}
    text = gguf.GGUFReader(model_store.blob_path(layers[mt.MODEL].digest))
    assert text.fields["general.architecture"].contents() == "qwen2vl"
    assert text.fields["qwen2vl.rope.dimension_sections"].contents() == [2, 3, 3, 0]
    assert not any(key.startswith("qwen25vl.") for key in text.fields)
    assert not any(t.name.startswith(("v.", "mm.")) for t in text.tensors)
    clip = gguf.GGUFReader(model_store.blob_path(layers[mt.PROJECTOR].digest))
    assert clip.fields["clip.projector_type"].contents() == "qwen2.5vl_merger"
    assert clip.fields["clip.vision.n_wa_pattern"].contents() == 2  # full attention in block 1
    names = {t.name: t.tensor_type for t in clip.tensors}
    for name in ("v.patch_embd.weight", "v.patch_embd.weight.1"):
        assert names[name] == gguf.GGMLQuantizationType.F32
    assert {"v.post_ln.weight", "mm.0.weight", "mm.2.bias", "v.blk.1.ffn_gate.weight"} <= set(names)
    assert not any(name.startswith("v.merger") for name in names)


@pytest.mark.parametrize(
    "probe", [conversion.HEADER_PROBE_BYTES, 64], ids=["header-read-first", "header-past-the-probe"]
)
def test_a_layout_cllm_cannot_run_is_refused_at_pull_naming_the_architecture(
    model_store: ModelStore, registry: FakeRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, probe: int
) -> None:
    """Refused from the blob's first bytes, before its download; or, where the header is longer than
    that first read, after the download, its blobs removed. Never a manifest."""
    monkeypatch.setattr(registry_pull, "HEADER_PROBE_BYTES", probe)
    monkeypatch.setattr(registry_pull, "HEADER_PROBE_MIN_BLOB", 0)  # as if the model were big
    data = tiny_gguf_of(tmp_path / "mllama.gguf", "mllama", {"token_embd.weight": (8, 4)}, **{"mllama.block_count": 1})
    registry.add_model("library/llama3.2-vision", "tiny", [(mt.MODEL, data), (mt.PARAMS, orjson.dumps({}))], CONFIG)
    with pytest.raises(PullError) as refused:
        pull(model_store, registry, "llama3.2-vision:tiny")
    assert refused.value.message.startswith(
        "architecture \"mllama\" written by Ollama's converter is not supported by cllm's llama.cpp ("
    )
    assert model_store.list_models() == [] and model_store.resolve("llama3.2-vision:tiny") is None
    blobs = model_store.blobs_dir
    assert not blobs.exists() or [p.name for p in blobs.iterdir() if p.name.startswith("sha256-")] == []
    gets = registry.seen("GET", digest_of(data))
    if probe > len(data):  # one ranged read of the header, nothing more
        assert [r.headers.get("Range") for r in gets] == [f"bytes=0-{len(data) - 1}"]
    else:
        assert len(gets) > 1


def test_a_layout_cllm_cannot_run_is_refused_at_create(model_store: ModelStore, tmp_path: Path) -> None:
    data = tiny_gguf_of(
        tmp_path / "ocr.gguf",
        "deepseekocr",
        {"token_embd.weight": (10, 4), "s.blk.0.attn_qkv.weight": (8, 4)},
        **{"deepseekocr.block_count": 1},
    )
    digest = model_store.write_blob_from([data])
    req = CreateRequest(model=parse_name("g3n"), files={"g3n.gguf": digest})
    with pytest.raises(InvalidRequest, match=r'^architecture "deepseekocr" written by Ollama\'s converter'):
        create_model(model_store, req, lambda event: None)
    assert model_store.list_models() == []


def header(arch: str, tensors: dict[str, list[int]] | None = None, **kv: Any) -> Header:
    """A header for ``plan``; keys spelled with ``__`` for dots (``gemma3__context_length``)."""
    keys = {k.replace("__", "."): v for k, v in kv.items()}
    return Header(arch, {"general.architecture": arch, **keys}, tensors or {})


@pytest.mark.parametrize(
    "h",
    [
        header("nemotron_h_omni", {"a.blk.0.attn_q.weight": [4, 4]}),
        header("glmocr", {"v.blk.0.attn_qkv.weight": [4, 12]}),  # a tower that states none of its keys
        header("qwen3vl", {"token_embd.weight": [4, 8]}),
        header("mistral3", {"v.patch_conv.weight": [4]}),
        header("llama4", {"mm.linear_1.weight": [4, 4]}),
        header("qwen25vl"),
        header("deepseekocr"),
        header("mllama"),
        header("gemma3", {"dense.0.weight": [4, 4]}),  # EmbeddingGemma without its second dense layer
        header("not-an-arch"),
        header("qwen3vl", {"v.blk.0.attn_qkv.weight": [4, 12]}, qwen3vl__rope__dimension_sections=[2, 3, 3, 0]),
    ],
    ids=lambda h: h.arch,
)
def test_layouts_llama_cpp_cannot_load_are_refused_naming_the_architecture(h: Header) -> None:
    with pytest.raises(LayoutRefused, match=rf'^architecture "{h.arch}" written by Ollama\'s converter'):
        plan(h)


@pytest.mark.parametrize(
    "h",
    [
        header("gemma3", gemma3__attention__layer_norm_rms_epsilon=1e-6),
        header("qwen3vl", qwen3vl__rope__dimension_sections=[24, 20, 20, 0]),
        header("mistral3", {"blk.0.attn_q.weight": [4, 4]}),
        header("lfm2", {"token_embd_norm.weight": [4]}),
        header("gemma3n", {"token_embd.weight": [4, 8], "per_layer_token_embd.weight": [4, 8]}),
        header("qwen3next", {"blk.0.ssm_dt.bias": [4]}),
        header("gpt-oss"),
        header("qwen3"),
        header("clip", {"mm.0.weight": [4, 4]}, clip__projector_type="mlp"),
    ],
    ids=lambda h: h.arch,
)
def test_layouts_llama_cpp_loads_are_kept_as_they_are(h: Header) -> None:
    assert plan(h) is None


def test_an_old_llava_projector_without_a_type_is_typed(tmp_path: Path) -> None:
    (rewrite,) = plan(header("clip", {"mm.0.weight": [4, 4]})) or []
    assert rewrite.role == "projector" and rewrite.set_kv["clip.projector_type"][0] == "mlp"


def llama3_header(**kv: Any) -> Header:
    tokens = [f"t{i}" for i in range(128256)]
    tokens[128001], tokens[128006], tokens[128009] = "<|end_of_text|>", "<|start_header_id|>", "<|eot_id|>"
    return header("llama", **{"tokenizer.ggml.tokens".replace(".", "__"): tokens, **kv})


def test_a_llama3_without_its_pre_tokenizer_gets_it_and_ends_turns_at_eot() -> None:
    """Ollama's shim fixes these Llama 3 files; llama.cpp would split their text with its default
    pre-tokenizer and run on past the end of a turn."""
    (rewrite,) = plan(llama3_header(tokenizer__ggml__eos_token_id=128001)) or []
    assert rewrite.arch == "llama" and rewrite.keep_tensor("blk.0.attn_q.weight")
    assert rewrite.set_kv == {
        "tokenizer.ggml.pre": ("llama-bpe", gguf.GGUFValueType.STRING),
        "tokenizer.ggml.eos_token_id": (128009, gguf.GGUFValueType.UINT32),
        "tokenizer.ggml.eot_token_id": (128009, gguf.GGUFValueType.UINT32),
    }
    named = plan(llama3_header(tokenizer__ggml__pre="smaug-bpe", tokenizer__ggml__eos_token_id=128001)) or []
    assert "tokenizer.ggml.pre" not in named[0].set_kv  # a named pre-tokenizer is kept
    assert plan(llama3_header(tokenizer__ggml__pre="llama-bpe", tokenizer__ggml__eos_token_id=128009)) is None
    assert plan(header("llama")) is None  # not a Llama 3 vocabulary


def test_a_text_only_mistral3_gets_llama_cpp_s_yarn_keys(model_store: ModelStore, tmp_path: Path) -> None:
    w = gguf.GGUFWriter(str(tmp_path / "m3.gguf"), "mistral3")
    w.add_uint32("mistral3.block_count", 1)
    w.add_float32("mistral3.rope.scaling.beta_fast", 32.0)
    w.add_float32("mistral3.rope.scaling.beta_slow", 1.0)
    w.add_float32("mistral3.rope.scaling_beta", 0.1)
    w.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    digest = model_store.write_blob_from([(tmp_path / "m3.gguf").read_bytes()])
    record = create_model(model_store, CreateRequest(model=parse_name("m3"), files={"m3.gguf": digest}), print)
    fields = gguf.GGUFReader(model_store.blob_path(record.manifest.layers[0].digest)).fields
    assert fields["mistral3.rope.scaling.yarn_beta_fast"].contents() == 32.0
    assert fields["mistral3.rope.scaling.yarn_beta_slow"].contents() == 1.0
    assert fields["mistral3.attention.temperature_scale"].contents() == pytest.approx(0.1)
    assert fields["tokenizer.ggml.pre"].contents() == "tekken"
    assert "mistral3.rope.scaling.beta_fast" not in fields


def test_a_conversion_that_fails_is_a_clear_refusal_with_nothing_left(
    model_store: ModelStore, ollama_gemma3: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(src: Path, dst: Path, rw: Any) -> None:
        dst.write_bytes(b"GGUF")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(conversion, "rewrite", full_disk)
    digest = model_store.write_blob_from([ollama_gemma3])
    with pytest.raises(InvalidRequest, match=r"converting gemma3 from Ollama's layout failed: .*No space left"):
        create_model(model_store, CreateRequest(model=parse_name("eyes"), files={"m.gguf": digest}), print)
    assert model_store.list_models() == []
    assert not any(p.name.startswith(".layout-") for p in model_store.blobs_dir.iterdir())
