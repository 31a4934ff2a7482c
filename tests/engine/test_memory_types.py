"""Oracle tests on the memory types that behave differently when a prompt's start is reused:
sliding-window attention (gemma3: an iSWA cache), recurrent (mamba: one state per sequence, no
KV cells) and hybrid (jamba: both). Greedy output of every path (own slot, copied, restored,
shared by requests arriving together, batched with others) equals a cold computation, token for
token; models whose memory cannot be cut recompute instead of sharing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import llama_cpp
import pytest
from oracle import (
    GREEDY,
    QUESTIONS,
    SYSTEM,
    N,
    answer_then_other,
    close,
    cold_llm,
    cold_tokens,
    drain,
    make_runner,
    next_turn,
    shared_prompts,
    submit,
    tokens_of,
)

from cllm_ollama.engine.binding import Model
from cllm_ollama.engine.request import Request
from cllm_ollama.engine.runner import Runner
from cllm_ollama.testing.ggufs import write_gemma3, write_jamba, write_mamba

pytestmark = pytest.mark.model

WINDOW = 16  # gemma3's sliding window here: every prompt below is several windows long

WRITERS: dict[str, Callable[..., Path]] = {"gemma3": write_gemma3, "mamba": write_mamba, "jamba": write_jamba}
RECURRENT = {"mamba", "jamba"}


@pytest.fixture(scope="module", params=sorted(WRITERS))
def arch(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def gguf_path(arch: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    # F32 weights of scale 0.5 (peaked logits); endless: every request runs its N tokens.
    kwargs = {"sliding_window": WINDOW} if arch == "gemma3" else {}
    return WRITERS[arch](tmp_path_factory.mktemp(arch) / f"{arch}.gguf", endless=True, **kwargs)


@pytest.fixture(scope="module")
def cold(gguf_path: Path) -> Iterator[llama_cpp.Llama]:
    with cold_llm(gguf_path) as llm:
        yield llm


def distinct_prompts(model: Model) -> list[tuple[int, ...]]:
    """Four prompts with nothing in common from their first token."""
    starts = ["Hello, how are you today?", "Write a short poem about the sea.", "def add(a, b):", "Once upon a time"]
    return [tuple(model.tokenize(f"{s} {q}\n{SYSTEM}")) for s, q in zip(starts, QUESTIONS, strict=True)]


def assert_no_sharing(runner: Runner) -> None:
    """A recurrent or hybrid memory cannot be cut: nothing copied, nothing restored, no host cache."""
    assert runner.model.is_recurrent
    assert runner.kv.cache is None
    assert runner.scheduler.stats.copied == 0
    assert runner.scheduler.stats.restored == 0


def test_the_model_has_the_memory_type_it_is_written_for(arch: str, gguf_path: Path) -> None:
    model = Model(gguf_path)
    try:
        assert model.is_recurrent == (arch in RECURRENT)
        assert model.n_swa == (WINDOW if arch == "gemma3" else 0)
        assert model.meta("general.architecture") == arch
        assert gguf_path.stat().st_size < 4 << 20
    finally:
        model.close()


def test_generation_equals_the_cold_computation(gguf_path: Path, cold: llama_cpp.Llama) -> None:
    runner = make_runner(gguf_path, n_slots=1)
    try:
        prompt = shared_prompts(runner.model)[0]
        assert len(prompt) > 3 * WINDOW
        events = drain(submit(runner, Request(prompt, GREEDY, num_predict=N)))
        assert tokens_of(events) == cold_tokens(cold, prompt)
        assert len(set(tokens_of(events))) > 4  # not one token repeated
    finally:
        close(runner)


def test_a_second_turn_reuses_the_first_and_equals_cold(arch: str, gguf_path: Path, cold: llama_cpp.Llama) -> None:
    runner = make_runner(gguf_path, n_slots=1)
    try:
        model = runner.model
        first = shared_prompts(model)[0]
        answer = tokens_of(drain(submit(runner, Request(first, GREEDY, num_predict=N))))
        follow_up = next_turn(model, first, answer)
        events = drain(submit(runner, Request(follow_up, GREEDY, num_predict=N)))
        assert tokens_of(events) == cold_tokens(cold, follow_up)
        if arch in RECURRENT:
            assert_no_sharing(runner)  # whether the state was continued: the test below
        else:
            # The slot's own KV, several windows long, served the whole first turn.
            stats = events[-1].stats
            assert stats is not None and stats.prompt_cached == len(first) + N - 1
            assert runner.scheduler.stats.own == stats.prompt_cached
    finally:
        close(runner)


@pytest.mark.parametrize("writer", [write_mamba, write_jamba], ids=["mamba", "jamba"])
def test_a_recurrent_state_is_continued_by_the_next_turn(writer: Callable[..., Path], tmp_path: Path) -> None:
    runner = make_runner(writer(tmp_path / "m.gguf", endless=True), n_slots=1)
    try:
        model = runner.model
        first = shared_prompts(model)[0]
        answer = tokens_of(drain(submit(runner, Request(first, GREEDY, num_predict=N))))
        follow_up = next_turn(model, first, answer)
        events = drain(submit(runner, Request(follow_up, GREEDY, num_predict=N)))
        with cold_llm(model.path) as llm:
            assert tokens_of(events) == cold_tokens(llm, follow_up)
        # The scheduler keeps a whole state it can continue (Scheduler._place, share=False): the
        # first turn and its answer are not computed again.
        stats = events[-1].stats
        assert stats is not None and stats.prompt_cached == len(first) + N - 1
    finally:
        close(runner)


@pytest.mark.parametrize("n_slots", [2, 4])
def test_prompts_decoded_together_equal_each_alone(
    arch: str, gguf_path: Path, cold: llama_cpp.Llama, n_slots: int
) -> None:
    runner = make_runner(gguf_path, n_slots=n_slots)
    try:
        all_prompts = distinct_prompts(runner.model)
        sinks = [submit(runner, Request(p, GREEDY, num_predict=N)) for p in all_prompts]
        results = [tokens_of(drain(s)) for s in sinks]
        assert results == [cold_tokens(cold, p) for p in all_prompts]
        assert len({tuple(r) for r in results}) == len(all_prompts)  # not degenerate
        assert runner.scheduler.stats.cached == 0  # nothing in common: batching alone
    finally:
        close(runner)


def test_a_prefix_from_a_generating_slot_equals_cold(arch: str, gguf_path: Path, cold: llama_cpp.Llama) -> None:
    runner = make_runner(gguf_path, n_slots=2)
    try:
        first, second = shared_prompts(runner.model)[:2]
        running = submit(runner, Request(first, GREEDY, num_predict=60))
        running.queue.get(timeout=60)  # type: ignore[attr-defined]  # generating now
        running.consumed += 1
        events = drain(submit(runner, Request(second, GREEDY, num_predict=N)))
        drain(running)
        assert tokens_of(events) == cold_tokens(cold, second)
        stats = events[-1].stats
        assert stats is not None
        if arch in RECURRENT:
            assert_no_sharing(runner)
            assert stats.prompt_cached == 0
        else:
            # Several windows' worth of KV copied from the other stream, then trimmed.
            assert stats.prompt_cached >= 2 * WINDOW
            assert runner.scheduler.stats.copied == stats.prompt_cached
    finally:
        close(runner)


def test_requests_arriving_together_equal_cold(arch: str, gguf_path: Path, cold: llama_cpp.Llama) -> None:
    runner = make_runner(gguf_path, n_slots=4)
    try:
        all_prompts = shared_prompts(runner.model)
        sinks = [submit(runner, Request(p, GREEDY, num_predict=N)) for p in all_prompts]
        results = [tokens_of(drain(s)) for s in sinks]
        assert results == [cold_tokens(cold, p) for p in all_prompts]
        assert len({tuple(r) for r in results}) == len(all_prompts)
        if arch in RECURRENT:
            assert_no_sharing(runner)
        else:
            shared = len(runner.model.tokenize(SYSTEM + "\nQ:")) - 1
            assert runner.scheduler.stats.copied >= 3 * (shared - 8)
    finally:
        close(runner)


def test_a_conversation_back_after_its_slot_was_taken_equals_cold(
    arch: str, gguf_path: Path, cold: llama_cpp.Llama
) -> None:
    runner = make_runner(gguf_path, n_slots=1)
    try:
        model = runner.model
        first = shared_prompts(model)[0]
        answer = answer_then_other(runner, first)  # the other takes the only slot
        if arch not in RECURRENT:
            assert runner.kv.cache is not None and len(runner.kv.cache) == 1  # the first was saved
        follow_up = next_turn(model, first, answer)
        events = drain(submit(runner, Request(follow_up, GREEDY, num_predict=N)))
        assert tokens_of(events) == cold_tokens(cold, follow_up)
        if arch in RECURRENT:
            assert_no_sharing(runner)
    finally:
        close(runner)


# -- sliding window only ----------------------------------------------------------------


@pytest.fixture(scope="module")
def swa_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_gemma3(tmp_path_factory.mktemp("swa") / "gemma3.gguf", endless=True, sliding_window=WINDOW)


@pytest.fixture(scope="module")
def swa_cold(swa_path: Path) -> Iterator[llama_cpp.Llama]:
    with cold_llm(swa_path) as llm:
        yield llm


def test_the_window_matters(swa_path: Path, swa_cold: llama_cpp.Llama) -> None:
    """Guards the oracle: a window of 16 and a whole-sequence model answer differently, so the
    tests above would see a reused KV that attended the wrong span."""
    model = Model(swa_path)
    try:
        prompt = shared_prompts(model)[0]
    finally:
        model.close()
    wide = write_gemma3(swa_path.with_name("wide.gguf"), endless=True, sliding_window=4096)
    with cold_llm(wide) as llm:
        assert cold_tokens(llm, prompt) != cold_tokens(swa_cold, prompt)


def test_a_long_prompt_reused_then_copied_equals_cold(swa_path: Path, swa_cold: llama_cpp.Llama) -> None:
    """One conversation many windows long: its own slot continues it, then a second slot copies
    it while the first generates; both continuations equal cold."""
    runner = make_runner(swa_path, n_slots=2, n_ctx=512)
    try:
        model = runner.model
        first = tuple(model.tokenize(f"{SYSTEM} {SYSTEM}"))
        assert 12 * WINDOW < len(first) < 512 - 100
        answer = tokens_of(drain(submit(runner, Request(first, GREEDY, num_predict=N))))
        follow_up = next_turn(model, first, answer)
        running = submit(runner, Request(follow_up, GREEDY, num_predict=60))
        got = [running.queue.get(timeout=60)]  # type: ignore[attr-defined]
        running.consumed += 1
        branch = first + tuple(model.tokenize("\nQ: Something else?\nA:", add_special=False))
        branched = drain(submit(runner, Request(branch, GREEDY, num_predict=N)))
        continued = tokens_of(got + drain(running))
        assert continued[:N] == cold_tokens(swa_cold, follow_up)
        assert tokens_of(branched) == cold_tokens(swa_cold, branch)
        stats = runner.scheduler.stats
        assert stats.own >= len(first) and stats.copied >= len(first)
    finally:
        close(runner)


def test_a_restore_cut_below_the_saved_window_equals_cold(swa_path: Path, swa_cold: llama_cpp.Llama) -> None:
    runner = make_runner(swa_path, n_slots=1)
    try:
        model = runner.model
        first, second = shared_prompts(model)[:2]
        answer_then_other(runner, first)  # saves the first
        # Shares only the system prompt with the saved conversation: restored, then cut far below
        # the last window the state kept.
        events = drain(submit(runner, Request(second, GREEDY, num_predict=N)))
        assert tokens_of(events) == cold_tokens(swa_cold, second)
    finally:
        close(runner)


def test_an_swa_conversation_is_restored_from_the_host_cache(swa_path: Path, swa_cold: llama_cpp.Llama) -> None:
    runner = make_runner(swa_path, n_slots=1)
    try:
        model = runner.model
        first = shared_prompts(model)[0]
        answer = answer_then_other(runner, first)
        follow_up = next_turn(model, first, answer)
        events = drain(submit(runner, Request(follow_up, GREEDY, num_predict=N)))
        assert tokens_of(events) == cold_tokens(swa_cold, follow_up)
        assert runner.scheduler.stats.restored >= len(first)
    finally:
        close(runner)


@pytest.mark.parametrize("writer", [write_mamba, write_jamba], ids=["mamba", "jamba"])
def test_the_deterministic_mode_serves_recurrent_models(
    writer: Callable[..., Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The mode's pad tokens cannot be dropped from a recurrent state: padded, every step failed
    # ("invalid batch"). Unshaped, such a model answers, as cold, and the log says why.
    runner = make_runner(writer(tmp_path / "m.gguf", endless=True), n_slots=2, deterministic=True)
    try:
        assert not runner.invariant
        assert "cannot drop the deterministic mode's pad tokens" in caplog.text
        prompts = distinct_prompts(runner.model)[:2]
        sinks = [submit(runner, Request(p, GREEDY, num_predict=N)) for p in prompts]
        results = [tokens_of(drain(s)) for s in sinks]
        with cold_llm(runner.model.path) as llm:
            assert results == [cold_tokens(llm, p) for p in prompts]
    finally:
        close(runner)


def test_an_swa_state_loaded_from_disk_brings_its_window_checkpoints(
    swa_path: Path, swa_cold: llama_cpp.Llama, tmp_path: Path
) -> None:
    """After an unload, a follow-up that re-sends the answer changed halfway (as a client's
    re-tokenized text is) cuts the state loaded from disk below the window it holds: the
    checkpoints saved in its file let it keep its start up to the nearest one, instead of
    computing the whole prompt again, and it answers as cold does."""
    answer_n, cut = 120, 70  # checkpoints every 32 answer tokens (MIN_GAP): the nearest is < 32 back
    runner = make_runner(swa_path, n_slots=1, n_ctx=512, disk=tmp_path)
    try:
        model = runner.model
        first = shared_prompts(model)[0]
        answer = tokens_of(drain(submit(runner, Request(first, GREEDY, num_predict=answer_n))))
        edit = tuple(model.tokenize(" Or so I was told.", add_special=False))
        assert edit[0] != answer[cut]
        follow_up = next_turn(model, first, [*answer[:cut], *edit])
    finally:
        close(runner)  # the unload: the slot's state goes to disk
    runner = make_runner(swa_path, n_slots=1, n_ctx=512, disk=tmp_path)
    try:
        events = drain(submit(runner, Request(follow_up, GREEDY, num_predict=N)))
        stats = events[-1].stats
        assert stats is not None
        computed = stats.prompt_tokens - stats.prompt_cached
        assert runner.scheduler.stats.loaded >= len(first)  # a start came from the file
        assert computed <= len(follow_up) - (len(first) + cut) + 32
        assert tokens_of(events) == cold_tokens(swa_cold, follow_up)
    finally:
        close(runner)
