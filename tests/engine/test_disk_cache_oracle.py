"""Oracle tests of the disk tier: a conversation whose start comes back from disk after its model
was unloaded gives exactly the greedy tokens of a cold computation, and a file that is
truncated, corrupted, or another model's or KV type's is ignored while the answer stays right."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import llama_cpp
import oracle
import pytest
from oracle import GREEDY, OTHER, N, cold_tokens, drain, make_runner, submit
from oracle import tokens_of as answer_of
from polling import until

from cllm_ollama.engine import disk_cache, prefix
from cllm_ollama.engine.request import Request
from cllm_ollama.testing.ggufs import Shape, write_qwen3

pytestmark = pytest.mark.model
gguf_path, cold = oracle.gguf_path, oracle.cold  # the oracle model and its cold reference (fixtures)


def first_session(gguf_path: Path, disk: Path, n_slots: int = 1) -> tuple[tuple[int, ...], list[int], tuple[int, ...]]:
    """A conversation's first turn on a runner that is then unloaded (its state goes to disk):
    the prompt, its answer, and the conversation's next turn."""
    runner = make_runner(gguf_path, n_slots=n_slots, disk=disk)
    try:
        first = oracle.shared_prompts(runner.model)[0]
        answer = answer_of(drain(submit(runner, Request(first, GREEDY, num_predict=N))))
        return first, answer, oracle.next_turn(runner.model, first, answer)
    finally:
        oracle.close(runner)


def second_session(gguf_path: Path, disk: Path, prompt: tuple[int, ...], **spec: object) -> tuple[list[int], int]:
    """A fresh runner (nothing in RAM) answers ``prompt``: its tokens, and how many came from disk."""
    runner = make_runner(gguf_path, n_slots=1, disk=disk, **spec)
    try:
        tokens = answer_of(drain(submit(runner, Request(prompt, GREEDY, num_predict=N))))
        return tokens, runner.scheduler.stats.loaded
    finally:
        oracle.close(runner)


def state_files(disk: Path) -> list[Path]:
    return sorted(disk.glob("*/*" + disk_cache.SUFFIX))


def test_a_conversation_loaded_from_disk_after_an_unload_gives_the_cold_tokens(
    gguf_path: Path, cold: llama_cpp.Llama, tmp_path: Path
) -> None:
    first, answer, follow_up = first_session(gguf_path, tmp_path)
    assert answer == cold_tokens(cold, first)
    assert len(state_files(tmp_path)) == 1
    tokens, loaded = second_session(gguf_path, tmp_path, follow_up)
    assert loaded >= len(first)
    assert tokens == cold_tokens(cold, follow_up)


@pytest.mark.parametrize("damage", ["truncated", "corrupted", "other-model", "other-tokens"])
def test_a_damaged_or_foreign_file_is_a_miss_and_the_answer_stays_right(
    gguf_path: Path, cold: llama_cpp.Llama, tmp_path: Path, damage: str
) -> None:
    _, _, follow_up = first_session(gguf_path, tmp_path)
    (path,) = state_files(tmp_path)
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "corrupted":
        data[len(data) // 2] ^= 0xFF  # one flipped byte in the KV payload: only the checksum sees it
        path.write_bytes(data)
    elif damage == "other-model":
        data[8] ^= 0xFF  # the identity digest in the header: written by another model or KV type
        path.write_bytes(data)
    else:  # a file renamed onto another prompt's name: its tokens are not the index's
        data[disk_cache._HEAD.size] ^= 0x01
        path.write_bytes(data)
    tokens, loaded = second_session(gguf_path, tmp_path, follow_up)
    assert loaded == 0
    assert tokens == cold_tokens(cold, follow_up)


def test_another_kv_cache_type_never_reads_the_files(tmp_path: Path) -> None:
    # Heads of 32 values: a q8_0 cache needs whole 32-value blocks.
    path = write_qwen3(tmp_path / "heads32.gguf", shape=Shape(n_head=2, n_head_kv=1, head_dim=32), endless=True)
    disk = tmp_path / "cache"
    first, _, follow_up = first_session(path, disk)
    _, loaded = second_session(path, disk, follow_up, kv_cache_type="q8_0", flash_attention=True)
    assert loaded == 0
    assert len({p.parent for p in state_files(disk)}) == 2  # each identity its own directory
    tokens, loaded = second_session(path, disk, follow_up)
    assert loaded >= len(first)
    with oracle.cold_llm(path) as cold:
        assert tokens == cold_tokens(cold, follow_up)


def test_a_full_disk_does_not_fail_requests(
    gguf_path: Path, cold: llama_cpp.Llama, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(src: object, dst: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(disk_cache.os, "replace", full)
    first, answer, follow_up = first_session(gguf_path, tmp_path)
    assert answer == cold_tokens(cold, first)
    assert state_files(tmp_path) == [] and list(tmp_path.glob("*/.tmp-*")) == []
    tokens, loaded = second_session(gguf_path, tmp_path, follow_up)
    assert loaded == 0
    assert tokens == cold_tokens(cold, follow_up)


def test_others_keep_stepping_while_a_state_is_read_from_disk(
    gguf_path: Path, cold: llama_cpp.Llama, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, answer, follow_up = first_session(gguf_path, tmp_path, n_slots=2)
    release = threading.Event()
    read = disk_cache.DiskCache._read

    def slow_read(self: disk_cache.DiskCache, path: Path, tokens: tuple[int, ...]) -> disk_cache.Read | None:
        assert release.wait(60)  # a disk that takes as long as the test wants
        return read(self, path, tokens)

    monkeypatch.setattr(disk_cache.DiskCache, "_read", slow_read)
    runner = make_runner(gguf_path, n_slots=2, disk=tmp_path)
    try:
        waiting = submit(runner, Request(follow_up, GREEDY, num_predict=N))
        other = tuple(runner.model.tokenize(OTHER))
        # The other request runs to its end while the first one's state is still being read.
        assert answer_of(drain(submit(runner, Request(other, GREEDY, num_predict=N)))) == cold_tokens(cold, other)
        assert waiting.published == 0
        release.set()
        assert answer_of(drain(waiting)) == cold_tokens(cold, follow_up)
        # The first turn's prompt and answer (less its last token, never decoded) came from disk.
        assert runner.scheduler.stats.loaded == len(first) + len(answer) - 1
    finally:
        release.set()
        oracle.close(runner)


def test_a_long_computed_prompt_reaches_disk_before_any_unload(
    gguf_path: Path, cold: llama_cpp.Llama, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prefix, "CHECKPOINT_TOKENS", 64)  # the test prompts are short
    runner = make_runner(gguf_path, n_slots=1, disk=tmp_path)
    try:
        first = oracle.shared_prompts(runner.model)[0]
        answer_of(drain(submit(runner, Request(first, GREEDY, num_predict=N))))
        # Written while the model is still loaded: a crash now would not lose it.
        (path,) = until(lambda: state_files(tmp_path))
        reader = disk_cache.DiskCache(tmp_path, runner.kv.disk.identity, 1 << 20, 32)  # type: ignore[union-attr]
        try:
            assert reader.lookup(first)[1] == len(first)
            assert reader.lookup(first)[0].tokens == first  # type: ignore[union-attr]
        finally:
            reader.close()
        # A second prompt that computed few tokens is not written again.
        answer_of(drain(submit(runner, Request((*first, *first[1:9]), GREEDY, num_predict=N))))
        assert state_files(tmp_path) == [path]
    finally:
        oracle.close(runner)


@pytest.mark.parametrize(("saved_with", "read_with"), [(2, 1), (1, 3)])
def test_a_state_saved_with_one_slot_count_restores_with_another(
    gguf_path: Path, cold: llama_cpp.Llama, tmp_path: Path, saved_with: int, read_with: int
) -> None:
    """Files hold one KV stream (``state_streams``): a reload for another num_parallel reads them."""
    first, _, follow_up = first_session(gguf_path, tmp_path, n_slots=saved_with)
    runner = make_runner(gguf_path, n_slots=read_with, disk=tmp_path)
    try:
        tokens = answer_of(drain(submit(runner, Request(follow_up, GREEDY, num_predict=N))))
        assert runner.scheduler.stats.loaded >= len(first)
        assert tokens == cold_tokens(cold, follow_up)
    finally:
        oracle.close(runner)
