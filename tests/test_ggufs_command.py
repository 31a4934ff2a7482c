"""The test-model writer as a command: ``python -m cllm_ollama.testing.ggufs KIND DIR``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gguf


def _written(kind: str, folder: Path) -> list[str]:
    """The paths the command prints, having written them."""
    out = subprocess.run(
        [sys.executable, "-m", "cllm_ollama.testing.ggufs", kind, str(folder)],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def test_vision_writes_a_text_model_and_its_projector(tmp_path: Path) -> None:
    assert _written("vision", tmp_path) == [str(tmp_path / "text.gguf"), str(tmp_path / "mmproj.gguf")]
    text, mmproj = gguf.GGUFReader(tmp_path / "text.gguf"), gguf.GGUFReader(tmp_path / "mmproj.gguf")
    assert text.fields["general.architecture"].contents() == "gemma3"
    assert mmproj.fields["general.architecture"].contents() == "clip"
    assert mmproj.fields["clip.projector_type"].contents() == "gemma3"
    # The projector's output is as wide as the text model's embeddings (libmtmd refuses it otherwise).
    assert mmproj.fields["clip.vision.projection_dim"].contents() == text.fields["gemma3.embedding_length"].contents()
    assert (tmp_path / "mmproj.gguf").stat().st_size < 100_000


def test_other_kinds_write_one_file_named_for_the_kind(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "cllm_ollama.testing.ggufs", "qwen3", str(tmp_path)], check=True)
    assert gguf.GGUFReader(tmp_path / "qwen3.gguf").fields["general.architecture"].contents() == "qwen3"


def test_vision_qwen2vl_writes_an_m_rope_pair(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "cllm_ollama.testing.ggufs", "vision-qwen2vl", str(tmp_path)], check=True)
    assert gguf.GGUFReader(tmp_path / "text.gguf").fields["general.architecture"].contents() == "qwen2vl"
    assert gguf.GGUFReader(tmp_path / "mmproj.gguf").fields["clip.projector_type"].contents() == "qwen2vl_merger"


def test_vision_sliced_writes_a_pair_whose_projector_tiles(tmp_path: Path) -> None:
    assert _written("vision-sliced", tmp_path) == [str(tmp_path / "text.gguf"), str(tmp_path / "mmproj.gguf")]
    mmproj = gguf.GGUFReader(tmp_path / "mmproj.gguf")
    assert mmproj.fields["clip.projector_type"].contents() == "idefics3"
    # Larger than one tile: libmtmd scales images to this longest side and cuts them into tiles.
    assert (
        mmproj.fields["clip.vision.preproc_image_size"].contents() > mmproj.fields["clip.vision.image_size"].contents()
    )
    tokens = gguf.GGUFReader(tmp_path / "text.gguf").fields["tokenizer.ggml.tokens"].contents()
    assert {"<fake_token_around_image>", "<global-img>"} <= set(tokens)


def test_reranker_writes_a_rank_pooled_qwen3(tmp_path: Path) -> None:
    assert _written("reranker", tmp_path) == [str(tmp_path / "reranker.gguf")]
    reader = gguf.GGUFReader(tmp_path / "reranker.gguf")
    assert reader.fields["qwen3.pooling_type"].contents() == gguf.PoolingType.RANK
    assert reader.fields["qwen3.classifier.output_labels"].contents() == ["yes", "no"]
    assert "{query}" in reader.fields["tokenizer.chat_template.rerank"].contents()
    assert any(t.name == "cls.output.weight" for t in reader.tensors)


def test_lora_writes_a_base_and_its_adapter(tmp_path: Path) -> None:
    assert _written("lora", tmp_path) == [str(tmp_path / "base.gguf"), str(tmp_path / "adapter.gguf")]
    adapter = gguf.GGUFReader(tmp_path / "adapter.gguf")
    assert adapter.fields["general.type"].contents() == "adapter"
    assert adapter.fields["adapter.type"].contents() == "lora"
    assert {t.name.rsplit(".", 1)[1] for t in adapter.tensors} == {"lora_a", "lora_b"}


def test_ollama_vision_kinds_write_one_file_with_the_tower_inside(tmp_path: Path) -> None:
    kinds = {"ollama-mistral3-vision": "mistral3", "ollama-qwen3vl-vision": "qwen3vl", "ollama-llama4-vision": "llama4"}
    for kind, arch in kinds.items():
        assert _written(kind, tmp_path / kind) == [str(tmp_path / kind / "model.gguf")]
        reader = gguf.GGUFReader(tmp_path / kind / "model.gguf")
        assert reader.fields["general.architecture"].contents() == arch
        assert any(t.name.startswith("v.blk.") for t in reader.tensors)


def test_tower_models_write_llama_cpp_s_pair_and_ollama_s_one_file(tmp_path: Path) -> None:
    """DeepSeek-OCR, GLM-OCR and Nemotron Omni: the llama.cpp-layout twin as a text model and its
    projector, Ollama's layout as one file."""
    for kind, arch, ollama_kind in (
        ("deepseekocr", "deepseekocr", "ollama-deepseekocr"),
        ("glmocr", "glmocr", "ollama-glmocr"),
        ("nemotron", "nemotron_h_omni", "ollama-nemotron-omni"),
    ):
        pair = _written(f"vision-{kind}", tmp_path / kind)
        assert pair == [str(tmp_path / kind / "text.gguf"), str(tmp_path / kind / "mmproj.gguf")]
        (one,) = _written(ollama_kind, tmp_path / f"ollama-{kind}")
        assert gguf.GGUFReader(one).fields["general.architecture"].contents() == arch


def test_audio_writes_a_text_model_and_its_audio_projector(tmp_path: Path) -> None:
    assert _written("audio", tmp_path) == [str(tmp_path / "text.gguf"), str(tmp_path / "mmproj.gguf")]
    text, mmproj = gguf.GGUFReader(tmp_path / "text.gguf"), gguf.GGUFReader(tmp_path / "mmproj.gguf")
    assert mmproj.fields["clip.has_audio_encoder"].contents() is True
    assert mmproj.fields["clip.projector_type"].contents() == "qwen2a"
    assert mmproj.fields["clip.audio.projection_dim"].contents() == text.fields["qwen3.embedding_length"].contents()
    assert (tmp_path / "mmproj.gguf").stat().st_size < 200_000


def test_hf_kinds_write_a_checkpoint_folder_and_its_twin(tmp_path: Path) -> None:
    assert _written("hf-llama", tmp_path) == [str(tmp_path / "hf-llama"), str(tmp_path / "llama.gguf")]
    names = sorted(p.name for p in (tmp_path / "hf-llama").iterdir())
    assert names == ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    assert gguf.GGUFReader(tmp_path / "llama.gguf").fields["general.architecture"].contents() == "llama"
    lora = tmp_path / "lora"
    assert _written("hf-lora", lora) == [str(lora / p) for p in ("hf-lora", "base.gguf", "adapter.gguf")]
    assert sorted(p.name for p in (lora / "hf-lora").iterdir()) == ["adapter_config.json", "adapter_model.safetensors"]
    assert gguf.GGUFReader(lora / "adapter.gguf").fields["general.type"].contents() == "adapter"
