"""Audio bytes before libmtmd decodes them: which bytes are audio, and how long a file says it lasts.

libmtmd's helper decodes WAV, MP3 and FLAC (miniaudio) into 16 kHz mono floats, in one buffer as
long as the file's header claims: a WAV's ``fact`` chunk or a sample rate of 1 Hz, a FLAC's
sample count, an MP3's Xing frame count, a few bytes each, can claim days of audio, whose buffer
would exhaust the memory before anything could refuse it (an MP3 without a claim is as long as
its frames, 32 MiB of them up to nine hours). ``claimed_seconds`` reads that claim first, so
that the binding refuses a clip longer than it takes (``binding.MAX_AUDIO_SECONDS``) before
decoding it.
"""

from __future__ import annotations

import math
import struct

from .mp3 import mp3_seconds

_WAV_NO_SIZE = 0xFFFFFFFF  # a streamed WAV's data size: "to the end of the file"


def is_audio(data: bytes) -> bool:
    """Whether ``data`` starts as audio libmtmd decodes (WAV, MP3, FLAC): its helper's own test
    (``mtmd-helper.cpp`` ``is_audio_file``), so that what is taken for audio here is what libmtmd
    decodes as audio. Ollama tells audio from images the same way (``llm/media.go``), FLAC aside."""
    if len(data) < 12:
        return False
    wav = data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    mp3 = data[:3] == b"ID3" or (data[0] == 0xFF and data[1] & 0xE0 == 0xE0)  # an ID3 tag, or a frame sync
    return wav or mp3 or data[:4] == b"fLaC"


def claimed_seconds(data: bytes, limit: float = math.inf) -> float | None:
    """How long the audio says it lasts (for an MP3, which says nothing, the most its frame
    headers let it last: ``mp3.mp3_seconds``, which may stop counting past ``limit``); None for
    a header that cannot be read (miniaudio would not decode it either)."""
    if data[:4] == b"RIFF":
        return _wav_seconds(data)
    if data[:4] == b"fLaC":
        return _flac_seconds(data)
    return mp3_seconds(data, limit)


def _wav_seconds(data: bytes) -> float | None:
    """A RIFF WAVE's frames (its ``fact`` count, else its data chunk over the frame size, the data
    cut to the bytes present as miniaudio cuts it) over its sample rate."""
    rate = block = fact = 0
    size: int | None = None
    at = 12
    while at + 8 <= len(data):
        kind, length = data[at : at + 4], struct.unpack_from("<I", data, at + 4)[0]
        body = at + 8
        if kind == b"fmt " and length >= 16 and body + 16 <= len(data):
            _, _, rate, _, block = struct.unpack_from("<HHIIH", data, body)
        elif kind == b"fact" and length >= 4 and body + 4 <= len(data):
            fact = struct.unpack_from("<I", data, body)[0]
        elif kind == b"data":
            present = len(data) - body
            size = present if length == _WAV_NO_SIZE else min(length, present)
            break
        at = body + length + (length & 1)  # chunks are padded to an even size
    if size is None or rate == 0 or block == 0:
        return None
    return (fact or size // block) / rate


def _flac_seconds(data: bytes) -> float | None:
    """A FLAC's STREAMINFO (the first metadata block, required): its total samples (0: not
    stated, which miniaudio decodes as nothing) over its sample rate."""
    if len(data) < 26 or data[4] & 0x7F != 0:
        return None
    bits = int.from_bytes(data[18:26], "big")  # rate: 20 bits, channels: 3, bits per sample: 5, samples: 36
    rate, samples = bits >> 44, bits & ((1 << 36) - 1)
    return samples / rate if rate else None
