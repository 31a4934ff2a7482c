"""A prompt's media (images, audio windows) on its way into its slot's sequence.

The media thread (``encoder.MediaEncoder``) encodes items ahead of need; the engine thread
decodes each item's embeddings into its slot, alone, before a step's batch. The prompts
with media are held here until their request ends, then released to the encoder, which
closes each once no encode reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

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

    def decode(self, plan: StepPlan, ctx: Context, fail: Callable[[Slot, str], Event]) -> list[Event]:
        """The media step: each item's embeddings into its slot's sequence, one decode each,
        before the batch (an embedding batch carries no tokens; Gemma 3's non-causal attention
        switches the whole context). One that fails ends only its own request (``fail``)."""
        failed: list[Event] = []
        for slot, item, embd in list(plan.media):
            request = slot.request
            assert request is not None and request.media is not None
            try:
                if isinstance(embd, EncodeFailed):
                    raise EngineError(embd.message)
                request.media.decode(ctx, item, embd, slot.pos, slot.seq_id)
            except EngineError as exc:
                plan.media.remove((slot, item, embd))
                ctx.seq_clear(slot.seq_id)
                failed.append(fail(slot, str(exc)))
        self.encode_ahead([slot for slot, _, _ in plan.media])  # the items after these, next
        return failed

    def close(self) -> None:
        """Stop the encoder; close the prompts of requests the loop never saw end (it died)."""
        if self.encoder is not None:
            self.encoder.close()
        for media in self.held.values():
            media.close()
        self.held.clear()
