"""What a request's media may cost: sizes read from headers and checked before decoding, images
reduced to what the projector keeps, and the server's pixels being decoded at once."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cllm_ollama.config import Settings
from cllm_ollama.engine.binding.pixels import decode_cost
from cllm_ollama.engine.binding.webp import decode_scaled
from cllm_ollama.engine.media_budget import (
    GENERIC_SIDE,
    MAX_IMAGE_PIXELS,
    MediaLimits,
    PixelBudget,
    ProjectorGeometry,
    check_audio,
    check_images,
    reduced_size,
)
from cllm_ollama.engine.transcode import decode_reduced, reduce_rgb, webp_size
from cllm_ollama.errors import MediaError, MediaTooLarge
from cllm_ollama.testing.ggufs import write_vision
from cllm_ollama.testing.images import bmp_claiming, png_claiming

SIDE = 8192


def encoded(image: Image.Image, fmt: str, **kwargs: object) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt, **kwargs)
    return out.getvalue()


@pytest.mark.parametrize(
    ("size", "side", "reduced"),
    [
        ((8192, 8192), 896, (896, 896)),
        ((8192, 4096), 896, (1792, 896)),  # the shorter side is the one brought to the projector's
        ((4096, 8192), 1000, (1000, 2000)),
        ((800, 600), 896, (800, 600)),  # no larger than it came
        ((8192, 16), 32, (8192, 16)),  # a strip keeps its pixels: they are few
    ],
)
def test_an_image_is_reduced_by_its_shorter_side(size: tuple[int, int], side: int, reduced: tuple[int, int]) -> None:
    assert reduced_size(*size, side) == reduced


def test_a_fixed_size_projector_keeps_its_image_size_and_others_keep_more() -> None:
    assert ProjectorGeometry(kind="gemma3", image_size=896).working_side() == 896
    assert ProjectorGeometry(kind="mlp", image_size=336).working_side() == 336
    # llava-uhd slices (pinpoints), Qwen-VL's pixel range, kinds not followed one by one: more.
    assert ProjectorGeometry(kind="mlp", image_size=336, pinpoints=(336, 672, 1008, 336)).working_side() == GENERIC_SIDE
    assert ProjectorGeometry(kind="qwen2vl_merger", image_size=14).working_side() == GENERIC_SIDE
    assert ProjectorGeometry(kind="qwen3vl_merger", max_pixels=6000 * 6000).working_side() == 6001
    assert ProjectorGeometry(kind="idefics3", longest_edge=5000).working_side() == 5000


def test_a_projectors_geometry_is_read_from_its_file(tmp_path: Path) -> None:
    _, gemma = write_vision(tmp_path / "g", kind="gemma3")
    _, qwen = write_vision(tmp_path / "q", kind="qwen2vl")
    assert ProjectorGeometry.read(gemma) == ProjectorGeometry(
        kind="gemma3", image_size=32, patch_size=8, scale_factor=2
    )
    assert ProjectorGeometry.read(gemma).working_side() == 32
    assert ProjectorGeometry.read(qwen).kind == "qwen2vl_merger"
    assert ProjectorGeometry.read(qwen).working_side() == GENERIC_SIDE


def test_an_image_past_the_largest_decoded_is_refused_by_its_size() -> None:
    with pytest.raises(MediaTooLarge) as caught:
        check_images([(100, 100), (8193, 8192)], MediaLimits(request_pixels=0, server_pixels=0), floor=0)
    assert caught.value.status_code == 400
    assert caught.value.message.startswith(f"image 1 is 8193x8192: larger than {MAX_IMAGE_PIXELS} pixels")


def test_a_requests_images_add_up_and_each_counts_at_least_the_projectors_size() -> None:
    limits = MediaLimits(request_pixels=2 * SIDE * SIDE, server_pixels=0)
    check_images([(SIDE, SIDE), None, (SIDE, SIDE)], limits, floor=896 * 896)  # None: a clip, not counted
    with pytest.raises(
        MediaTooLarge, match=r"add up to 201326592 pixels: more than 134217728 \(CLLM_MAX_REQUEST_PIXELS\)"
    ):
        check_images([(SIDE, SIDE)] * 3, limits, floor=0)
    # 1x1 images are preprocessed as whole 896 px squares: counted as such.
    many = [(1, 1)] * (limits.request_pixels // (896 * 896) + 1)
    with pytest.raises(MediaTooLarge, match="CLLM_MAX_REQUEST_PIXELS"):
        check_images(many, limits, floor=896 * 896)
    check_images(many[:-1], limits, floor=896 * 896)


def test_an_image_larger_than_the_servers_decode_budget_names_that_limit() -> None:
    limits = MediaLimits(request_pixels=0, server_pixels=1000 * 1000)
    with pytest.raises(
        MediaTooLarge, match=r"image 0 is 1001x1000: larger than 1000000 pixels \(CLLM_MAX_DECODE_PIXELS\)"
    ):
        check_images([(1001, 1000)], limits, floor=0)


def test_a_requests_audio_adds_up_against_its_limit() -> None:
    check_audio([900.0, 900.0], MediaLimits(audio_seconds=1800))
    with pytest.raises(MediaTooLarge, match=r"lasts 1801 seconds: more than 1800 \(CLLM_MAX_AUDIO_SECONDS\)"):
        check_audio([900.0, 901.0], MediaLimits(audio_seconds=1800))
    check_audio([10_000.0], MediaLimits(audio_seconds=0))  # 0: no limit of the operator's


def test_the_limits_come_from_the_environment_with_ollama_twins() -> None:
    assert Settings.from_env({}).media == MediaLimits()
    env = {"OLLAMA_MAX_REQUEST_PIXELS": "1000", "CLLM_MAX_DECODE_PIXELS": "2000", "CLLM_MAX_AUDIO_SECONDS": "60"}
    assert Settings.from_env(env).media == MediaLimits(request_pixels=1000, server_pixels=2000, audio_seconds=60)


def test_the_decode_budget_is_never_exceeded_by_concurrent_decodes() -> None:
    """Eight threads each decoding three images of 40 (of a budget of 100): at most two at once."""
    budget = PixelBudget(100)
    inside: list[int] = []
    lock = threading.Lock()
    current = [0]
    start = threading.Barrier(8)

    def work() -> None:
        start.wait()
        for _ in range(3):
            with budget.hold(40):
                with lock:
                    current[0] += 40
                    inside.append(current[0])
                with lock:
                    current[0] -= 40

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(inside) == 24 and max(inside) <= 100 and budget.peak <= 100 and budget.in_use == 0


def test_a_budget_of_zero_holds_nothing() -> None:
    budget = PixelBudget(0)
    with budget.hold(10**12):
        assert budget.in_use == 0


def test_box_reduction_keeps_the_picture() -> None:
    """A smooth gradient reduced 8x by the band-wise box filter is Pillow's own box reduction."""
    y, x = np.mgrid[0:1024, 0:768]
    full = np.stack([x % 256, y % 256, (x + y) // 8 % 256], axis=-1).astype(np.uint8)
    small = reduce_rgb(full, (96, 128))
    assert small.shape == (128, 96, 3) and small.dtype == np.uint8
    expected = np.asarray(Image.fromarray(full).reduce(8))
    assert np.abs(small.astype(int) - expected.astype(int)).max() <= 1
    # Not a whole factor: box-filtered 7x, then resized to the exact size.
    odd = reduce_rgb(full, (100, 140))
    assert odd.shape == (140, 100, 3)
    flat = reduce_rgb(np.full((999, 1001, 3), 77, dtype=np.uint8), (50, 50))
    assert (flat == 77).all()


@pytest.mark.parametrize(
    "options",
    [{"quality": 90}, {"lossless": True}, {"lossless": True, "exif": b"Exif\0\0"}],  # VP8, VP8L, VP8X
    ids=["lossy", "lossless", "extended"],
)
def test_a_webps_size_is_read_from_its_header_as_pillow_reads_it(options: dict[str, object]) -> None:
    for size in ((900, 600), (1, 16383), (16383, 3)):
        data = encoded(Image.new("RGB", size, (1, 2, 3)), "WEBP", **options)
        assert webp_size(data) == size == Image.open(io.BytesIO(data)).size
    assert webp_size(b"RIFF\0\0\0\0WEBPVP8 ") is None  # cut short
    assert webp_size(b"RIFF\0\0\0\0WEBPXXXX" + b"\0" * 20) is None


@pytest.mark.parametrize("lossless", [False, True])
def test_libwebp_decodes_a_still_webp_straight_to_the_reduced_size(lossless: bool) -> None:
    y, x = np.mgrid[0:600, 0:900]
    full = np.stack([x * 255 // 899, y * 255 // 599, np.full_like(x, 90)], axis=-1).astype(np.uint8)
    data = encoded(Image.fromarray(full), "WEBP", quality=95, lossless=lossless)
    small = decode_scaled(data, (90, 60))
    assert small is not None and small.shape == (60, 90, 3)
    expected = np.asarray(Image.fromarray(full).resize((90, 60), Image.Resampling.BOX)).astype(int)
    assert np.abs(small.astype(int) - expected).mean() < 3
    same = decode_scaled(data, (900, 600))
    assert same is not None and same.shape == (600, 900, 3)
    assert np.abs(same.astype(int) - np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))).max() <= 2


def test_an_animated_webp_is_left_to_pillow_and_broken_bytes_refused() -> None:
    frames = [Image.new("RGB", (64, 48), color) for color in ((200, 0, 0), (0, 200, 0))]
    data = encoded(frames[0], "WEBP", save_all=True, append_images=frames[1:], lossless=True)
    assert webp_size(data) == (64, 48) and decode_scaled(data, (32, 24)) is None
    width, height, rgb = decode_reduced(data, 0, (32, 24))  # the first frame
    assert (width, height) == (32, 24) and rgb[:3] == bytes((200, 0, 0))
    broken = encoded(frames[0], "WEBP", quality=90)[:40]
    assert decode_scaled(broken, (32, 24)) is None
    with pytest.raises(MediaError) as caught:
        decode_reduced(broken, 3, (32, 24))
    assert caught.value.detail == "image 3: the image could not be decoded"


def test_pillow_decodes_a_reduced_jpeg_at_a_fraction_of_its_size() -> None:
    picture = Image.fromarray(np.full((600, 900, 3), (200, 30, 60), dtype=np.uint8))
    data = encoded(picture, "JPEG", quality=95)
    width, height, rgb = decode_reduced(data, 0, reduced_size(900, 600, 64))
    assert (width, height) == (96, 64) and len(rgb) == 96 * 64 * 3
    pixel = np.frombuffer(rgb, dtype=np.uint8).reshape(64, 96, 3)[32, 48]
    assert np.abs(pixel.astype(int) - [200, 30, 60]).max() <= 8


def test_a_decode_is_charged_its_decoders_working_copies() -> None:
    """stb_image holds a BMP once, a PNG twice, a GIF three times; a reduced JPEG is decoded at a
    fraction of its size; Pillow's WebP reader (animations only) six times."""
    size, px = (4000, 3000), 4000 * 3000
    assert decode_cost(bmp_claiming(*size), size, 896) == px
    assert decode_cost(png_claiming(*size), size, 896) == 2 * px
    assert decode_cost(b"GIF89a" + b"\0" * 30, size, 896) == 3 * px
    jpeg = encoded(Image.new("RGB", (64, 48)), "JPEG")
    assert decode_cost(jpeg, size, 896) == px  # reduced: decoded by Pillow at a smaller scale
    assert decode_cost(jpeg, size, 4096) == 2 * px  # as it is: stb_image
    frames = [Image.new("RGB", (64, 48), c) for c in ((200, 0, 0), (0, 200, 0))]
    animated = encoded(frames[0], "WEBP", save_all=True, append_images=frames[1:], lossless=True)
    assert decode_cost(animated, size, 896) == 6 * px
    assert decode_cost(encoded(frames[0], "WEBP"), size, 896) == px
