"""Pixtral's [IMG_BREAK] rows, which llama.cpp's graph may leave NaN (``engine/image_breaks.py``),
come out of the binding's encode whole: the fault behind the Ollama-layout Pixtral's NaN
log-probabilities, made to happen every time on a poisoned heap."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from harness.child_report import child_report

from cllm_ollama.engine.image_breaks import mend_image_breaks
from cllm_ollama.testing.vision_ggufs import write_mistral3_vision

ROW = np.array([0.5, -1.0, 2.0, 0.0], dtype=np.float32)


def image(*rows: list[float]) -> np.ndarray:
    return np.array(rows, dtype=np.float32)


def test_a_spoiled_break_row_is_written_back_whole() -> None:
    nan, inf = float("nan"), float("inf")
    embd = image([1, 2, 3, 4], [nan, -1, nan, 0], [5, 6, 7, 8], [nan, nan, nan, nan])
    mended = mend_image_breaks(embd.copy(), ROW)
    assert np.array_equal(mended, image([1, 2, 3, 4], ROW, [5, 6, 7, 8], ROW))
    # A row of the image's own that is not finite is not a break row: it stays as it came.
    own = image([1, 2, 3, 4], [inf, 6, 7, 8])
    assert np.array_equal(mend_image_breaks(own.copy(), ROW), own)


def test_nothing_is_mended_when_the_projector_itself_failed_or_has_no_break_row() -> None:
    nan = float("nan")
    failed = image([nan, 2, 3, 4], [nan, -1, nan, 0])  # no finite row: not a graph's stray NaN
    assert np.array_equal(mend_image_breaks(failed.copy(), ROW), failed, equal_nan=True)
    spoiled = image([1, 2, 3, 4], [nan, -1, nan, 0])
    assert np.array_equal(mend_image_breaks(spoiled.copy(), None), spoiled, equal_nan=True)


@pytest.mark.model
@pytest.mark.skipif(
    not hasattr(ctypes.CDLL(None), "mallinfo2"), reason="the heap is poisoned through glibc's (2.33+) malloc"
)
def test_a_pixtral_projector_encodes_an_image_whole_on_a_poisoned_heap(tmp_path: Path) -> None:
    child = Path(__file__).with_name("poisoned_heap.py")
    text, mmproj = write_mistral3_vision(tmp_path)  # here: in the child, the writers' imports move the heap
    report = child_report(child, str(text), str(mmproj), timeout=120)
    # Pixtral takes at least 8 image tokens, so the 32 px picture is enlarged to 48 px: 8 px patches
    # merged 2x2 make three rows of three, the first two each ended by an [IMG_BREAK] (rows 3 and 7).
    assert report["raw_nonfinite_rows"] == [3, 7]  # llama.cpp read the poison: the fault happened
    assert report["nonfinite_rows"] == []
    assert report["equals_clean"]
