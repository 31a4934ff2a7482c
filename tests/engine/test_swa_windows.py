"""Checkpoints of a sliding window (``swa_windows``): a follow-up whose reusable prefix ends
inside the last answer, below the window a restored state holds, keeps its start up to the
nearest checkpoint instead of computing its whole prompt again.

``SwaContext`` keeps, per sequence, what llama.cpp's sliding-window cache keeps: the cells of the
full-attention layers (``n``) and the lowest position its SWA layers still hold (``low``). A live
sequence keeps every cell (``swa_full``); a saved state holds the full layers whole and the last
window of the SWA ones; a window checkpoint holds that window alone and replaces only it.
"""

from __future__ import annotations

import queue
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_binding import FakeBatch, FakeContext, FakeModel, drain

from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.request import Request, SamplingParams
from cllm_ollama.engine.runner import Runner, Sink
from cllm_ollama.engine.swa_windows import MIN_GAP, PER_SLOT, Windows

N_SWA = 64
CELL_BYTES = 10
GREEDY = SamplingParams(temperature=0)


class SwaModel(FakeModel):
    def __init__(self) -> None:
        super().__init__()
        self.n_swa = N_SWA


class SwaContext(FakeContext):
    """Per sequence ``[n, low]``: full-attention cells at positions ``[0, n)``, SWA cells at
    ``[low, n)`` (``low`` -1: none). States are bytes sized like llama.cpp's (cells they hold)."""

    def __init__(self, model: FakeModel, **kw: Any) -> None:
        super().__init__(model, **kw)
        self.seqs = [[0, 0] for _ in range(self.n_seq_max)]
        self.window_sets = 0

    def decode(self, batch: FakeBatch) -> None:
        super().decode(batch)
        for _, pos, seq_id in batch.rows:
            seq = self.seqs[seq_id]
            assert pos == seq[0], "positions are decoded in order, after what the sequence holds"
            if seq[0] == 0:
                seq[1] = 0
            assert 0 <= seq[1] <= max(0, pos - N_SWA + 1), "a token decoded without its window"
            seq[0] = pos + 1

    def seq_rm(self, seq_id: int, p0: int, p1: int = -1) -> bool:
        seq = self.seqs[seq_id]
        seq[0] = min(seq[0], p0)
        if seq[0] <= seq[1] or seq[0] == 0:
            seq[1] = -1 if seq[0] else 0
        return True

    def seq_clear(self, seq_id: int) -> None:
        self.seqs[seq_id] = [0, 0]

    def seq_copy(self, src: int, dst: int) -> None:
        self.seqs[dst] = list(self.seqs[src])

    def seq_pos_min(self, seq_id: int) -> int:
        n, low = self.seqs[seq_id]
        return -1 if n == 0 else low

    def state_get(self, seq_id: int, alloc: Any = None, *, window: bool = False) -> bytes:  # type: ignore[override]
        n, low = self.seqs[seq_id]
        low = max(low, n - N_SWA)
        cells = n - low if window else n
        return struct.pack("<?ii", window, n, low) + bytes(CELL_BYTES * cells)

    def state_set(self, seq_id: int, data: bytes, *, window: bool = False) -> bool:  # type: ignore[override]
        was_window, n, low = struct.unpack_from("<?ii", data)
        if was_window != window:
            return False
        if window:
            self.window_sets += 1
            if self.seqs[seq_id][0] != n:  # the full layers must hold exactly what the window follows
                return False
        self.seqs[seq_id] = [n, low]
        return True


@pytest.fixture
def runner() -> Iterator[Runner]:
    spec = LoadSpec(
        Path("fake.gguf"), n_slots=1, n_ctx_slot=4096, n_batch=64, n_threads=1, cache_bytes=1 << 24, cache_min_tokens=32
    )
    r = Runner(SwaModel(), spec, context=SwaContext, batch=FakeBatch)  # type: ignore[arg-type]
    yield r
    r.close()


def run(runner: Runner, prompt: tuple[int, ...], n: int) -> tuple[tuple[int, ...], int]:
    """``prompt`` answered with ``n`` tokens: the answer, and how many prompt tokens were computed."""
    sink = Sink(queue.SimpleQueue())
    runner.submit(Request(prompt, GREEDY, num_predict=n), None, sink)
    events = drain(runner, sink)
    stats = events[-1].stats
    assert stats is not None
    return tuple(t for e in events for t in e.tokens), stats.prompt_tokens - stats.prompt_cached


def chat(runner: Runner, cut: int) -> tuple[int, int]:
    """A 300-token prompt answered with 200 tokens; another request takes the only slot (the chat
    is saved to the host cache); the follow-up re-sends the answer, which differs from what was
    generated ``cut`` tokens in. Returns the follow-up's prompt length and its computed tokens."""
    prompt = tuple(1 + i % 40 for i in range(300))
    answer, computed = run(runner, prompt, 200)
    assert computed == 300
    run(runner, (45, 46, 47), 3)  # e.g. a title request: the chat's state goes to the host cache
    other = answer[cut] % 49 + 1 if cut < len(answer) else 1
    resent = answer[:cut] + (other,) * (len(answer) - 1 - cut)  # the last answer token was never decoded
    follow_up = prompt + resent + (7, 8, 9, 10)
    _, computed = run(runner, follow_up, 5)
    return len(follow_up), computed


def test_a_cut_inside_the_answer_restores_the_nearest_checkpoint(runner: Runner) -> None:
    ctx: SwaContext = runner.ctx  # type: ignore[assignment]
    n, computed = chat(runner, cut=150)
    # The restored state's window ends at the answer's end: the cut (450) is below it. The nearest
    # checkpoint at or before it is at most half a window back.
    assert ctx.window_sets == 1
    assert computed <= n - 450 + N_SWA // 2
    assert runner.scheduler.stats.restored == n - computed


def test_a_cut_at_the_answers_end_recomputes_only_the_new_turn(runner: Runner) -> None:
    n, computed = chat(runner, cut=199)
    assert computed <= n - 300 - 199 + MIN_GAP


def test_a_cut_below_every_checkpoint_computes_the_prompt_as_before(runner: Runner) -> None:
    ctx: SwaContext = runner.ctx  # type: ignore[assignment]
    windows = runner.kv.windows
    assert windows is not None
    windows.per_slot = 2  # only the answer's last checkpoints are kept
    n, computed = chat(runner, cut=20)
    assert computed == n and ctx.window_sets == 0


def test_a_saved_state_takes_its_checkpoints_along(runner: Runner) -> None:
    chat(runner, cut=150)
    cache = runner.kv.cache
    assert cache is not None
    saved = [e for e in cache.entries() if len(e.tokens) == 499]
    assert len(saved) == 1 and saved[0].windows
    assert all(w.n < 499 and saved[0].tokens[: w.n] == tuple(w.tokens) for w in saved[0].windows)
    assert saved[0].size == 9 + CELL_BYTES * 499 + sum(w.size for w in saved[0].windows)


def test_a_model_without_a_sliding_window_keeps_no_checkpoints() -> None:
    spec = LoadSpec(Path("fake.gguf"), n_slots=1, n_ctx_slot=256, n_batch=16, n_threads=1, cache_bytes=1 << 20)
    r = Runner(FakeModel(), spec, context=FakeContext, batch=FakeBatch)  # type: ignore[arg-type]
    try:
        assert r.kv.windows is None
    finally:
        r.close()


# -- the bookkeeping alone -----------------------------------------------------------------


def tokens(n: int, start: int = 1) -> list[int]:
    return list(range(start, start + n))


def test_checkpoints_are_due_every_spacing_and_at_ends_past_the_minimum_gap() -> None:
    w = Windows(n_slots=1, spacing=100, limit_bytes=10**6)
    assert not w.due(0, 99) and w.due(0, 100)
    assert not w.due(0, MIN_GAP - 1, now=True) and w.due(0, MIN_GAP, now=True)
    w.add(0, tokens(100), 100, b"x", 1)
    assert not w.due(0, 199) and w.due(0, 200)
    assert not w.due(0, 100 + MIN_GAP - 1, now=True) and w.due(0, 100 + MIN_GAP, now=True)


def test_a_checkpoint_supersedes_those_at_or_past_it_and_each_slot_keeps_the_newest() -> None:
    w = Windows(n_slots=2, spacing=32, limit_bytes=10**6)
    for n in range(40, 40 * (PER_SLOT + 3), 40):
        w.add(0, tokens(n), n, b"x", 1)
    assert [c.n for c in w.of(0)] == list(range(40 * 3, 40 * (PER_SLOT + 3), 40))
    w.add(0, tokens(130), 130, b"x", 1)  # the sequence was cut back and grew again
    assert [c.n for c in w.of(0)] == [120, 130]
    assert w.total_bytes == 2 and w.of(1) == ()


def test_the_live_checkpoints_stay_under_their_budget_the_fullest_slot_losing_its_oldest() -> None:
    w = Windows(n_slots=2, spacing=32, limit_bytes=25)
    w.add(0, tokens(40), 40, b"", 10)
    w.add(0, tokens(80), 80, b"", 10)
    w.add(1, tokens(40), 40, b"", 10)
    assert [c.n for c in w.of(0)] == [80] and [c.n for c in w.of(1)] == [40] and w.total_bytes == 20


def test_only_a_checkpoint_of_the_same_tokens_serves_and_the_furthest_one_wins() -> None:
    w = Windows(n_slots=1, spacing=32, limit_bytes=10**6)
    seq = tokens(300)
    for n in (64, 128, 192):
        w.add(0, seq[:n], n, b"", 1)
    other = seq[:100] + [0] * 200  # differs from token 100 on
    assert w.best(w.of(0), seq[:150]) is not None and w.best(w.of(0), seq[:150]).n == 128  # type: ignore[union-attr]
    assert w.best(w.of(0), other).n == 64  # type: ignore[union-attr]
    assert w.best(w.of(0), seq[:63]) is None
    assert [c.n for c in w.for_entry(0, seq[:192])] == [64, 128]
    w.adopt(0, w.of(0), 100)
    assert [c.n for c in w.of(0)] == [64]
