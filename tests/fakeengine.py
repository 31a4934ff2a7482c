"""One base for the tests' fake loaded models: every member of the engine's front door
(``frontdoor.EngineClient``) with an inert default, so each fake writes only what it plays and
a type checker (``mypy``, run by .ci/run) catches one that drifts from the protocol."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

import numpy as np

from cllm_ollama.engine.frontdoor import EngineClient, LoadSpec, Occupancy
from cllm_ollama.engine.request import Event, MediaInput, Request


class FakeEmbedding:
    """Embeddings of zeros (no fake here computes any)."""

    n_ctx = 256

    async def embed(self, inputs: Sequence[Sequence[int]], *, normalize: bool = True) -> list[np.ndarray]:
        return [np.zeros(4, dtype=np.float32) for _ in inputs]

    async def rank(self, query: str, documents: Sequence[str]) -> tuple[list[float], int]:
        return [0.0 for _ in documents], 0


class FakeEngine:
    """A loaded model without weights: the facts of ``spec``, nothing running, nothing generated."""

    spec: LoadSpec
    n_ctx_train: int = 4096
    size_bytes: int = 0
    size_vram: int = 0
    bos_text: str = ""
    eos_text: str = ""
    dead: str | None = None
    engine_freed: bool = False
    closed: bool = False
    embedder: FakeEmbedding = FakeEmbedding()

    @property
    def n_slots(self) -> int:
        return self.spec.n_slots

    @property
    def n_ctx_slot(self) -> int:
        return self.spec.n_ctx_slot

    def tokenize(self, text: str, *, add_special: bool = True, parse_special: bool = True) -> list[int]:
        return [ord(c) % 100 + 1 for c in text] or [1]

    def detokenize(self, tokens: list[int]) -> str:
        return "x" * len(tokens)

    def token_piece(self, token: int) -> bytes:
        return b"x"

    def fim_tokens(self) -> tuple[int, int, int] | None:
        return None

    def has_room(self) -> bool:
        return True

    @property
    def media_marker(self) -> str | None:
        return None  # loaded without a projector

    def tokenize_media(self, text: str, images: Sequence[bytes], *, add_special: bool = True) -> MediaInput:
        raise NotImplementedError("this fake sees nothing")

    async def generate(self, request: Request) -> AsyncGenerator[Event, None]:
        raise NotImplementedError("this fake generates nothing")
        yield  # an async generator, as the protocol's

    def occupancy(self) -> Occupancy:
        return Occupancy(running=0, waiting=0, cells_used=0, cells_total=self.n_ctx_slot * self.n_slots)

    def free_engine(self) -> None:
        self.engine_freed = True

    def close(self) -> None:
        self.closed = True


def _conforms(engine: FakeEngine) -> EngineClient:
    return engine  # what the type check proves: a FakeEngine (and every subclass) is an EngineClient
