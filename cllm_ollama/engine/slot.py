"""One llama.cpp sequence and the request it serves, as a small state machine.

    IDLE --assign()--> PREFILL --prompt done, first token sampled--> GENERATING
      ^                 |     ^                                          |
      |      wait_for() v     | stop_waiting()                           |
      |               WAITING (its prompt's start is being computed in    |
      |                        another slot: llama.cpp's WAIT_OTHER)      |
      +------------------- finish / abort (from any state) --------------+

A slot counts KV cells (``n_past``) and positions (``pos``) apart: an image takes ``n_tokens``
cells but, for M-RoPE models, fewer positions; ``shift`` is the difference so far.

A finished slot keeps ``cached`` (the tokens whose KV is still in the sequence, with their
block keys in ``chain``), so the next request that shares a prefix with it skips that much
prefill.
"""

from __future__ import annotations

import bisect
import codecs
import enum
import time
from dataclasses import dataclass, field

from .blocks import TokenChain
from .media import Media
from .request import Event, FinishReason, Request, Stats


class SlotState(enum.Enum):
    IDLE = "idle"
    PREFILL = "prefill"
    # Admitted, but its prompt's start is being computed by another slot: it copies it from
    # there once it is (``Slot.wait`` says which), and takes no part in batches until then.
    WAITING = "waiting"
    GENERATING = "generating"


class Tier(enum.StrEnum):
    """Where the KV of a prompt's reused start came from (the value names its counter)."""

    OWN = "own"  # the slot's own sequence
    SLOT = "copied"  # another slot's sequence
    HOST = "restored"  # a state saved in host RAM
    DISK = "loaded"  # a state read from the disk cache


@dataclass(frozen=True)
class Wait:
    """What a WAITING slot waits for: ``source`` computing the first ``n`` tokens for request
    ``request_id`` (if that request leaves the slot, the wait ends with what is there), or with
    no ``source``, a read of that start from the disk cache."""

    source: Slot | None
    request_id: int
    n: int


@dataclass
class StopMatcher:
    """Holds back text that might be the start of a stop string; never emits a stop string."""

    stops: tuple[str, ...]
    pending: str = ""
    _hold: int = field(init=False)

    def __post_init__(self) -> None:
        self._hold = max((len(s) for s in self.stops), default=1) - 1
        # Sorted, a stop that begins with a tail is the first one not below it: the tail check is
        # then a search per tail length, not a scan of every stop (10,000 stops: 15 ms a token).
        self._sorted = sorted(self.stops)

    def feed(self, text: str) -> tuple[str, bool]:
        """Returns (text safe to emit, whether a stop string was hit)."""
        if not self.stops:
            return text, False
        buf = self.pending + text
        cut = min((i for i in (buf.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.pending = ""
            return buf[:cut], True
        keep = next((n for n in range(min(self._hold, len(buf)), 0, -1) if self._begins_a_stop(buf[-n:])), 0)
        self.pending = buf[len(buf) - keep :] if keep else ""
        return buf[: len(buf) - keep], False

    def _begins_a_stop(self, tail: str) -> bool:
        i = bisect.bisect_left(self._sorted, tail)
        return i < len(self._sorted) and self._sorted[i].startswith(tail)

    def flush(self) -> str:
        text, self.pending = self.pending, ""
        return text


# What a slot knows of the request it serves, beside its state and its chain: all of it moves
# with the request when the request goes on in another slot (``Slot.hand_over``).
_PROGRESS = (
    "request",
    "limit",
    "n_past",
    "shift",
    "media_rows",
    "last_token",
    "n_generated",
    "_utf8",
    "_stops",
    "_prompt_cached",
    "_t_admit",
    "_t_first",
    "_queued_ns",
    "prefix_source",
)


class Slot:
    """A sequence id in the llama.cpp context, plus the progress of the request it serves."""

    def __init__(self, seq_id: int, n_ctx: int) -> None:
        self.seq_id = seq_id
        self.n_ctx = n_ctx
        self.state = SlotState.IDLE
        self.chain = TokenChain()
        self.request: Request | None = None
        self.n_past = 0
        # Cells minus positions so far (images of M-RoPE models take fewer positions than cells).
        self.shift = 0
        # Rows of the media item due (``media_due``) decoded so far: an item is decoded in pieces
        # over steps, and counts in ``n_past`` (and ``chain``) only once it is whole.
        self.media_rows = 0
        self.limit = n_ctx
        self.last_token = -1
        self.n_generated = 0
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self._stops = StopMatcher(())
        self._prompt_cached = 0
        self._t_admit = 0
        self._t_first = 0
        self._queued_ns = 0
        # Set while WAITING: whose computation this slot waits for.
        self.wait: Wait | None = None
        # Where the KV of the prompt's first ``prompt_cached`` tokens came from.
        self.prefix_source = Tier.OWN

    @property
    def busy(self) -> bool:
        return self.state is not SlotState.IDLE

    @property
    def pos(self) -> int:
        """The position of the next cell decoded into this sequence."""
        return self.n_past - self.shift

    @property
    def cached(self) -> list[int]:
        """The tokens whose KV this slot's sequence holds (read only: ``chain`` keeps their keys)."""
        return self.chain.tokens

    def forget(self) -> None:
        """The sequence's KV is gone (cleared, or in an unknown state): nothing is cached."""
        self.chain.clear()

    def wait_for(self, wait: Wait) -> None:
        """Take no part in batches until ``wait.source`` has computed this prompt's start."""
        assert self.state is SlotState.PREFILL
        self.state = SlotState.WAITING
        self.wait = wait

    def stop_waiting(self) -> None:
        assert self.state is SlotState.WAITING
        self.state = SlotState.PREFILL
        self.wait = None

    def assign(self, request: Request, n_reuse: int, now_ns: int, queued_ns: int = 0) -> None:
        """Start ``request`` here, keeping the first ``n_reuse`` cached tokens' KV; it waited
        ``queued_ns`` for a slot."""
        assert self.state is SlotState.IDLE
        self.state = SlotState.PREFILL
        self.request = request
        self.limit = min(self.n_ctx, request.num_ctx or self.n_ctx)
        self.chain.truncate(n_reuse)
        self.n_past = n_reuse
        self.shift = n_reuse - request.position_after(n_reuse)
        self.media_rows = 0
        self._prompt_cached = n_reuse
        self.n_generated = 0
        self.last_token = -1
        self._utf8.reset()
        self._stops = StopMatcher(request.stop)
        self._t_admit = now_ns
        self._queued_ns = queued_ns
        self.wait = None
        self.prefix_source = Tier.OWN

    def take_prefix(self, n: int, source: Tier) -> None:
        """The first ``n`` prompt tokens' KV arrived from ``source`` (another slot, the host cache)."""
        assert self.request is not None and self.state is SlotState.PREFILL and n < len(self.request.prompt)
        self.chain = TokenChain(self.request.prompt[:n], self.request.prefix_keys)
        self.n_past = n
        self.shift = n - self.request.position_after(n)
        self.media_rows = 0
        self._prompt_cached = n
        self.prefix_source = source

    def hand_over(self, dst: Slot) -> None:
        """Move this slot's generating request, with all its progress, to idle ``dst``, whose
        sequence now holds a copy of this one's KV (``Scheduler``'s compaction). This slot goes
        idle and keeps what its sequence holds (the prompt and the answer so far) as a cached prefix."""
        assert self.state is SlotState.GENERATING and dst.state is SlotState.IDLE and self.wait is None
        dst.chain = TokenChain(self.chain.tokens, self.chain.keys)
        for name in _PROGRESS:
            setattr(dst, name, getattr(self, name))
        dst.state, self.state = SlotState.GENERATING, SlotState.IDLE
        self.request = None
        # ``dst`` holds this decoder now; the next ``assign`` here resets its own in place.
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")

    def lose_prefix(self) -> None:
        """The KV this slot counted on is gone: compute the prompt from its start."""
        assert self.state in (SlotState.PREFILL, SlotState.WAITING)
        self.state = SlotState.PREFILL
        self.wait = None
        self.chain.clear()
        self.n_past = 0
        self.shift = 0
        self.media_rows = 0
        self._prompt_cached = 0

    def prompt_chunk(self, budget: int) -> list[int]:
        """The next prompt tokens to decode, up to the next media item (decoded apart: ``media_due``) or
        the next length to keep (its state is saved after the step)."""
        assert self.request is not None
        return list(self.request.prompt[self.n_past : self.n_past + self.chunk_room(budget)])

    def chunk_room(self, budget: int) -> int:
        """How many prompt tokens the next chunk can hold, at most ``budget`` (``prompt_chunk``)."""
        request = self.request
        assert request is not None
        end = min(self.n_past + budget, request.next_media(self.n_past), request.next_keep(self.n_past))
        return max(0, end - self.n_past)

    @property
    def prompt_left(self) -> int:
        """Prompt tokens not decoded yet (a media item's decoded rows not counted)."""
        return len(self.request.prompt) - self.n_past - self.media_rows if self.request is not None else 0

    def media_due(self) -> Media | None:
        """The media item (image or audio window) that starts where the prompt stands, if one does."""
        return self.request.media_items.get(self.n_past) if self.request is not None else None

    def advance_media(self, item: Media, rows: int) -> None:
        """Record that ``rows`` more rows of ``item`` (the one due) were decoded; once it is whole,
        its cells and its positions."""
        assert self.request is not None and self.state is SlotState.PREFILL and self.media_due() is item
        self.media_rows += rows
        assert self.media_rows <= item.n_tokens
        if self.media_rows < item.n_tokens:
            return
        self.media_rows = 0
        self.chain.extend(self.request.prompt[self.n_past : self.n_past + item.n_tokens])
        self.n_past += item.n_tokens
        self.shift += item.n_tokens - item.n_pos

    def advance_prompt(self, n: int) -> None:
        """Record that ``n`` more prompt tokens were decoded."""
        assert self.request is not None and self.state is SlotState.PREFILL
        self.chain.extend(self.request.prompt[self.n_past : self.n_past + n])
        self.n_past += n

    def accept_token(self, token: int, piece: bytes, is_eog: bool, now_ns: int) -> Event:
        """Take a sampled token: emit its text, or finish the request."""
        request = self.request
        assert request is not None and self.state is not SlotState.IDLE
        if self.state is SlotState.PREFILL:
            self.state = SlotState.GENERATING
            self._t_first = now_ns
        else:
            # The previous sampled token was decoded in this step: its KV now exists.
            self.chain.append(self.last_token)
            self.n_past += 1
        self.n_generated += 1
        self.last_token = token
        if is_eog:
            return self._finish(FinishReason.STOP, self._utf8.decode(b"", final=True), now_ns, token)
        text, hit = self._stops.feed(self._utf8.decode(piece))
        if hit:
            return self._finish(FinishReason.STOP, text, now_ns, token, flush=False)
        if 0 <= request.num_predict <= self.n_generated:
            return self._finish(FinishReason.LENGTH, text, now_ns, token)
        # The next decode needs one free cell for this token.
        if self.n_past + 1 >= self.limit:
            return self._finish(FinishReason.LENGTH, text, now_ns, token)
        return Event(request.id, text, (token,))

    def abort(self, now_ns: int) -> Event:
        assert self.request is not None
        return self._finish(FinishReason.CANCELED, "", now_ns, None, flush=False)

    def fail(self, message: str, now_ns: int) -> Event:
        assert self.request is not None
        event = self._finish(FinishReason.ERROR, "", now_ns, None, flush=False)
        return Event(event.request_id, "", (), FinishReason.ERROR, event.stats, message)

    def _finish(self, reason: FinishReason, text: str, now_ns: int, token: int | None, flush: bool = True) -> Event:
        request = self.request
        assert request is not None
        if flush:
            text += self._stops.flush()
        t_first = self._t_first or now_ns
        stats = Stats(
            prompt_tokens=len(request.prompt),
            prompt_cached=self._prompt_cached,
            prompt_eval_ns=t_first - self._t_admit,
            eval_tokens=self.n_generated,
            eval_ns=now_ns - t_first,
            queue_ns=self._queued_ns,
        )
        self.state = SlotState.IDLE
        self.request = None
        self.wait = None
        return Event(request.id, text, (token,) if token is not None else (), reason, stats)

    @property
    def prompt_cached(self) -> int:
        return self._prompt_cached


def now_ns() -> int:
    return time.perf_counter_ns()
