"""One sequence's saved state without the slot count in it, so that the disk tier serves a model
loaded with any ``num_parallel``.

``llama_state_seq_get_data`` writes (llama.cpp's ``llama_context::state_seq_get_data`` and
``llama_kv_cache::state_write``): a magic (u32) and the sequence id (i32), then for the KV cache
its stream count (u32) and, for every stream, a cell count (u32) followed, when not zero, by that
stream's cells (positions, then K and V rows, self-describing). Contexts here have one stream per
slot (``kv_unified`` off), and a sequence's cells are all in its own stream, so every other
stream's count is 0. ``state_read`` refuses a state whose stream count is not its own ("n_stream
mismatch"), but it reads any stream's cells into the destination sequence's stream, whatever the
stream's index. So the same cells restore into a context with another slot count once the stream
count is rewritten and the empty streams are made as many: ``one_stream`` strips a state to one
stream for the file, ``widen`` makes a read one the context's again.

Only a model whose memory is one KV cache qualifies: a sliding-window model writes two caches one
after the other (``llama_kv_cache_iswa``) and recurrent or hybrid ones write another layout;
without parsing the cells, where the first cache ends cannot be told. Those keep the slot count in
their disk identity (``runner``).
"""

from __future__ import annotations

import struct
from typing import Any

HEAD = 8  # magic (u32) and sequence id (i32)
_U32 = struct.Struct("<I")
# A stream count past this is no state of ours (llama.cpp allows at most 256 sequences).
MAX_STREAMS = 4096


def one_stream(state: Any) -> list[memoryview] | None:
    """``state`` in its one-stream form, as pieces to write in order (views: nothing copied); None
    when it is not one KV cache's state of one sequence (then it is not written)."""
    view = memoryview(state).cast("B")
    if len(view) < HEAD + 8:
        return None
    (n,) = _U32.unpack_from(view, HEAD)
    if not 1 <= n <= MAX_STREAMS:
        return None
    head = memoryview(bytes(view[:HEAD]) + _U32.pack(1))
    at = HEAD + 4
    for k in range(n):
        if at + 4 > len(view):
            return None
        if _U32.unpack_from(view, at)[0] != 0:
            end = len(view) - 4 * (n - 1 - k)  # the streams after this one are empty: 4 zero bytes each
            if end <= at + 4 or any(view[end:]):
                return None
            return [head, view[at:end]]
        at += 4
    return [head, view[at - 4 : at]] if at == len(view) else None  # no cells at all


def widen(payload: bytearray, n_stream: int) -> bool:
    """Make a one-stream state, read into the start of ``payload`` with ``4 * (n_stream - 1)``
    zero bytes after it, a state of ``n_stream`` streams (the others empty), in place. False if it
    is not a one-stream state."""
    if len(payload) < HEAD + 4 or _U32.unpack_from(payload, HEAD)[0] != 1:
        return False
    _U32.pack_into(payload, HEAD, n_stream)
    return True
