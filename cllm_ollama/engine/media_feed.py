"""A prompt's media (images, audio windows) on its way into its slot's sequence.

The media thread (``encoder.MediaEncoder``) encodes items ahead of need, off the engine thread;
the engine thread decodes the embeddings into the slot's sequence in pieces. The prompts with
media are held here until their request ends, then released to the encoder, which closes each
once no encode reads it.

**Media in pieces.** An item's ``llama_decode`` is what stalls the other streams (its encode
runs beside them), so the scheduler cuts it into pieces that fit the step budget
(``prompt_rows.PromptRows``, ``step_budget``): each step decodes at most one piece, the next rows of
one item (the oldest prompt's that is encoded), at the positions libmtmd's helper gives the whole
item (sequential, or M-RoPE's t, y, x for Qwen-VL images: ``binding.MediaPrompt.decode``). The
piece's size is its slot's share of the prompt rows the budget leaves after the generating
streams' tokens, shared with other prompts' text as text is (``prompt_rows.shares``: fewest rows
left first, the oldest's quarter), so a short chat is not held up by a long clip either. A piece
shares its step with the text rows in a call of its own, before them: a llama.cpp batch holds
token ids or embeddings, never both. A step is then up to three calls: the media piece, the
prompts' text rows, and the rows whose logits are sampled; the piece's call is timed into the
prompt-call costs like any other call without logits. Where the budget leaves a row at most
and no prompt text is read in the step, that row rides in the generating streams' call instead,
their tokens given as their embedding rows (``binding.token_rows``): a call of its own costs about
a small model's whole decode step however few its rows, a row in theirs a fraction of it.

An item whose tokens attend both ways (Gemma 3's images: ``mtmd_decode_use_non_causal``) is one
piece whatever its size (the oldest prompt's always, another's when it fits the budget), decoded
with causal attention off for the whole context, so it never shares a call and is never split.

Until its last piece is decoded an item counts nowhere (not in ``Slot.n_past``, its chain, saved
states or prefixes): its rows decoded so far sit in the sequence above the slot's position. A
request that ends with an item half decoded leaves them there: ``drop_partial`` removes them
before the slot is saved, copied or reused.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import EngineError
from .binding import Context
from .encoder import ENCODE_AHEAD, EncodeFailed, MediaEncoder
from .media import Media
from .request import Event, MediaInput, Request
from .scheduler import StepPlan
from .slot import Slot


class MediaFeed:
    """The media of the requests the engine knows (engine thread only, bar the encoder's thread).

    Without a projector there is no encoder: a prompt with media then fails at its first item.
    """

    def __init__(self, projector: bool, on_encoded: Callable[[], None], name: str) -> None:
        self.encoder = MediaEncoder(on_encoded, name) if projector else None
        # Prompts with media, by request id: released to the encoder when their request ends.
        self.held: dict[int, MediaInput] = {}
        # Sequences holding part of an item: (the request decoding it, the item's first position).
        self.partial: dict[int, tuple[int, int]] = {}

    def add(self, request: Request) -> None:
        if request.media is not None:
            self.held[request.id] = request.media

    def release(self, request_id: int) -> None:
        """The request ended: its prompt is closed (after any encode that reads it)."""
        media = self.held.pop(request_id, None)
        if media is None:
            return
        if self.encoder is not None:
            self.encoder.release(media)
        else:
            media.close()

    def embeddings(self, request: Request, item: Media) -> object | None:
        """The scheduler's question: is ``item`` encoded? Asking queues it on the media thread."""
        if self.encoder is None or request.media is None:
            return EncodeFailed("this model was loaded without its projector")
        return self.encoder.want(request.media, item)

    def waiting(self, slot: Slot) -> bool:
        """Whether ``slot``'s prompt stands at a media item not encoded yet."""
        item = slot.media_due()
        return item is not None and self.embeddings(slot.request, item) is None  # type: ignore[arg-type]

    def encode_ahead(self, slots: Iterable[Slot]) -> None:
        """Queue the encodes of the next media items these prompts still need, at most
        ``ENCODE_AHEAD``, so that they run while the text and media before them are decoded, not
        after; called as a prompt is admitted and as each of its media items is decoded."""
        for slot in slots:
            request = slot.request
            if request is not None and request.media is not None:
                ahead = [item for start, item in request.media_items.items() if start >= slot.n_past]
                for item in ahead[:ENCODE_AHEAD]:
                    self.embeddings(request, item)

    def decode(
        self,
        plan: StepPlan,
        ctx: Context,
        fail: Callable[[Slot, str], Event],
        observe: Callable[[int, int], None],
        ride: Callable[[Any, Any, int], None],
    ) -> list[Event]:
        """The step's media pieces, each into its slot's sequence in a call of its own before the
        batch, timed into ``observe(rows, ns)``; a piece that ``rides`` is handed to ``ride(embeddings,
        positions, seq_id)`` instead, for the streams' call. One that fails ends only its own
        request (``fail``)."""
        failed: list[Event] = []
        for piece in list(plan.media):
            slot, item, embd, rows = piece.slot, piece.item, piece.embd, piece.rows
            request = slot.request
            assert request is not None and request.media is not None
            try:
                if isinstance(embd, EncodeFailed):
                    raise EngineError(embd.message)
                if piece.rides:
                    embeddings, positions = request.media.piece(item, embd, slot.pos, rows)
                    ride(embeddings, positions, slot.seq_id)
                else:
                    t0 = time.perf_counter_ns()
                    request.media.decode(ctx, item, embd, slot.pos, slot.seq_id, rows=rows)
                    observe(len(rows), time.perf_counter_ns() - t0)
            except EngineError as exc:
                plan.media.remove(piece)
                self.partial.pop(slot.seq_id, None)
                ctx.seq_clear(slot.seq_id)
                failed.append(fail(slot, str(exc)))
                continue
            if rows.stop < item.n_tokens:
                self.partial[slot.seq_id] = (request.id, slot.pos)
            else:
                self.partial.pop(slot.seq_id, None)
        # The items after the finished ones, next.
        self.encode_ahead([p.slot for p in plan.media if p.rows.stop == p.item.n_tokens])
        return failed

    def drop_partial(self, ctx: Context, slots: Sequence[Slot]) -> None:
        """Remove the rows of half-decoded items whose request has left its slot (aborted, or its
        engine closing): the sequence is then exactly what its slot counts, as a save, a copy or
        the next request expects. Called every pass: nothing to do unless an item is half decoded."""
        if not self.partial:
            return
        for seq_id, (request_id, pos) in list(self.partial.items()):
            slot = slots[seq_id]
            if slot.request is None or slot.request.id != request_id:
                del self.partial[seq_id]
                if not ctx.seq_rm(seq_id, pos):  # a recurrent state has taken the rows in: all of it goes
                    ctx.seq_clear(seq_id)
                    slot.forget()

    def forget_partial(self) -> None:
        """Every sequence was cleared (a failed step): no item is half decoded any more."""
        self.partial.clear()

    def close(self) -> None:
        """Stop the encoder; close the prompts of requests the loop never saw end (it died)."""
        if self.encoder is not None:
            self.encoder.close()
        for media in self.held.values():
            media.close()
        self.held.clear()
