"""bench/vision_itl.py's parts, without measuring anything: the models it writes make a 256-token
image (M-RoPE, decoded in pieces) and a 750-token audio window, and it counts a stream's gaps as
"during a prefill" by when they end."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import vision_itl

from cllm_ollama.engine.binding import Context, MediaItem, Model, Projector
from cllm_ollama.testing.audio_ggufs import AUDIO_TOKENS
from cllm_ollama.testing.core_ggufs import write_qwen3
from cllm_ollama.testing.gguf_base import Shape


def test_gaps_count_as_during_a_prefill_when_they_overlap_it() -> None:
    times = [0.0, 0.010, 0.020, 0.120, 0.130]
    assert vision_itl.all_gaps(times) == pytest.approx([10, 10, 100, 10])
    assert vision_itl.gaps_during(times, [(0.015, 0.125)]) == pytest.approx([10, 100, 10])
    # A stall spanning the whole window counts (one that merely ended in it would be missed).
    assert vision_itl.gaps_during(times, [(0.030, 0.110)]) == pytest.approx([100])
    assert vision_itl.gaps_during(times, []) == []


SMALL = vision_itl.shapes(argparse.Namespace(layers=1, width=64))


def heard(text: Path, mmproj: Path, kind: str) -> tuple[MediaItem, bool]:
    """A prompt with one of the bench's media through ``text`` and ``mmproj``, evaluated whole by
    libmtmd's helper (finite logits at the position after it): its media item, and whether the
    projector positions it by M-RoPE."""
    model = Model(text)
    projector = Projector(model, mmproj, n_threads=1)
    try:
        prompt = projector.tokenize(f"Look: {projector.marker} What is it?", [vision_itl.medium(kind, 1)])
        ctx = Context(model, n_seq_max=1, n_ctx_seq=1024, n_batch=256, n_threads=1)
        try:
            (item,) = [p for p in prompt.parts if isinstance(p, MediaItem)]
            assert prompt.eval_all(ctx, 0, 0) == prompt.n_pos and np.isfinite(ctx.logits(1)).all()
            return item, projector.uses_mrope
        finally:
            ctx.close()
            prompt.close()
    finally:
        projector.close()
        model.close()


@pytest.mark.model
@pytest.mark.parametrize(("kind", "tokens"), [("image", 256), ("audio", AUDIO_TOKENS)])
def test_the_bench_models_make_the_media_the_issue_is_about(kind: str, tokens: int, tmp_path: Path) -> None:
    item, mrope = heard(*vision_itl.write_models(kind, tmp_path, SMALL), kind)
    assert item.n_tokens == tokens and not item.whole and item.kind == kind
    assert mrope == (kind == "image")


@pytest.mark.model
def test_a_text_model_of_ones_own_hears_through_a_projector_as_wide(tmp_path: Path) -> None:
    """``--text-model``: a GGUF wider than the bench's own (here a 96-wide tiny Qwen3) takes a
    projector of its width, and a clip's window decodes into it; an image needs Qwen2-VL's M-RoPE."""
    text = write_qwen3(tmp_path / "own.gguf", shape=Shape(n_embd=96, n_head=6, n_head_kv=2))
    same, mmproj = vision_itl.write_models("audio", tmp_path, SMALL, text)
    assert same == text
    item, _ = heard(text, mmproj, "audio")
    assert item.n_tokens == AUDIO_TOKENS
    with pytest.raises(SystemExit, match="audio only"):
        vision_itl.write_models("image", tmp_path / "image", SMALL, text)
