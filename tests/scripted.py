"""An engine that plays a script instead of running weights: exact outputs (tool calls, thinking)
through every layer above the engine, for tests that need them from a model too small to say them."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import gguf
from fakeengine import FakeEngine
from serving import serve_in_thread
from starlette.types import ASGIApp

from cllm_ollama.api.services import services
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.engine.frontdoor import Occupancy
from cllm_ollama.engine.loaded import LoadSpec
from cllm_ollama.engine.pool import ModelPool
from cllm_ollama.engine.request import Event, FinishReason, Request, Stats
from cllm_ollama.store.create import import_gguf
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_qwen3


@dataclass
class ScriptedModel(FakeEngine):
    """A loaded model without weights: ``generate`` emits ``script``'s texts, raising its exceptions."""

    spec: LoadSpec
    script: list[str | BaseException]
    n_ctx_slot: int = 256  # type: ignore[assignment]
    n_ctx_train: int = 256
    running: set[int] = field(default_factory=set)
    finish: FinishReason = FinishReason.STOP  # how every generation ends once the script is played
    recorded: list[Request] | None = None  # where each request is recorded, if anywhere

    def occupancy(self) -> Occupancy:
        return Occupancy(running=len(self.running), waiting=0, cells_used=0, cells_total=self.n_ctx_slot * self.n_slots)

    async def generate(self, request: Request) -> AsyncGenerator[Event, None]:
        self.running.add(request.id)
        if self.recorded is not None:
            self.recorded.append(request)
        try:
            for step in self.script:
                if isinstance(step, BaseException):
                    raise step
                yield Event(request.id, step, (7,))
            stats = Stats(len(request.prompt), 0, 1, len(self.script), 1)
            yield Event(request.id, "", (), self.finish, stats)
        finally:
            self.running.discard(request.id)


def scripted_pool(
    script: list[str | BaseException],
    models: list[ScriptedModel] | None = None,
    make: Callable[[LoadSpec, list[str | BaseException]], ScriptedModel] = ScriptedModel,
) -> ModelPool:
    """A pool whose every model (``make(spec, script)``) plays ``script`` (appended to by the test as it goes)."""
    loaded = models if models is not None else []

    def load(spec: LoadSpec, max_queue: int) -> ScriptedModel:
        loaded.append(make(spec, script))
        return loaded[-1]

    return ModelPool(
        defaults=LoadSpec(Path(), n_slots=2, n_ctx_slot=256, n_batch=64, n_threads=1),
        max_loaded=1,
        max_queue=4,
        default_keep_alive=300,
        loader=load,
    )


@contextmanager
def scripted_server(
    root: Path,
    model: str = "tiny",
    *,
    chat_template: str | None = None,
    n_ctx: int = 256,
    seen: list[Request] | None = None,
) -> Iterator[tuple[str, list[str | BaseException]]]:
    """A live server (real sockets) with the tiny qwen3 installed as ``model`` (carrying
    ``chat_template`` where given), whose engine plays the yielded script, with ``n_ctx`` cells a
    slot: its base URL and the script to fill; the engine's requests are added to ``seen``."""
    path = write_qwen3(root / "tiny.gguf", qtype=gguf.GGMLQuantizationType.Q8_0, chat_template=chat_template)
    import_gguf(ModelStore(root / "models"), model, path)
    app = create_app(Settings(models_dir=root / "models", num_parallel=2, context_length=n_ctx, num_thread=1))
    script: list[str | BaseException] = []

    def make(spec: LoadSpec, steps: list[str | BaseException]) -> ScriptedModel:
        return ScriptedModel(spec, steps, n_ctx_slot=n_ctx, n_ctx_train=n_ctx, recorded=seen)

    with serve_in_thread(app) as url:
        services(app).pool = scripted_pool(script, make=make)
        yield url, script


@dataclass
class Turns(ScriptedModel):
    """A scripted model that says the next of ``turns`` on each request, then "Done.": an agent's
    session, turn by turn."""

    turns: list[list[str | BaseException]] = field(default_factory=list)
    n_ctx_slot: int = 65536

    async def generate(self, request: Request) -> AsyncGenerator[Event, None]:
        self.script = self.turns.pop(0) if self.turns else ["Done."]
        async for event in super().generate(request):
            yield event


def tool_call(name: str, arguments: dict[str, object]) -> str:
    """What the tiny qwen3 says to call a tool, as its chat format's parser reads it."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


@contextmanager
def scripted_turns(
    models_dir: Path, front: Callable[[ASGIApp], ASGIApp] = lambda app: app
) -> Iterator[tuple[str, ASGIApp, list[list[str | BaseException]]]]:
    """A live server over ``models_dir`` (its model installed) whose engine plays the yielded turns,
    one per request (``Turns``), behind ``front(app)`` (a request log): its URL and that front."""
    turns: list[list[str | BaseException]] = []
    app = create_app(Settings(models_dir=models_dir, num_parallel=1, context_length=65536, num_thread=1))
    wrapped = front(app)
    with serve_in_thread(wrapped) as url:
        services(app).pool = scripted_pool([], make=lambda spec, script: Turns(spec, script, turns=turns))
        yield url, wrapped, turns
