"""A prompt with images longer than its context: it grows the context as a text prompt does (nobody
set num_ctx); else, or where memory cannot hold the larger one, the oldest turns leave with their
images (Ollama's chatPrompt), the system prompt and the latest image stay, and the response says
so; if even the last turn with its images does not fit, Ollama's 400. Every prompt tokenized with
images and given up on the way is freed, once.

Over a scripted engine whose projector makes each image ``IMAGE_CELLS`` cells and each character
of text a token; the counting rules alone at the end."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from scripted import ScriptedModel, scripted_pool
from starlette.testclient import TestClient

from cllm_ollama.api.fitting import MediaCounter, media_counter
from cllm_ollama.api.media import place_markers
from cllm_ollama.api.services import services
from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.media import cell_keys, media_cells
from cllm_ollama.engine.request import Event, MediaInput, Part, Request
from cllm_ollama.errors import InsufficientMemory
from cllm_ollama.testing.images import png

IMAGE_CELLS = 100
MARKER = "<M>"


@dataclass(frozen=True)
class Item:
    """A media chunk as the projector makes one: its id the SHA-256 of its bytes (first chunk)."""

    id: str
    n_tokens: int
    n_pos: int
    whole: bool = False


@dataclass
class Tokenized:
    """A prompt tokenized with its images, and how often it was freed."""

    text: str
    parts: Sequence[Part]
    images: Sequence[bytes]
    closed: int = 0

    def encode(self, item: Any) -> Any:
        raise NotImplementedError

    def decode(self, ctx: Any, item: Any, embd: Any, pos: int, seq_id: int, rows: range | None = None) -> int:
        raise NotImplementedError

    def piece(self, item: Any, embd: Any, pos: int, rows: range) -> tuple[Any, Any]:
        raise NotImplementedError

    def close(self) -> None:
        self.closed += 1


@dataclass
class PictureModel(ScriptedModel):
    """A scripted model that sees: images of ``IMAGE_CELLS`` cells; generating frees the prompt as the engine does."""

    n_ctx_train: int = 1 << 16
    prompts: list[Tokenized] = field(default_factory=list)
    around: Callable[[bytes], int] = lambda image: 0  # text tokens the projector writes before an image

    @property
    def media_marker(self) -> str | None:
        return MARKER

    def tokenize_media(self, text: str, images: Sequence[bytes], *, add_special: bool = True) -> MediaInput:
        pieces = text.split(MARKER)
        assert len(pieces) == len(images) + 1
        parts: list[Part] = []
        for piece, image in zip(pieces, images, strict=False):
            parts += [tuple(self.tokenize(piece)), (3,) * self.around(image)]
            parts.append(Item(hashlib.sha256(image).hexdigest(), IMAGE_CELLS, IMAGE_CELLS))
        parts.append(tuple(self.tokenize(pieces[-1])))
        self.prompts.append(Tokenized(text, parts, images))
        return self.prompts[-1]

    async def generate(self, request: Request) -> AsyncGenerator[Event, None]:
        try:
            async for event in super().generate(request):
                yield event
        finally:
            if request.media is not None:
                request.media.close()


@dataclass
class FullPictureModel(PictureModel):
    """One whose queue is full: every request is refused (503) before the engine takes it."""

    def has_room(self) -> bool:
        return False


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


IMAGES = [png(8, 8, seed=i) for i in range(4)]


def conversation(turns: int, system: bool = True) -> list[dict[str, Any]]:
    """``turns`` picture turns (the user's image and question, the answer), then one more question
    with an image of its own: the latest."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You look at pictures."}] if system else []
    for i in range(turns):
        messages.append({"role": "user", "content": f"What is in picture {i}?", "images": [b64(IMAGES[i])]})
        messages.append({"role": "assistant", "content": f"Picture {i} shows a small square of noise."})
    messages.append({"role": "user", "content": "And this one?", "images": [b64(IMAGES[turns])]})
    return messages


def serve(
    client: TestClient,
    memory: int = 1 << 20,
    around: Callable[[bytes], int] = lambda image: 0,
    kind: type[PictureModel] = PictureModel,
) -> tuple[list[PictureModel], list[int]]:
    """The app's pool made of ``PictureModel``s (all loaded, and their contexts), contexts growing
    to 4,096 as the server's default lets them; a context larger than ``memory`` is refused by
    the load, as a machine without room refuses it."""
    shared = services(client.app)
    shared.settings = replace(shared.settings, context_grow=4096)
    models: list[PictureModel] = []
    loads: list[int] = []

    def make(spec: LoadSpec, script: list[str | BaseException]) -> ScriptedModel:
        loads.append(spec.n_ctx_slot)
        if spec.n_ctx_slot > memory:
            raise InsufficientMemory("model requires more system memory (9.0 GiB) than is available (1.0 GiB)")
        models.append(kind(spec, script, n_ctx_slot=spec.n_ctx_slot, around=around))
        return models[-1]

    shared.pool = scripted_pool(["ok"], make=make)
    return models, loads


def chat(client: TestClient, messages: list[dict[str, Any]], **options: Any) -> Any:
    body = {"model": "eyes", "messages": messages, "stream": False, "options": {"num_predict": 2, **options}}
    return client.post("/api/chat", json=body)


def freed_once(models: list[PictureModel]) -> bool:
    return all(p.closed == 1 for m in models for p in m.prompts)


def test_an_image_prompt_longer_than_the_context_grows_it(seeing: TestClient) -> None:
    """Open WebUI's first picture message: no num_ctx, an image and a long preamble."""
    models, loads = serve(seeing)
    r = chat(seeing, [{"role": "user", "content": "tools " * 40, "images": [b64(IMAGES[0])]}])
    assert r.status_code == 200, r.text
    assert loads == [256, 2048] and "truncated_prompt_tokens" not in r.json()
    assert [len(m.prompts) for m in models] == [1, 1] and freed_once(models)  # tokenized once at each size


def test_where_the_grown_context_does_not_fit_the_oldest_turns_go_instead(seeing: TestClient) -> None:
    models, loads = serve(seeing, memory=256)
    r = chat(seeing, conversation(2))
    assert r.status_code == 200, r.text
    assert loads == [256, 2048, 256] and r.json()["truncated_prompt_tokens"] > 0
    assert list(models[-1].prompts[-1].images) == [IMAGES[2]] and freed_once(models)


def test_over_num_ctx_the_oldest_turns_leave_with_their_images(seeing: TestClient) -> None:
    """The system prompt and the latest turn stay, with its image; the cut is reported."""
    models, loads = serve(seeing)
    r = chat(seeing, conversation(3), num_ctx=512)
    assert r.status_code == 200, r.text
    (model,) = models
    assert loads == [512]  # num_ctx set: never grown
    whole, *_, sent = model.prompts
    assert list(whole.images) == IMAGES
    assert IMAGES[0] not in sent.images and list(sent.images) == IMAGES[4 - len(sent.images) :]
    assert "picture 0" not in sent.text and "You look at pictures." in sent.text
    n_sent, n_whole = len(cell_keys(sent.parts)), len(cell_keys(whole.parts))
    assert n_sent < 512 and r.json()["truncated_prompt_tokens"] == n_whole - n_sent
    assert len(model.prompts) == 2 and freed_once(models)  # counted right: tokenized whole, then fitted


def test_where_the_count_falls_short_the_fitted_prompt_loses_another_turn(seeing: TestClient) -> None:
    """A projector writing text around each image that the calibration cannot foresee (more
    around the later ones than on average): the fitted prompt is over, tokenized again shorter."""
    models, _ = serve(seeing, around=lambda image: 200 if image == IMAGES[3] else 0)
    r = chat(seeing, conversation(3), num_ctx=600)
    assert r.status_code == 200, r.text
    (model,) = models
    sent = model.prompts[-1]
    assert len(model.prompts) > 2 and list(sent.images)[-1] == IMAGES[3] and freed_once(models)
    assert len(cell_keys(sent.parts)) < 600


def test_when_even_the_last_turn_and_its_image_do_not_fit_it_is_refused(seeing: TestClient) -> None:
    models, _ = serve(seeing)
    r = chat(seeing, conversation(2), num_ctx=128)
    assert r.status_code == 400
    assert r.json()["error"].startswith("the prompt is longer than the context length")
    assert freed_once(models)


def test_a_fitted_prompt_refused_for_a_full_queue_is_freed_with_the_whole_one(seeing: TestClient) -> None:
    models, _ = serve(seeing, kind=FullPictureModel)
    assert chat(seeing, conversation(3), num_ctx=512).status_code == 503
    (model,) = models
    assert len(model.prompts) == 2 and freed_once(models)


def test_truncate_false_refuses_instead_of_dropping_turns(seeing: TestClient) -> None:
    models, _ = serve(seeing)
    body = {"model": "eyes", "messages": conversation(3), "stream": False, "truncate": False}
    r = seeing.post("/api/chat", json=body | {"options": {"num_ctx": 512}})
    assert r.status_code == 400 and freed_once(models) and len(models[0].prompts) == 1


@dataclass
class Chars:
    """A tokenizer of one token per character, BOS (0) in front where asked."""

    bos_text: str = ""
    eos_text: str = ""

    def tokenize(self, text: str, *, add_special: bool = True) -> list[int]:
        return [0] * add_special + [ord(c) for c in text]

    def fim_tokens(self) -> tuple[int, int, int] | None:
        return None


def test_a_tag_counts_its_images_cells_and_the_text_between_is_tokenized_piece_by_piece() -> None:
    counter = MediaCounter(Chars(), [10, 20])
    assert len(counter.tokenize("ab[img-1]cd[img-0]")) == 1 + 2 + 20 + 2 + 10
    assert len(counter.tokenize("[img-0]x", add_special=False)) == 10 + 1
    # Not an item's tag (no item 2, a leading zero), or an item's second tag: text.
    assert len(counter.tokenize("[img-2][img-01]", add_special=False)) == 15
    assert len(counter.tokenize("[img-0][img-0]", add_special=False)) == 10 + 7
    assert counter.dropped("[img-0] a [img-1] b", "[img-1] b") == [0]


def test_the_count_is_calibrated_to_what_the_projector_made() -> None:
    """libmtmd writes text around an image (Gemma 3's begin and end of image) that no tag shows."""
    parts: list[Part] = [(1, 2), (9,), Item(hashlib.sha256(b"a").hexdigest(), 10, 10), (9,), (3,)]
    counter = media_counter(Chars(), "ab[img-0]c", parts, [b"a"], [0])
    assert counter.cells == [11] and len(counter.tokenize("ab[img-0]c")) == 15


def test_each_items_cells_are_its_chunks_and_the_text_between_them() -> None:
    """A sliced image's tiles and the text between them are its own; the same bytes twice are two items."""
    a, b = hashlib.sha256(b"a").hexdigest(), hashlib.sha256(b"b").hexdigest()
    tiles: list[Part] = [Item(a, 5, 5), (7, 7), Item(hashlib.sha256(b"a/1").hexdigest(), 5, 5)]
    parts: list[Part] = [(1,), *tiles, (2, 2, 2), Item(b, 3, 3), Item(a, 4, 4), (3,)]
    assert media_cells(parts, [b"a", b"b", b"a"]) == [12, 3, 4]
    assert media_cells([(1,), (2,)], []) == []


@pytest.mark.parametrize("n_items", [1, 3])
def test_a_stand_in_chunk_counts_toward_the_first_item(n_items: int) -> None:
    assert media_cells([Item("x", 4, 4), (1,), Item("y", 2, 2)], [b"z"] * n_items)[0] == 4 + 1 + 2


def test_an_item_left_out_with_its_turn_is_not_placed_first() -> None:
    """Untagged items go first (a template that drops tags); one whose turn was dropped goes nowhere."""
    assert place_markers("[img-1] x", 3, "<M>", dropped=[0]) == ("<M><M> x", [2, 1])
    assert place_markers("[img-1] x", 2, "<M>") == ("<M><M> x", [0, 1])
