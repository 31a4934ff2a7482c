"""A sequence's state without its slot count (``state_streams``), on layouts as llama.cpp writes
them: the cells of the one stream that holds any survive a round trip to another stream count;
anything else is refused, never guessed at. (The oracle over a real model:
``test_disk_cache_oracle``'s restore across slot counts.)"""

from __future__ import annotations

import struct

import pytest

from cllm_ollama.engine.state_streams import one_stream, widen

HEAD = struct.pack("<Ii", 0xAF143CD8, 1)
CELLS = struct.pack("<I", 3) + bytes(range(1, 40))  # a cell count, then its (opaque) cells


def state(n_stream: int, holder: int) -> bytes:
    """A state as a context of ``n_stream`` streams writes sequence ``holder``'s."""
    counts = [struct.pack("<I", 0)] * n_stream
    counts[holder] = CELLS
    return HEAD + struct.pack("<I", n_stream) + b"".join(counts)


@pytest.mark.parametrize(("n_stream", "holder", "into"), [(1, 0, 4), (4, 0, 1), (4, 2, 3), (3, 2, 1)])
def test_the_cells_round_trip_to_any_stream_count(n_stream: int, holder: int, into: int) -> None:
    pieces = one_stream(state(n_stream, holder))
    assert pieces is not None
    stored = b"".join(pieces)
    assert stored == state(1, 0)
    payload = bytearray(stored) + bytes(4 * (into - 1))
    assert widen(payload, into)
    assert bytes(payload) == state(into, 0)


def test_a_state_with_no_cells_is_one_empty_stream() -> None:
    empty = HEAD + struct.pack("<III", 2, 0, 0)
    assert b"".join(one_stream(empty) or ()) == HEAD + struct.pack("<II", 1, 0)


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        HEAD + struct.pack("<I", 0),  # no stream
        HEAD + struct.pack("<I", 1 << 20) + CELLS,  # no stream count of ours
        state(3, 0)[:-2],  # the empty streams after the cells cut short
        state(3, 0)[:-4] + struct.pack("<I", 7),  # a second stream with cells (two caches' layout)
        HEAD + struct.pack("<II", 2, 0),  # streams missing
    ],
)
def test_an_unknown_layout_is_refused(bad: bytes) -> None:
    assert one_stream(bad) is None


def test_widen_refuses_a_state_that_is_not_one_stream() -> None:
    assert not widen(bytearray(state(2, 1)), 3)
