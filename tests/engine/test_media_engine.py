"""Images in the real engine (libmtmd, the tiny vision models): an image's KV saved to the host cache
and restored answers exactly as a cold run, at the right positions (M-RoPE too)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from oracle import GREEDY, OTHER, drain, submit, tokens_of
from polling import until

from cllm_ollama.engine.binding import MediaPrompt, Model, Projector
from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.loaded import LoadedModel
from cllm_ollama.engine.media import cell_keys
from cllm_ollama.engine.request import Event, FinishReason, Request
from cllm_ollama.engine.runner import Runner
from cllm_ollama.testing.ggufs import TINY, VisionShape, write_gemma3, write_gemma3_projector, write_vision
from cllm_ollama.testing.images import png

pytestmark = pytest.mark.model

FIRST = "Look at this picture, carefully, and then answer the questions that follow it: {m}\nQ: What is it?\nA:"
# A projector whose encode takes a while on a CPU (1024 patches, 64 image tokens): long enough to leave during.
SLOW_VIT = VisionShape(image_size=448, patch_size=14, n_embd=256, n_head=4, n_ff=1024, merge=4)
FOLLOW_UP = "\nQ: And its colour?\nA:"


class Continued:
    """A tokenized prompt with images, continued by text tokens (a next turn after the answer): the
    way a chat's next prompt starts with the last one's cells exactly, as a sliding window needs."""

    def __init__(self, media: MediaPrompt, more: list[int]) -> None:
        self.media = media
        self.parts = (*media.parts, tuple(more))

    def encode(self, item: Any) -> Any:
        return self.media.encode(item)

    def decode(self, ctx: Any, item: Any, embd: Any, pos: int, seq_id: int, rows: range | None = None) -> int:
        return self.media.decode(ctx, item, embd, pos, seq_id, rows)

    def close(self) -> None:
        self.media.close()


@pytest.fixture(params=["gemma3", "qwen2vl"], scope="module")
def seeing(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Model, Projector]]:
    text, mmproj = write_vision(tmp_path_factory.mktemp(request.param), kind=request.param)
    model = Model(text)
    projector = Projector(model, mmproj, n_threads=2)
    yield model, projector
    projector.close()
    model.close()


def ask(
    runner: Runner, projector: Projector, picture: bytes, answer: list[int] | None = None
) -> tuple[list[int], Request]:
    """The first turn, or (with the first turn's ``answer``) the second."""
    media: Any = projector.tokenize(FIRST.format(m=projector.marker), [picture])
    if answer is not None:
        media = Continued(media, answer + projector.model.tokenize(FOLLOW_UP, add_special=False))
    request = Request(cell_keys(media.parts), GREEDY, num_predict=8, media=media)
    events = drain(submit(runner, request))
    assert events[-1].error is None, events[-1].error
    return tokens_of(events), request


def cold_ask(spec: LoadSpec, projector: Projector, picture: bytes, answer: list[int]) -> list[int]:
    """The second turn on a runner of its own, nothing cached: the cold reference."""
    runner = Runner(projector.model, spec)
    try:
        tokens, _ = ask(runner, projector, picture, answer)
        assert runner.scheduler.stats.cached == 0
    finally:
        runner.close()
    return tokens


def test_an_image_restored_from_the_host_cache_answers_as_a_cold_run(seeing: tuple[Model, Projector]) -> None:
    model, projector = seeing
    spec = LoadSpec(
        model.path, n_slots=1, n_ctx_slot=256, n_batch=64, n_threads=2, projector=projector.path, cache_min_tokens=16
    )
    picture = png(32, 32, seed=4)
    warm_runner = Runner(model, replace(spec, cache_bytes=64 << 20))
    try:
        answer, _ = ask(warm_runner, projector, picture)
        # An unrelated request takes the only slot: the conversation goes to the host cache.
        drain(submit(warm_runner, Request(tuple(model.tokenize(OTHER)), GREEDY, num_predict=4)))
        warm, request = ask(warm_runner, projector, picture, answer)
        stats = warm_runner.scheduler.stats
        assert stats.restored > 4  # the first turn, its image's cells included
    finally:
        warm_runner.close()
    cold = cold_ask(spec, projector, picture, answer)  # no host cache, a fresh context
    assert warm == cold
    assert min(request.prompt) < 0  # the prompt did hold an image


def test_a_request_that_leaves_while_its_image_encodes_frees_its_slot_and_prompt(tmp_path: Path) -> None:
    """The encode goes on (it cannot be stopped) but the prompt is freed once it ends, the slot at
    once, and the engine answers the next image request."""
    text = write_gemma3(tmp_path / "text.gguf")
    mmproj = write_gemma3_projector(tmp_path / "mmproj.gguf", n_embd_text=TINY.n_embd, shape=SLOW_VIT)
    loaded = LoadedModel(LoadSpec(text, n_slots=2, n_ctx_slot=256, n_threads=2, projector=mmproj), max_queue=4)
    runner, marker = loaded.runner, loaded.media_marker
    assert runner is not None and runner.feed.encoder is not None and marker is not None

    def image_request(seed: int) -> Request:
        media = loaded.tokenize_media(f"See {marker} now.", [png(448, 448, seed=seed)])
        return Request(cell_keys(media.parts), GREEDY, num_predict=2, media=media)

    async def leave_mid_encode() -> MediaPrompt:
        request = image_request(1)
        task = asyncio.ensure_future(anext(aiter(loaded.generate(request))))
        await asyncio.to_thread(until, lambda: runner.feed.encoder._running is request.media)  # type: ignore[union-attr]
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return request.media  # type: ignore[return-value]

    async def answer() -> list[Event]:
        return [event async for event in loaded.generate(image_request(2))]

    try:
        media = asyncio.run(leave_mid_encode())
        until(lambda: media._ptr is None and loaded.occupancy().running == 0)
        events = asyncio.run(answer())
        assert events[-1].finish is FinishReason.LENGTH and events[-1].stats.prompt_tokens > 64  # type: ignore[union-attr]
    finally:
        loaded.close()
