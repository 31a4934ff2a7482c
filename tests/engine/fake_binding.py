"""A stand-in for ``engine.binding`` so the runner's step loop runs without llama.cpp.

The fake model "predicts" the token after any token (wrapping around, never 0), and token 0
is end-of-generation, so a request runs until its limit, an abort or a failure.
``FakeContext`` records every batch and can be told to fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.request import Event
from cllm_ollama.engine.runner import Runner, Sink
from cllm_ollama.errors import EngineError


class FakeModel:
    def __init__(self, n_vocab: int = 50) -> None:
        self.path = Path("fake.gguf")
        self.n_vocab = n_vocab
        self.is_recurrent = False
        self.n_swa = 0

    def kv_bytes_per_token(self, cache_type: str = "f16") -> int:
        return 16

    def meta(self, key: str) -> str | None:
        return None  # no architecture: its tokens never ride as embeddings (``binding.token_rows``)

    def piece(self, token: int) -> bytes:
        return b"" if token == 0 else bytes([96 + token % 26 + 1])

    def is_eog(self, token: int) -> bool:
        return token == 0


class FakeBatch:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.rows: list[tuple[int, int, int]] = []
        self.outputs: list[int] = []

    def fill(self, tokens: Sequence[int], positions: Sequence[int], seq_ids: Sequence[int], output_rows: Any) -> None:
        assert len(tokens) <= self.capacity
        self.rows = list(zip(tokens, positions, seq_ids, strict=True))
        self.outputs = list(output_rows)


class FakeContext:
    def __init__(
        self,
        model: FakeModel,
        *,
        n_seq_max: int,
        n_ctx_seq: int,
        n_batch: int,
        n_threads: int,
        cache_type: str = "f16",
        flash_attn: bool | None = None,
        outputs_per_seq: int = 1,
    ) -> None:
        self.model = model
        self.cache_type, self.flash_attn = cache_type, flash_attn
        self.n_seq_max, self.n_ctx_seq, self.n_batch = n_seq_max, n_ctx_seq, n_batch
        self.batches: list[list[tuple[int, int, int]]] = []
        self.closes = 0
        self.fail_decode: str | None = None
        self.fail_clear = False
        self._last: np.ndarray = np.zeros((0, model.n_vocab), np.float32)
        self.pos_max: dict[int, int] = {}  # each sequence's last position, as llama.cpp keeps it
        self.removed: list[tuple[int, int]] = []  # (sequence, from position) of every seq_rm
        self.queued: set[int] = set()  # what a seq_copy reads or writes at the next decode, as llama.cpp's

    def decode(self, batch: FakeBatch) -> None:
        self.queued.clear()
        if self.fail_decode is not None:
            raise EngineError(self.fail_decode)
        self.batches.append(batch.rows)
        for _, pos, seq in batch.rows:
            self.pos_max[seq] = max(self.pos_max.get(seq, -1), pos)
        logits = np.zeros((len(batch.outputs), self.model.n_vocab), np.float32)
        for j, row in enumerate(batch.outputs):
            logits[j, batch.rows[row][0] % (self.model.n_vocab - 1) + 1] = 1.0
        self._last = logits

    def logits(self, n_outputs: int) -> np.ndarray:
        assert n_outputs == len(self._last)
        return self._last

    def clear(self) -> None:
        if self.fail_clear:
            raise RuntimeError("the KV cache is gone")

    def reset(self) -> None:
        self.clear()

    def seq_rm(self, seq_id: int, p0: int, p1: int = -1) -> bool:
        self.removed.append((seq_id, p0))
        if p1 < 0 and seq_id in self.pos_max:
            self.pos_max[seq_id] = min(self.pos_max[seq_id], p0 - 1)
        return True

    def seq_pos_max(self, seq_id: int) -> int:
        return self.pos_max.get(seq_id, -1)

    def seq_clear(self, seq_id: int) -> None:
        pass

    def seq_copy(self, src: int, dst: int) -> None:
        self.queued |= {src, dst}

    def copy_queued(self, seq_id: int) -> bool:
        return seq_id in self.queued

    def seq_pos_min(self, seq_id: int) -> int:
        return 0

    def state_get(self, seq_id: int, alloc: Any = None) -> bytes:
        return bytes(8)

    def state_set(self, seq_id: int, data: bytes) -> bool:
        return True

    def close(self) -> None:
        self.closes += 1  # freed twice: a double free in llama.cpp


def fake_runner(
    context: type[FakeContext] = FakeContext, n_slots: int = 2, deterministic: bool = False, gap_fill: int = 0
) -> Runner:
    """A real runner (its engine thread, scheduler and KV operations) over the fakes; close it."""
    return Runner(
        FakeModel(),  # type: ignore[arg-type]
        LoadSpec(
            Path("fake.gguf"),
            n_slots=n_slots,
            n_ctx_slot=4096,
            n_batch=16,
            n_threads=1,
            deterministic=deterministic,
            gap_fill=gap_fill,
        ),
        context=context,  # type: ignore[arg-type]
        batch=FakeBatch,  # type: ignore[arg-type]
    )


def drain(runner: Runner, sink: Sink) -> list[Event]:
    """Read to the last event, waking the engine when a pause ends, as the async client does."""
    events: list[Event] = []
    while not events or events[-1].finish is None:
        events.append(sink.queue.get(timeout=10))  # type: ignore[attr-defined]
        if sink.consume():
            runner.wake()
    return events
