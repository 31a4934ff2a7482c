"""Prefix reuse, beside the scheduler: where a prompt's start can come from, and the KV operations
that bring it into the slot the scheduler chose (in the manner of vLLM's ``KVCacheManager``).

The scheduler decides who runs, where, and what each batch holds; this component answers, for
a request and its slot, "which of the prompt's first tokens have KV somewhere already":

- ``Tier.OWN``: the slot's own sequence (keep its start, ``Trim`` the rest);
- ``Tier.SLOT``: another slot's sequence, busy or idle (``Copy``, then ``Trim``);
- ``Tier.HOST``: a state saved in host RAM (``Restore``, then ``Trim``);
- ``Tier.DISK``: a state saved on disk (``engine/disk_cache.py``): ``take`` emits a ``Load``
  that the runner hands to the disk cache's IO thread, and the slot goes WAITING on it; when
  the runner reports the read (``loaded``), ``resolve_waits`` turns it into ``Restore`` +
  ``Trim`` and the slot joins the next batch, while the other slots keep stepping (a read that
  failed is a miss: the slot computes the rest of its prompt);
- a slot still computing that start for its own request: the slot goes WAITING (a named
  ``SlotState``, llama.cpp's WAIT_OTHER) and copies it once it is there (``resolve_waits``).

A slot about to be reused first has what only it holds ``Save``d to the host cache. The
operations are typed values in ``StepPlan.ops``; the runner performs them in that order before
the step's batch, and reports any that failed (``lost``): that slot recomputes its prompt.

Matching is cheap at long contexts: every sequence carries its block-hash chain (a slot's
``TokenChain``, a request's ``prefix_keys``, a cache entry's ``keys``), so ranking candidates
bisects over keys instead of comparing up to 32k tokens per slot, and only the length that is
acted on is checked token by token (``blocks.verified``).

The two pieces written into this component's seams:

1. The DISK tier under host RAM (issue 18; ``engine/disk_cache.py``). ``best_now`` looks it up
   by the same chain (its files are named by a stable digest of the tokens, under the identity
   of the weights, KV type, flash attention and state format). A disk read is slow,
   so it never runs on the engine thread: ``take`` emits a ``Load`` (the runner hands it to the
   disk cache's IO thread) and puts the slot in WAITING with a ``Wait`` that has no source
   slot; when the runner reports the read (``loaded``), ``resolve_waits`` turns it into
   ``Restore`` + ``Trim`` and the slot joins the next batch, while the other slots keep
   stepping. A ``Save``'s state also goes to disk, written on that IO thread, and a prompt that
   computed ``CHECKPOINT_TOKENS`` or more is written once it is done and no other slot is busy
   (or before its slot is reused), as is the prefix at every length its request asks to keep
   (``Request.keep``: at once, to host RAM too, when no other slot is busy or the model slides a
   window; else with the rest, ``to_checkpoint``).
2. IMAGES in prompts (issue 17). A prompt becomes token runs plus media items (hash of the
   bytes, ``n_tokens``, ``n_pos``); ``engine/media.py`` (issue 17's first part) turns it into
   one key per KV cell, an image's cells a negative key from its hash. ``Request.prompt`` then
   carries those cell keys, and the chains here match them unchanged: the same image in
   another slot, a saved state or on disk matches without being encoded or decoded again, a
   different one does not. Two rules join, each in one place: every length this component
   acts on (``find``'s kept and source lengths, ``resolve_waits``' copy) is cut back with
   ``media.whole_prefix`` (a sequence holds an image whole or not at all), and the scheduler
   places the rest at ``media.position_after`` instead of at the cell count (M-RoPE images
   take fewer positions than cells). The operations do not change: a copy, restore or trim
   moves cells, whatever they hold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .blocks import BLOCK, keyed_prefix, verified
from .disk_cache import DiskCache, Read
from .prompt_cache import CacheEntry, PromptCache
from .request import Request
from .slot import Slot, SlotState, Tier, Wait

# A cross-slot copy serialises the source's state when it holds fewer tokens than
# n_ctx_seq / this, and copies the whole KV stream otherwise. Measured with bench/kv_copy.py
# (Qwen2.5-0.5B Q4_K_M, 4096 cells, 2 cores): the stream copy costs 10-16 ms at any prefix
# length, the state copy about 10x more per token (11 ms at 1024 tokens, 171 ms at 4000).
STATE_COPY_FACTOR = 10


def copied_cells(n_cached: int, n_ctx_seq: int) -> int:
    """What copying a sequence of ``n_cached`` tokens costs, in cells of a whole-stream copy: the
    whole stream, or its state (``STATE_COPY_FACTOR`` times dearer a token) where that is less."""
    return n_ctx_seq if n_cached * STATE_COPY_FACTOR >= n_ctx_seq else n_cached * STATE_COPY_FACTOR


# Fewer shared tokens than this are recomputed: a copy moves a whole KV stream, a restore a
# whole saved state, which only pays for itself beyond a few tokens of prefill.
MIN_SHARE = 16
# A prompt that took at least this many computed tokens is written to disk once it is done (not
# only when its slot is reused or the model unloaded): what a crash, or a kill, would otherwise
# cost again. Serialising it stalls the engine thread for a copy of its KV, a small fraction of
# what computing this many tokens took, but several decode steps on a GPU: while other slots are
# busy it waits for them (``to_checkpoint``).
CHECKPOINT_TOKENS = 1024


def room_to_grow(n: int, n_ctx: int) -> int:
    """The tokens to make a buffer ready for, for a state that holds ``n`` now and grows while its
    slot answers: the power of two at or above ``n``, at most the slot's context. It changes only
    at doublings (each one a buffer made again, off the engine thread, well before the save), and is
    never more than twice what it serves, within the buffers' slack (``state_buffers.SLACK``, 4)
    even beside the bound on a state's header (``kv_store.STATE_HEADER_BYTES``)."""
    return min(n_ctx, 1 << (n - 1).bit_length()) if n > 0 else 0


class Save(NamedTuple):
    """Keep sequence ``seq_id``'s state (it holds ``tokens``) in the host cache."""

    seq_id: int
    tokens: tuple[int, ...]


class Copy(NamedTuple):
    """Sequence ``dst`` takes all of ``src``'s KV (a ``Trim`` then cuts it to the shared prefix)."""

    src: int
    dst: int


class Move(NamedTuple):
    """Sequence ``src``'s generating stream goes on in ``dst`` (``Scheduler``'s compaction): ``dst``
    takes all of ``src``'s KV, and ``src``, idle, keeps its copy as a cached prefix."""

    src: int
    dst: int


class Restore(NamedTuple):
    """Sequence ``seq_id`` takes a saved state (a ``Trim`` then cuts it)."""

    seq_id: int
    entry: CacheEntry


class Trim(NamedTuple):
    """Drop sequence ``seq_id``'s KV from position ``pos`` on (a position, not a cell count:
    ``Request.position_after`` of the cells kept)."""

    seq_id: int
    pos: int


class Load(NamedTuple):
    """Read ``entry`` (a disk cache file) off the engine thread for request ``request_id``."""

    request_id: int
    entry: CacheEntry


KvOp = Save | Copy | Move | Restore | Trim | Load


class Checkpoint(NamedTuple):
    """A sequence's state to save after a step (it holds ``tokens``), and to which tiers;
    ``later``: its disk copy waits until no other slot is busy and no request came meanwhile, or
    for the slot's reuse (``PrefixReuse.defer``)."""

    tokens: tuple[int, ...]
    host: bool
    disk: bool
    later: bool = False


@dataclass
class PrefixStats:
    """Prompt tokens admitted, and how many of them were not computed, by where their KV came from."""

    prompt_tokens: int = 0
    own: int = 0
    copied: int = 0
    restored: int = 0
    loaded: int = 0

    @property
    def cached(self) -> int:
        return self.own + self.copied + self.restored + self.loaded

    def count(self, tier: Tier, n: int) -> None:
        """Add ``n`` reused tokens (negative: take them back) to ``tier``'s counter."""
        match tier:
            case Tier.OWN:
                self.own += n
            case Tier.SLOT:
                self.copied += n
            case Tier.HOST:
                self.restored += n
            case Tier.DISK:
                self.loaded += n


@dataclass(frozen=True)
class Source:
    """Where an admitted request's prefix comes from: how many tokens, and from what."""

    n: int = 0
    tier: Tier = Tier.OWN
    slot: Slot | None = None  # another slot's KV (a copy, or a wait while ``pending``)
    entry: CacheEntry | None = None  # the host cache (a restore) or the disk cache (a load)
    pending: bool = False  # the slot is still computing it: wait, then copy


NOTHING = Source()


class PrefixReuse:
    """Finds a prompt's reusable start over ``slots`` and ``cache`` and plans the KV operations.

    ``share`` allows copying KV between sequences and reusing part of one; recurrent models
    can do neither (a slot then keeps its sequence only when the prompt continues all of it).
    ``windowed``: the model slides a window over some layers, so a state holding more than a
    prefix cannot give that prefix back (its window there is gone): a length a request asks to
    keep is saved when the slot reaches it.
    """

    def __init__(
        self,
        slots: Sequence[Slot],
        cache: PromptCache | None,
        share: bool,
        disk: DiskCache | None = None,
        windowed: bool = False,
    ) -> None:
        self.slots = slots
        self.cache = cache if share else None
        self.disk = disk if share else None
        self.share = share
        self.windowed = windowed
        self.stats = PrefixStats()
        # Disk reads asked for and done (request id -> the file's entry; -> the state, None: a miss).
        self._reading: dict[int, CacheEntry] = {}
        self._loaded: dict[int, Read | None] = {}
        # Slots whose disk checkpoint (a long prompt, an agent's breakpoints) waits for a moment
        # when no slot is busy and no request came, or for the slot's reuse (``to_checkpoint``).
        self._deferred: set[int] = set()

    # -- questions (cheap: block keys only, nothing verified) ----------------------------

    def own(self, slot: Slot, request: Request) -> int:
        """How much of ``slot``'s own KV ``request`` could keep."""
        prompt = request.prompt
        n = request.whole(min(keyed_prefix(slot.cached, slot.chain.keys, prompt, request.prefix_keys), len(prompt) - 1))
        if not self.share:  # only a sequence's whole KV can be kept: continue it, or start over
            return n if n == len(slot.cached) else 0
        return n

    def best_now(self, request: Request, exclude: frozenset[int] = frozenset()) -> Source:
        """The longest prefix of ``request``'s prompt whose KV exists now: in a slot, or the host cache
        (or on disk). Neither cache holds a state longer than a slot's context (``PromptCache``'s
        ``max_tokens``), which llama.cpp would refuse, so no check is needed here."""
        prompt, keys = request.prompt, request.prefix_keys
        limit = len(prompt) - 1  # at least one token must be decoded to get logits
        best = NOTHING
        if self.share and prompt:
            for slot in self.slots:
                if slot.seq_id in exclude or not slot.chain.tokens or slot.chain.tokens[0] != prompt[0]:
                    continue
                n = request.whole(min(keyed_prefix(slot.cached, slot.chain.keys, prompt, keys), limit))
                if n > best.n:
                    best = Source(n, Tier.SLOT, slot=slot)
        if self.cache is not None:
            entry, n = self.cache.lookup(prompt, keys)
            n = request.whole(min(n, limit))
            if entry is not None and n > best.n:
                best = Source(n, Tier.HOST, entry=entry)
        if self.disk is not None:
            # A read costs milliseconds to seconds: only worth it for clearly more than RAM holds.
            entry, n = self.disk.lookup(prompt, keys)
            n = request.whole(min(n, limit))
            if entry is not None and n >= best.n + MIN_SHARE:
                best = Source(n, Tier.DISK, entry=entry)
        return best

    def best_pending(self, request: Request) -> Source:
        """The longest prefix of ``request``'s prompt that a slot is computing now for its own request."""
        best = NOTHING
        if not self.share or not request.prompt:
            return best
        prompt, keys = request.prompt, request.prefix_keys
        limit = len(prompt) - 1
        for slot in self.slots:
            other = slot.request
            if slot.state is SlotState.PREFILL and other is not None and other.prompt[:1] == prompt[:1]:
                n = request.whole(min(keyed_prefix(other.prompt, other.prefix_keys, prompt, keys), limit))
                if n > best.n:
                    best = Source(n, Tier.SLOT, slot=slot, pending=True)
        return best

    def to_save(self, slot: Slot, kept: int) -> tuple[int, ...]:
        """What ``slot`` holds beyond ``kept`` that exists nowhere else (saved before it is reused),
        or its deferred checkpoint (``to_checkpoint``), whose cells reuse would cut."""
        chain = slot.chain
        if len(chain) - kept < BLOCK:
            return ()
        if slot.seq_id in self._deferred and self._disk_lacks(chain.tokens, chain.keys):
            return tuple(chain.tokens)
        if self.cache is None or len(chain) < self.cache.min_tokens:
            return ()
        for other in self.slots:
            if (
                other is not slot
                and len(other.chain) >= len(chain)
                and keyed_prefix(other.cached, other.chain.keys, chain.tokens, chain.keys) == len(chain)
            ):
                return ()
        tokens = tuple(chain.tokens)
        return () if self.cache.covers(tokens, chain.keys) else tokens

    def defer(self, slot: Slot) -> None:
        """``slot``'s checkpoint waits (``Checkpoint.later``): taken by ``take_deferred`` once no slot
        is busy and no request came meanwhile, or by ``to_save`` before the slot's reuse cuts its
        cells."""
        self._deferred.add(slot.seq_id)

    def saved(self, slot: Slot) -> None:
        """``slot``'s whole chain went to disk after this step: a checkpoint that waited, of a
        length it has since gone past, is covered."""
        self._deferred.discard(slot.seq_id)

    def reused(self, slot: Slot, kept: int) -> None:
        """``slot`` takes a new request keeping ``kept`` of its cells (after any ``Save`` of
        ``to_save``): a waiting checkpoint goes unless the slot keeps all it was for."""
        if kept < len(slot.chain):
            self._deferred.discard(slot.seq_id)

    def cleared(self) -> None:
        """The KV cache was cleared: no checkpoint waits."""
        self._deferred.clear()

    def _others_busy(self, slot: Slot) -> bool:
        return any(other.busy for other in self.slots if other is not slot)

    def _disk_lacks(self, tokens: Sequence[int], keys: Sequence[int]) -> bool:
        disk = self.disk
        return disk is not None and len(tokens) >= disk.index.min_tokens and not disk.covers(tokens, keys)

    def to_checkpoint(self, slot: Slot) -> Checkpoint | None:
        """What ``slot`` computed in this step that is worth saving now: its prefix at a length its
        request asks to keep (``Request.keep``: to the host cache and to disk), or a prompt of
        ``CHECKPOINT_TOKENS`` computed tokens or more just finished (to disk). A whole prompt goes
        to disk only: the slot holds it, and is saved to RAM when it is reused (``to_save``);
        copying it on the engine thread at every turn would stall the others for nothing.

        While another slot is busy, the save waits (``later``): the copy holds the engine thread
        (~0.1 ms per MiB of state from host or device memory, 21 ms for the GPU check model's
        2k-token state on an H200, 100-200 ms for a coding agent's 20k-token context: several
        decode steps there), and every stream would wait for it. It is taken when no slot is
        busy, or before the slot's reuse cuts its cells (``to_save``), with all the slot holds by
        then (the answer too: what the next turn starts with). That state also gives back any
        length kept inside the prompt (an agent's breakpoint after its tools), as every state
        gives back its prefixes; meanwhile the slot itself holds it, for others to copy. Beside
        busy slots, only a sliding-window model (``windowed``) saves such a length at once, to RAM
        too. A save made at once covers what waited before it (``saved``)."""
        request = slot.request
        if request is None or (self.cache is None and self.disk is None):
            return None
        n = len(slot.chain)
        done = slot.state is SlotState.GENERATING and slot.n_generated == 1 and n == len(request.prompt)
        if not (done or slot.state is SlotState.PREFILL):
            return None
        hinted = n in request.keep
        long = done and n - slot.prompt_cached >= CHECKPOINT_TOKENS
        if not (hinted or long):
            return None
        tokens, keys = tuple(slot.chain.tokens), slot.chain.keys
        cache = self.cache
        host = hinted and not done and cache is not None and n >= cache.min_tokens and not cache.covers(tokens, keys)
        disk = self._disk_lacks(tokens, keys)
        if (done or not self.windowed) and self._others_busy(slot):
            # RAM gets it when the slot is reused (``to_save``): only the disk copy waits.
            return Checkpoint(tokens, False, False, later=True) if disk else None
        return Checkpoint(tokens, host, disk) if host or disk else None

    def take_deferred(self, quiet: Callable[[], bool] = lambda: True) -> Iterator[tuple[int, tuple[int, ...]]]:
        """The waiting checkpoints to take now, one at a time (to be saved as they come), each a
        sequence and the tokens it holds: none while a slot is busy, and none more once ``quiet()``
        is False, a request having come meanwhile (it would wait for the copies, on a GPU 100-200
        ms each for an agent's context): those wait on for the next moment no slot is busy, or
        for their slot's reuse."""
        if not self._deferred or any(slot.busy for slot in self.slots):  # every step: cheap when none waits
            return
        for seq_id in sorted(self._deferred):
            if not quiet():
                return
            self._deferred.discard(seq_id)
            chain = self.slots[seq_id].chain
            if self._disk_lacks(chain.tokens, chain.keys):
                yield seq_id, tuple(chain.tokens)

    def next_save(self, slot: Slot) -> int:
        """How many tokens the next state ``slot`` is expected to save holds (0: none), so that
        its buffer can be made ready before (``state_buffers``): the next length its request asks
        to keep, its prompt when that makes a checkpoint (``to_checkpoint``), or, idle, what it
        holds when reusing it would save that (``to_save``). A slot whose checkpoint waits
        (``defer``) expects it, at a size that leaves room for its answer (``room_to_grow``)."""
        request = slot.request
        if slot.seq_id in self._deferred:
            n = len(slot.chain)
            if request is not None and slot.state in (SlotState.PREFILL, SlotState.WAITING):
                n = max(n, len(request.prompt))  # not made again at each doubling of a prompt read on
            return room_to_grow(n, slot.n_ctx)
        if request is None:
            return len(slot.chain) if self.to_save(slot, 0) else 0
        if slot.state not in (SlotState.PREFILL, SlotState.WAITING):
            return 0
        tiers = [c.min_tokens for c in (self.cache, self.disk.index if self.disk else None) if c is not None]
        n = request.next_keep(len(slot.chain))
        if (n == len(request.prompt) or not self.windowed) and self._others_busy(slot):
            return 0  # it waits (``to_checkpoint``)
        if n == len(request.prompt) and self.disk is None:
            return 0  # a whole prompt is saved to disk only
        long = n == len(request.prompt) and n - slot.prompt_cached >= CHECKPOINT_TOKENS
        return n if tiers and n >= min(tiers) and (n in request.keep or long) else 0

    # -- decisions, and the operations they take ----------------------------------------

    def find(self, request: Request, dst: Slot, kept: int, exclude: frozenset[int]) -> tuple[int, Source]:
        """What ``dst`` keeps of its own KV (checked), and where the rest of the reusable start is.

        ``exclude``: slots taken by this step's admissions (their KV is about to change).
        """
        prompt = request.prompt
        kept = request.whole(verified(dst.cached, prompt, kept))
        source = self.best_now(request, exclude)
        pending = self.best_pending(request)
        if pending.n >= max(kept, source.n) + BLOCK:
            source = pending
        elif source.slot is not None:
            n = request.whole(verified(source.slot.cached, prompt, source.n))
            source = Source(n, Tier.SLOT, slot=source.slot)
        if source.n < kept + MIN_SHARE:
            source = NOTHING
        return kept, source

    def take(self, dst: Slot, kept: int, source: Source) -> list[KvOp]:
        """Bring ``source`` into ``dst``, just assigned its request keeping ``kept`` tokens."""
        request = dst.request
        assert request is not None
        self.stats.prompt_tokens += len(request.prompt)
        ops: list[KvOp]
        if source.slot is not None and not source.pending:
            ops = self._copy(source.slot, dst, source.n)
        elif source.entry is not None and source.tier is Tier.DISK:
            ops = [Trim(dst.seq_id, request.position_after(kept)), Load(request.id, source.entry)]
            self._reading[request.id] = source.entry
            dst.wait_for(Wait(None, request.id, source.n))
        elif source.entry is not None:
            ops = [Restore(dst.seq_id, source.entry), Trim(dst.seq_id, request.position_after(source.n))]
            dst.take_prefix(source.n, Tier.HOST)
            assert self.cache is not None
            self.cache.touch(source.entry, source.n)
        else:
            # Always trim: cheap, and a failed decode may have left KV that ``cached`` forgot.
            ops = [Trim(dst.seq_id, request.position_after(kept))]
            if source.slot is not None and source.slot.request is not None:
                dst.wait_for(Wait(source.slot, source.slot.request.id, source.n))
        self.stats.count(dst.prefix_source, dst.prompt_cached)
        return ops

    def loaded(self, request_id: int, state: Read | None) -> None:
        """The runner read a ``Load``'s state (None: the file was unusable, a miss)."""
        if request_id in self._reading:
            self._loaded[request_id] = state

    def loading(self, request_id: int) -> bool:
        """Whether ``request_id``'s slot waits for a disk read (it has nothing to decode)."""
        return any((w := s.wait) is not None and w.source is None and w.request_id == request_id for s in self.slots)

    def resolve_waits(self, sources: set[int]) -> list[KvOp]:
        """Slots waiting for another to compute their prefix copy it once it is there; slots
        waiting for a disk read restore it once it is done.

        ``sources`` collects the sequences these copies read (they must not change before the decode).
        """
        ops: list[KvOp] = []
        loaded, self._loaded = self._loaded, {}
        for request_id in loaded:  # reads for requests that left since are dropped
            if not self.loading(request_id):
                self._reading.pop(request_id, None)
        for slot in self.slots:
            wait, request = slot.wait, slot.request
            if slot.state is not SlotState.WAITING or wait is None or request is None:
                continue
            src = wait.source
            if src is None:
                if request.id in loaded:
                    ops += self._restore_loaded(slot, wait.n, self._reading.pop(request.id), loaded.pop(request.id))
                continue
            have = request.whole(
                min(keyed_prefix(src.cached, src.chain.keys, request.prompt, request.prefix_keys), wait.n)
            )
            still_coming = src.request is not None and src.request.id == wait.request_id
            if have < wait.n and still_coming and src.state is SlotState.PREFILL:
                continue
            slot.stop_waiting()
            have = request.whole(verified(src.cached, request.prompt, have))
            if have >= slot.n_past + MIN_SHARE:
                self.stats.count(slot.prefix_source, -slot.prompt_cached)
                ops += self._copy(src, slot, have)
                sources.add(src.seq_id)
                self.stats.count(slot.prefix_source, slot.prompt_cached)
        return ops

    def lost(self, slot: Slot) -> None:
        """An operation for ``slot`` failed: it computes its prompt anew (or, idle, holds nothing)."""
        self._deferred.discard(slot.seq_id)
        if slot.state in (SlotState.PREFILL, SlotState.WAITING):
            self.stats.count(slot.prefix_source, -slot.prompt_cached)
            slot.lose_prefix()
        else:
            slot.forget()

    def cut_back(self, slot: Slot, n: int) -> None:
        """``slot``'s sequence holds its prompt's first ``n`` tokens only, fewer than planned (a
        sliding-window model's cut fell below the window its state holds: the nearest checkpoint
        of that window was restored instead, ``swa_windows``); it computes the rest."""
        assert slot.request is not None and n <= len(slot.cached)
        self.stats.count(slot.prefix_source, n - slot.prompt_cached)
        slot.take_prefix(n, slot.prefix_source)

    def _restore_loaded(self, slot: Slot, n: int, read: CacheEntry, state: Read | None) -> list[KvOp]:
        """A disk read is done: restore it into ``slot`` (keeping it in RAM too, its window
        checkpoints with it), or go on without."""
        slot.stop_waiting()
        if state is None:
            if self.disk is not None:
                self.disk.forget(read)
            return []
        tokens, (payload, windows) = read.tokens, state
        entry = self.cache.add(tokens, payload, len(payload), windows) if self.cache is not None else None
        if entry is None:  # not kept in RAM (too big, or no host cache): restored from the read
            entry = CacheEntry(tokens, payload, len(payload), windows=windows)
        self.stats.count(slot.prefix_source, -slot.prompt_cached)
        slot.take_prefix(n, Tier.DISK)
        self.stats.count(slot.prefix_source, slot.prompt_cached)
        return [Restore(slot.seq_id, entry), Trim(slot.seq_id, slot.pos)]

    def _copy(self, src: Slot, dst: Slot, n: int) -> list[KvOp]:
        dst.take_prefix(n, Tier.SLOT)
        return [Copy(src.seq_id, dst.seq_id), Trim(dst.seq_id, dst.pos)]
