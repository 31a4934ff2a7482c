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
