"""Token sequences as chains of block hashes: what makes prefix matching cheap at long contexts.

Key ``i`` is the hash of key ``i - 1`` and the ``i``-th block of ``BLOCK`` tokens, so two
sequences whose ``i``-th keys are equal share (barring a collision) everything up to the end of
that block, and the number of shared blocks is found by bisection over the keys: O(log n)
comparisons instead of copying and comparing up to 32k tokens per candidate. Rankings use the
keys alone; a length that is acted on (a copy, a restore, a kept prefix) is checked token by
token once (``verified``), so a collision costs a recomputed prompt, never a wrong answer.
"""

from __future__ import annotations

from collections.abc import Sequence

BLOCK = 32


def block_keys(tokens: Sequence[int], keys: list[int] | None = None) -> list[int]:
    """One key per full block: the hash of everything up to the end of that block (a chain).

    With ``keys`` (the keys of a prefix of ``tokens``), only the blocks after them are hashed
    and appended to it.
    """
    keys = [] if keys is None else keys
    key = keys[-1] if keys else 0
    for end in range((len(keys) + 1) * BLOCK, len(tokens) + 1, BLOCK):
        key = hash((key, tuple(tokens[end - BLOCK : end])))
        keys.append(key)
    return keys


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences (exact, any sequence types)."""
    n = min(len(a), len(b))
    if n == 0 or a[0] != b[0]:
        return 0
    a, b = list(a[:n]), list(b[:n])  # a list slice never equals a tuple slice
    if a == b:
        return n
    # Bisect on slice equality: C-speed comparisons instead of a Python loop over long prompts.
    lo, hi = 1, n - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def shared_blocks(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading keys two chains share (keys are chained: equal at i means equal before)."""
    n = min(len(a), len(b))
    if n == 0 or a[0] != b[0]:
        return 0
    if a[n - 1] == b[n - 1]:
        return n
    lo, hi = 1, n - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[mid - 1] == b[mid - 1]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def keyed_prefix(a: Sequence[int], a_keys: Sequence[int], b: Sequence[int], b_keys: Sequence[int]) -> int:
    """The common prefix of ``a`` and ``b`` by their keys, then token by token in the next block.

    Cheap and exact unless two different blocks collide; ``verified`` makes a result exact.
    """
    i = shared_blocks(a_keys, b_keys) * BLOCK
    end = min(len(a), len(b), i + BLOCK)
    while i < end and a[i] == b[i]:
        i += 1
    return i


def verified(a: Sequence[int], b: Sequence[int], n: int) -> int:
    """``n`` if ``a`` and ``b`` really share their first ``n`` tokens, else their exact common prefix."""
    if n == 0 or list(a[:n]) == list(b[:n]):
        return n
    return common_prefix(a, b)


class TokenChain:
    """A growing token sequence (a slot's KV contents) and the keys of its full blocks."""

    __slots__ = ("keys", "tokens")

    def __init__(self, tokens: Sequence[int] = (), keys: Sequence[int] | None = None) -> None:
        self.tokens = list(tokens)
        n_blocks = len(self.tokens) // BLOCK
        self.keys = list(keys[:n_blocks]) if keys is not None else []
        block_keys(self.tokens, self.keys)

    def __len__(self) -> int:
        return len(self.tokens)

    def extend(self, tokens: Sequence[int]) -> None:
        self.tokens.extend(tokens)
        block_keys(self.tokens, self.keys)

    def append(self, token: int) -> None:
        self.tokens.append(token)
        if len(self.tokens) % BLOCK == 0:
            block_keys(self.tokens, self.keys)

    def truncate(self, n: int) -> None:
        del self.tokens[n:]
        del self.keys[n // BLOCK :]

    def clear(self) -> None:
        self.tokens.clear()
        self.keys.clear()
