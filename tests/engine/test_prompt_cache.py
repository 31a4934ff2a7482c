"""The host prompt cache's bookkeeping: lookup by prefix, one copy of a shared start, LRU."""

from __future__ import annotations

from cllm_ollama.engine.prompt_cache import BLOCK, PromptCache, common_prefix


def seq(n: int, start: int = 0) -> tuple[int, ...]:
    return tuple(range(start, start + n))


def test_lookup_finds_the_longest_shared_prefix_to_the_token() -> None:
    cache = PromptCache(10_000, min_tokens=32)
    cache.add(seq(100), "a", 10)
    cache.add(seq(3 * BLOCK) + seq(50, 1000), "b", 10)
    entry, n = cache.lookup((*seq(98), 7, 7))  # 98 shared with "a", 96 with "b"
    assert entry is not None and entry.payload == "a" and n == 98
    entry, n = cache.lookup(seq(3 * BLOCK) + seq(10, 1000) + (5,))
    assert entry is not None and entry.payload == "b" and n == 3 * BLOCK + 10
    assert cache.lookup(seq(BLOCK - 1)) == (None, 0)  # under a block: not worth a restore
    assert cache.lookup(seq(100, 5000)) == (None, 0)


def test_a_prefix_of_a_stored_state_is_stored_once() -> None:
    cache = PromptCache(10_000, min_tokens=32)
    cache.add(seq(64), "short", 10)
    assert cache.add(seq(64), "again", 10) is None  # already held
    cache.add(seq(128), "long", 20)  # supersedes the short one
    assert [e.payload for e in cache.entries()] == ["long"] and cache.total_bytes == 20
    assert cache.add(seq(96), "middle", 10) is None  # a prefix of what is held


def test_least_recently_used_go_first_past_the_limit_and_restores_count_as_use() -> None:
    cache = PromptCache(30, min_tokens=32)
    a = cache.add(seq(64, 0), "a", 10)
    cache.add(seq(64, 1000), "b", 10)
    cache.add(seq(64, 2000), "c", 10)
    assert a is not None
    cache.touch(a, 64)
    cache.add(seq(64, 3000), "d", 10)
    assert sorted(e.payload for e in cache.entries()) == ["a", "c", "d"]
    assert cache.total_bytes == 30 and cache.stats.evicted == 1 and cache.stats.restored_tokens == 64
    assert cache.add(seq(64, 4000), "too big", 31) is None


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], (1, 2, 4)) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix(list(range(1000)), (*tuple(range(999)), 5)) == 999
