"""An engine that plays a script instead of running weights: exact outputs (tool calls, thinking)
through every layer above the engine, for tests that need them from a model too small to say them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from cllm_ollama.engine.client import LoadSpec
from cllm_ollama.engine.pool import ModelPool
from cllm_ollama.engine.request import Event, FinishReason, Request, Stats


@dataclass
class ScriptedModel:
    """A loaded model without weights: ``generate`` emits ``script``'s texts, raising its exceptions."""

    spec: LoadSpec
    script: list[str | BaseException]
    n_ctx_slot: int = 256
    n_ctx_train: int = 256
    size_bytes: int = 0
    size_vram: int = 0
    bos_text: str = ""
    eos_text: str = ""
    dead: str | None = None
    running: set[int] = field(default_factory=set)

    def tokenize(self, text: str, *, add_special: bool = True) -> list[int]:
        return [ord(c) % 100 + 1 for c in text] or [1]

    def token_piece(self, token: int) -> bytes:
        return b"x"

    async def generate(self, request: Request) -> AsyncIterator[Event]:
        self.running.add(request.id)
        try:
            for step in self.script:
                if isinstance(step, BaseException):
                    raise step
                yield Event(request.id, step, (7,))
            stats = Stats(len(request.prompt), 0, 1, len(self.script), 1)
            yield Event(request.id, "", (), FinishReason.STOP, stats)
        finally:
            self.running.discard(request.id)

    def close(self) -> None:
        pass


def scripted_pool(script: list[str | BaseException], models: list[ScriptedModel] | None = None) -> ModelPool:
    """A pool whose every model plays ``script`` (appended to by the test as it goes)."""
    loaded = models if models is not None else []

    def load(spec: LoadSpec, max_queue: int) -> ScriptedModel:
        loaded.append(ScriptedModel(spec, script))
        return loaded[-1]

    return ModelPool(
        num_parallel=2,
        context_length=256,
        num_batch=64,
        num_thread=1,
        max_loaded=1,
        max_queue=4,
        default_keep_alive=300,
        loader=load,  # type: ignore[arg-type]
    )
