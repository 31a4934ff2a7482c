"""Checkpoints of a sliding-window sequence's window (llama-server's ``--ctx-checkpoints``).

A saved state of a sliding-window model (Gemma 2/3, ...) holds its full-attention layers' KV
whole but only the last window of its SWA layers' cells (llama.cpp writes no masked cell). Cut
below that window, nothing is left for the next token to attend to, and the prompt was computed
from zero (``KvStore.window_held``). That is the common case of a chat: the client re-sends the
previous answer as text, which tokenizes differently from what was generated, so the reusable
prefix ends inside the answer, further back than the restored window reaches.

So, along a sequence (its prompt, every ``spacing`` tokens of its answer, the prompt's end and
the answer's end), the SWA layers' window alone is copied to host RAM
(``LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY``: ``n_swa`` cells of the SWA layers, 7.5 MiB for
Gemma-3-270M against 11 MiB for the whole 1,200-token state). A cut at ``c`` then keeps the
full-attention KV up to the nearest checkpoint at or before ``c``, puts that checkpoint's window
back, and computes from there: at most ``spacing`` tokens more than the cut itself would.

Each slot keeps at most ``per_slot`` checkpoints (llama-server keeps 8: the same here), the
newest; a state saved to the host cache or to disk takes the slot's along (``CacheEntry.windows``,
counted in its size; ``disk_cache`` writes them into the state's file), so a conversation
restored after another request took its slot, or loaded from disk after an unload or a restart,
finds them too. The live lists together stay under ``limit_bytes`` (a share of the host cache's
budget); the oldest go first. A checkpoint names the tokens it follows; one whose tokens are not
the start of the sequence it would serve is never used.

The re-sent answer's tokens are never replaced with the generated ones, even where both spell
the same text (which would let the cut land at the answer's end): the model would then read
other tokens than a cold request with the same messages does, and could answer otherwise; a
re-sent request answers as it did cold (the deterministic mode promises it bitwise). The
checkpoints bound what the different tokenization costs instead.

Pure bookkeeping: ``KvStore`` makes the copies and restores them, on the engine thread.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

# Checkpoints kept per slot (llama-server's --ctx-checkpoints default).
PER_SLOT = 8
# Fewer new tokens than this since a slot's last checkpoint are not worth a copy.
MIN_GAP = 32


def _key(tokens: Sequence[int]) -> array[int]:
    """The tokens a checkpoint follows, compactly (cell keys of images are 64-bit)."""
    return array("q", tokens)


@dataclass(eq=False)
class Window:
    """The SWA layers' cells of a sequence holding ``n`` cells (the next at position ``pos``)."""

    n: int
    pos: int
    tokens: array[int] = field(repr=False)
    payload: Any = field(repr=False)
    size: int = 0

    def follows(self, tokens: Sequence[int]) -> bool:
        """Whether this checkpoint was taken after exactly ``tokens[:n]``."""
        return self.n <= len(tokens) and self.tokens == _key(tokens[: self.n])


def window_of(tokens: Sequence[int], pos: int, payload: Any) -> Window:
    """A checkpoint taken after ``tokens`` (the next position ``pos``) holding ``payload``: one
    read back with a state from disk."""
    return Window(len(tokens), pos, _key(tokens), payload, len(payload))


class Windows:
    """Each slot's checkpoints, newest last, and when the next one is due."""

    def __init__(self, n_slots: int, spacing: int, limit_bytes: int, per_slot: int = PER_SLOT) -> None:
        self.spacing = max(spacing, MIN_GAP)
        self.limit_bytes = limit_bytes
        self.per_slot = per_slot
        self.total_bytes = 0
        self._live: list[list[Window]] = [[] for _ in range(n_slots)]
        # The cell count at which each slot's next checkpoint along its sequence is due.
        self._due = [self.spacing] * n_slots

    def of(self, seq_id: int) -> tuple[Window, ...]:
        return tuple(self._live[seq_id])

    def due(self, seq_id: int, n: int, *, now: bool = False) -> bool:
        """Whether a sequence holding ``n`` cells is to be checkpointed: every ``spacing`` cells,
        or ``now`` (a prompt or an answer just ended) unless the last is within ``MIN_GAP``."""
        live = self._live[seq_id]
        last = live[-1].n if live else 0
        if n < last + MIN_GAP:
            return False
        return now or n >= self._due[seq_id]

    def add(self, seq_id: int, tokens: Sequence[int], pos: int, payload: Any, size: int) -> Window:
        """Keep a checkpoint of ``seq_id`` after ``tokens``: those at or past it go (superseded)."""
        n = len(tokens)
        window = Window(n, pos, _key(tokens), payload, size)
        live = [w for w in self._live[seq_id] if w.n < n]
        live.append(window)
        self._set(seq_id, live[-self.per_slot :])
        self._due[seq_id] = n + self.spacing
        self._shrink()
        return window

    def adopt(self, seq_id: int, windows: Iterable[Window], n_kept: int) -> None:
        """``seq_id`` now holds the start of another sequence (restored, copied) or of its own,
        ``n_kept`` cells: the checkpoints of that start are its own."""
        live = [w for w in windows if w.n <= n_kept][-self.per_slot :]
        self._set(seq_id, live)
        self._due[seq_id] = (live[-1].n if live else 0) + self.spacing

    def best(self, windows: Iterable[Window], tokens: Sequence[int]) -> Window | None:
        """The checkpoint furthest along ``tokens`` (a sequence's kept cells) that follows them."""
        for window in sorted(windows, key=lambda w: w.n, reverse=True):
            if window.follows(tokens):
                return window
        return None

    def for_entry(self, seq_id: int, tokens: Sequence[int]) -> tuple[Window, ...]:
        """The checkpoints of ``seq_id`` that a state of it holding ``tokens`` takes along."""
        return tuple(w for w in self._live[seq_id] if w.n < len(tokens) and w.follows(tokens))

    def clear(self) -> None:
        for seq_id in range(len(self._live)):
            self._set(seq_id, [])

    def _set(self, seq_id: int, live: list[Window]) -> None:
        self.total_bytes += sum(w.size for w in live) - sum(w.size for w in self._live[seq_id])
        self._live[seq_id] = live

    def _shrink(self) -> None:
        """Over ``limit_bytes``: the slot holding the most loses its oldest checkpoint, until under."""
        while self.total_bytes > self.limit_bytes:
            seq_id = max(range(len(self._live)), key=lambda s: sum(w.size for w in self._live[s]))
            if not self._live[seq_id]:
                return
            self._set(seq_id, self._live[seq_id][1:])
