"""Safetensors LoRA adapters converted as ``ollama create`` converts an ``ADAPTER`` folder
(``convert/hf/lora.py``): the GGUF written is the twin the adapter was exported from, or scales
every module's update as it did; what cannot be converted is a 400 that says why."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from cllm_ollama.convert.hf import Checkpoint, ImportRefused, convert, convert_lora, safetensors
from cllm_ollama.errors import InvalidRequest
from cllm_ollama.store import manifests as mt
from cllm_ollama.store.adapters import check_adapter
from cllm_ollama.store.create import CreateRequest, create_model
from cllm_ollama.store.gguf_info import gguf_info
from cllm_ollama.store.modelfile import create_body, parse_modelfile
from cllm_ollama.store.names import parse_name
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.deepseek2_ggufs import write_deepseek2
from cllm_ollama.testing.gemma3n_ggufs import write_gemma3n
from cllm_ollama.testing.ggufs import write_mamba
from cllm_ollama.testing.glm4_ggufs import write_glm4
from cllm_ollama.testing.hf_folders import (
    LORA_BASES,
    export,
    export_lora,
    write_hf_lora,
    write_llama,
    write_qwen3moe,
    write_safetensors,
)
from cllm_ollama.testing.nemotron_h_ggufs import NEMOTRON3_SUPER, write_nemotron_h


@pytest.fixture(scope="module")
def lora(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(the PEFT folder, the base GGUF, the adapter GGUF it was exported from)."""
    return write_hf_lora(tmp_path_factory.mktemp("lora"))


def _tensors(path: Path) -> dict[str, np.ndarray]:
    return {
        t.name: np.asarray(t.data, dtype=np.float32).reshape(list(reversed(t.shape)))
        for t in gguf.GGUFReader(path).tensors
    }


def _alpha(path: Path) -> float:
    return float(gguf.GGUFReader(path).fields["adapter.lora.alpha"].contents())


def _updates(path: Path) -> dict[str, np.ndarray]:
    """Each adapted weight's update as llama.cpp applies it: ``alpha / rank * B @ A`` (an
    embedding's A looked up by token, so its update is ``(B @ A.T).T``)."""
    tensors, alpha = _tensors(path), _alpha(path)
    out = {}
    for name in {n.rpartition(".")[0] for n in tensors}:
        a, b = tensors[name + ".lora_a"], tensors[name + ".lora_b"]
        if name == "token_embd.weight":
            out[name] = alpha / a.shape[1] * (b @ a.T).T
        else:
            out[name] = alpha / a.shape[0] * (b @ a)
    return out


def _convert(folder: Path, base: Path, out: Path) -> list[str]:
    return convert_lora(Checkpoint.folder(folder), gguf_info(base, verbose=True), out)


def _pair(module: str, rows: int, columns: int = 64) -> dict[str, tuple[str, np.ndarray]]:
    """PEFT's pair of rank 4 for ``module`` (zeros): A ``(4, columns)``, B ``(rows, 4)``."""
    return {
        f"{module}.lora_A.weight": ("F32", np.zeros((4, columns), np.float32)),
        f"{module}.lora_B.weight": ("F32", np.zeros((rows, 4), np.float32)),
    }


def _adapter(folder: Path, tensors: dict[str, tuple[str, np.ndarray]], targets: list[str] | None = None) -> Path:
    """``folder``: a PEFT adapter (rank 4, alpha 8) of ``tensors``, written anew."""
    folder.mkdir(exist_ok=True)
    config = {"peft_type": "LORA", "r": 4, "lora_alpha": 8} | ({"target_modules": targets} if targets else {})
    (folder / "adapter_config.json").write_text(json.dumps(config))
    (folder / "adapter_model.safetensors").unlink(missing_ok=True)  # mapped while read: written anew, not over
    write_safetensors(folder / "adapter_model.safetensors", tensors)
    return folder


@pytest.mark.parametrize("arch", sorted(LORA_BASES))
def test_a_peft_adapter_converts_to_its_twin(arch: str, tmp_path: Path) -> None:
    folder, base, twin = write_hf_lora(tmp_path / arch, base=arch)
    out = tmp_path / "adapter.gguf"
    assert _convert(folder, base, out) == []
    fields = {f.name: f.contents() for f in gguf.GGUFReader(out).fields.values() if not f.name.startswith("GGUF.")}
    assert fields == {
        "general.architecture": arch,
        "general.type": "adapter",
        "general.name": "hf-lora",
        "adapter.type": "lora",
        "adapter.lora.alpha": 8.0,
    }
    got, want = _tensors(out), _tensors(twin)
    assert got.keys() == want.keys()
    for name in want:
        assert np.array_equal(got[name], want[name]), name


@pytest.mark.parametrize(
    "variant",
    [
        {"mlx": True},
        {"rslora": True},
        {"alpha_pattern": {"q_proj": 32.0, r"layers\.1\.mlp\.down_proj": 2.0}},
        {"dtype": "F16"},
        {"dtype": "BF16", "rslora": True},
    ],
    ids=["mlx", "rslora", "alpha-pattern", "f16", "bf16-rslora"],
)
def test_each_scaling_gives_the_updates_it_was_trained_with(
    lora: tuple[Path, Path, Path], tmp_path: Path, variant: dict[str, Any]
) -> None:
    """MLX's bare scale, rank-stabilized alphas and per-module alphas are what llama.cpp's one
    ``alpha / rank`` would not give: the converter folds the difference into B."""
    _, base, twin = lora
    folder = export_lora(twin, base, tmp_path / "variant", **variant)
    out = tmp_path / "adapter.gguf"
    _convert(folder, base, out)
    got, want = _updates(out), _updates(twin)
    assert got.keys() == want.keys()
    tolerance = {"F16": 2e-3, "BF16": 2e-2}.get(variant.get("dtype", "F32"), 1e-5)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=tolerance, atol=tolerance * np.abs(want[name]).max())


def test_the_updates_land_on_the_rows_llama_cpp_keeps(lora: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """The adapter merged into the base in Hugging Face's layout and converted as a model gives
    the base plus the converted adapter's updates: B's Q and K rows reordered as the weights are."""
    folder, base, _ = lora
    checkpoint = export(base, tmp_path / "hf-base", dtype="F32")
    config = json.loads((folder / "adapter_config.json").read_text())
    scale = config["lora_alpha"] / config["r"]
    source = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(base).tensors}
    weights = {name: np.array(values) for name, values in _safetensors(checkpoint / "model.safetensors").items()}
    for name, values in _safetensors(folder / "adapter_model.safetensors").items():
        if name.endswith("lora_A.weight"):
            module = name.removeprefix("base_model.model.").removesuffix(".lora_A.weight")
            b = _safetensors(folder / "adapter_model.safetensors")[name.replace("lora_A", "lora_B")]
            weights[module + ".weight"] += scale * (b @ values)
        elif name.endswith("lora_embedding_A"):
            b = _safetensors(folder / "adapter_model.safetensors")[name.replace("_A", "_B")]
            weights["model.embed_tokens.weight"] += scale * (b @ values).T
    write_safetensors(checkpoint / "model.safetensors", {n: ("F32", v.astype(np.float32)) for n, v in weights.items()})
    merged, adapter = tmp_path / "merged.gguf", tmp_path / "adapter.gguf"
    convert(Checkpoint.folder(checkpoint), merged)
    _convert(folder, base, adapter)
    merged_tensors = _tensors(merged)
    for name, update in _updates(adapter).items():
        expected = source[name].astype(np.float32).reshape(update.shape) + update
        np.testing.assert_allclose(merged_tensors[name], expected, rtol=2e-3, atol=2e-3, err_msg=name)


def _safetensors(path: Path) -> dict[str, np.ndarray]:
    return {
        t.name: np.array(t.data, dtype=np.float32) for t in safetensors.read(path, path.name)
    }  # copies: files get rewritten


def _edit_config(folder: Path, **changes: Any) -> None:
    path = folder / "adapter_config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


def _edit_tensors(folder: Path, add: dict[str, np.ndarray] | None = None, drop: tuple[str, ...] = ()) -> None:
    path = folder / "adapter_model.safetensors"
    tensors = {n: ("F32", v) for n, v in _safetensors(path).items() if n not in drop}
    write_safetensors(path, tensors | {n: ("F32", v) for n, v in (add or {}).items()})


def _refusal_cases() -> list[tuple[str, Any, str]]:
    a = np.zeros((4, 64), np.float32)
    return [
        (
            "config",
            lambda f: (f / "adapter_config.json").unlink(),
            r"^the adapter has no adapter_config\.json: send it beside the adapter's safetensors \(cllm's CLI",
        ),
        ("dora", lambda f: _edit_config(f, use_dora=True), r"DoRA adapters \(use_dora\)"),
        ("saved", lambda f: _edit_config(f, modules_to_save=["lm_head"]), r"replaces whole modules"),
        ("prefix", lambda f: _edit_config(f, peft_type="PREFIX_TUNING"), r"peft_type 'PREFIX_TUNING' is not a LoRA"),
        (
            "mlx-dora",
            lambda f: _edit_config(f, lora_parameters={"rank": 4, "scale": 2}, fine_tune_type="dora"),
            "not a LoRA",
        ),
        ("pattern", lambda f: _edit_config(f, alpha_pattern={"(": 1}), r"alpha_pattern key '\(' is not a regular"),
        (
            "magnitude",
            lambda f: _edit_tensors(
                f, {"base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector": a[0]}
            ),
            r"lora_magnitude_vector is not a LoRA's A or B",
        ),
        (
            "half",
            lambda f: _edit_tensors(f, drop=("base_model.model.model.layers.1.mlp.up_proj.lora_B.weight",)),
            r"^model\.layers\.1\.mlp\.up_proj has only one of its LoRA matrices",
        ),
        (
            "unknown",
            lambda f: _edit_tensors(f, {"base_model.model.model.layers.0.mlp.act.lora_A.weight": a}),
            r"tensor model\.layers\.0\.mlp\.act\.weight is not one cllm's converter knows",
        ),
    ]


@pytest.mark.parametrize("case", _refusal_cases(), ids=lambda c: c[0])
def test_what_cannot_be_converted_says_why(
    lora: tuple[Path, Path, Path], tmp_path: Path, case: tuple[str, Any, str]
) -> None:
    _, base, twin = lora
    folder = export_lora(twin, base, tmp_path / "broken")
    _, damage, message = case
    damage(folder)
    with pytest.raises(ImportRefused, match=message):
        _convert(folder, base, tmp_path / "out.gguf")


@pytest.mark.parametrize("module", ["kv_b_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "lm_head"])
def test_a_lora_on_a_latent_attention_s_projections_is_refused(tmp_path: Path, module: str) -> None:
    """llama.cpp's deepseek2 multiplies its latent attention's projections and its output without
    adapters, so a LoRA on one would change nothing: refused, saying so and what to do instead; one
    on the attention's output converts."""
    base = write_deepseek2(tmp_path / "base.gguf")
    stem = "base_model.model.model.layers.1.self_attn"
    tensors = _pair(f"{stem}.o_proj", 64)
    folder = _adapter(tmp_path / "adapter", tensors, ["o_proj", module])
    assert _convert(folder, base, tmp_path / "out.gguf") == []
    at = "base_model.model.lm_head" if module == "lm_head" else f"{stem}.{module}"
    _adapter(
        folder, tensors | _pair(at, 416 if module == "lm_head" else 64), ["o_proj", module]
    )  # lm_head's: the vocabulary's
    why = re.escape(f"{at.removeprefix('base_model.model.')} is no weight llama.cpp adapts (") + ".*merge_and_unload"
    with pytest.raises(ImportRefused, match="^" + why):
        _convert(folder, base, tmp_path / "out.gguf")


def test_a_lora_on_nemotron_3_super_s_latent_projections_is_refused(tmp_path: Path) -> None:
    """llama.cpp multiplies Nemotron 3 Super's latent projections around its experts without
    adapters: a LoRA on one is refused; one on its Mamba-2 in-projection converts."""
    base = write_nemotron_h(tmp_path / "base.gguf", NEMOTRON3_SUPER)
    targets = ["in_proj", "fc1_latent_proj"]
    rows = 2 * NEMOTRON3_SUPER.d_inner + 2 * NEMOTRON3_SUPER.n_group * NEMOTRON3_SUPER.d_state + 8
    tensors = _pair("base_model.model.backbone.layers.0.mixer.in_proj", rows)
    folder = _adapter(tmp_path / "adapter", tensors, targets)
    assert _convert(folder, base, tmp_path / "out.gguf") == []
    _adapter(folder, tensors | _pair("base_model.model.backbone.layers.3.mixer.fc1_latent_proj", 32), targets)
    with pytest.raises(ImportRefused, match=r"fc1_latent_proj is no weight llama\.cpp adapts \(its nemotron_h_moe"):
        _convert(folder, base, tmp_path / "out.gguf")


@pytest.mark.parametrize(
    "module", ["modality_router", "altup_projections", "per_layer_model_projection", "embed_tokens_per_layer"]
)
def test_a_lora_on_gemma3n_s_altup_router_or_stream_projections_is_refused(tmp_path: Path, module: str) -> None:
    """llama.cpp's gemma3n multiplies AltUp's router, the streams' projections and the per-layer
    embeddings' projection without adapters, and reads the per-layer embeddings without them (it
    would take an adapter there for the token embedding's, and refuse to load it): a LoRA on one is
    refused; one on LAuReL's residual (as a fine-tune of the release names it, under
    ``language_model``) converts."""
    base = write_gemma3n(tmp_path / "base.gguf")
    root = "base_model.model.model.language_model"
    tensors = _pair(f"{root}.layers.2.laurel.linear_left", 64)
    folder = _adapter(tmp_path / "adapter", tensors, ["linear_left", module])
    assert _convert(folder, base, tmp_path / "out.gguf") == []
    at, rows = {
        "modality_router": (f"{root}.layers.2.altup.modality_router", 4),
        "altup_projections": (f"{root}.altup_projections.1", 64),
        "per_layer_model_projection": (f"{root}.per_layer_model_projection", 256 * 25),
        "embed_tokens_per_layer": (f"{root}.embed_tokens_per_layer", 256 * 25),
    }[module]
    also = _pair(at, rows)
    if module == "embed_tokens_per_layer":  # PEFT's names for an embedding's pair
        also = {
            f"{at}.lora_embedding_A": ("F32", np.zeros((4, 368), np.float32)),
            f"{at}.lora_embedding_B": ("F32", np.zeros((rows, 4), np.float32)),
        }
    _adapter(folder, tensors | also, ["linear_left", module])
    with pytest.raises(ImportRefused, match=r"is no weight llama\.cpp adapts \(its gemma3n"):
        _convert(folder, base, tmp_path / "out.gguf")


def test_a_lora_for_a_glm4_with_m_rope_has_its_q_and_k_rows_in_halves(tmp_path: Path) -> None:
    """llama.cpp's glm4 with M-RoPE sections (GLM-OCR's and GLM-4.1V's text model) takes its Q and K
    rows in halves where transformers takes them in pairs (its converter reorders them), so an
    adapter's B rows for Q and K are reordered the same way over the rotating width the base
    states (all of GLM-OCR's heads, half of GLM-4.1V's, whose head size is the width over the
    heads); V's stay as they are; a base that does not state the width is refused."""
    base = write_glm4(tmp_path / "base.gguf", ocr=True)  # 4 heads of 32, all of each rotating
    root = "base_model.model.model.language_model.layers.0.self_attn"
    rows = {
        part: np.arange(n, dtype=np.float32)[:, None] * np.ones((1, 4), np.float32)
        for part, n in (("q", 128), ("v", 64))
    }
    tensors = {}
    for part, b in rows.items():
        tensors |= {f"{root}.{part}_proj.lora_A.weight": ("F32", np.ones((4, 64), np.float32))}
        tensors |= {f"{root}.{part}_proj.lora_B.weight": ("F32", b)}
    folder = _adapter(tmp_path / "adapter", tensors)
    assert _convert(folder, base, tmp_path / "out.gguf") == []
    got = {t.name: np.array(t.data) for t in gguf.GGUFReader(tmp_path / "out.gguf").tensors}
    head = np.concatenate([np.arange(0, 32, 2), np.arange(1, 32, 2)])
    assert np.array_equal(got["blk.0.attn_q.weight.lora_b"][:, 0], np.concatenate([h * 32 + head for h in range(4)]))
    assert np.array_equal(got["blk.0.attn_v.weight.lora_b"][:, 0], np.arange(64))
    stated = gguf_info(base, verbose=True)
    info = dataclasses.replace(
        stated, model_info={k: v for k, v in stated.model_info.items() if "dimension_count" not in k}
    )
    with pytest.raises(ImportRefused, match="states no head size and rotary width"):
        convert_lora(Checkpoint.folder(folder), info, tmp_path / "out.gguf")
    # GLM-4.1V's as llama.cpp converts it: no head size stated (the width over the heads, 16),
    # half of each head rotating in sections.
    plain = gguf_info(write_glm4(tmp_path / "plain.gguf"), verbose=True)
    kv = {k: v for k, v in plain.model_info.items() if not k.endswith("key_length")}
    info = dataclasses.replace(plain, model_info=kv | {"glm4.rope.dimension_sections": [2, 1, 1, 0]})
    q = {f"{root}.q_proj.lora_A.weight": tensors[f"{root}.q_proj.lora_A.weight"]}
    q[f"{root}.q_proj.lora_B.weight"] = ("F32", rows["q"][:64])
    convert_lora(Checkpoint.folder(_adapter(tmp_path / "adapter", q)), info, tmp_path / "out.gguf")
    got = {t.name: np.array(t.data) for t in gguf.GGUFReader(tmp_path / "out.gguf").tensors}
    head = np.concatenate([np.arange(0, 8, 2), np.arange(1, 8, 2), np.arange(8, 16)])
    assert np.array_equal(got["blk.0.attn_q.weight.lora_b"][:, 0], np.concatenate([h * 16 + head for h in range(4)]))


def test_a_base_cllm_does_not_convert_adapters_for_is_named(lora: tuple[Path, Path, Path], tmp_path: Path) -> None:
    folder, _, _ = lora
    moe = write_qwen3moe(tmp_path / "moe.gguf")
    with pytest.raises(ImportRefused, match=r"but the base model has no tensor blk\.0\.ffn_\w+\.weight$"):
        _convert(folder, moe, tmp_path / "out.gguf")
    with pytest.raises(ImportRefused, match=r"^safetensors adapters for architecture 'mamba' are not converted"):
        _convert(folder, write_mamba(tmp_path / "mamba.gguf"), tmp_path / "out.gguf")


def test_a_base_whose_output_is_its_embedding_takes_neither_s_update(
    lora: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """PEFT adapts the embedding and lm_head of a tied model apart; llama.cpp has one tensor for
    both, and would apply an embedding's pair to the output too (and abort on its shape)."""
    _, base, twin = lora
    folder = export_lora(twin, base, tmp_path / "adapter")
    tied = gguf_info(write_llama(tmp_path / "tied.gguf"), verbose=True)
    with pytest.raises(
        ImportRefused, match=r"changes lm_head, but the base model ties its output to the token embedding"
    ):
        convert_lora(Checkpoint.folder(folder), tied, tmp_path / "out.gguf")
    _edit_tensors(folder, drop=tuple(f"base_model.model.lm_head.lora_{p}.weight" for p in "AB"))
    convert_lora(Checkpoint.folder(folder), tied, tmp_path / "out.gguf")
    with pytest.raises(InvalidRequest, match=r"^x: the adapter changes the token embedding, which the base model also"):
        check_adapter("x", gguf_info(tmp_path / "out.gguf", verbose=True), tied)


def _upload(store: ModelStore, path: Path) -> str:
    with open(path, "rb") as f:
        return store.write_blob_from(f)


def test_create_converts_an_adapter_folder_as_ollama_does(
    model_store: ModelStore, lora: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    folder, base, twin = lora
    (tmp_path / "base.gguf").write_bytes(base.read_bytes())
    (tmp_path / "hf-lora").symlink_to(folder)
    mf = parse_modelfile("FROM ./base.gguf\nADAPTER ./hf-lora")
    body = create_body("tuned", mf, tmp_path, lambda p: _upload(model_store, p))
    assert set(body["adapters"]) == {"adapter_model.safetensors", "adapter_config.json"}
    events: list[dict[str, Any]] = []
    create_model(model_store, CreateRequest.from_json(body), events.append)
    statuses = [e["status"] for e in events]
    assert statuses[:2] == ["parsing GGUF", "converting adapter"]
    assert statuses[-2:] == ["writing manifest", "success"]
    record = model_store.get("tuned")
    (adapter,) = [layer for layer in record.manifest.layers if layer.media_type == mt.ADAPTER]
    assert f"creating new layer {adapter.digest}" in statuses
    got = _tensors(model_store.blob_path(adapter.digest))
    assert all(np.array_equal(got[n], v) for n, v in _tensors(twin).items())
    for digest in body["adapters"].values():  # converted: the uploads are no model's layers
        assert not model_store.blob_path(digest).exists()
    assert not [p for p in model_store.blobs_dir.iterdir() if p.name.startswith(".tmp-")]


def test_create_refuses_an_adapter_it_cannot_convert_with_a_400(
    model_store: ModelStore, lora: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    _, base, twin = lora
    folder = export_lora(twin, base, tmp_path / "dora")
    _edit_config(folder, use_dora=True)
    files = {"base.gguf": _upload(model_store, base)}
    adapters = {p.name: _upload(model_store, p) for p in folder.iterdir()}
    request = CreateRequest.from_json({"model": "bad", "files": files, "adapters": adapters})
    with pytest.raises(InvalidRequest, match=r"^adapter_config\.json: DoRA adapters"):
        create_model(model_store, request, lambda e: None)
    assert model_store.resolve(parse_name("bad")) is None
    assert not [p for p in model_store.blobs_dir.iterdir() if p.name.startswith(".tmp-")]
    assert all(model_store.blob_path(d).exists() for d in adapters.values())  # kept for a retry
