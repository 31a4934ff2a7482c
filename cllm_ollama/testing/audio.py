"""Small real audio files for tests: WAV written with the standard library's ``wave``, and the
first bytes of a few that lie about their length."""

from __future__ import annotations

import io
import struct
import wave

import numpy as np


def wav(seconds: float = 1.0, *, seed: int = 0, rate: int = 16000, channels: int = 1) -> bytes:
    """A 16-bit PCM WAV of three seeded tones (a different sound per ``seed``)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    signal = sum(np.sin(2 * np.pi * f * t + p) for f, p in rng.uniform((100, 0), (2000, 6), (3, 2))) / 6
    pcm = np.repeat((signal * 32767).astype("<i2")[:, None], channels, axis=1)
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return out.getvalue()


def wav_claiming(seconds: float) -> bytes:
    """A WAV of a few samples whose ``fact`` chunk claims ``seconds`` at 16 kHz: decoded as its
    header says, a buffer that long."""
    frames = int(seconds * 16000)
    fmt = struct.pack("<HHIIHH", 1, 1, 16000, 32000, 2, 16)
    body = b"WAVE" + _chunk(b"fmt ", fmt) + _chunk(b"fact", struct.pack("<I", frames)) + _chunk(b"data", b"\0" * 64)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _chunk(kind: bytes, data: bytes) -> bytes:
    return kind + struct.pack("<I", len(data)) + data


_L3_KBPS = {
    True: (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),  # MPEG-1
    False: (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),  # MPEG-2 and 2.5
}
_RATES = {44100: (3, 0), 48000: (3, 1), 32000: (3, 2), 22050: (2, 0), 24000: (2, 1), 16000: (2, 2), 8000: (0, 2)}


def mp3(frames: int, *, kbps: int = 8, rate: int = 8000, xing: int | None = None, id3: int | None = None) -> bytes:
    """``frames`` mono Layer III frames of zeros after valid headers (minimp3 decodes them as
    silence: 1,152 samples a frame at MPEG-1 rates, 576 below); with ``xing``, a first frame
    that carries a Xing header claiming that many frames; with ``id3``, an ID3v2 tag of that
    many bytes first. No encoder needed: enough for a walk of the headers and for a decode."""
    version, rate_index = _RATES[rate]
    mpeg1 = version == 3
    index = _L3_KBPS[mpeg1].index(kbps)
    header = bytes([0xFF, 0xE0 | version << 3 | 1 << 1 | 1, index << 4 | rate_index << 2, 0xC0])
    length = (144 if mpeg1 else 72) * kbps * 1000 // rate
    frame = header + b"\0" * (length - 4)
    out = frame * frames
    if xing is not None:
        side = 17 if mpeg1 else 9  # a mono frame's side information
        tag = b"Xing" + (1).to_bytes(4, "big") + xing.to_bytes(4, "big")
        first = header + b"\0" * side + tag
        out = first + b"\0" * (length - len(first)) + out
    if id3 is not None:
        size = bytes((id3 >> shift) & 0x7F for shift in (21, 14, 7, 0))
        out = b"ID3\x04\x00\x00" + size + b"\0" * id3 + out
    return out
