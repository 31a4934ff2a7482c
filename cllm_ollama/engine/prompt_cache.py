"""Saved KV states of past prompts in host RAM, found by token prefix: what lets a conversation
that lost its slot to another come back without recomputing its history.

Pure bookkeeping: a state is an opaque payload with a size (the runner makes and restores it
with llama.cpp). Lookups walk the prompt in blocks of ``BLOCK`` tokens through a hash index, so
they cost O(prompt / BLOCK), not a scan of every entry. A state that is a prefix of another
is stored once: the longer one supersedes it, and the shorter is never added.
Entries stay when restored (llama-server's cache erases them, its issue #24143), and the least
recently used go first once the total passes ``limit_bytes``.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

BLOCK = 32
# Shorter states are not saved: serialising one costs the engine thread more than most such
# prompts will save (a one-shot 64+64-token load ran ~15% slower saving every slot it reused).
MIN_TOKENS = 256


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    a, b = tuple(a), tuple(b)  # a list slice never equals a tuple slice
    n = min(len(a), len(b))
    if n == 0 or a[0] != b[0]:
        return 0
    # Bisect on slice equality: C-speed comparisons instead of a Python loop over long prompts.
    lo, hi = 1, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def block_keys(tokens: Sequence[int]) -> list[int]:
    """One key per full block: the hash of everything up to the end of that block (a chain)."""
    keys: list[int] = []
    key = 0
    t = tuple(tokens)
    for end in range(BLOCK, len(t) + 1, BLOCK):
        key = hash((key, t[end - BLOCK : end]))
        keys.append(key)
    return keys


_ids = itertools.count(1)


@dataclass(eq=False)
class CacheEntry:
    tokens: tuple[int, ...]
    payload: Any
    size: int
    id: int = field(default_factory=lambda: next(_ids))


@dataclass
class CacheStats:
    """Prompt tokens asked for and found, over the cache's life (counters, never reset)."""

    saved: int = 0
    restored_tokens: int = 0
    evicted: int = 0


class PromptCache:
    """LRU of saved sequence states, indexed by block-hash chains of their tokens."""

    def __init__(self, limit_bytes: int, min_tokens: int = MIN_TOKENS) -> None:
        self.limit_bytes = limit_bytes
        self.min_tokens = max(min_tokens, BLOCK)
        self.total_bytes = 0
        self._entries: OrderedDict[int, CacheEntry] = OrderedDict()
        # block-chain key -> ids of entries whose tokens run through that block
        self._index: dict[int, set[int]] = {}
        self.stats = CacheStats()

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[CacheEntry]:
        return list(self._entries.values())

    def lookup(self, prompt: Sequence[int]) -> tuple[CacheEntry | None, int]:
        """The entry sharing the longest prefix with ``prompt``, and that length (0: none)."""
        candidates: set[int] = set()
        for key in block_keys(prompt):
            ids = self._index.get(key)
            if not ids:
                break
            candidates = ids
        best: CacheEntry | None = None
        best_n = 0
        for entry_id in candidates:
            entry = self._entries[entry_id]
            n = common_prefix(entry.tokens, prompt)
            if n > best_n:
                best, best_n = entry, n
        return best, best_n

    def touch(self, entry: CacheEntry, n_tokens: int) -> None:
        """Mark ``entry`` as just used (restored for ``n_tokens`` tokens)."""
        if entry.id in self._entries:
            self._entries.move_to_end(entry.id)
            self.stats.restored_tokens += n_tokens

    def covers(self, tokens: Sequence[int]) -> bool:
        """Whether some entry already holds ``tokens`` (as all or the start of its own)."""
        _, n = self.lookup(tokens)
        return n == len(tokens) and n > 0

    def worth_saving(self, tokens: Sequence[int], payload_size: int) -> bool:
        return len(tokens) >= self.min_tokens and payload_size <= self.limit_bytes and not self.covers(tokens)

    def add(self, tokens: Sequence[int], payload: Any, size: int) -> CacheEntry | None:
        """Keep a state; entries it makes redundant (prefixes of it) go. None if not kept."""
        tokens = tuple(tokens)
        if not self.worth_saving(tokens, size):
            return None
        keys = block_keys(tokens)
        # Entries whose tokens are a prefix of these are superseded.
        for key in keys:
            for entry_id in list(self._index.get(key, ())):
                entry = self._entries.get(entry_id)
                if (
                    entry is not None
                    and len(entry.tokens) <= len(tokens)
                    and tokens[: len(entry.tokens)] == entry.tokens
                ):
                    self._remove(entry)
        entry = CacheEntry(tokens, payload, size)
        self._entries[entry.id] = entry
        for key in keys:
            self._index.setdefault(key, set()).add(entry.id)
        self.total_bytes += size
        self.stats.saved += 1
        while self.total_bytes > self.limit_bytes and self._entries:
            self._remove(next(iter(self._entries.values())))
            self.stats.evicted += 1
        return entry if entry.id in self._entries else None

    def _remove(self, entry: CacheEntry) -> None:
        if self._entries.pop(entry.id, None) is None:
            return
        self.total_bytes -= entry.size
        for key in block_keys(entry.tokens):
            ids = self._index.get(key)
            if ids is not None:
                ids.discard(entry.id)
                if not ids:
                    del self._index[key]

    def clear(self) -> None:
        self._entries.clear()
        self._index.clear()
        self.total_bytes = 0
