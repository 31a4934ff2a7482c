"""How long an MP3 lasts, read from its frame headers before anything decodes it.

An MP3 states no length: miniaudio (inside libmtmd's helper) either believes the frame count of
a Xing/Info header in the first frame, or counts the frames by reading them all, and decodes
into one buffer of that many samples. Four bytes of Xing count can claim years, and 32 MiB of
8 kbit/s frames lasts nine hours (2 GB of floats at 16 kHz): both must be refused before the
decode. The walk here is cheap (headers only: sync word, version, layer, bitrate, sample rate,
padding) and bounds what miniaudio would decode:

- every Xing/Info frame count in the file (miniaudio believes the one in the frame it starts at);
- the frames walked from header to header as minimp3 does: the next frame where this one ends
  when a header that matches it is there, else the next header further on;
- half the sum over every byte position that reads as a frame header. Every decoded frame starts
  at one of them, so the whole sum bounds any decode, also of a crafted file whose walk misses
  frames minimp3 finds: such a file passes only if it decodes to at most twice the limit. Half,
  because bytes inside a real file's frames read as headers by chance (one in ~5,000: a tenth to
  a half more again, by bitrate), which must not refuse a real file the walk finds short.
"""

from __future__ import annotations

import math

import numpy as np

# Samples per frame by [version][layer] (version: 0 MPEG-2.5, 2 MPEG-2, 3 MPEG-1; layer: 1 III,
# 2 II, 3 I; 0 for reserved values) and sample rates by [version][index].
_SAMPLES = np.array([[0, 576, 1152, 384], [0, 0, 0, 0], [0, 576, 1152, 384], [0, 1152, 1152, 384]])
_RATES = np.array([[11025, 12000, 8000, 1], [1, 1, 1, 1], [22050, 24000, 16000, 1], [44100, 48000, 32000, 1]])
# Bitrates in kbit/s by (MPEG-1?, layer) and index (0 is free format: no stated size).
_KBPS = {
    (True, 3): (0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448),
    (True, 2): (0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384),
    (True, 1): (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    (False, 3): (0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256),
    (False, 2): (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
    (False, 1): (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}
_BLOCK = 1 << 20  # bytes scanned for headers at a time (the masks of a 32 MiB body at once are 100s of MB)


def mp3_seconds(data: bytes, limit: float = math.inf) -> float | None:
    """How long ``data`` could last decoded, at most (see the module); None where no frame
    header follows its ID3 tag (nothing miniaudio could decode). Once the count of every header
    is past ``limit`` (the longest clip taken), that is the answer: the walk is not needed."""
    start = _after_id3(data)
    if start is None:
        return None
    heads, everywhere = _headers(data, start, limit)
    if heads.size == 0:
        return None
    if everywhere / 2 > limit:
        return everywhere / 2
    return max(_walk(data, heads), _xing_claim(data, heads), everywhere / 2)


def _after_id3(data: bytes) -> int | None:
    """Where the frames start: after an ID3v2 tag (its size is 4 x 7 bits, a footer adds 10), as
    miniaudio skips it; None for a tag longer than the data."""
    if data[:3] != b"ID3":
        return 0
    if len(data) < 10:
        return None
    size = 10 + ((data[6] & 0x7F) << 21 | (data[7] & 0x7F) << 14 | (data[8] & 0x7F) << 7 | data[9] & 0x7F)
    size += 10 if data[5] & 0x10 else 0
    return size if size <= len(data) else None


def _headers(data: bytes, start: int, limit: float) -> tuple[np.ndarray, float]:
    """The positions from ``start`` on whose four bytes read as a frame header, and the seconds
    of a frame at every one of them summed (stopping once past twice ``limit``)."""
    found: list[np.ndarray] = []
    total = 0.0
    for at in range(start, max(start, len(data) - 3), _BLOCK):
        block = np.frombuffer(data, np.uint8, count=min(_BLOCK, len(data) - 3 - at) + 3, offset=at)
        b0, b1, b2 = block[:-3], block[1:-2], block[2:-1]
        version, layer = (b1 >> 3) & 3, (b1 >> 1) & 3
        ok = (b0 == 0xFF) & (b1 & 0xE0 == 0xE0) & (version != 1) & (layer != 0)
        ok &= (b2 >> 4 != 15) & ((b2 >> 2) & 3 != 3)
        where = np.flatnonzero(ok)
        v, rate = version[where], (b2[where] >> 2) & 3
        total += float((_SAMPLES[v, layer[where]] / _RATES[v, rate]).sum())
        found.append(where + at)
        if total / 2 > limit:
            break
    return (np.concatenate(found) if found else np.empty(0, np.int64)), total


def _frame(h: bytes) -> tuple[float, int]:
    """A valid header's frame: its seconds and its length in bytes (0 for free format)."""
    version, layer, index, rate_index = (h[1] >> 3) & 3, (h[1] >> 1) & 3, h[2] >> 4, (h[2] >> 2) & 3
    samples, rate = int(_SAMPLES[version, layer]), int(_RATES[version, rate_index])
    kbps = _KBPS[(version == 3, layer)][index]
    if kbps == 0:
        return samples / rate, 0
    padding = (h[2] >> 1) & 1
    if layer == 3:  # Layer I: 4-byte slots
        return samples / rate, (12 * kbps * 1000 // rate + padding) * 4
    return samples / rate, samples // 8 * kbps * 1000 // rate + padding


def _matches(a: bytes, b: bytes) -> bool:
    """minimp3's test that two headers are of one stream: version, layer, sample rate, both or
    neither free format."""
    return (a[1] ^ b[1]) & 0xFE == 0 and (a[2] ^ b[2]) & 0x0C == 0 and (a[2] >> 4 == 0) == (b[2] >> 4 == 0)


def _walk(data: bytes, heads: np.ndarray) -> float:
    """The frames read from header to header: where a frame ends, the next begins if a matching
    header is there (or the data ends); else the next header on."""
    seconds, i, n = 0.0, 0, len(heads)
    while i < n:
        at = int(heads[i])
        head = data[at : at + 4]
        frame_seconds, length = _frame(head)
        seconds += frame_seconds
        end = at + length
        j = int(np.searchsorted(heads, end)) if length else i + 1
        if length and j < n and heads[j] == end and _matches(head, data[end : end + 4]):
            i = j
        elif length and end >= len(data):
            break
        else:
            i += 1
    return seconds


def _xing_claim(data: bytes, heads: np.ndarray) -> float:
    """The longest a Xing/Info header claims (its frame count times the frame's samples), over
    every one that sits where a header's side information ends (found for all headers at once:
    a file full of the word costs no more than one without)."""
    arr = np.frombuffer(data, np.uint8)
    claim = 0.0
    # After the header, its CRC or not, and the side information: MPEG-2 mono, MPEG-2 stereo or
    # MPEG-1 mono, MPEG-1 stereo.
    for offset in (4 + crc + side for crc in (0, 2) for side in (9, 17, 32)):
        at = heads[heads + offset + 12 <= len(data)] + offset
        tagged = np.zeros(at.size, bool)
        for tag in (b"Xing", b"Info"):
            tagged |= np.logical_and.reduce([arr[at + k] == tag[k] for k in range(4)])
        for h in (at[tagged & (arr[at + 7] & 1 == 1)] - offset).tolist():
            frames = int.from_bytes(data[h + offset + 8 : h + offset + 12], "big")
            claim = max(claim, frames * _frame(data[h : h + 4])[0])
    return claim
