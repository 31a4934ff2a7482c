"""libmtmd's audio through ``binding``: a tiny qwen3 with a tiny ``qwen2a`` projector hears a WAV.

As for images (test_media_binding.py), libmtmd's own ``mtmd_helper_eval_chunks`` is the reference:
each audio chunk encoded and decoded by the engine's steps must give the same logits.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator

import numpy as np
import pytest
from test_media_binding import decode_stepwise, greedy, tokenize

from cllm_ollama.engine.audio import claimed_seconds
from cllm_ollama.engine.binding import MAX_AUDIO_SECONDS, Context, MediaItem, MediaPrompt, Model, Projector, TextRun
from cllm_ollama.engine.binding.media import _mtmd
from cllm_ollama.engine.media import cell_keys
from cllm_ollama.errors import MediaError, MediaTooLarge
from cllm_ollama.testing.audio import mp3, wav, wav_claiming
from cllm_ollama.testing.audio_ggufs import AUDIO_TOKENS, write_audio
from cllm_ollama.testing.images import png

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def projector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Projector]:
    text, mmproj = write_audio(tmp_path_factory.mktemp("audio"))
    model = Model(text)
    proj = Projector(model, mmproj, n_threads=1)
    yield proj
    proj.close()
    model.close()


@pytest.fixture
def ctx(projector: Projector) -> Iterator[Context]:
    context = Context(projector.model, n_seq_max=2, n_ctx_seq=2 * AUDIO_TOKENS + 256, n_batch=256, n_threads=1)
    yield context
    context.close()


@pytest.fixture
def prompts() -> Iterator[list[MediaPrompt]]:
    """Prompts a test tokenizes, freed after it."""
    made: list[MediaPrompt] = []
    yield made
    for prompt in made:
        prompt.close()


def test_a_clip_is_one_audio_chunk_between_the_projectors_markers(projector: Projector, prompts: list) -> None:
    clip = wav(1.0, seed=1)
    prompt = tokenize(projector, prompts, f"hear {projector.marker} what is said?", [clip])
    assert projector.audio and not projector.vision and projector.sample_rate == 16000
    assert [type(p) for p in prompt.parts] == [TextRun, MediaItem, TextRun]
    item = prompt.parts[1]
    assert isinstance(item, MediaItem) and item.kind == "audio"
    assert item.id == hashlib.sha256(clip).hexdigest()  # the key prefix reuse matches clips by
    assert (item.n_tokens, item.n_pos) == (AUDIO_TOKENS, AUDIO_TOKENS)  # one 30 s window, one position a token
    before, after = (b"".join(projector.model.piece(t) for t in run) for run in (prompt.parts[0], prompt.parts[2]))
    # Qwen2-Audio's begin/end-of-audio text, which libmtmd writes around the clip itself.
    assert before.endswith(b"<|audio_bos|>") and after.startswith(b"<|audio_eos|>")


def test_a_clip_longer_than_a_window_is_several_chunks_each_known_apart(projector: Projector, prompts: list) -> None:
    """31 s is two 30 s windows: two chunks libmtmd gives one id; each gets its own, the same next time."""
    clip = wav(31.0, seed=2)
    first = tokenize(projector, prompts, f"{projector.marker}.", [clip])
    items = [p for p in first.parts if isinstance(p, MediaItem)]
    assert len(items) == 2 and items[0].id == hashlib.sha256(clip).hexdigest() != items[1].id
    keys = cell_keys(first.parts)
    assert keys[len(first.parts[0])] != keys[len(first.parts[0]) + AUDIO_TOKENS]  # their cells differ
    again = tokenize(projector, prompts, f"Again: {projector.marker}.", [clip])
    assert [p.id for p in again.parts if isinstance(p, MediaItem)] == [i.id for i in items]
    assert not np.array_equal(first.encode(items[0]), first.encode(items[1]))


def test_stepwise_decode_equals_libmtmd_helper(projector: Projector, ctx: Context, prompts: list) -> None:
    prompt = tokenize(projector, prompts, f"Listen: {projector.marker} What was said?", [wav(1.0, seed=3)])
    end = prompt.eval_all(ctx, 0, seq_id=1)
    reference = ctx.logits(1)[0].copy()
    pos, logits = decode_stepwise(ctx, prompt, seq_id=0)
    assert pos == end == prompt.n_pos
    assert np.isfinite(logits).all()
    np.testing.assert_array_equal(logits, reference)
    assert greedy(ctx, pos, logits, 0, 8) == greedy(ctx, end, reference, 1, 8)


def test_the_clip_changes_what_the_model_says(projector: Projector, ctx: Context, prompts: list) -> None:
    text = f"Say {projector.marker} again."
    _, a = decode_stepwise(ctx, tokenize(projector, prompts, text, [wav(1.0, seed=4)]), seq_id=0)
    _, b = decode_stepwise(ctx, tokenize(projector, prompts, text, [wav(1.0, seed=5)]), seq_id=1)
    assert not np.array_equal(a, b)


def test_a_one_second_clip_encodes_in_well_under_a_second(projector: Projector, prompts: list) -> None:
    prompt = tokenize(projector, prompts, projector.marker, [wav(1.0, seed=6)])
    (item,) = [p for p in prompt.parts if isinstance(p, MediaItem)]
    t0 = time.perf_counter()
    embd = prompt.encode(item)
    elapsed = time.perf_counter() - t0
    assert embd.shape == (AUDIO_TOKENS, projector.model.n_embd) and np.isfinite(embd).all()
    assert elapsed < 0.5, f"{elapsed:.3f} s"


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        (wav(1.0)[:40], "audio 0: the audio could not be decoded"),  # no data chunk
        (b"RIFF\0\0\0\0WAVEfmt ", "audio 0: the audio could not be decoded"),
        (b"ID3\x04\0\0\0\0\0\0" + b"\0" * 32, "audio 0: the audio could not be decoded"),  # a tag, no frames
        (b"\xff\xfb\xf0\x00" + b"\0" * 32, "audio 0: the audio could not be decoded"),  # a bad bitrate
        (png(8, 8), "image 0: this model's projector takes audio, not images"),
        (b"not audio at all", "image 0: this model's projector takes audio, not images"),
    ],
)
def test_bytes_that_are_no_audio_raise_media_error(projector: Projector, data: bytes, detail: str) -> None:
    with pytest.raises(MediaError) as caught:
        projector.tokenize(f"hear {projector.marker}", [data])
    assert caught.value.status_code == 400 and caught.value.message == "Failed to load image or audio file"
    assert detail in caught.value.detail


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (wav_claiming(MAX_AUDIO_SECONDS + 1), f"seconds: more than {MAX_AUDIO_SECONDS} (CLLM_MAX_AUDIO_SECONDS)"),
        (mp3(26_000), "audio 0 lasts 1872 seconds: more than 1800"),  # 1.9 MB of 8 kbit/s frames
        # A claim miniaudio sizes its buffer by (wrapped to 32 bits: 59,298 s, 3.8 GB decoded, then refused).
        (mp3(1, xing=10**9), "audio 0 lasts 72000000 seconds: more than 1800"),
    ],
)
def test_audio_longer_than_the_limit_is_refused_before_decoding(
    projector: Projector, data: bytes, message: str
) -> None:
    with pytest.raises(MediaTooLarge) as caught:
        projector.tokenize(f"hear {projector.marker}", [data])
    assert caught.value.status_code == 400 and message in caught.value.message


def test_a_requests_clips_add_up_against_the_limit(projector: Projector) -> None:
    """Two clips of 1,000 s each: either alone would do, together they are past 1,800 s."""
    clip = wav_claiming(1000)
    with pytest.raises(MediaTooLarge, match="the request's audio lasts 2000 seconds: more than 1800"):
        projector.tokenize(f"{projector.marker}{projector.marker}", [clip, clip])


@pytest.mark.parametrize("data", [mp3(100), mp3(100, kbps=128, rate=44100, id3=64), mp3(40, xing=100)])
def test_an_mp3_decodes_to_no_more_than_its_headers_said(projector: Projector, prompts: list, data: bytes) -> None:
    """miniaudio decodes the synthetic frames (silence): as long as the walk said, or as the Xing
    header claimed (its buffer is sized by the claim, past the frames there)."""
    prompt = tokenize(projector, prompts, projector.marker, [data])
    (item,) = [p for p in prompt.parts if isinstance(p, MediaItem)]
    assert item.n_tokens > 0
    bitmap = projector._audio_bitmap(data, 0)
    try:
        decoded = _mtmd().mtmd_bitmap_get_nx(bitmap) / projector.sample_rate
    finally:
        _mtmd().mtmd_bitmap_free(bitmap)
    assert decoded == pytest.approx(claimed_seconds(data), rel=1e-3)


def test_audio_to_a_projector_that_does_not_hear_is_no_image(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The gemma3 projector sees only: a WAV is refused as the bytes of no image, never decoded."""
    from cllm_ollama.testing.ggufs import write_vision

    text, mmproj = write_vision(tmp_path_factory.mktemp("vision"))
    model = Model(text)
    try:
        proj = Projector(model, mmproj, n_threads=1)
        try:
            assert proj.vision and not proj.audio and proj.sample_rate == -1
            with pytest.raises(MediaError) as caught:
                proj.tokenize(proj.marker, [wav(0.5)])
            assert caught.value.detail == "image 0: unknown or unsupported image format"
        finally:
            proj.close()
    finally:
        model.close()
