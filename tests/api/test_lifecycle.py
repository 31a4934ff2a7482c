"""The lifecycle's hold on a model: a lease cancelled during a load gives the model back when it is
ready; a request refused before the engine takes it frees its tokenized images."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fakeengine import FakeEngine
from scripted import ScriptedModel, scripted_pool
from starlette.testclient import TestClient

from cllm_ollama.api import media
from cllm_ollama.api.lifecycle import lease
from cllm_ollama.api.media import b64decode_go
from cllm_ollama.api.options import resolve_options
from cllm_ollama.api.services import services
from cllm_ollama.engine.loaded import LoadSpec
from cllm_ollama.engine.pool import ModelPool
from cllm_ollama.engine.request import MediaInput, Part
from cllm_ollama.testing.images import png


class SlowModel(FakeEngine):
    n_ctx_train = 256

    def __init__(self, spec: LoadSpec) -> None:
        time.sleep(0.2)  # reading weights: a thread nobody can interrupt
        self.spec = spec


def test_a_lease_cancelled_during_the_load_gives_the_model_back_once_loaded() -> None:
    record = SimpleNamespace(
        model_path=Path("/m.gguf"), short_name="m:latest", digest="d", adapter_paths=(), projector_paths=()
    )
    model: Any = SimpleNamespace(record=record, info=SimpleNamespace(is_embedding=False), full_name="m")

    async def run() -> None:
        pool = ModelPool(
            defaults=LoadSpec(Path(), n_slots=1, n_ctx_slot=256, n_batch=64, n_threads=1),
            max_loaded=1,
            max_queue=1,
            default_keep_alive=300,
            loader=lambda spec, _: SlowModel(spec),
        )

        async def hold() -> None:
            async with lease(pool, model, resolve_options(None, None), None):
                raise AssertionError("cancelled before the model was held")

        task = asyncio.ensure_future(hold())
        await asyncio.sleep(0.05)
        task.cancel()  # the client left while its model loads
        await asyncio.gather(task, return_exceptions=True)
        assert task.cancelled()
        deadline = time.monotonic() + 5
        while not pool.running():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.01)
        (entry,) = pool.running()
        # Loaded, registered and given back.
        assert entry.refs == 0 and isinstance(entry.model, SlowModel) and not entry.model.closed
        await pool.close()

    asyncio.run(run())


@dataclass
class CountedMedia:
    """A tokenized prompt with an image: text tokens only, and how often it was freed."""

    parts: Sequence[Part] = ((5, 6, 7),)
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
class FullModel(ScriptedModel):
    """A model that sees, whose queue is full: every request is refused before the engine takes it."""

    media: list[CountedMedia] = field(default_factory=list)
    seen: list[Sequence[bytes]] = field(default_factory=list)  # what the projector was given

    @property
    def media_marker(self) -> str | None:
        return "<__media__>"

    def tokenize_media(self, text: str, images: Sequence[bytes], *, add_special: bool = True) -> MediaInput:
        self.seen.append(images)
        self.media.append(CountedMedia())
        return self.media[-1]

    def has_room(self) -> bool:
        return False


def test_a_request_refused_for_a_full_queue_frees_its_tokenized_images(seeing: TestClient) -> None:
    """The prompt tokenized with its images holds native memory until closed: a 503 frees it."""
    models: list[ScriptedModel] = []
    services(seeing.app).pool = scripted_pool([], models, make=FullModel)
    image = base64.b64encode(png(8, 8)).decode()
    body = {"model": "eyes", "prompt": "What is it?", "images": [image], "stream": False}
    r = seeing.post("/api/generate", json=body)
    assert r.status_code == 503, r.text
    (model,) = models
    assert isinstance(model, FullModel)
    assert [m.closed for m in model.media] == [1]


def test_an_image_is_decoded_once_and_its_bytes_go_to_the_projector(
    seeing: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the request is decoded, never again (it was decoded a second time on the event loop)."""
    decodes: list[str] = []

    def counted(text: str) -> bytes:
        decodes.append(text)
        return b64decode_go(text)

    monkeypatch.setattr(media, "b64decode_go", counted)
    models: list[ScriptedModel] = []
    services(seeing.app).pool = scripted_pool([], models, make=FullModel)
    data = png(8, 8)
    body = {
        "model": "eyes",
        "messages": [{"role": "user", "content": "What?", "images": [base64.b64encode(data).decode()]}],
    }
    assert seeing.post("/api/chat", json=body | {"stream": False}).status_code == 503
    (model,) = models
    assert isinstance(model, FullModel)
    assert [list(images) for images in model.seen] == [[data]] and len(decodes) == 1
