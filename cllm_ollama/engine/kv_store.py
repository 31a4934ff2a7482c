"""The KV cache's contents beyond the live sequences: what the scheduler's KV operations do,
prompt states saved to the host cache and to disk, and the memory those saves are copied into.

The scheduler decides (``prefix``); this performs, on the engine thread, in the order planned.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import EngineError
from .binding import STATE_FORMAT, Context, Model, StateBuffers
from .blocks import BLOCK
from .disk_cache import DiskCache, Read, identity_digest, weights_id
from .frontdoor import LoadSpec
from .prefix import Copy, Load, Move, PrefixReuse, Restore, Save, Trim, copied_cells
from .prompt_cache import CacheEntry, PromptCache
from .scheduler import Scheduler, StepPlan
from .slot import Slot, SlotState
from .swa_windows import Window, Windows
from .tile_order import EMBEDDING_ORDER

log = logging.getLogger("cllm.engine")

# What a saved state holds beyond its cells' K and V rows (headers, each cell's position and
# sequence), bounded from above: a prepared buffer must not be short (``state_buffers``).
STATE_BYTES_PER_CELL = 64
STATE_HEADER_BYTES = 64 << 10
# The share of the host cache's budget that the slots' live checkpoints of a sliding window may
# take (``swa_windows``); those saved with a state count in the cache itself.
WINDOW_SHARE = 4

ReadDone = Callable[[int], Callable[[Read | None], None]]


def disk_cache_for(
    model: Model, spec: LoadSpec, alloc: Callable[[int], Any] | None = None, max_tokens: int | None = None
) -> DiskCache | None:
    """The disk tier for this load: its identity is everything that changes a state's bytes.
    A model whose memory is one KV cache keeps its states without the slot count
    (``state_streams``), so a load with another ``num_parallel`` reads them; for the others
    (sliding-window ones write two caches) the slot count is part of the identity, as
    llama.cpp refuses a state with another stream count ("n_stream mismatch"). The context size
    is not (a state fits any slot at least as large): a file of more than ``max_tokens`` cells,
    a slot's context, is only left out of this load's index (``DiskCache``)."""
    if spec.cache_dir is None or spec.cache_disk_bytes <= 0:
        return None
    # Image cells are the projector's output: another projector over the same weights differs, and
    # so do its tokens in another order (``tile_order``: Llama 4's, put back since).
    projector = f"{weights_id(spec.projector)} {EMBEDDING_ORDER}" if spec.projector else ""
    streams = spec.n_slots if model.n_swa == 0 else None
    # A LoRA changes every layer's KV: an adapted model's states are its own.
    adapters = ",".join(weights_id(path) for path in spec.adapters)
    identity = identity_digest(
        weights_id(model.path),
        spec.kv_cache_type,
        spec.flash_attention,
        "any slot count" if streams else spec.n_slots,
        STATE_FORMAT,
        projector,
        *([adapters] if adapters else []),
        # The deterministic mode computes other bytes (unrepacked weights, other kernels): a state
        # saved by one mode, restored by the other, would answer as neither does cold.
        *(["deterministic"] if spec.deterministic else []),
    )
    alloc = alloc or bytearray
    return DiskCache(
        spec.cache_dir, identity, spec.cache_disk_bytes, spec.cache_min_tokens, streams, alloc, max_tokens=max_tokens
    )


class KvStore:
    """Saved prompt states (host ``cache``, ``disk``) and the KV operations over one context.

    ``read_done(request_id)`` is what a disk read calls when it is done (the engine's inbox).
    Recurrent models share nothing: no saves, no caches, no buffers.
    """

    def __init__(self, model: Model, spec: LoadSpec, ctx: Context, read_done: ReadDone) -> None:
        self.model, self.ctx = model, ctx
        self._read_done = read_done
        # Recurrent state cannot be cut at a position or shared: such models recompute prompts.
        self.share = not model.is_recurrent
        self._cell_bytes = model.kv_bytes_per_token(spec.kv_cache_type) + STATE_BYTES_PER_CELL if self.share else 0
        # Saved states' memory, made ready and freed off this thread: a save only copies. Made
        # ready at most: two full slots' states, or one when the host cache holds less.
        full = self.state_bytes(spec.n_ctx_slot)
        limit = max(full, min(spec.cache_bytes, 2 * full))
        self.buffers = StateBuffers(limit, f"cllm-state-{model.path.name}") if self.share else None
        self._expected: dict[int, tuple[int | None, int]] = {}  # slot -> (its request, its next save's tokens)
        host = spec.cache_bytes > 0 and self.share
        # A state of more cells than a slot holds cannot be restored (llama.cpp's state_read_meta):
        # neither tier keeps one (a file saved by a load with a larger context stays on disk).
        n_ctx_seq = ctx.n_ctx_seq
        self.cache = PromptCache(spec.cache_bytes, spec.cache_min_tokens, max_tokens=n_ctx_seq) if host else None
        # A sliding-window model's cuts below its saved window restore the nearest checkpoint of
        # it (``swa_windows``): one every half window, so that a cut costs at most that much more.
        n_swa = model.n_swa
        self.windows = (
            Windows(spec.n_slots, n_swa // 2, spec.cache_bytes // WINDOW_SHARE)
            if n_swa > 0 and self.cache is not None
            else None
        )
        self.disk: DiskCache | None = None
        self._disk_open = False
        try:
            self.disk = disk_cache_for(model, spec, self.alloc(None), n_ctx_seq) if self.share else None
        except BaseException:
            self.close()
            raise
        self._disk_open = self.disk is not None

    def state_bytes(self, n_tokens: int) -> int:
        """At least the size of a saved state of ``n_tokens`` cells (their K, V and metadata)."""
        return n_tokens * self._cell_bytes + STATE_HEADER_BYTES

    def alloc(self, seq_id: int | None) -> Callable[[int], Any] | None:
        """Where a state of sequence ``seq_id`` (None: not a slot's expected save) is written."""
        return None if self.buffers is None else functools.partial(self.buffers.take, seq_id)

    def prepare_saves(self, slots: Sequence[Slot], prefix: PrefixReuse) -> None:
        """Have each of ``slots``' next expected save find its buffer ready (``state_buffers``):
        asked again only when what the slot expects changes (an idle slot's, once)."""
        buffers = self.buffers
        if buffers is None:
            return
        for slot in slots:
            request, last = slot.request, self._expected.get(slot.seq_id)
            if request is None and last is not None and last[0] is None:
                continue
            expected = (None if request is None else request.id, prefix.next_save(slot))
            if expected == last:
                continue
            self._expected[slot.seq_id] = expected
            if expected[1]:
                buffers.prepare(slot.seq_id, self.state_bytes(expected[1]))
            else:
                buffers.discard(slot.seq_id)

    def apply(self, plan: StepPlan, scheduler: Scheduler) -> None:
        """Perform admission's KV operations in the order planned (``prefix`` says what each means).

        One that cannot be done costs only its own request a recomputed prompt; it never
        fails the others in the batch.
        """
        ctx, lost = self.ctx, set()
        # Whose window checkpoints each trimmed sequence now holds the start of (``swa_windows``).
        origin: dict[int, tuple[Window, ...]] = {}
        windows = self.windows
        for op in plan.ops:
            match op:
                case Save(seq_id, tokens):
                    self.keep(seq_id, tokens, host=True, disk=True)
                case Copy(src, dst):
                    origin[dst] = windows.of(src) if windows is not None else ()
                    # A source in ``lost`` copied (or was to copy) a prefix it does not hold.
                    if src in lost or not self._copied(src, dst, len(scheduler.slots[src].cached)):
                        lost.add(dst)
                case Move(src, dst):
                    # Planned only where nothing else this step reads or writes either sequence.
                    if self._copied(src, dst, len(scheduler.slots[src].cached)):
                        scheduler.moved(src, dst)
                    else:  # the stream stays; what ``dst`` holds now is unknown
                        log.warning("sequence %d could not be copied into %d: its stream stays where it is", src, dst)
                        ctx.seq_clear(dst)
                        scheduler.slots[dst].forget()
                case Restore(seq_id, entry):
                    origin[seq_id] = entry.windows
                    if not self._restored(seq_id, entry):
                        lost.add(seq_id)
                case Load(request_id, entry):
                    assert self.disk is not None
                    self.disk.load(entry, self._read_done(request_id))
                case Trim(seq_id, pos):
                    if windows is not None:
                        origin.setdefault(seq_id, windows.of(seq_id))
                    if seq_id in lost or not self._trimmed(scheduler, seq_id, pos, origin.get(seq_id, ())):
                        lost.add(seq_id)
        for seq_id in lost:
            log.warning("KV of sequence %d could not be reused: its prompt is computed again", seq_id)
            ctx.seq_clear(seq_id)
            scheduler.lost_prefix(seq_id)
        if windows is not None:
            for seq_id, held in origin.items():
                windows.adopt(seq_id, () if seq_id in lost else held, len(scheduler.slots[seq_id].cached))

    def _restored(self, seq_id: int, entry: CacheEntry) -> bool:
        """Put a saved state into sequence ``seq_id``. One that llama.cpp refuses (a size or layout
        this context cannot take) goes from the host cache and from disk (the same tokens there are
        the same state, or the one it was read from): offered again, it would be read and refused at
        every request that shares it. False: the sequence lost it (also where a queued copy is to
        land on it, which is not the state's fault: ``Context.state_set``)."""
        ctx = self.ctx
        if ctx.copy_queued(seq_id):
            return False
        if ctx.state_set(seq_id, entry.payload):
            return True
        log.warning("a saved prompt state of %d tokens was refused: it is dropped", len(entry.tokens))
        if self.cache is not None:
            self.cache.remove(entry)
        if self.disk is not None:
            self.disk.forget_state(entry.tokens)
        return False

    def _trimmed(self, scheduler: Scheduler, seq_id: int, pos: int, windows: tuple[Window, ...]) -> bool:
        """Cut sequence ``seq_id`` at ``pos``, or where one of ``windows`` lets it keep its start
        (``_back_to_window``); False: what it kept is unusable."""
        if not self.ctx.seq_rm(seq_id, pos):
            return False
        return self.window_held(seq_id, pos) or self._back_to_window(scheduler, seq_id, windows)

    def _back_to_window(self, scheduler: Scheduler, seq_id: int, candidates: tuple[Window, ...]) -> bool:
        """A sliding-window sequence cut below the window it holds: keep its start only up to the
        nearest checkpoint of the window at or before the cut, and put that window back
        (``swa_windows``). False: there is none, or it could not be restored."""
        slot, windows = scheduler.slots[seq_id], self.windows
        request = slot.request
        if windows is None or request is None or slot.state is not SlotState.PREFILL:
            return False
        window = windows.best(candidates, slot.cached)
        if window is None or window.n != request.whole(window.n) or window.pos != request.position_after(window.n):
            return False
        ctx = self.ctx
        if not (
            ctx.seq_rm(seq_id, window.pos)
            and ctx.state_set(seq_id, window.payload, window=True)
            and self.window_held(seq_id, window.pos)
        ):
            return False
        log.info(
            "sequence %d keeps %d of %d tokens, up to a checkpoint of its sliding window",
            seq_id,
            window.n,
            len(slot.cached),
        )
        scheduler.kept_prefix(seq_id, window.n)
        return True

    def _copied(self, src: int, dst: int, n_cached: int) -> bool:
        """Copy sequence ``src``'s KV (``n_cached`` tokens) into ``dst``: a short one by its state,
        a long one as the whole stream (``prefix.copied_cells``). So too where either waits on a
        stream copy of this step (a waiter copies a prefix in, and a newcomer copies it from the
        waiter): its bytes move at the next decode, and a copy queued behind it is done in order
        where a state copy would read or write them now. False: ``dst`` lost it."""
        ctx = self.ctx
        if copied_cells(n_cached, ctx.n_ctx_seq) == ctx.n_ctx_seq or ctx.copy_queued(src) or ctx.copy_queued(dst):
            ctx.seq_copy(src, dst)
            return True
        try:
            return ctx.state_set(dst, ctx.state_get(src, self.alloc(None)))
        except EngineError:  # the source's state could not be read: as a refused set
            return False

    def window_held(self, seq_id: int, pos: int) -> bool:
        """Whether a sliding-window sequence cut at ``pos`` still holds the window before it.

        A live sequence keeps every cell (``swa_full``), but a saved state keeps only the last
        window of its SWA layers: restored (or state-copied) and cut below that, the window the
        next token attends to is gone. Full attention and recurrent memory keep what ``seq_rm``
        left (for recurrent state ``seq_pos_min`` is the last position, not a start).
        """
        n_swa = self.model.n_swa
        if pos == 0 or n_swa == 0:
            return True
        low = self.ctx.seq_pos_min(seq_id)
        return 0 <= low <= max(0, pos - n_swa)  # llama-server's rule

    def checkpoint(self, plan: StepPlan, prefix: PrefixReuse, quiet: Callable[[], bool]) -> None:
        """Prefixes a request asked to keep, and long prompts finished in this step, are saved now
        (disk writes run on the IO thread), or, while other slots are busy, once none is and
        ``quiet()`` says no request came (``to_checkpoint``, ``save_deferred``); so are a
        sliding-window model's checkpoints."""
        for slot, _ in plan.prefills:
            checkpoint = prefix.to_checkpoint(slot)
            if checkpoint is None:
                continue
            if checkpoint.later:
                prefix.defer(slot)
            if checkpoint.host or checkpoint.disk:
                self.keep(slot.seq_id, checkpoint.tokens, host=checkpoint.host, disk=checkpoint.disk)
                if checkpoint.disk:
                    prefix.saved(slot)
        self.save_deferred(prefix, quiet)
        if self.windows is not None:
            self._window_checkpoints(plan)

    def save_deferred(self, prefix: PrefixReuse, quiet: Callable[[], bool]) -> None:
        """The checkpoints that waited for the other slots, once none is busy (to disk), one by
        one while ``quiet()`` (``PrefixReuse.take_deferred``)."""
        for seq_id, tokens in prefix.take_deferred(quiet):
            self.keep(seq_id, tokens, host=False, disk=True)

    def _window_checkpoints(self, plan: StepPlan) -> None:
        """Copy the window of the sequences this step took past a checkpoint's place: along a
        prompt's last two windows, at its end, every half window of an answer and at its end."""
        windows = self.windows
        assert windows is not None
        tail = 2 * self.model.n_swa
        prefilled = set()
        for slot, _ in plan.prefills:
            prefilled.add(slot.seq_id)
            request, n = slot.request, len(slot.chain)
            ended = request is None or slot.state is not SlotState.PREFILL
            if (ended or len(request.prompt) - n <= tail) and windows.due(slot.seq_id, n, now=ended):  # type: ignore[union-attr]
                self._window(slot)
        for slot, _ in plan.outputs:
            if slot.seq_id not in prefilled and windows.due(slot.seq_id, len(slot.chain), now=slot.request is None):
                self._window(slot)

    def _window(self, slot: Slot) -> None:
        """Keep a checkpoint of ``slot``'s sliding window (its SWA layers' cells alone)."""
        assert self.windows is not None
        try:
            state = self.ctx.state_get(slot.seq_id, window=True)
        except EngineError:
            log.warning("could not save the sliding window of sequence %d", slot.seq_id)
            return
        self.windows.add(slot.seq_id, slot.chain.tokens, slot.pos, state, len(state))

    def keep(self, seq_id: int, tokens: tuple[int, ...], *, host: bool, disk: bool) -> None:
        """Save sequence ``seq_id``'s state (it holds ``tokens``) to the host cache and/or disk."""
        try:
            state = self.ctx.state_get(seq_id, self.alloc(seq_id))
        except EngineError:
            log.warning("could not save the prompt state of sequence %d", seq_id)
            return
        windows = self.windows.for_entry(seq_id, tokens) if self.windows is not None else ()
        if host and self.cache is not None:
            self.cache.add(tokens, state, len(state), windows)
        if disk and self.disk is not None:  # written on the disk cache's IO thread
            self.disk.save(tokens, state, windows)

    def save_to_disk(self, slots: Sequence[Slot]) -> None:
        """At unload, what the slots hold goes to disk unless it is there nearly all (the engine
        thread has stopped: reading the KV here is safe), and the writes finish before the model
        is freed. The host cache's states went to disk when they were saved."""
        disk, windows = self.disk, self.windows
        if disk is None:
            return
        try:
            for slot in slots:
                chain = slot.chain
                if len(chain) < disk.index.min_tokens or disk.lookup(chain.tokens, chain.keys)[1] + BLOCK > len(chain):
                    continue
                held = windows.for_entry(slot.seq_id, chain.tokens) if windows is not None else ()
                try:
                    state = self.ctx.state_get(slot.seq_id, self.alloc(slot.seq_id))
                except EngineError:  # unreadable (a copy into it never ran): the others still go
                    log.warning("could not save the prompt state of sequence %d", slot.seq_id)
                    continue
                disk.save(chain.tokens, state, held)
        except Exception:
            log.exception("could not save prompt states to disk")
        finally:
            self._close_disk()

    def _close_disk(self) -> None:
        if self.disk is not None and self._disk_open:
            self._disk_open = False
            self.disk.close()

    def close(self) -> None:
        """Free what this holds (the disk tier's pending writes finish first; no slot is saved)."""
        self._close_disk()
        if self.windows is not None:
            self.windows.clear()
        if self.cache is not None:
            self.cache.clear()
        if self.buffers is not None:
            self.buffers.close()
