"""The engine thread's step loop over a fake binding: failures, aborts and a dead engine."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from fake_binding import FakeBatch, FakeContext, FakeModel, drain, fake_runner
from polling import until

from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.request import Event, FinishReason, Request, SamplingParams
from cllm_ollama.engine.runner import Runner, Sink
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
