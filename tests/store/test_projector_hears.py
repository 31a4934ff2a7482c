"""A projector with an audio encoder gives its model the ``audio`` capability (Ollama's
``projectorHasAudio``); one that only sees does not."""

from __future__ import annotations

from pathlib import Path

from cllm_ollama.store.gguf_info import gguf_info, projector_hears
from cllm_ollama.testing.audio_ggufs import write_qwen2a_projector
from cllm_ollama.testing.ggufs import write_gemma3_projector


def test_an_audio_projector_hears_and_a_vision_one_does_not(tmp_path: Path) -> None:
    audio = write_qwen2a_projector(tmp_path / "audio.gguf")
    assert projector_hears(audio)
    info = gguf_info(audio).model_info
    assert info["clip.has_audio_encoder"] is True and info["clip.projector_type"] == "qwen2a"
    assert not projector_hears(write_gemma3_projector(tmp_path / "vision.gguf"))
    assert not projector_hears(tmp_path / "missing.gguf")
