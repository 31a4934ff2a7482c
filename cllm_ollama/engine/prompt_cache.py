"""Saved KV states of past prompts in host RAM, found by token prefix: what lets a conversation
that lost its slot to another come back without recomputing its history.

Pure bookkeeping: a state is an opaque payload with a size (the runner makes and restores it
with llama.cpp). Lookups walk the prompt's block-hash chain (``blocks``) through an index, so
they cost O(prompt / BLOCK), not a scan of every entry. A state that is a prefix of another
is stored once: the longer one supersedes it, and the shorter is never added.
Entries stay when restored (llama-server's cache erases them, its issue #24143), and the least
recently used go first once the total passes ``limit_bytes``. A state of more tokens than the
context's slots hold (``max_tokens``: saved by a load with a larger context) is never kept: llama.cpp
refuses to restore it, and it would stand in for the shorter states this load could use.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .blocks import BLOCK, block_keys, common_prefix, keyed_prefix, verified

__all__ = ["BLOCK", "MIN_TOKENS", "CacheEntry", "PromptCache", "common_prefix"]

# Shorter states are not saved: serialising one costs the engine thread more than most such
# prompts will save (a one-shot 64+64-token load ran ~15% slower saving every slot it reused).
MIN_TOKENS = 256


_ids = itertools.count(1)


@dataclass(eq=False)
class CacheEntry:
    tokens: tuple[int, ...]
    payload: Any
    size: int
    keys: list[int] = field(default_factory=list, repr=False)  # block_keys(tokens)
    # A sliding-window model's checkpoints along ``tokens`` (``swa_windows``), counted in ``size``.
    windows: tuple[Any, ...] = field(default=(), repr=False)
    id: int = field(default_factory=lambda: next(_ids))


@dataclass
class CacheStats:
    """Prompt tokens asked for and found, over the cache's life (counters, never reset)."""

    saved: int = 0
    restored_tokens: int = 0
    evicted: int = 0


class PromptCache:
    """LRU of saved sequence states, indexed by block-hash chains of their tokens."""

    def __init__(
        self,
        limit_bytes: int,
        min_tokens: int = MIN_TOKENS,
        on_remove: Callable[[CacheEntry], None] | None = None,
        max_tokens: int | None = None,
    ) -> None:
        """``on_remove`` hears of every entry that goes (superseded, evicted, removed), ``clear`` aside.
        ``max_tokens``: the cells of a slot's context (None: any length), the most a state kept holds."""
        self.limit_bytes = limit_bytes
        self.max_tokens = max_tokens
        self._on_remove = on_remove
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

    def lookup(self, prompt: Sequence[int], keys: Sequence[int] | None = None) -> tuple[CacheEntry | None, int]:
        """The entry sharing the longest prefix with ``prompt``, and that length (0: none).

        ``keys`` are the prompt's ``block_keys`` when the caller has them already.
        """
        keys = block_keys(prompt) if keys is None else keys
        candidates: set[int] = set()
        for key in keys:
            ids = self._index.get(key)
            if not ids:
                break
            candidates = ids
        best: CacheEntry | None = None
        best_n = 0
        for entry_id in candidates:
            entry = self._entries[entry_id]
            n = keyed_prefix(entry.tokens, entry.keys, prompt, keys)
            if n > best_n:
                best, best_n = entry, n
        if best is not None:
            best_n = verified(best.tokens, prompt, best_n)
        return best, best_n

    def touch(self, entry: CacheEntry, n_tokens: int) -> None:
        """Mark ``entry`` as just used (restored for ``n_tokens`` tokens)."""
        if entry.id in self._entries:
            self._entries.move_to_end(entry.id)
            self.stats.restored_tokens += n_tokens

    def covers(self, tokens: Sequence[int], keys: Sequence[int] | None = None) -> bool:
        """Whether some entry already holds ``tokens`` (as all or the start of its own)."""
        _, n = self.lookup(tokens, keys)
        return n == len(tokens) and n > 0

    def worth_saving(self, tokens: Sequence[int], payload_size: int) -> bool:
        fits = self.max_tokens is None or len(tokens) <= self.max_tokens
        return fits and len(tokens) >= self.min_tokens and payload_size <= self.limit_bytes and not self.covers(tokens)

    def add(self, tokens: Sequence[int], payload: Any, size: int, windows: tuple[Any, ...] = ()) -> CacheEntry | None:
        """Keep a state (with its ``windows``: checkpoints of ``size`` bytes, ``swa_windows``);
        entries it makes redundant (prefixes of it) go. None if not kept."""
        tokens = tuple(tokens)
        size += sum(w.size for w in windows)
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
        entry = CacheEntry(tokens, payload, size, keys, windows)
        self._entries[entry.id] = entry
        for key in keys:
            self._index.setdefault(key, set()).add(entry.id)
        self.total_bytes += size
        self.stats.saved += 1
        while self.total_bytes > self.limit_bytes and self._entries:
            self._remove(next(iter(self._entries.values())))
            self.stats.evicted += 1
        return entry if entry.id in self._entries else None

    def remove(self, entry: CacheEntry) -> None:
        """Drop ``entry`` (its state turned out unusable)."""
        self._remove(entry)

    def _remove(self, entry: CacheEntry) -> None:
        if self._entries.pop(entry.id, None) is None:
            return
        if self._on_remove is not None:
            self._on_remove(entry)
        self.total_bytes -= entry.size
        for key in entry.keys:
            ids = self._index.get(key)
            if ids is not None:
                ids.discard(entry.id)
                if not ids:
                    del self._index[key]

    def clear(self) -> None:
        self._entries.clear()
        self._index.clear()
        self.total_bytes = 0
