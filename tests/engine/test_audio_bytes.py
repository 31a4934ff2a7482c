"""Audio told from images by its first bytes, and the length a file claims read before it is decoded."""

from __future__ import annotations

import base64
import struct

import pytest

from cllm_ollama.api.images import is_audio_base64
from cllm_ollama.engine.audio import claimed_seconds, is_audio
from cllm_ollama.testing.audio import wav, wav_claiming
from cllm_ollama.testing.images import png


def flac_header(rate: int, samples: int) -> bytes:
    """The first bytes of a FLAC: its magic and its STREAMINFO block (rate and total samples)."""
    packed = rate << 44 | (1 - 1) << 41 | (16 - 1) << 36 | samples
    info = struct.pack(">HH", 4096, 4096) + b"\0" * 6 + packed.to_bytes(8, "big") + b"\0" * 16
    return b"fLaC" + bytes([0x80]) + len(info).to_bytes(3, "big") + info


@pytest.mark.parametrize(
    ("data", "audio"),
    [
        (wav(0.1), True),
        (b"ID3\x04\x00" + b"\0" * 16, True),  # an MP3 with an ID3 tag
        (b"\xff\xfb\x90\x64" + b"\0" * 16, True),  # an MP3 frame sync
        (flac_header(16000, 16000), True),
        (png(8, 8), False),
        (b"\xff\xd8\xff\xe0" + b"\0" * 16, False),  # a JPEG: 0xFF then 0xD8 is no frame sync
        (b"RIFF\0\0\0\0WEBPVP8 " + b"\0" * 8, False),  # RIFF, but a WebP
        (b"RIFF\0\0\0\0WAVE", True),  # libmtmd's test: the first 12 bytes
        (b"ID3", False),  # shorter than the 12 bytes libmtmd looks at
        (b"", False),
    ],
)
def test_audio_is_told_by_libmtmds_own_first_bytes(data: bytes, audio: bool) -> None:
    assert is_audio(data) is audio
    assert is_audio_base64(base64.b64encode(data).decode()) is audio


def test_base64_audio_is_told_from_its_first_bytes_whatever_its_line_breaks() -> None:
    encoded = base64.encodebytes(wav(0.5)).decode()  # MIME base64: a line break every 76 characters
    assert "\n" in encoded[:80] and is_audio_base64(encoded)
    assert not is_audio_base64(base64.b64encode(png(4, 4)).decode())


def test_a_wav_says_how_long_it_lasts() -> None:
    assert claimed_seconds(wav(2.0)) == pytest.approx(2.0)
    assert claimed_seconds(wav(1.5, rate=8000, channels=2)) == pytest.approx(1.5)
    # A fact chunk's sample count is believed (miniaudio sizes its buffer by it): days, in 100 bytes.
    assert claimed_seconds(wav_claiming(3 * 86400)) == pytest.approx(3 * 86400)


def test_a_wav_that_claims_more_data_than_it_has_is_cut_to_what_it_has() -> None:
    whole = wav(1.0)
    assert claimed_seconds(whole[: 44 + 3200]) == pytest.approx(0.1)  # 1,600 of 16,000 samples


@pytest.mark.parametrize("data", [b"RIFF\0\0\0\0WAVE", b"RIFF\0\0\0\0WAVEfmt ", wav(1.0)[:36]])
def test_a_wav_without_its_format_or_data_has_no_length(data: bytes) -> None:
    assert claimed_seconds(data) is None


def test_a_flac_says_how_long_it_lasts_in_its_streaminfo() -> None:
    assert claimed_seconds(flac_header(44100, 44100 * 90)) == pytest.approx(90.0)
    assert claimed_seconds(flac_header(0, 100)) is None
    assert claimed_seconds(b"fLaC\x80\0\0\x22") is None  # cut short


def test_an_mp3_claims_nothing_it_has_to_be_read_through() -> None:
    assert claimed_seconds(b"ID3\x04\x00" + b"\0" * 16) == 0.0
