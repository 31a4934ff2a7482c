"""libmtmd through ``binding``: a tiny gemma3 with its tiny projector sees an image.

The reference for every media step is libmtmd's own ``mtmd_helper_eval_chunks`` (what
llama-server and ``mtmd-cli`` run): encoding and decoding an image chunk by chunk, with the text
runs decoded as the engine decodes tokens, must give the same logits.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from cllm_ollama.engine.binding import (
    Batch,
    Context,
    MediaItem,
    MediaPrompt,
    Model,
    Projector,
    TextRun,
    media_marker,
)
from cllm_ollama.engine.media import cell_keys, position_after
from cllm_ollama.engine.media_budget import PixelBudget
from cllm_ollama.errors import EngineError, MediaError, MediaTooLarge
from cllm_ollama.testing.ggufs import write_gemma3_projector, write_vision
from cllm_ollama.testing.images import bmp_claiming, png, png_claiming

pytestmark = pytest.mark.model

IMAGE_TOKENS = 4  # TINY_VISION: 32 px in 8 px patches, pooled 2x2


@pytest.fixture(scope="module")
def projector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Projector]:
    text, mmproj = write_vision(tmp_path_factory.mktemp("vision"))
    model = Model(text)
    proj = Projector(model, mmproj, n_threads=1)
    yield proj
    proj.close()
    model.close()


@pytest.fixture
def ctx(projector: Projector) -> Iterator[Context]:
    context = Context(projector.model, n_seq_max=2, n_ctx_seq=256, n_batch=64, n_threads=1)
    yield context
    context.close()


@pytest.fixture
def prompts(projector: Projector) -> Iterator[list[MediaPrompt]]:
    """Prompts a test tokenizes, freed after it."""
    made: list[MediaPrompt] = []
    yield made
    for prompt in made:
        prompt.close()


def tokenize(projector: Projector, made: list[MediaPrompt], text: str, images: list[bytes]) -> MediaPrompt:
    prompt = projector.tokenize(text, images)
    made.append(prompt)
    return prompt


def decode_stepwise(ctx: Context, prompt: MediaPrompt, seq_id: int, size: int | None = None) -> tuple[int, np.ndarray]:
    """What a batching engine does: text runs as token batches, each image encoded then decoded,
    ``size`` rows a call (None: whole; whole anyway where it must be): the last token's logits."""
    batch, pos = Batch(ctx.n_batch), 0
    logits = np.empty(0)
    for part in prompt.parts:
        if isinstance(part, MediaItem):
            embd, step = prompt.encode(part), part.n_tokens if part.whole or size is None else size
            for first in range(0, part.n_tokens, step):
                end = prompt.decode(ctx, part, embd, pos, seq_id, range(first, min(first + step, part.n_tokens)))
            pos = end
        else:
            batch.fill(part, range(pos, pos + len(part)), [seq_id] * len(part), [len(part) - 1])
            ctx.decode(batch)
            logits = ctx.logits(1)[0].copy()
            pos += len(part)
    return pos, logits


def greedy(ctx: Context, pos: int, logits: np.ndarray, seq_id: int, n: int) -> list[int]:
    batch, out = Batch(1), []
    for _ in range(n):
        token = int(logits.argmax())
        out.append(token)
        batch.fill([token], [pos], [seq_id], [0])
        ctx.decode(batch)
        logits = ctx.logits(1)[0].copy()
        pos += 1
    return out


def test_a_prompt_with_an_image_is_text_runs_around_one_media_item(projector: Projector, prompts: list) -> None:
    image = png(40, 24)
    prompt = tokenize(projector, prompts, f"hello {projector.marker} what is this?", [image])
    kinds = [type(p) for p in prompt.parts]
    assert kinds == [TextRun, MediaItem, TextRun]
    item = prompt.parts[1]
    assert isinstance(item, MediaItem)
    # The image's id is the hash of its bytes: the key prefix reuse will match images by.
    assert item.id == hashlib.sha256(image).hexdigest()
    assert (item.n_tokens, item.n_pos) == (IMAGE_TOKENS, IMAGE_TOKENS)  # gemma3: one position a token
    assert prompt.n_tokens == len(prompt.parts[0]) + IMAGE_TOKENS + len(prompt.parts[2]) == prompt.n_pos
    assert projector.vision and not projector.uses_mrope
    assert projector.non_causal(prompt, item)  # Gemma 3's image tokens see each other both ways
    # libmtmd wraps the image in the model's begin/end-of-image text itself.
    before, after = (b"".join(projector.model.piece(t) for t in run) for run in (prompt.parts[0], prompt.parts[2]))
    assert before.startswith(b"hello ") and before.endswith(b"<start_of_image>")
    assert after.startswith(b"<end_of_image>") and after.endswith(b" what is this?")


def test_two_images_keep_their_order_and_the_same_bytes_their_id(projector: Projector, prompts: list) -> None:
    a, b = png(32, 32, seed=1), png(32, 32, seed=2)
    m = projector.marker
    prompt = tokenize(projector, prompts, f"{m} and {m} and {m}", [a, b, a])
    ids = [p.id for p in prompt.parts if isinstance(p, MediaItem)]
    assert ids == [hashlib.sha256(x).hexdigest() for x in (a, b, a)]
    assert ids[0] == ids[2] != ids[1]


def test_stepwise_decode_equals_libmtmd_helper(projector: Projector, ctx: Context, prompts: list) -> None:
    prompt = tokenize(projector, prompts, f"Look: {projector.marker} What is in the picture?", [png(48, 40)])
    end = prompt.eval_all(ctx, 0, seq_id=1)
    reference = ctx.logits(1)[0].copy()
    pos, logits = decode_stepwise(ctx, prompt, seq_id=0)
    assert pos == end == prompt.n_pos
    assert np.isfinite(logits).all()
    np.testing.assert_array_equal(logits, reference)
    # And the continuations agree, token for token.
    assert greedy(ctx, pos, logits, 0, 8) == greedy(ctx, end, reference, 1, 8)


def test_the_image_changes_what_the_model_says(projector: Projector, ctx: Context, prompts: list) -> None:
    text = f"Describe {projector.marker} please."
    first = tokenize(projector, prompts, text, [png(32, 32, seed=3)])
    second = tokenize(projector, prompts, text, [png(32, 32, seed=4)])
    _, a = decode_stepwise(ctx, first, seq_id=0)
    _, b = decode_stepwise(ctx, second, seq_id=1)
    assert not np.array_equal(a, b)


def test_identical_inputs_give_identical_greedy_tokens(projector: Projector, ctx: Context, prompts: list) -> None:
    image = png(64, 64, seed=5)
    runs = []
    for seq_id in (0, 1):
        prompt = tokenize(projector, prompts, f"{projector.marker}\nWhat is this?", [image])
        pos, logits = decode_stepwise(ctx, prompt, seq_id)
        runs.append(greedy(ctx, pos, logits, seq_id, 12))
    assert runs[0] == runs[1]


def test_encoded_embeddings_are_the_projectors_width_and_repeatable(projector: Projector, prompts: list) -> None:
    prompt = tokenize(projector, prompts, f"{projector.marker}", [png(32, 32, seed=6)])
    (item,) = [p for p in prompt.parts if isinstance(p, MediaItem)]
    first = prompt.encode(item)
    assert first.shape == (IMAGE_TOKENS, projector.model.n_embd) and first.dtype == np.float32
    np.testing.assert_array_equal(prompt.encode(item), first)  # a copy, not libmtmd's reused buffer


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not an image at all", "unknown or unsupported image format"),
        (b"", "unknown or unsupported image format"),
        (png(8, 8)[:40], "could not be decoded"),  # a PNG header, cut short
        (b"\xff\xd8\xff\xe0" + b"\x00" * 64, "could not be decoded"),  # a JPEG start, no JPEG
        (b"RIFF\x00\x00\x00\x00WAVEfmt ", "unknown or unsupported image format"),  # audio is not an image
    ],
)
def test_bytes_that_are_no_image_raise_media_error(projector: Projector, data: bytes, message: str) -> None:
    with pytest.raises(MediaError) as caught:
        projector.tokenize(f"see {projector.marker}", [data])
    assert caught.value.status_code == 400 and caught.value.message == "Failed to load image or audio file"
    assert message in caught.value.detail


@pytest.fixture
def budget(projector: Projector) -> Iterator[PixelBudget]:
    """A decode budget of the projector's own for one test (as the pool's, 2**27 pixels)."""
    shared, projector.budget = projector.budget, PixelBudget(1 << 27)
    yield projector.budget
    projector.budget = shared


def test_a_bomb_header_is_refused_by_its_size_before_it_is_decoded(projector: Projector, budget: PixelBudget) -> None:
    with pytest.raises(MediaTooLarge) as caught:
        projector.tokenize(f"see {projector.marker}", [png_claiming(10_000, 10_000)])  # 300 MB decoded
    assert caught.value.status_code == 400
    assert caught.value.message.startswith("image 0 is 10000x10000: larger than 67108864 pixels")
    assert budget.peak == 0  # nothing was decoded


def test_the_largest_image_is_decoded_reduced_to_the_projectors_size(
    projector: Projector, prompts: list, budget: PixelBudget
) -> None:
    """A 54-byte BMP claiming 8192x8192 (201 MB decoded): decoded once, within the server's decode
    budget, and kept as the 32 px the projector uses; the same tokens as any other image."""
    assert projector.image_side == 32
    bomb = bmp_claiming(8192, 8192)
    prompt = tokenize(projector, prompts, f"see {projector.marker}", [bomb])
    (item,) = [p for p in prompt.parts if isinstance(p, MediaItem)]
    assert item.n_tokens == IMAGE_TOKENS and item.id == hashlib.sha256(bomb).hexdigest()
    assert budget.peak == 8192 * 8192 + 32 * 32 and budget.in_use == 0  # its decode, and the 32 px it keeps
    # Three of them are more than a request may have (two): refused before the first is decoded.
    with pytest.raises(MediaTooLarge, match="the request's images add up to 201326592 pixels"):
        projector.tokenize(projector.marker * 3, [bomb] * 3)


def test_requests_decoding_at_once_stay_within_the_servers_budget(projector: Projector, budget: PixelBudget) -> None:
    """Four requests of two bombs each, at once, on a budget of one bomb and its small copies:
    each request holds its whole peak before it decodes, so they take turns and none waits on
    another's part."""
    projector.budget = small = PixelBudget(8192 * 8192 + 2 * 32 * 32)
    bomb = bmp_claiming(8192, 8192)
    made: list[MediaPrompt] = []
    lock = threading.Lock()

    def run() -> None:
        prompt = projector.tokenize(projector.marker * 2, [bomb, bomb])
        with lock:
            made.append(prompt)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert len(made) == 4 and small.peak == small.limit and small.in_use == 0
    finally:
        for prompt in made:
            prompt.close()


def test_markers_and_images_must_agree(projector: Projector) -> None:
    with pytest.raises(EngineError, match="0 image markers for 1 images"):
        projector.tokenize("no marker here", [png(8, 8)])
    with pytest.raises(EngineError, match="2 image markers for 1 images"):
        projector.tokenize(f"{projector.marker}{projector.marker}", [png(8, 8)])


def test_the_default_marker_in_user_text_is_only_text(projector: Projector, prompts: list) -> None:
    """libmtmd's well-known marker typed by a user places no image: the projector's marker is its own."""
    assert media_marker() == "<__media__>" != projector.marker
    prompt = tokenize(projector, prompts, f"a {media_marker()} b {projector.marker}", [png(8, 8)])
    assert sum(isinstance(p, MediaItem) for p in prompt.parts) == 1


@pytest.fixture(scope="module")
def mrope(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Projector]:
    """A tiny Qwen2-VL: M-RoPE text model, ``qwen2vl_merger`` projector."""
    text, mmproj = write_vision(tmp_path_factory.mktemp("qwen2vl"), kind="qwen2vl")
    model = Model(text)
    proj = Projector(model, mmproj, n_threads=1)
    yield proj
    proj.close()
    model.close()


@pytest.mark.parametrize(("width", "height"), [(32, 32), (64, 32), (40, 24)])
def test_m_rope_images_take_fewer_positions_than_tokens(
    mrope: Projector, prompts: list, width: int, height: int
) -> None:
    """An M-RoPE image advances the position by ``max(rows, columns)`` of its token grid, not by
    its token count: a slot's next position is no longer its prompt length."""
    assert mrope.uses_mrope
    prompt = tokenize(mrope, prompts, f"hi {mrope.marker} what?", [png(width, height)])
    (item,) = [p for p in prompt.parts if isinstance(p, MediaItem)]
    assert item.n_pos < item.n_tokens
    assert not mrope.non_causal(prompt, item)
    text_tokens = prompt.n_tokens - item.n_tokens
    assert prompt.n_pos == text_tokens + item.n_pos
    # The engine's bookkeeping (engine/media.py) agrees with libmtmd's.
    assert len(cell_keys(prompt.parts)) == prompt.n_tokens
    assert position_after(prompt.parts, prompt.n_tokens) == prompt.n_pos
    ctx = Context(mrope.model, n_seq_max=2, n_ctx_seq=256, n_batch=64, n_threads=1)
    try:
        end = prompt.eval_all(ctx, 0, seq_id=1)
        reference = ctx.logits(1)[0].copy()
        pos, logits = decode_stepwise(ctx, prompt, seq_id=0)
        assert pos == end == prompt.n_pos
        np.testing.assert_array_equal(logits, reference)
        assert greedy(ctx, pos, logits, 0, 6) == greedy(ctx, end, reference, 1, 6)
    finally:
        ctx.close()


def test_a_non_causal_image_must_fit_one_micro_batch(projector: Projector, prompts: list) -> None:
    """Split over micro-batches, a Gemma 3 image's tokens would not all see each other: refused."""
    prompt = tokenize(projector, prompts, f"{projector.marker}", [png(32, 32)])
    (item,) = [p for p in prompt.parts if isinstance(p, MediaItem)]
    small = Context(projector.model, n_seq_max=1, n_ctx_seq=64, n_batch=IMAGE_TOKENS - 1, n_threads=1)
    try:
        with pytest.raises(EngineError, match="needs micro-batches"):
            prompt.decode(small, item, prompt.encode(item), 0, 0)
    finally:
        small.close()


def test_encoding_on_another_thread_while_the_engine_decodes_changes_nothing(
    projector: Projector, ctx: Context, prompts: list
) -> None:
    """The projector (its own ggml context and threads) encodes while llama.cpp decodes other
    sequences: both give exactly what they give alone. This is what lets the engine encode an
    image off its thread while running streams keep their pace."""
    prompt = tokenize(projector, prompts, f"{projector.marker} and text", [png(48, 48, seed=9)])
    (item,) = [p for p in prompt.parts if isinstance(p, MediaItem)]
    reference_embd = prompt.encode(item)
    tokens = projector.model.tokenize("The quick brown fox jumps over the lazy dog", add_special=False)
    batch = Batch(ctx.n_batch)
    batch.fill(tokens, range(len(tokens)), [0] * len(tokens), [len(tokens) - 1])
    ctx.decode(batch)
    reference_logits = ctx.logits(1)[0].copy()

    rounds = 40
    embeddings: list[np.ndarray] = []
    thread = threading.Thread(target=lambda: embeddings.extend(prompt.encode(item) for _ in range(rounds)))
    thread.start()
    logits = []
    for _ in range(rounds):
        ctx.seq_clear(0)
        ctx.decode(batch)
        logits.append(ctx.logits(1)[0].copy())
    thread.join()
    assert len(embeddings) == rounds
    assert all(np.array_equal(e, reference_embd) for e in embeddings)
    assert all(np.array_equal(row, reference_logits) for row in logits)


def test_a_projector_that_does_not_fit_the_model_is_an_error_not_a_crash(projector: Projector, tmp_path: Path) -> None:
    narrow = write_gemma3_projector(tmp_path / "narrow.gguf", n_embd_text=projector.model.n_embd // 2)
    for wrong in (narrow, projector.model.path):  # another model's width; a text model as projector
        with pytest.raises(EngineError, match="libmtmd could not load projector"):
            Projector(projector.model, wrong, n_threads=1)
