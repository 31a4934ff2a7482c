"""The engine thread's step loop over a fake binding: failures, aborts, a dead engine, and the rows that
fill gaps between its streams."""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import pytest
from fake_binding import FakeBatch, FakeContext, FakeModel, drain, fake_runner
from polling import until

from cllm_ollama.engine import outbox
from cllm_ollama.engine import runner as runner_module
from cllm_ollama.engine.binding import DecodeError
from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.gap_fill import SPAN, span
from cllm_ollama.engine.request import Event, FinishReason, Request, SamplingParams
from cllm_ollama.engine.runner import Runner, Sink
from cllm_ollama.engine.scheduler import StepPlan
from cllm_ollama.errors import EngineError

GREEDY = SamplingParams(temperature=0)


@pytest.fixture
def runner() -> Iterator[Runner]:
    r = fake_runner()
    yield r
    r.close()


def submit(runner: Runner, prompt: tuple[int, ...], n: int = 5) -> tuple[Request, Sink]:
    request = Request(prompt, GREEDY, num_predict=n)
    sink = Sink(queue.SimpleQueue())
    runner.submit(request, None, sink)
    return request, sink


def first_event(runner: Runner, sink: Sink) -> Event:
    event = sink.queue.get(timeout=10)  # type: ignore[attr-defined]
    if sink.consume():
        runner.wake()
    return event  # type: ignore[no-any-return]


def test_the_step_loop_runs_on_the_fake(runner: Runner) -> None:
    _, sink = submit(runner, (3, 4), n=4)
    events = drain(runner, sink)
    assert [t for e in events for t in e.tokens] == [5, 6, 7, 8] and events[-1].finish is FinishReason.LENGTH


def test_a_failed_step_with_pending_aborts_leaks_nothing(runner: Runner) -> None:
    ctx: FakeContext = runner.ctx  # type: ignore[assignment]
    first, first_sink = submit(runner, (3,), n=1000)
    first_event(runner, first_sink)  # generating
    ctx.fail_decode = "compute error"
    second, second_sink = submit(runner, (9,), n=1000)
    runner.abort(first.id)
    ends = {first.id: drain(runner, first_sink)[-1].finish, second.id: drain(runner, second_sink)[-1].finish}
    assert ends[first.id] in (FinishReason.CANCELED, FinishReason.ERROR)
    assert ends[second.id] is FinishReason.ERROR
    ctx.fail_decode = None
    assert drain(runner, submit(runner, (3,), n=2)[1])[-1].finish is FinishReason.LENGTH
    assert runner.outbox.sinks == {} and runner.sampling.samplers == {}


def test_a_dead_engine_says_why_and_ends_what_it_ran(runner: Runner) -> None:
    ctx: FakeContext = runner.ctx  # type: ignore[assignment]
    _, sink = submit(runner, (3,), n=1000)
    first_event(runner, sink)
    ctx.fail_decode, ctx.fail_clear = "compute error", True  # the recovery fails too
    last = drain(runner, sink)[-1]
    assert last.finish is FinishReason.ERROR
    runner._thread.join(timeout=10)
    assert runner.dead is not None and "the KV cache is gone" in runner.dead
    with pytest.raises(EngineError, match="engine stopped"):
        submit(runner, (3,))
    runner.close()  # the pool frees a dead engine's context at once, and again with its model
    runner.close()
    assert ctx.closes == 1


def test_occupancy_is_exact_when_every_running_reader_lags(runner: Runner) -> None:
    """Nobody reads: the two running slots pause once their readers are far enough behind, and
    nothing moves. Then the counts are exact, and the cells agree with what was decoded."""
    sinks = [submit(runner, (3 + i, 4), n=10_000)[1] for i in range(5)]
    until(lambda: sinks[0].behind and sinks[1].behind, timeout=10)  # the engine thread's state
    now = runner.occupancy()
    decoded: dict[int, int] = {}
    for batch in runner.ctx.batches:  # type: ignore[attr-defined]
        for _, pos, seq in batch:
            decoded[seq] = max(decoded.get(seq, 0), pos + 1)
    assert (now.running, now.waiting) == (2, 3)
    assert now.cells_used == sum(decoded.values()) and now.cells_total == 2 * 4096
    assert not any(s.backlog for s in sinks[2:])  # the waiting ones never got a token
    for request_id in runner.scheduler.running_ids() + [r.id for r in runner.scheduler.waiting]:
        runner.abort(request_id)
    until(lambda: runner.occupancy() == replace(now, running=0, waiting=0, cells_used=0), timeout=10)


def test_a_part_that_cannot_be_made_releases_the_parts_made_before_it(tmp_path: Path) -> None:
    """The batch is made last but one: when it fails, the context is closed and the threads of
    the state buffers, the disk cache and the media encoder are stopped (a reload after a failed
    load must not find them still holding memory)."""
    closed: list[FakeContext] = []
    made: list[threading.Thread] = []

    class ClosingContext(FakeContext):
        def close(self) -> None:
            closed.append(self)

    def no_batch(capacity: int) -> FakeBatch:
        made.extend(threading.enumerate())
        raise EngineError("no memory for the batch")

    blob = Path("/store/blobs/sha256-" + "a" * 64)
    model = FakeModel()
    model.path = blob
    spec = LoadSpec(
        blob,
        n_slots=2,
        n_ctx_slot=4096,
        n_batch=16,
        n_threads=1,
        cache_bytes=1 << 20,
        cache_dir=tmp_path,
        cache_disk_bytes=1 << 20,
        projector=Path("/store/blobs/sha256-" + "b" * 64),
    )
    before = set(threading.enumerate())  # threads by identity: another test's may share a name
    with pytest.raises(EngineError, match="no memory for the batch"):
        Runner(model, spec, context=ClosingContext, batch=no_batch)  # type: ignore[arg-type]
    parts = {f"cllm-state-{blob.name}", "cllm-disk-cache", "cllm-disk-cache-read", f"cllm-media-{blob.name}"}
    started = [t for t in made if t not in before and t.name in parts]
    assert {t.name for t in started} == parts  # each part was running when the batch failed
    assert len(closed) == 1
    until(lambda: not any(t.is_alive() for t in started), timeout=10)


def test_a_prompts_last_token_is_decoded_beside_the_decode_rows_cold_as_when_re_sent(runner: Runner) -> None:
    # llama.cpp's CPU kernels round a token inside a chunk differently from one alone: a re-sent
    # prompt decodes only its last token (the rest is cached), so a cold one decodes its last token
    # in a call of its own too, after the rest, in the same step.
    ctx: FakeContext = runner.ctx  # type: ignore[assignment]
    _, sink = submit(runner, (3, 4, 5), n=1)
    drain(runner, sink)
    assert ctx.batches == [[(3, 0, 0), (4, 1, 0)], [(5, 2, 0)]]
    _, sink = submit(runner, (3, 4, 5), n=1)
    drain(runner, sink)
    assert ctx.batches[2:] == [[(5, 2, 0)]]


def test_beside_a_generating_stream_a_reproducible_prompts_last_token_is_decoded_with_the_streams_row(
    runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With KV streams per sequence, llama.cpp cuts a step of several sequences into ubatches a run of
    # sequences at a time (``split_equal``): the streams' rows and the prompt's rows are two passes
    # over the weights whether they are one call or two, so the second call costs only its own
    # overhead, and the prompt's last token is decoded as a re-sent one is, beside the streams' rows.
    monkeypatch.setattr(outbox, "MAX_BUFFERED_EVENTS", 1 << 30)  # the unread stream never pauses
    ctx: FakeContext = runner.ctx  # type: ignore[assignment]
    running = stream(runner, (30,))
    _, sink = submit(runner, (3, 4, 5), n=1)
    drain(runner, sink)
    mine = [rows for rows in ctx.batches if any(seq == 1 for *_, seq in rows)]
    end(runner, [running])
    assert [[row for row in rows if row[2] == 1] for rows in mine] == [[(3, 0, 1), (4, 1, 1)], [(5, 2, 1)]]
    assert mine[0] == [(3, 0, 1), (4, 1, 1)]
    assert any(seq == 0 for *_, seq in mine[1])  # the stream's token, in the same call


@pytest.mark.parametrize(("sampling", "calls"), [(SamplingParams(seed=7), 2), (SamplingParams(), 1)])
def test_only_a_reproducible_prompt_has_its_last_token_decoded_apart(
    runner: Runner, sampling: SamplingParams, calls: int
) -> None:
    # A seeded draw answers again as it did, so its prompt ends as a greedy one does (above); an
    # unseeded one differs every time, and its prompt is read in one call.
    ctx: FakeContext = runner.ctx  # type: ignore[assignment]
    sink = Sink(queue.SimpleQueue())
    runner.submit(Request((3, 4, 5), sampling, num_predict=1), None, sink)
    drain(runner, sink)
    assert len(ctx.batches) == calls
    assert [row for batch in ctx.batches for row in batch] == [(3, 0, 0), (4, 1, 0), (5, 2, 0)]


class RowSampler:
    """A sampler chain stand-in that reads the batch row the runner names (the fake's next token
    after that row's token): a wrong row shows as a stream that stops counting up."""

    def __init__(self, ctx: FakeContext) -> None:
        self.ctx = ctx

    def prime(self, tokens: object) -> None:
        pass

    def sample(self, ctx: object, row: int) -> int:
        return self.ctx.batches[-1][row][0] % 49 + 1

    def close(self) -> None:
        pass


class Stream(NamedTuple):
    request: Request
    sink: Sink
    tokens: list[int]  # what it sent, as far as read


def stream(runner: Runner, prompt: tuple[int, ...]) -> Stream:
    """A long request sampled by a ``RowSampler``, its first token read (it generates)."""
    request = Request(prompt, SamplingParams(temperature=0.8), num_predict=100_000)
    sink = Sink(queue.SimpleQueue())
    runner.submit(request, RowSampler(runner.ctx), sink)  # type: ignore[arg-type]
    return Stream(request, sink, list(first_event(runner, sink).tokens))


def read(runner: Runner, streams: list[Stream]) -> bool:
    """Read what the streams sent so far, as a client does (a reader far behind pauses its slot)."""
    for s in streams:
        while not s.sink.queue.empty():  # type: ignore[attr-defined]
            s.tokens.extend(s.sink.queue.get().tokens)  # type: ignore[attr-defined]
            if s.sink.consume():
                runner.wake()
    return True


def end(runner: Runner, streams: list[Stream]) -> list[list[int]]:
    """Abort the streams; each one's tokens, all of them."""
    for s in streams:
        runner.abort(s.request.id)
    return [s.tokens + [t for e in drain(runner, s.sink) for t in e.tokens] for s in streams]


def counting(tokens: list[int]) -> bool:
    return all(b == a % 49 + 1 for a, b in itertools.pairwise(tokens))


def test_an_idle_slot_between_two_streams_gets_a_throw_away_row_removed_after_the_call() -> None:
    # llama.cpp reads the weights once per run of neighbouring sequences (engine/gap_fill.py): with
    # slot 1 idle between two streams, its row makes one run of the call, and goes again after it.
    runner = fake_runner(n_slots=3, gap_fill=1)
    ctx: FakeContext = runner.ctx  # type: ignore[assignment]
    try:
        first, middle, last = (stream(runner, prompt) for prompt in ((3,), (20,), (30,)))
        end(runner, [middle])
        seen = len(ctx.batches)
        # (The streams may stand in another span than the idle slot for a while: read until a pad.)
        until(lambda: read(runner, [first, last]) and any(len(rows) == 3 for rows in ctx.batches[seen + 1 :]))
        sent = end(runner, [first, last])  # no step runs after this: the last pad is out
        padded = [rows for rows in ctx.batches[seen + 1 :] if len(rows) == 3]
        assert all([seq for _, _, seq in rows] == [0, 1, 2] for rows in padded)
        pad = padded[-1][1]
        assert pad[0] == padded[-1][0][0]  # the call's first token
        assert (1, pad[1]) in ctx.removed and ctx.seq_pos_max(1) == pad[1] - 1  # gone again
        # Each stream's sampler still read its own row: its tokens went on counting up from its own.
        assert all(counting(tokens) for tokens in sent)
    finally:
        runner.close()


def test_a_gap_longer_than_the_setting_stays_open() -> None:
    runner = fake_runner(n_slots=4, gap_fill=1)
    ctx: FakeContext = runner.ctx  # type: ignore[assignment]
    try:
        streams = [stream(runner, (3 + 10 * i,)) for i in range(4)]
        end(runner, streams[1:3])  # slots 1 and 2 idle: a gap of two
        seen = len(ctx.batches)
        until(lambda: read(runner, [streams[0], streams[3]]) and len(ctx.batches) > seen + 3)
        assert not any(seq in (1, 2) for rows in ctx.batches[seen + 1 :] for _, _, seq in rows)
        end(runner, [streams[0], streams[3]])
    finally:
        runner.close()


def test_an_idle_slot_in_a_deeper_span_gets_no_row_until_the_streams_reach_it() -> None:
    # Every row of a ubatch attends over its deepest stream's cells, in spans of 256: a pad in a
    # deeper idle sequence would make every row of the call read more, so it waits for the streams.
    runner = fake_runner(n_slots=3, gap_fill=1)
    ctx: FakeContext = runner.ctx  # type: ignore[assignment]
    try:
        first = stream(runner, (3,))
        middle = stream(runner, tuple(range(1, 41)) * 15)  # 600 cells and what it generates
        last = stream(runner, (30,))
        end(runner, [middle])
        idle = len(ctx.batches)
        # The idle slot's span starts past ``floor`` (512 or more: the other two stop at most 257
        # tokens in, when their readers fall behind, and the middle one is 600 deeper).
        floor = span(ctx.seq_pos_max(1) + 1) - SPAN
        until(lambda: read(runner, [first, last]) and any(seq == 1 for rows in ctx.batches[idle:] for *_, seq in rows))
        after = ctx.batches[idle + 1 :]
        padded = [any(seq == 1 for _, _, seq in rows) for rows in after]
        shallowest = [min(pos for _, pos, seq in rows if seq != 1) for rows in after]
        assert not padded[0]
        assert all(depth >= floor for depth, pad in zip(shallowest, padded, strict=True) if pad)
        end(runner, [first, last])
    finally:
        runner.close()


def test_a_throw_away_row_without_a_cell_leaves_the_step_to_go_on_without_it() -> None:
    # A slot's count short of llama.cpp's cells would make the padded call fail for want of a cell
    # (llama_decode's 1, the KV left as it was): the call goes again without the row.
    class NoRoom(FakeContext):
        full: int | None = None

        def decode(self, batch: FakeBatch) -> None:
            if any(seq == self.full for _, _, seq in batch.rows):
                raise DecodeError(1)
            super().decode(batch)

    runner = fake_runner(NoRoom, n_slots=3, gap_fill=1)
    ctx: NoRoom = runner.ctx  # type: ignore[assignment]
    try:
        first, middle, last = (stream(runner, prompt) for prompt in ((3,), (20,), (30,)))
        end(runner, [middle])
        ctx.full = 1
        seen = len(ctx.batches)
        until(lambda: read(runner, [first, last]) and len(ctx.batches) > seen + 3)
        assert not any(seq == 1 for rows in ctx.batches[seen + 1 :] for _, _, seq in rows)
        assert all(counting(tokens) for tokens in end(runner, [first, last]))  # neither failed
    finally:
        runner.close()


def test_kv_work_before_a_step_is_what_the_budget_takes_off_its_prompt_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner times its KV operations (here the admission's cut, made to take 30 ms) and the
    step after them plans with that much of its target gone; the step after that, with none."""
    ms = 1_000_000

    class Clock:
        ns = 0

        @classmethod
        def perf_counter_ns(cls) -> int:
            cls.ns += 1000
            return cls.ns

    class SlowCut(FakeContext):
        def seq_rm(self, seq_id: int, p0: int, p1: int = -1) -> bool:
            Clock.ns += 30 * ms
            return super().seq_rm(seq_id, p0, p1)

    monkeypatch.setattr(runner_module, "time", Clock)
    r = fake_runner(SlowCut)
    seen: list[int] = []
    plan = r.scheduler.plan

    def watched() -> StepPlan:
        seen.append(r.budget.stall_ns)
        return plan()

    monkeypatch.setattr(r.scheduler, "plan", watched)
    try:
        drain(r, submit(r, (3, 4), n=3)[1])
        assert seen[0] >= 30 * ms and all(ns < ms for ns in seen[1:]) and len(seen) >= 3
        assert r.times.kv_ns >= 30 * ms
    finally:
        r.close()


class PrimedSampler(RowSampler):
    """A ``RowSampler`` that records what it was primed with (its penalties' window)."""

    def __init__(self, ctx: FakeContext) -> None:
        super().__init__(ctx)
        self.primed: list[object] = []

    def prime(self, tokens: object) -> None:
        self.primed.append(list(tokens))  # type: ignore[call-overload]


def test_a_request_admitted_in_a_pass_with_nothing_to_decode_is_primed_once(runner: Runner) -> None:
    """Penalties see the prompt even when the pass that admits the request decodes nothing (its slot
    waits on a disk read, its first item is encoding): the chain is primed at admission."""
    plan, passes = runner.scheduler.plan, []

    def first_pass_empty() -> StepPlan:
        planned = plan()
        passes.append(planned)
        return StepPlan() if len(passes) == 1 else planned

    runner.scheduler.plan = first_pass_empty  # type: ignore[method-assign]
    sampler = PrimedSampler(runner.ctx)  # type: ignore[arg-type]
    sink = Sink(queue.SimpleQueue())
    runner.submit(Request((3, 4, 5), SamplingParams(temperature=0.8), num_predict=3), sampler, sink)  # type: ignore[arg-type]
    drain(runner, sink)
    assert passes[0].admitted and sampler.primed == [[3, 4, 5]]
