"""The media step with no model: the scheduler plans an image's decode apart from the token batch,
only once it is encoded; slots count cells and positions apart (M-RoPE); prefix reuse keeps images
whole and trims at positions; the encoder encodes off the calling thread and closes a prompt only
after the encode that reads it."""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import pytest
from fake_binding import FakeBatch, FakeContext, FakeModel
from polling import until
from test_media import Image, image

from cllm_ollama.engine import outbox
from cllm_ollama.engine.encoder import ENCODE_AHEAD, KEPT_MEDIA, EncodeFailed, MediaEncoder
from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.media import cell_keys
from cllm_ollama.engine.media_feed import MediaFeed
from cllm_ollama.engine.prefix import Trim
from cllm_ollama.engine.request import Event, FinishReason, MediaInput, Request, SamplingParams
from cllm_ollama.engine.runner import Runner, Sink
from cllm_ollama.engine.scheduler import Scheduler
from cllm_ollama.engine.slot import SlotState
from cllm_ollama.engine.step_budget import StepBudget
from cllm_ollama.errors import EngineError


@dataclass(eq=False)
class Prompt:
    """A stand-in ``MediaInput``: its parts, an encode that can be held, and whether it was closed."""

    parts: list[Any]
    gate: threading.Event = field(default_factory=threading.Event)
    started: threading.Event = field(default_factory=threading.Event)
    encoded: list[str] = field(default_factory=list)
    closed: int = 0

    def encode(self, item: Image) -> str:
        self.started.set()
        self.gate.wait(10)
        self.encoded.append(item.id)
        return f"embd-{item.id[:6]}"

    def decode(self, ctx: Any, item: Any, embd: Any, pos: int, seq_id: int, rows: range | None = None) -> int:
        raise AssertionError("the scheduler never decodes")

    def close(self) -> None:
        self.closed += 1


def media_request(parts: list[Any], **kw: Any) -> Request:
    prompt = Prompt(parts)
    return Request(cell_keys(parts), SamplingParams(temperature=0), media=prompt, **kw)


def make(
    ready: dict[str, object],
    n_slots: int = 2,
    n_ctx: int = 128,
    n_batch: int = 32,
    max_rows: int | None = None,
    budget: StepBudget | None = None,
) -> Scheduler:
    clock = iter(range(0, 10**9, 1000))
    return Scheduler(
        n_slots,
        n_ctx,
        n_batch,
        lambda t: b"x",
        lambda t: False,
        clock=lambda: next(clock),
        budget=budget,
        embeddings=lambda request, item: ready.get(item.id),
        max_rows=max_rows,
    )


def test_an_image_is_decoded_alone_once_encoded_and_mrope_positions_trail_the_cells() -> None:
    cat = image(b"cat", n_tokens=6, n_pos=3)  # M-RoPE: 6 cells, 3 positions
    ready: dict[str, object] = {}
    s = make(ready)
    s.add(media_request([(1, 2), cat, (3, 4)], num_predict=3))
    plan = s.schedule()
    assert plan.tokens == [1, 2] and plan.positions == [0, 1] and not plan.media  # text up to the image
    s.update(plan, [])
    plan = s.schedule()  # not encoded yet: the slot waits at its image, nothing else to do
    assert len(plan) == 0 and not plan.media
    ready[cat.id] = "embd"
    plan = s.schedule()
    assert [(p.slot.seq_id, p.item, p.embd, p.rows, p.rides) for p in plan.media] == [(0, cat, "embd", range(6), False)]
    assert len(plan) == 0  # the image's decode is a step of its own
    s.update(plan, [])
    slot = s.slots[0]
    assert slot.n_past == 8 and slot.pos == 5
    plan = s.schedule()
    assert plan.tokens == [3, 4] and plan.positions == [5, 6]  # text resumes after the image's positions
    s.update(plan, [7])
    plan = s.schedule()
    assert plan.positions == [7] and slot.state is SlotState.GENERATING


def test_a_resent_image_is_reused_from_another_slot_whole_and_trimmed_at_its_position() -> None:
    cat = image(b"cat", n_tokens=20, n_pos=5)
    text = tuple(range(1, 11))
    ready: dict[str, object] = {cat.id: "embd"}
    s = make(ready)
    first = [text, cat, (11, 12)]
    s.add(media_request(first, num_predict=1))
    for _ in range(5):
        plan = s.schedule()
        s.update(plan, [9] * len(plan.outputs))
    assert not s.has_work() and len(s.slots[0].cached) == 32
    # Slot 0 is busy with an unrelated prompt: the follow-up copies the image from nowhere else.
    s.add(media_request([text, image(b"cat", 20, 5), (11, 12, 13, 14)], num_predict=1))
    plan = s.admit()
    slot = s.slots[0]
    assert slot.prompt_cached == 32 and slot.pos == 32 - 15  # 10 + 5 positions for the image, + 2
    assert Trim(0, 17) in plan.ops


def test_a_request_cuts_lengths_back_to_whole_images_and_places_them_at_positions() -> None:
    cat = image(b"cat", n_tokens=20, n_pos=5)
    request = media_request([tuple(range(1, 11)), cat, (1, 2)])
    assert [request.whole(n) for n in (5, 10, 11, 29, 30, 31)] == [5, 10, 10, 10, 30, 31]
    assert [request.position_after(n) for n in (10, 30, 31)] == [10, 15, 16]
    assert request.next_media(0) == 10 and request.next_media(11) == len(request.prompt) == 32
    text = Request((1, 2, 3))
    assert text.whole(2) == 2 and text.position_after(2) == 2 and text.media_items == {}


def test_the_encoder_encodes_each_image_once_off_the_caller_and_closes_after_the_encode() -> None:
    woken = threading.Event()
    encoder = MediaEncoder(woken.set)
    cat = image(b"cat")
    a, b = Prompt([cat]), Prompt([cat])
    try:
        assert encoder.want(a, cat) is None
        until(a.started.is_set)
        assert encoder.want(b, cat) is None  # being encoded already: not queued again
        encoder.release(a)  # its request ended while its image is being encoded
        assert a.closed == 0  # never closed before the encode that reads it
        a.gate.set()
        until(woken.is_set)
        assert a.closed == 1 and a.encoded == [cat.id] and not b.encoded
        assert encoder.want(b, cat) == f"embd-{cat.id[:6]}"  # the same picture: encoded once
        encoder.release(b)
        assert b.closed == 1
        dog = image(b"dog")
        c = Prompt([dog])
        encoder.want(c, cat)  # known: nothing queued
        encoder.want(c, dog)
        until(c.started.is_set)
        queued = Prompt([dog])
        queued.gate.set()
        encoder.want(queued, image(b"queued"))
        encoder.release(c)
        assert c.closed == 0
        c.gate.set()
        until(lambda: c.closed == 1)
    finally:
        a.gate.set()
        encoder.close()


def test_a_failed_encode_is_an_answer_not_a_dead_thread() -> None:
    class Broken(Prompt):
        def encode(self, item: Image) -> str:
            raise RuntimeError("no")

    woken = threading.Event()
    encoder = MediaEncoder(woken.set)
    try:
        cat, dog = image(b"cat"), image(b"dog")
        broken = Broken([cat])
        encoder.want(broken, cat)
        until(woken.is_set)
        assert isinstance(encoder.want(broken, cat), EncodeFailed)
        fine = Prompt([dog])
        fine.gate.set()
        woken.clear()
        encoder.want(fine, dog)
        until(woken.is_set)
        assert encoder.want(fine, dog) == f"embd-{dog.id[:6]}"
    finally:
        encoder.close()


class Decoding(Prompt):
    """A prompt whose image decodes are recorded (on the engine thread) instead of run."""

    def __init__(self, parts: list[Any]) -> None:
        super().__init__(parts)
        self.gate.set()
        self.decoded: list[tuple[str, int, int, str, range | None]] = []

    def decode(self, ctx: Any, item: Any, embd: Any, pos: int, seq_id: int, rows: range | None = None) -> int:
        self.decoded.append((threading.current_thread().name, pos, seq_id, embd, rows))
        return pos + item.n_pos


def fake_runner(n_slots: int) -> Runner:
    """A runner over the fake model and context, loaded with a projector."""
    mm = Path("mm.gguf")
    spec = LoadSpec(Path("fake.gguf"), n_slots=n_slots, n_ctx_slot=256, n_batch=16, n_threads=1, projector=mm)
    return Runner(
        FakeModel(),  # type: ignore[arg-type]
        spec,
        context=FakeContext,  # type: ignore[arg-type]
        batch=FakeBatch,  # type: ignore[arg-type]
    )


def test_the_runner_decodes_images_on_its_thread_and_a_failed_one_ends_only_its_request() -> None:
    class Broken(Decoding):
        def encode(self, item: Image) -> str:
            raise RuntimeError("the projector refused")

    runner = fake_runner(n_slots=3)
    try:
        cat = image(b"cat", n_tokens=6, n_pos=3)
        good, broken = Decoding([(3, 4), cat, (5,)]), Broken([(3, 4), image(b"dog"), (5,)])
        sinks = {}
        for prompt in (good, broken, None):
            media = cast(MediaInput, prompt) if prompt is not None else None
            request = Request(
                cell_keys(prompt.parts) if prompt else (3, 4, 5), SamplingParams(temperature=0), 3, media=media
            )
            sinks[id(prompt)] = sink = Sink(queue.SimpleQueue())
            runner.submit(request, None, sink)
        ends = {}
        for key, sink in sinks.items():
            events: list[Event] = []
            while not events or events[-1].finish is None:
                events.append(sink.queue.get(timeout=10))  # type: ignore[attr-defined]
            ends[key] = events[-1]
        assert ends[id(good)].finish is FinishReason.LENGTH and ends[id(None)].finish is FinishReason.LENGTH
        assert ends[id(broken)].finish is FinishReason.ERROR and ends[id(broken)].error == "the projector refused"
        assert [(thread.startswith("cllm-engine"), pos, embd) for thread, pos, _, embd, _ in good.decoded] == [
            (True, 2, f"embd-{cat.id[:6]}")
        ]
        assert ends[id(good)].stats is not None and ends[id(good)].stats.prompt_tokens == 9  # image cells count
        until(lambda: good.closed == 1 and broken.closed == 1)
        assert runner.feed.held == {}
    finally:
        runner.close()


def test_a_media_piece_that_failed_ends_its_request_even_when_the_streams_call_then_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The media request's slot is freed when its piece fails; were its error held back until the
    step's end, the streams' call failing next (the loop then fails only what it still knows of)
    would leave that request with no end, its client waiting for ever."""
    # A stream that runs until the failure: a context it never fills, a reader never behind.
    monkeypatch.setattr(outbox, "MAX_BUFFERED_EVENTS", 1 << 30)
    spec = LoadSpec(Path("fake.gguf"), n_slots=2, n_ctx_slot=1 << 24, n_batch=16, n_threads=1, projector=Path("mm"))
    runner = Runner(FakeModel(), spec, context=FakeContext, batch=FakeBatch)  # type: ignore[arg-type]
    ctx = cast(FakeContext, runner.ctx)

    class Broken(Decoding):
        def decode(self, ctx: Any, item: Any, embd: Any, pos: int, seq_id: int, rows: range | None = None) -> int:
            cast(FakeContext, ctx).fail_decode = "the streams' call failed too"
            raise EngineError("the piece's call failed")

    def ending(sink: Sink) -> Event:
        while (event := sink.queue.get(timeout=10)).finish is None:  # type: ignore[attr-defined]
            pass
        return event

    try:
        stream = Sink(queue.SimpleQueue())
        runner.submit(Request((3, 4, 5), SamplingParams(temperature=0), 1 << 23), None, stream)
        assert stream.queue.get(timeout=10).finish is None  # type: ignore[attr-defined]  # generating
        broken = Broken([(3, 4), image(b"dog"), (5,)])
        sink = Sink(queue.SimpleQueue())
        runner.submit(Request(cell_keys(broken.parts), SamplingParams(temperature=0), 3, media=broken), None, sink)
        end = ending(sink)
        assert (end.finish, end.error) == (FinishReason.ERROR, "the piece's call failed")
        assert ending(stream).finish is FinishReason.ERROR
        ctx.fail_decode = None
    finally:
        runner.close()


def test_a_long_clips_windows_are_encoded_a_few_ahead_each_once_and_decoded_in_order() -> None:
    """A long clip is many media items in a row (its 30 s windows): they are queued on the media
    thread a few at a time ahead of their decode, never all at once, so that none is dropped from
    the encoder's kept few before its turn and encoded twice."""
    windows = [image(b"window %d" % i) for i in range(2 * KEPT_MEDIA)]
    prompt = Decoding([(3, 4), *windows, (5,)])
    prompt.gate.clear()  # the first encode holds until the queue has been looked at
    runner = fake_runner(n_slots=1)
    try:
        sink = Sink(queue.SimpleQueue())
        media = cast(MediaInput, prompt)
        runner.submit(Request(cell_keys(prompt.parts), SamplingParams(temperature=0), 2, media=media), None, sink)
        until(prompt.started.is_set)
        assert runner.feed.encoder is not None and len(runner.feed.encoder._queued) <= ENCODE_AHEAD
        prompt.gate.set()
        events: list[Event] = []
        while not events or events[-1].finish is None:
            events.append(sink.queue.get(timeout=10))  # type: ignore[attr-defined]
        assert events[-1].finish is FinishReason.LENGTH
        assert prompt.encoded == [w.id for w in windows]  # each once, in order
        assert [embd for _, _, _, embd, _ in prompt.decoded] == [f"embd-{w.id[:6]}" for w in windows]
    finally:
        runner.close()


def beside_a_stream(
    ready: dict[str, object], cap: int, max_rows: int | None = None, streams: int = 1, n_slots: int = 2
) -> Scheduler:
    """A scheduler whose steps carry ``cap`` prompt rows beside generating streams (the first slots')."""
    s = make(ready, n_slots, n_ctx=256, n_batch=128, max_rows=max_rows, budget=StepBudget(cap=cap))
    for i in range(streams):
        s.add(Request((1, 2, 3 + i), SamplingParams(temperature=0), num_predict=100))
    plan = s.schedule()
    s.update(plan, [5] * streams)
    assert all(s.slots[i].state is SlotState.GENERATING for i in range(streams))
    return s


def pieces_until_text(s: Scheduler) -> list[tuple[range, int, int]]:
    """Step until the image prompt (slot 1) has decoded its image: each step's media piece's rows,
    the stream's decode rows beside it, and slot 1's cells counted after the step."""
    seen: list[tuple[range, int, int]] = []
    for _ in range(50):
        plan = s.schedule()
        if not plan.media:
            return seen
        (piece,) = plan.media
        assert piece.slot.seq_id == 1 and piece.embd == "embd"
        seen.append((piece.rows, len(plan.outputs), 0))
        s.update(plan, [5] * len(plan.outputs))
        seen[-1] = (piece.rows, seen[-1][1], s.slots[1].n_past)
    raise AssertionError("the image never finished")


def test_an_image_is_decoded_in_pieces_of_the_budget_beside_a_generating_stream() -> None:
    cat = image(b"cat", n_tokens=17, n_pos=5)  # M-RoPE: its positions are its start's until it is whole
    s = beside_a_stream({cat.id: "embd"}, cap=8)
    s.add(media_request([(7, 8), cat, (9,)], num_predict=2))
    plan = s.schedule()
    assert plan.prefills == [(s.slots[1], 2)] and not plan.media  # the text before the image
    s.update(plan, [5])
    steps = pieces_until_text(s)
    # Rows in order, 8 a step, never a lone row left for a step of its own (8, then 7 and 2, not 8 and 1);
    # every piece beside the stream's token; the image counted in the slot only once whole.
    assert steps == [(range(0, 8), 1, 2), (range(8, 15), 1, 2), (range(15, 17), 1, 19)]
    assert s.slots[1].pos == 2 + 5
    plan = s.schedule()
    assert plan.prefills == [(s.slots[1], 1)] and plan.positions[-1] == 7  # the text after it, at its position


def test_an_image_whose_tokens_attend_both_ways_is_one_piece_whatever_the_budget() -> None:
    cat = replace(image(b"cat", n_tokens=40), whole=True)
    s = beside_a_stream({cat.id: "embd"}, cap=8)
    s.add(media_request([(7, 8), cat, (9,)], num_predict=2))
    s.update(s.schedule(), [5])
    assert pieces_until_text(s) == [(range(0, 40), 1, 42)]


def test_the_deterministic_mode_keeps_a_piece_under_its_row_limit_even_at_full_width() -> None:
    cat = image(b"cat", n_tokens=100)
    s = make({cat.id: "embd"}, n_slots=1, n_ctx=256, n_batch=128, max_rows=63)
    s.add(media_request([cat, (9,)], num_predict=2))
    sizes = []
    while (plan := s.schedule()).media:
        sizes.append(len(plan.media[0].rows))
        s.update(plan, [])
    assert sizes == [63, 37]


@pytest.mark.parametrize("recurrent", [False, True])
def test_the_rows_of_an_image_left_half_decoded_are_removed_before_the_slot_is_reused(recurrent: bool) -> None:
    cat = image(b"cat", n_tokens=20, n_pos=4)
    s = beside_a_stream({cat.id: "embd"}, cap=8)
    request = media_request([(7, 8), cat, (9,)], num_predict=2)
    prompt = Decoding(list(request.media.parts))  # type: ignore[union-attr]
    request = replace(request, media=prompt)
    s.add(request)
    s.update(s.schedule(), [5])
    feed = MediaFeed(False, lambda: None, "test")
    ctx = FakeContext(FakeModel(), n_seq_max=2, n_ctx_seq=256, n_batch=128, n_threads=1)  # type: ignore[arg-type]
    removed: list[tuple[int, int]] = []

    def seq_rm(seq_id: int, p0: int, p1: int = -1) -> bool:
        removed.append((seq_id, p0))
        return not recurrent  # recurrent memory cannot drop part of a sequence

    ctx.seq_rm = seq_rm  # type: ignore[method-assign]
    ctx.seq_clear = lambda seq_id: removed.append((seq_id, -1))  # type: ignore[method-assign]
    plan = s.schedule()
    assert feed.decode(plan, ctx, s.fail, lambda rows, ns: None, lambda *row: None) == []  # type: ignore[arg-type]
    assert [(pos, rows) for _, pos, _, _, rows in prompt.decoded] == [(2, range(0, 8))]
    s.update(plan, [5])
    feed.drop_partial(ctx, s.slots)  # type: ignore[arg-type]
    assert removed == [] and feed.partial == {1: (request.id, 2)}  # still decoding: kept
    s.abort([request.id])
    feed.drop_partial(ctx, s.slots)  # type: ignore[arg-type]
    if recurrent:  # the state took the rows in: the whole sequence goes, and the slot holds nothing
        assert removed == [(1, 2), (1, -1)] and feed.partial == {} and s.slots[1].cached == []
    else:  # from the image's first position on; the slot counts the text before it, no part of the image
        assert removed == [(1, 2)] and feed.partial == {} and len(s.slots[1].cached) == 2


def test_a_short_chat_shares_the_step_with_a_long_audio_window_and_neither_waits() -> None:
    """A media item takes part in the sharing of a step's prompt rows as text does: the chat that
    arrives while a 100-row window is being decoded beside two streams gets its rows at once
    (fewest left first), and the window keeps the oldest prompt's quarter."""
    window = image(b"audio window", n_tokens=100)
    s = beside_a_stream({window.id: "embd"}, cap=16, streams=2, n_slots=4)
    s.add(media_request([(7, 8), window, (9,)], num_predict=2))
    s.update(s.schedule(), [5, 5])  # the text before the window
    plan = s.schedule()
    assert [len(p.rows) for p in plan.media] == [16] and not plan.prefills  # alone: the whole budget
    s.update(plan, [5] * len(plan.outputs))
    s.add(Request(tuple(range(20, 30)), SamplingParams(temperature=0), num_predict=2))
    plan = s.schedule()
    assert [(p.slot.seq_id, p.rows) for p in plan.media] == [(2, range(16, 22))]  # its quarter, and the rest
    assert [(slot.seq_id, n) for slot, n in plan.prefills] == [(3, 10)]  # the chat whole, in one step
    assert len(plan.outputs) == 3  # the streams' tokens, and the chat's first
