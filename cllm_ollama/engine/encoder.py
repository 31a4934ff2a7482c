"""Media (images, audio windows) encoded off the engine thread: one media thread per projector.

Encoding an image (the projector's ViT forward pass) or an audio window (its audio encoder)
takes far longer on a CPU than a token step; done on the engine thread it would stall every
running stream. Here it runs on a thread of its own (one per projector: an encode writes the
projector's output buffer), while the engine keeps stepping; a slot whose media item is not
encoded yet waits at it. The engine thread then decodes the embeddings into the slot's
sequence, in pieces within the step budget (``media_feed``).

Embeddings are kept by media item (its id: the SHA-256 of its bytes, and its tile or window) for
the few most recent, so that requests sending the same image or clip at once encode it once. This
component also owns the closing of the prompts handed to it (``release``): never while one of
their items is being encoded.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Callable

from .media import Media
from .request import MediaInput

log = logging.getLogger("cllm.engine")

# Encoded media items kept (a Gemma 3 image is 256 x 2560 floats, 2.6 MB; a 30 s window of Qwen2.5-Omni
# audio 750 x 3584, 10.8 MB).
KEPT_MEDIA = 16
# Media items of one prompt queued ahead of the one being decoded: fewer than are kept, so that a
# long clip's windows encoded early are not dropped before their turn and encoded again.
ENCODE_AHEAD = KEPT_MEDIA // 4


class EncodeFailed:
    """A media item that could not be encoded: the request that needs it fails with ``message``."""

    def __init__(self, message: str) -> None:
        self.message = message


class MediaEncoder:
    """``want`` a media item's embeddings (an image's, an audio window's) from any thread;
    ``on_done`` is called after each encode."""

    def __init__(self, on_done: Callable[[], None], name: str = "cllm-media") -> None:
        self._on_done = on_done
        self._cv = threading.Condition()
        self._jobs: deque[tuple[MediaInput, Media]] = deque()
        self._queued: set[str] = set()  # media item ids queued or being encoded
        self._running: MediaInput | None = None
        self._released: set[int] = set()  # id() of prompts to close once their encode ends
        self._done: OrderedDict[str, object] = OrderedDict()
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def want(self, media: MediaInput, item: Media) -> object | None:
        """The item's embeddings (or ``EncodeFailed``), or None while it is being encoded."""
        with self._cv:
            if (done := self._done.get(item.id)) is not None:
                self._done.move_to_end(item.id)
                return done
            if item.id not in self._queued:
                self._queued.add(item.id)
                self._jobs.append((media, item))
                self._cv.notify()
            return None

    def release(self, media: MediaInput) -> None:
        """``media``'s request ended: close it now, or after the encode that reads it."""
        with self._cv:
            kept = deque(job for job in self._jobs if job[0] is not media)
            for _, item in self._jobs:
                if not any(job[1].id == item.id for job in kept) and item.id in self._queued:
                    self._queued.discard(item.id)  # another request wanting it queues it again
            self._jobs = kept
            if self._running is media:
                self._released.add(id(media))
                return
        media.close()

    def close(self) -> None:
        """Stop the thread (after the encode it is doing); queued jobs are dropped."""
        with self._cv:
            self._closing = True
            self._jobs.clear()
            self._cv.notify()
        self._thread.join()
        self._done.clear()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not (self._jobs or self._closing):
                    self._cv.wait()
                if self._closing:
                    return
                media, item = self._jobs.popleft()
                self._running = media
            result: object
            try:
                result = media.encode(item)
            except Exception as exc:  # a failed encode fails the requests that need it, not the thread
                log.warning("encoding media item %s failed: %s", item.id[:12], exc)
                result = EncodeFailed(str(exc))
            with self._cv:
                self._running = None
                self._queued.discard(item.id)
                self._done[item.id] = result
                while len(self._done) > KEPT_MEDIA:
                    self._done.popitem(last=False)
                close = id(media) in self._released
                self._released.discard(id(media))
            if close:
                media.close()
            self._on_done()
