"""A long prompt's state goes to disk after its first token is published, not before: the copy
(hundreds of MB at 32k tokens) on the engine thread must not add to the time to first token. While
other slots are busy it waits until none is, and then copies into a buffer made ready ahead."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import oracle
import pytest
from fake_binding import drain as read_waking
from oracle import GREEDY, N, drain, make_runner, submit
from polling import until

from cllm_ollama.engine import disk_cache, outbox, prefix
from cllm_ollama.engine.request import Request
from cllm_ollama.engine.runner import Runner, Sink

pytestmark = pytest.mark.model
gguf_path = oracle.gguf_path  # the oracle model (a fixture)


def test_the_first_token_is_out_before_the_checkpoint_copies_the_state(
    gguf_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prefix, "CHECKPOINT_TOKENS", 64)  # the test prompts are short
    runner = make_runner(gguf_path, n_slots=1, disk=tmp_path)
    sinks: list[Sink] = []
    published_at_copy: list[int] = []
    state_get = runner.ctx.state_get

    def watched(seq_id: int, alloc: Any = None) -> Any:
        published_at_copy.append(sinks[0].published if sinks else -1)
        return state_get(seq_id, alloc)

    monkeypatch.setattr(runner.ctx, "state_get", watched)
    try:
        prompt = oracle.shared_prompts(runner.model)[0]
        assert len(prompt) >= prefix.CHECKPOINT_TOKENS
        request = Request(prompt, GREEDY, num_predict=N)
        sinks.append(submit(runner, request))
        drain(sinks[0])
        until(lambda: list(tmp_path.glob("*/*" + disk_cache.SUFFIX)))  # the checkpoint was written
        assert published_at_copy and published_at_copy[0] >= 1  # the first token went out first
    finally:
        oracle.close(runner)


def watch_copies(runner: Runner, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """At each state copy of ``runner``'s context, whether some slot was busy (a list that grows)."""
    copies: list[bool] = []
    state_get = runner.ctx.state_get

    def watched(seq_id: int, alloc: Any = None) -> Any:
        copies.append(any(slot.busy for slot in runner.scheduler.slots))
        return state_get(seq_id, alloc)

    monkeypatch.setattr(runner.ctx, "state_get", watched)
    return copies


@pytest.mark.parametrize(("end", "why"), [("finished", "long"), ("aborted", "long"), ("finished", "breakpoint")])
def test_while_another_stream_runs_the_checkpoint_waits_for_it_to_end(
    gguf_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, end: str, why: str
) -> None:
    """The copy would stall the running stream (several decode steps on a GPU): it is taken once no
    slot is busy, with the answer the slot holds by then; also when the stream ends by an abort,
    with no step after it. The same for an agent's breakpoint inside its prompt (after its tools):
    the state taken then gives that length back too."""
    if why == "long":
        monkeypatch.setattr(prefix, "CHECKPOINT_TOKENS", 64)
    runner = make_runner(gguf_path, n_slots=2, n_ctx=512, disk=tmp_path)
    copies = watch_copies(runner, monkeypatch)
    try:
        streaming = Request(tuple(runner.model.tokenize("Hello")), GREEDY, num_predict=300)
        stream = submit(runner, streaming)
        until(lambda: stream.published >= 1)
        prompt = oracle.shared_prompts(runner.model)[0]
        tools = len(prompt) - 8
        keep = (tools,) if why == "breakpoint" else ()
        answer = oracle.tokens_of(drain(submit(runner, Request(prompt, GREEDY, num_predict=N, keep=keep))))
        assert copies == [] and stream.published < 300  # the stream still runs: nothing copied
        if end == "aborted":
            runner.abort(streaming.id)
        read_waking(runner, stream)  # a reader that wakes its paused stream
        until(lambda: list(tmp_path.glob("*/*" + disk_cache.SUFFIX)))
        assert copies == [False]  # one copy, with no slot busy
        entry, _ = runner.kv.disk.lookup((*prompt, *answer))  # type: ignore[union-attr]
        assert entry is not None and entry.tokens == (*prompt, *answer[:-1])  # its last token never decoded
        assert runner.kv.disk.lookup(prompt[:tools]) == (entry, tools)  # type: ignore[union-attr]
    finally:
        oracle.close(runner)


def test_a_request_that_came_as_the_last_stream_ended_does_not_wait_for_a_waiting_checkpoint(
    gguf_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy would hold back a request posted meanwhile: it waits on, and is taken at the next
    moment no slot is busy, or before its slot's reuse."""
    monkeypatch.setattr(prefix, "CHECKPOINT_TOKENS", 64)
    runner = make_runner(gguf_path, n_slots=2, n_ctx=512, disk=tmp_path)
    copies = watch_copies(runner, monkeypatch)
    asked = threading.Event()
    answers = iter([False])  # the first time the engine asks, a request has come

    def quiet() -> bool:
        asked.set()
        return next(answers, True)

    monkeypatch.setattr(runner.inbox, "quiet", quiet)
    try:
        stream = submit(runner, Request(tuple(runner.model.tokenize("Hello")), GREEDY, num_predict=300))
        until(lambda: stream.published >= 1)
        prompt = oracle.shared_prompts(runner.model)[0]
        drain(submit(runner, Request(prompt, GREEDY, num_predict=N)))
        read_waking(runner, stream)
        until(asked.is_set)
        assert copies == []  # no slot busy, but a request came: not copied
        drain(submit(runner, Request(tuple(runner.model.tokenize("Bye")), GREEDY, num_predict=2)))
        until(lambda: list(tmp_path.glob("*/*" + disk_cache.SUFFIX)))
        assert runner.kv.disk.lookup(prompt)[1] == len(prompt)  # type: ignore[union-attr]
    finally:
        oracle.close(runner)


def test_a_waiting_checkpoint_finds_its_buffer_ready_when_its_own_answer_ends(
    gguf_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slot whose checkpoint waits answers on after the others end: the save at its answer's
    end copies into a buffer made ready off the engine thread while it answered, not into fresh
    memory whose pages fault in during the copy (tens of ms per 100 MB)."""
    monkeypatch.setattr(prefix, "CHECKPOINT_TOKENS", 64)
    runner = make_runner(gguf_path, n_slots=2, n_ctx=512, disk=tmp_path)
    copies = watch_copies(runner, monkeypatch)
    try:
        # Both readers wait at first: each stream pauses once far enough ahead, its slot busy.
        other = submit(runner, Request(tuple(runner.model.tokenize("Hello")), GREEDY, num_predict=300))
        until(lambda: other.published >= 1)
        long = submit(runner, Request(oracle.shared_prompts(runner.model)[0], GREEDY, num_predict=300))
        until(lambda: long.published >= 1)  # its prompt ended beside the other stream: the save waits
        read_waking(runner, other)
        until(lambda: long.backlog > outbox.MAX_BUFFERED_EVENTS)
        buffers = runner.kv.buffers
        assert buffers is not None and copies == []
        buffers.flush()  # what the worker was asked to make ready is ready
        read_waking(runner, long)
        until(lambda: list(tmp_path.glob("*/*" + disk_cache.SUFFIX)))
        assert copies == [False] and buffers.stats.hits == 1 and buffers.stats.fresh == 0
    finally:
        oracle.close(runner)
