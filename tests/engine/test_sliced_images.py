"""Images a projector slices (Idefics3's tiles, text between them, and an overview): each tile is
a media item of its own, known by the image's bytes and its place, so that the engine decodes
each tile's own embeddings, batched and re-sent answers equal cold single runs, and a re-sent
image matches its earlier cells exactly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import test_media_binding
from oracle import GREEDY, drain, submit, tokens_of
from test_media_binding import decode_stepwise, greedy
from test_media_engine import ask, cold_ask

from cllm_ollama.engine.binding import Context, MediaItem, MediaPrompt, Model, Projector, TextRun
from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.media import cell_keys, media_key
from cllm_ollama.engine.request import Request
from cllm_ollama.engine.runner import Runner
from cllm_ollama.testing.images import png
from cllm_ollama.testing.sliced_ggufs import write_sliced_vision
from cllm_ollama.testing.vision_ggufs import write_llama4_vision

pytestmark = pytest.mark.model

N_PREDICT = 8
QUESTION = "Here is a picture: {m}\nQ: What is in it?\nA:"
prompts = test_media_binding.prompts  # a fixture: prompts a test tokenizes, freed after it


WRITERS = {"idefics3": write_sliced_vision, "llama4": write_llama4_vision}


def _loaded(kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Projector]:
    text, mmproj = WRITERS[kind](tmp_path_factory.mktemp(kind))
    model = Model(text)
    proj = Projector(model, mmproj, n_threads=2)
    yield proj
    proj.close()
    model.close()


@pytest.fixture(scope="module", params=list(WRITERS))
def slicing(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Projector]:
    """A projector that slices an image larger than its 32 px tile: Idefics3's tiles have text
    between them, Llama 4's follow each other."""
    yield from _loaded(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def projector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Projector]:
    """Idefics3's, whose tiles have text between them."""
    yield from _loaded("idefics3", tmp_path_factory)


def items(prompt: MediaPrompt) -> list[MediaItem]:
    return [p for p in prompt.parts if isinstance(p, MediaItem)]


def spec(projector: Projector, n_slots: int, **kw: Any) -> LoadSpec:
    return LoadSpec(
        projector.model.path, n_slots=n_slots, n_ctx_slot=256, n_batch=64, n_threads=2, projector=projector.path, **kw
    )


def cold(projector: Projector, text: str, images: list[bytes]) -> list[int]:
    """Greedy tokens of a fresh context fed the whole prompt in order, each tile whole (ids unused):
    libmtmd's own helper's way, each tile as cllm encodes it (Llama 4's tokens put back row by row,
    where the helper leaves them column by column: ``tile_order``)."""
    prompt = projector.tokenize(text, images)
    ctx = Context(projector.model, n_seq_max=1, n_ctx_seq=256, n_batch=64, n_threads=2)
    try:
        pos, logits = decode_stepwise(ctx, prompt, 0)
        return greedy(ctx, pos, logits, 0, N_PREDICT)
    finally:
        ctx.close()
        prompt.close()


def test_each_tile_has_its_own_id_the_same_wherever_the_image_is(projector: Projector, prompts: list) -> None:
    big, other = png(64, 64, seed=1), png(64, 48, seed=2)
    prompt = projector.tokenize(f"look {projector.marker} ok", [big])
    prompts.append(prompt)
    tiles = items(prompt)
    assert len(tiles) == 5  # 2 x 2 tiles and the overview
    kinds = [type(p) for p in prompt.parts]
    assert kinds == [TextRun, MediaItem] * 5 + [TextRun]  # text between every two (the case this is about)
    ids = [t.id for t in tiles]
    assert ids[0] == hashlib.sha256(big).hexdigest() and len(set(ids)) == 5
    assert len({media_key(t) for t in tiles} & set(cell_keys(prompt.parts))) == 5  # their KV cells told apart
    # Elsewhere in a prompt, after another image, the same ids; the same bytes twice, the same ids twice.
    again = projector.tokenize(f"{projector.marker} then {projector.marker}, and {projector.marker}", [other, big, big])
    prompts.append(again)
    got = [t.id for t in items(again)]
    assert got[5:] == ids + ids and not set(got[:5]) & set(ids) and len(set(got[:5])) == 5


def test_the_engine_decodes_each_tile_s_own_embeddings(slicing: Projector, prompts: list) -> None:
    """Tiles encoded off the engine thread and kept by id: each tile decodes its own embeddings,
    not the first tile's (what one id for all tiles did)."""
    projector = slicing

    @dataclass
    class Recorded:
        media: MediaPrompt
        decoded: dict[int, np.ndarray] = field(default_factory=dict)

        @property
        def parts(self) -> Any:
            return self.media.parts

        def encode(self, item: MediaItem) -> np.ndarray:
            return self.media.encode(item)

        def decode(
            self, ctx: Any, item: MediaItem, embd: np.ndarray, pos: int, seq_id: int, rows: range | None = None
        ) -> int:
            self.decoded[item.index] = np.array(embd)
            return self.media.decode(ctx, item, embd, pos, seq_id, rows)

        def close(self) -> None:
            self.media.close()

    picture = png(64, 64, seed=3)
    text = QUESTION.format(m=projector.marker)
    recorded = Recorded(projector.tokenize(text, [picture]))
    runner = Runner(projector.model, spec(projector, 1))
    try:
        events = drain(
            submit(runner, Request(cell_keys(recorded.parts), GREEDY, num_predict=N_PREDICT, media=recorded))
        )
    finally:
        runner.close()
    assert events[-1].error is None, events[-1].error
    reference = projector.tokenize(text, [picture])
    prompts.append(reference)
    tiles = items(reference)
    assert sorted(recorded.decoded) == [t.index for t in tiles]
    for tile in tiles:
        np.testing.assert_array_equal(recorded.decoded[tile.index], reference.encode(tile))
    first = recorded.decoded[tiles[0].index]
    assert not all(np.array_equal(recorded.decoded[t.index], first) for t in tiles[1:])
    assert tokens_of(events) == cold(projector, text, [picture])


def test_batched_sliced_images_answer_as_cold_single_runs(slicing: Projector) -> None:
    projector = slicing
    pictures = [png(64, 64, seed=4), png(96, 40, seed=5), png(64, 64, seed=4)]  # the first one twice
    texts = [QUESTION.format(m=projector.marker), f"{projector.marker} Describe it.", "Again: " + projector.marker]
    runner = Runner(projector.model, spec(projector, 3))
    try:
        sinks = []
        for text, picture in zip(texts, pictures, strict=True):
            media = projector.tokenize(text, [picture])
            sinks.append(submit(runner, Request(cell_keys(media.parts), GREEDY, num_predict=N_PREDICT, media=media)))
        answers = []
        for sink in sinks:
            events = drain(sink)
            assert events[-1].error is None, events[-1].error
            answers.append(tokens_of(events))
    finally:
        runner.close()
    assert answers == [cold(projector, text, [picture]) for text, picture in zip(texts, pictures, strict=True)]


def test_a_resent_sliced_image_reuses_its_cells_and_answers_as_a_cold_run(slicing: Projector, prompts: list) -> None:
    projector, picture = slicing, png(96, 40, seed=6)
    # The next turn computes the first one's answer inside a chunk cold and one token a step warm:
    # only the deterministic mode makes those round alike (a tiny random model's near-ties flip).
    exact = spec(projector, 1, deterministic=True)
    warm_runner = Runner(projector.model, exact)
    try:
        answer, first = ask(warm_runner, projector, picture)
        warm, request = ask(warm_runner, projector, picture, answer)
        cached = warm_runner.scheduler.stats.cached
    finally:
        warm_runner.close()
    assert cached >= len(first.prompt)  # the whole first turn, every tile, from the slot's KV
    assert warm == cold_ask(exact, projector, picture, answer)
    prompts.append(alone := projector.tokenize(projector.marker, [picture]))
    tiles = items(alone)
    assert len(tiles) > 2 and len({k for k in request.prompt if k < 0}) == len(tiles)  # each tile its own key
