"""Reference counts on blobs that work in progress relies on (a create, copy, pull or show).

A manifest only protects its blobs once it is written; until then, the blobs a writer has
checked or added are pinned here. Deletes and prunes skip pinned blobs and leave them
``doomed``: the last unpin hands them back so they are removed then, if still unreferenced.
The counts are only read or changed under the store's lock, so they need no lock of their own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


def _key(digest: str) -> str:
    return "sha256:" + digest.split(":", 1)[-1].split("-", 1)[-1].lower()


class BlobPins:
    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._doomed: set[str] = set()

    def pin(self, digests: Iterable[str]) -> None:
        self._counts.update(_key(d) for d in digests)

    def unpin(self, digests: Iterable[str]) -> set[str]:
        """Drop one pin on each; returns the doomed digests nobody pins any more."""
        freed = set()
        for digest in map(_key, digests):
            self._counts[digest] -= 1
            if self._counts[digest] <= 0:
                del self._counts[digest]
                if digest in self._doomed:
                    self._doomed.discard(digest)
                    freed.add(digest)
        return freed

    def spare(self, digest: str) -> bool:
        """Whether a removal of ``digest`` must wait (it is pinned); if so, it is removed at the last unpin."""
        key = _key(digest)
        if self._counts[key] > 0:
            self._doomed.add(key)
            return True
        return False
