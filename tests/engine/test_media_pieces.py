"""Media in pieces with the tiny models: an image's or audio window's embeddings decoded a piece at
a time answer exactly as libmtmd's own helper does (the M-RoPE image's t, y, x positions too), and
in the engine an image's rows are spread over steps beside running text streams (its step log)
without changing the answer.

In the deterministic setting (weights not repacked, as ``CLLM_DETERMINISTIC`` loads them) every
call of 2 to 63 rows takes the same CPU kernels, so pieces of any such size give the same bits:
the comparisons are exact, never a greedy near-tie.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from oracle import GREEDY, drain, submit, tokens_of
from polling import until
from test_media_binding import decode_stepwise, greedy

from cllm_ollama.engine.binding import Context, MediaItem, Model, Projector, batch_invariant_kernels
from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.media import cell_keys
from cllm_ollama.engine.request import Event, FinishReason, Request
from cllm_ollama.engine.runner import Runner, Sink
from cllm_ollama.engine.step_budget import AUTO_SLACK, MEDIA_SLACK
from cllm_ollama.errors import EngineError
from cllm_ollama.testing.audio import wav
from cllm_ollama.testing.audio_ggufs import AUDIO_TOKENS, write_audio
from cllm_ollama.testing.ggufs import write_vision
from cllm_ollama.testing.images import png
from cllm_ollama.testing.sliced_ggufs import write_sliced_vision
from cllm_ollama.testing.tower_ggufs import write_qwen35_vision
from cllm_ollama.testing.vision_ggufs import write_qwen3vl_vision

pytestmark = pytest.mark.model

QUESTION = "Look: {m} What is in it?"
N_CTX = AUDIO_TOKENS + 256


WRITERS: dict[str, Callable[[Path], tuple[Path, Path]]] = {
    "qwen2vl": lambda folder: write_vision(folder, kind="qwen2vl"),
    "qwen3vl": write_qwen3vl_vision,
    "qwen35": write_qwen35_vision,
    "audio": write_audio,
    "idefics3": write_sliced_vision,
    "gemma3": write_vision,
}


def media_of(kind: str) -> bytes:
    """An audio window (750 rows) or an image: Qwen2-VL's 256 x 192 is a grid of 8 x 6 tokens (not
    square: y and x told apart), Qwen3-VL's and Qwen 3.5's 16 x 12; Idefics3's 64 px is 2 x 2 tiles
    and an overview."""
    if kind == "audio":
        return wav(1.0, seed=3)
    return png(64, 64, seed=3) if kind in ("idefics3", "gemma3") else png(256, 192, seed=3)


@pytest.fixture(scope="module", params=list(WRITERS))
def projector(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Projector]:
    """M-RoPE: qwen2vl, qwen3vl (deepstack: its rows are wider than the model) and qwen35 (a hybrid
    of attention and recurrent layers); sequential positions: audio (Qwen2-Audio) and idefics3;
    gemma3: non-causal."""
    batch_invariant_kernels()
    text, mmproj = WRITERS[request.param](tmp_path_factory.mktemp(request.param))
    model = Model(text, batch_invariant=True)
    proj = Projector(model, mmproj, n_threads=2)
    proj.kind = request.param  # type: ignore[attr-defined]
    yield proj
    proj.close()
    model.close()


def helper_reference(projector: Projector, n_batch: int) -> tuple[int, np.ndarray, list[int]]:
    """libmtmd's own helper over the whole prompt, splitting each item into calls of ``n_batch``
    rows: the position after it, the last logits and 8 greedy tokens."""
    prompt = projector.tokenize(QUESTION.format(m=projector.marker), [media_of(projector.kind)])  # type: ignore[attr-defined]
    ctx = Context(projector.model, n_seq_max=1, n_ctx_seq=N_CTX, n_batch=n_batch, n_threads=2)
    try:
        end = prompt.eval_all(ctx, 0, 0)
        logits = ctx.logits(1)[0].copy()
        return end, logits, greedy(ctx, end, logits, 0, 8)
    finally:
        ctx.close()
        prompt.close()


def test_media_decoded_in_pieces_answers_exactly_as_libmtmds_helper(projector: Projector) -> None:
    prompt = projector.tokenize(QUESTION.format(m=projector.marker), [media_of(projector.kind)])  # type: ignore[attr-defined]
    ctx = Context(projector.model, n_seq_max=1, n_ctx_seq=N_CTX, n_batch=256, n_threads=2)
    try:
        items = [p for p in prompt.parts if isinstance(p, MediaItem)]
        assert all(item.whole == (projector.kind == "gemma3") for item in items)  # type: ignore[attr-defined]
        # The helper cuts an item (and a text run) into calls of its n_batch rows: 32 here, which
        # leaves no text run a lone row; pieces of 32 and of other sizes below.
        end, reference, answer = helper_reference(projector, 32)
        for size in (32, 5, 63):
            ctx.seq_clear(0)
            pos, logits = decode_stepwise(ctx, prompt, 0, size)
            assert pos == end == prompt.n_pos
            np.testing.assert_array_equal(logits, reference, err_msg=f"pieces of {size}")
            assert greedy(ctx, pos, logits, 0, 8) == answer
    finally:
        ctx.close()
        prompt.close()


@pytest.mark.parametrize("projector", ["gemma3"], indirect=True)
def test_an_image_that_attends_both_ways_is_refused_in_pieces(projector: Projector) -> None:
    prompt = projector.tokenize(QUESTION.format(m=projector.marker), [media_of("gemma3")])
    ctx = Context(projector.model, n_seq_max=1, n_ctx_seq=N_CTX, n_batch=256, n_threads=2)
    try:
        (item,) = [p for p in prompt.parts if isinstance(p, MediaItem)]
        with pytest.raises(EngineError, match="decoded whole"):
            prompt.decode(ctx, item, prompt.encode(item), 10, 0, range(0, item.n_tokens - 2))
    finally:
        ctx.close()
        prompt.close()


STEP = re.compile(r"step: (\d+) decode rows, prompt rows \{.*?\}, media rows \{(.*?)\}")


def media_steps(records: list[logging.LogRecord], seq_id: int) -> list[tuple[int, int]]:
    """From the engine's step log: (decode rows, the media rows of ``seq_id``) of each step that
    decoded a piece of its media."""
    out = []
    for record in records:
        match = STEP.match(record.getMessage())
        if match is None:
            continue
        rows = {int(k): int(v) for k, v in (kv.split(": ") for kv in match[2].split(", ") if kv)}
        if seq_id in rows:
            out.append((int(match[1]), rows[seq_id]))
    return out


def has_events(sink: Sink) -> bool:
    return not sink.queue.empty()  # type: ignore[attr-defined]


def ask_with_streams(runner: Runner, projector: Projector, n_streams: int) -> tuple[list[int], int]:
    """The media prompt's greedy answer, asked while ``n_streams`` text streams generate (each read
    as it comes, so none pauses); its slot."""
    model = projector.model
    texts = [Request(tuple(model.tokenize(f"Count to a thousand, {i}:")), GREEDY) for i in range(n_streams)]
    streams = [submit(runner, text) for text in texts]
    for sink in streams:  # every stream generates before the media prompt arrives
        until(functools.partial(has_events, sink))
    readers = [threading.Thread(target=drain, args=(sink,), daemon=True) for sink in streams]
    for reader in readers:
        reader.start()
    media: Any = projector.tokenize(QUESTION.format(m=projector.marker), [media_of(projector.kind)])  # type: ignore[attr-defined]
    request = Request(cell_keys(media.parts), GREEDY, num_predict=8, media=media)
    events: list[Event] = drain(submit(runner, request))
    assert events[-1].finish is FinishReason.LENGTH, events[-1].error
    slot = n_streams  # the streams took the first slots
    for text in texts:
        runner.abort(text.id)
    for reader in readers:
        reader.join(30)
    return tokens_of(events), slot


def beside_streams(projector: Projector, max_prefill: int, deterministic: bool) -> LoadSpec:
    """A load of ``projector``'s model with room for the media prompt and two text streams;
    ``max_prefill``: the prompt rows a step may carry beside generating streams."""
    return LoadSpec(
        projector.model.path,
        n_slots=3,
        n_ctx_slot=N_CTX + 1024,
        n_batch=256,
        n_threads=2,
        projector=projector.path,
        max_prefill=max_prefill,
        deterministic=deterministic,
    )


def alone_and_beside_streams(
    projector: Projector, spec: LoadSpec, alone: LoadSpec, caplog: pytest.LogCaptureFixture
) -> tuple[list[int], list[int], list[tuple[int, int]], list[int]]:
    """The media prompt's greedy answer from a runner of ``alone``'s with nothing beside it, then
    from one of ``spec``'s beside two text streams, that step's media pieces (``media_steps``), and
    the rows of each of its media items."""
    media: Any = projector.tokenize(QUESTION.format(m=projector.marker), [media_of(projector.kind)])  # type: ignore[attr-defined]
    items = [p.n_tokens for p in media.parts if isinstance(p, MediaItem)]
    runner = Runner(projector.model, alone)
    try:
        expected = tokens_of(drain(submit(runner, Request(cell_keys(media.parts), GREEDY, num_predict=8, media=media))))
    finally:
        runner.close()
    runner = Runner(projector.model, spec)
    try:
        with caplog.at_level(logging.DEBUG, logger="cllm.engine"):
            answer, slot = ask_with_streams(runner, projector, 2)
        rides = runner.token_rows is not None
        assert runner.budget.media_slack == (MEDIA_SLACK if rides else AUTO_SLACK)  # the tighter target with riding
    finally:
        runner.close()
    assert rides == (not spec.deterministic)  # these models' tokens ride outside the mode
    return expected, answer, media_steps(caplog.records, slot), items


# Not Qwen 3.5: the deterministic mode's throw-away pad rows cannot be removed from a recurrent
# state, so its text steps fail there, with or without media (the same on main).
@pytest.mark.parametrize("projector", [kind for kind in WRITERS if kind != "qwen35"], indirect=True)
def test_media_rows_are_spread_over_steps_beside_running_streams_and_answer_the_same(
    projector: Projector, caplog: pytest.LogCaptureFixture
) -> None:
    kind = projector.kind  # type: ignore[attr-defined]
    spec = beside_streams(projector, max_prefill=8, deterministic=True)
    expected, answer, steps, items = alone_and_beside_streams(projector, spec, spec, caplog)
    assert answer == expected
    n_rows, biggest = sum(items), max(items)
    assert sum(rows for _, rows in steps) == n_rows
    # Every piece beside the streams' tokens (at least one of them: a random model's stream may
    # sample its end-of-generation token on another CPU).
    assert all(decode >= 1 for decode, _ in steps)
    if kind == "gemma3":
        assert [rows for _, rows in steps] == [biggest]  # one piece, whatever the budget
    else:
        assert len(steps) >= n_rows // 8 and max(rows for _, rows in steps) <= 9


# The models whose tokens can ride as embeddings (``binding.token_rows``): an M-RoPE image, audio.
@pytest.mark.parametrize("projector", ["qwen2vl", "audio"], indirect=True)
def test_a_media_row_rides_in_the_streams_call_and_answers_the_same(
    projector: Projector, caplog: pytest.LogCaptureFixture
) -> None:
    """Outside the deterministic mode, where the budget leaves a row a step (a prompt chunk of 1),
    each media row rides in the streams' call, their tokens given as embedding rows: the step log
    shows pieces of one row beside the streams' tokens, and the answer is the one it gives alone."""
    spec = beside_streams(projector, max_prefill=1, deterministic=False)
    expected, answer, steps, items = alone_and_beside_streams(
        projector, spec, replace(spec, deterministic=True), caplog
    )
    # Every call of these rows takes the same kernels as alone (the weights are as stored) while a
    # stream generates beside them; a random model's streams rarely both end meanwhile.
    assert answer == expected
    assert sum(rows for _, rows in steps) == sum(items)
    # A piece in a call of its own is never a lone row: one beside the streams' tokens rode with them.
    assert all(rows == 1 for _, rows in steps) and all(decode >= 1 for decode, _ in steps)


@pytest.mark.parametrize("projector", ["audio"], indirect=True)
def test_a_riding_row_whose_call_fails_ends_only_its_request(
    projector: Projector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The streams' call that carries a media row fails: the media's request ends with the error,
    and the streams' rows go again without it (they keep generating), as when a piece's own call fails."""
    runner = Runner(projector.model, beside_streams(projector, max_prefill=1, deterministic=False))
    try:
        decode = runner.ctx.decode_embeddings

        def failing(embd: np.ndarray, positions: np.ndarray, seq_id: Any, outputs: Any = ()) -> None:
            if not isinstance(seq_id, int):  # a sequence a row: the streams' call with a media row in it
                raise EngineError("llama_decode of embeddings failed (-1): a stand-in")
            decode(embd, positions, seq_id, outputs)

        monkeypatch.setattr(runner.ctx, "decode_embeddings", failing)
        model = projector.model
        texts = [Request(tuple(model.tokenize(f"Count to a thousand, {i}:")), GREEDY) for i in range(2)]
        streams = [submit(runner, text) for text in texts]
        for sink in streams:
            until(functools.partial(has_events, sink))
        media: Any = projector.tokenize(QUESTION.format(m=projector.marker), [media_of("audio")])
        events = drain(submit(runner, Request(cell_keys(media.parts), GREEDY, num_predict=8, media=media)))
        assert events[-1].finish is FinishReason.ERROR and "a stand-in" in (events[-1].error or "")
        for sink in streams:  # after the failure, every stream still gets tokens, and no error
            while not sink.queue.empty():  # type: ignore[attr-defined]
                assert sink.queue.get().finish is None  # type: ignore[attr-defined]
            assert sink.queue.get(timeout=60).tokens  # type: ignore[attr-defined]
        for text in texts:
            runner.abort(text.id)
    finally:
        runner.close()
