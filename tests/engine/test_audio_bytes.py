"""Audio told from images by its first bytes, and the length a file claims read before it is decoded."""

from __future__ import annotations

import base64
import struct
import time

import pytest

from cllm_ollama.api.media import decode_media
from cllm_ollama.engine.audio import claimed_seconds, is_audio
from cllm_ollama.engine.binding import MAX_AUDIO_SECONDS
from cllm_ollama.testing.audio import mp3, wav, wav_claiming
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
    assert decode_media(base64.b64encode(data).decode()).is_audio is audio


def test_base64_audio_is_told_from_its_first_bytes_whatever_its_line_breaks() -> None:
    encoded = base64.encodebytes(wav(0.5)).decode()  # MIME base64: a line break every 76 characters
    assert "\n" in encoded[:80] and decode_media(encoded).is_audio
    assert not decode_media(base64.b64encode(png(4, 4)).decode()).is_audio


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


@pytest.mark.parametrize(
    ("kbps", "rate", "frame_seconds"), [(8, 8000, 0.072), (128, 44100, 1152 / 44100), (32, 16000, 0.036)]
)
def test_an_mp3_lasts_as_long_as_its_frame_headers_say(kbps: int, rate: int, frame_seconds: float) -> None:
    assert claimed_seconds(mp3(100, kbps=kbps, rate=rate)) == pytest.approx(100 * frame_seconds)
    assert claimed_seconds(mp3(100, kbps=kbps, rate=rate, id3=500)) == pytest.approx(100 * frame_seconds)


def test_a_low_bitrate_mp3_of_a_few_megabytes_lasts_past_the_limit() -> None:
    """8 kbit/s: 1,000 bytes a second, so 32 MiB would be nine hours of samples decoded."""
    data = mp3(26_000)  # 1.9 MB
    assert claimed_seconds(data) == pytest.approx(26_000 * 0.072) and claimed_seconds(data) > MAX_AUDIO_SECONDS


def test_a_xing_header_s_frame_count_is_believed_as_miniaudio_believes_it() -> None:
    assert claimed_seconds(mp3(10, xing=10**8)) == pytest.approx(10**8 * 0.072)  # days, in a 1 KB file
    assert claimed_seconds(mp3(10, xing=5)) == pytest.approx(11 * 0.072)  # the frames there, if more


def test_frames_after_garbage_are_found_again() -> None:
    data = mp3(50) + b"\0\xff\x13" * 101 + mp3(30, kbps=16)
    assert claimed_seconds(data) == pytest.approx(80 * 0.072)


def test_a_file_whose_walk_skips_frames_still_counts_them() -> None:
    """A chain of large frames (MPEG-1 Layer I, 448 kbit/s at 32 kHz: 672 bytes, 12 ms) that
    hides 9 small ones (72 bytes, 72 ms) in each: minimp3 could decode those, so the count
    of every header bounds the length, not the walk that follows the large ones."""
    big = bytes([0xFF, 0xFF, 0xE8, 0xC0])
    block = big + mp3(9) + b"\0" * (672 - 4 - 9 * 72)
    hidden = 1000 * 9 * 0.072
    assert claimed_seconds(block * 1000) >= hidden / 2


@pytest.mark.parametrize(
    "data",
    [
        b"ID3\x04\x00" + b"\0" * 16,  # a tag, no frames
        b"ID3\x04\x00\x00\x00\x00\x7f\x7f" + mp3(3),  # a tag longer than the file
        b"\xff\xfb\xf0\x00" + b"\0" * 16,  # a sync word, a bad bitrate
        b"\xff\xfb\x9c\x00" + b"\0" * 16,  # a bad sample rate
        b"\xff\xef\x90\x00" + b"\0" * 16,  # a reserved version
    ],
)
def test_an_mp3_without_a_valid_frame_header_has_no_length(data: bytes) -> None:
    assert is_audio(data) and claimed_seconds(data) is None


def test_the_walk_over_32_mib_is_cheap() -> None:
    """No header anywhere (a sync byte at every position, none valid), or nine hours of frames:
    read in a few seconds at most (the tokenizing thread's time), the long one given up once
    past the limit."""
    nothing, long = b"\xff" * (32 << 20), mp3((32 << 20) // 72)
    t0 = time.perf_counter()
    assert claimed_seconds(nothing, MAX_AUDIO_SECONDS) is None
    assert claimed_seconds(long, MAX_AUDIO_SECONDS) > MAX_AUDIO_SECONDS
    assert time.perf_counter() - t0 < 5
    assert claimed_seconds(long) == pytest.approx((32 << 20) // 72 * 0.072)  # walked through without a limit
