"""A projector whose audio aborts libmtmd (Ultravox's own stacking, in this llama.cpp) is caught by
the load's probe: the model loads, its audio is refused, and the server process lives."""

from __future__ import annotations

from pathlib import Path

import pytest

from cllm_ollama.engine import probe as probe_module
from cllm_ollama.testing.audio_ggufs import write_audio, write_ultravox_projector

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("probe-audio")
    text, qwen2a = write_audio(folder)
    return {
        "text": text,
        "qwen2a": qwen2a,
        "ultravox-8": write_ultravox_projector(folder / "ultravox-8.gguf", stack_factor=8),
        "ultravox-4": write_ultravox_projector(folder / "ultravox-4.gguf", stack_factor=4),
    }


def test_an_aborting_audio_encoder_is_refused_not_the_model(models: dict[str, Path]) -> None:
    refused = probe_module.probe(models["text"], n_gpu_layers=0, embedding_only=False, projector=models["ultravox-8"])
    assert refused is not None
    assert "cannot encode this model's audio" in refused and "SIGABRT" in refused
    assert "Invalid number of output tokens" in refused
    assert str(models["text"].parent) not in refused  # no server paths


@pytest.mark.parametrize("name", ["qwen2a", "ultravox-4"])
def test_audio_encoders_that_run_pass(models: dict[str, Path], name: str) -> None:
    assert probe_module.probe(models["text"], n_gpu_layers=0, embedding_only=False, projector=models[name]) is None
