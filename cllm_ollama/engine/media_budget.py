"""How much memory a request's media may cost, and what size an image is reduced to.

An image's header says how big it is before any pixel is decoded: a 54-byte BMP header claims
8192x8192, 201 MB once decoded to RGB. So every image is measured first, and refused past a
limit (``MediaTooLarge``, a 400 that names the limit) before anything is decoded:
- each image: at most ``MAX_IMAGE_PIXELS``;
- each request: its images' pixels summed (``MediaLimits.request_pixels``), each counted as at
  least the projector's own image size (a 1x1 PNG is still a whole image to preprocess);
- the server: pixels held by decodes at once, across all requests (``PixelBudget``): a request
  takes its whole peak at once (its kept copies and its costliest decode) and waits for room
  rather than fail, so a burst costs time, not memory.
The images are then decoded one at a time, each reduced as it is decoded to what its projector
uses (``working_side``), so that a request holds its small copies only; audio likewise: a
request's clips may last ``MediaLimits.audio_seconds`` together.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import MediaTooLarge
from .tile_order import COLUMN_TILES_KIND

# The largest picture decoded (8192 x 8192, 201 MB of RGB), whatever the limits below say.
MAX_IMAGE_PIXELS = 1 << 26
# Requests' defaults: two of the largest images (or ~11 12-megapixel photos), and two of them
# decoding at once across the server (~400 MB of RGB at the most).
DEFAULT_REQUEST_PIXELS = 1 << 27
DEFAULT_SERVER_PIXELS = 1 << 27
# The longest a request's audio may last: 30 minutes is 115 MB of 16 kHz floats and 60 encoder
# windows (45,000 tokens for Qwen2.5-Omni: more than most contexts hold).
DEFAULT_AUDIO_SECONDS = 1800

# Projector kinds (``clip.projector_type``) whose preprocessor resizes every image to one
# ``image_size`` square (libmtmd's ``mtmd_image_preprocessor_fixed_size``, mtmd.cpp), unless
# the file lists grid pinpoints (llava-uhd slicing then).
FIXED_SIZE_KINDS = frozenset(
    {"mlp", "mlp_norm", "ldp", "ldpv2", "cogvlm", "janus_pro", "adapter"}
    | {"gemma3", "gemma3nv", "yasa2", "nemotron_v2_vl"}
)
# Every other preprocessor keeps more, by kinds too many to follow one by one (Qwen-VL's pixel
# range, slices of 336-512 px tiles, a longest edge of up to 3024 px): an image is reduced no
# further than this shorter side, or what its file states if that is more.
GENERIC_SIDE = 4096


@dataclass(frozen=True)
class MediaLimits:
    """The operator's limits (``Settings``: CLLM_MAX_REQUEST_PIXELS, CLLM_MAX_DECODE_PIXELS,
    CLLM_MAX_AUDIO_SECONDS); 0 is no limit of the operator's (``MAX_IMAGE_PIXELS`` still holds)."""

    request_pixels: int = DEFAULT_REQUEST_PIXELS
    server_pixels: int = DEFAULT_SERVER_PIXELS
    audio_seconds: int = DEFAULT_AUDIO_SECONDS

    def image_cap(self) -> tuple[int, str]:
        """The most pixels one image may have, and what sets it."""
        caps = [(MAX_IMAGE_PIXELS, "the most this server decodes")]
        if self.request_pixels:
            caps.append((self.request_pixels, "CLLM_MAX_REQUEST_PIXELS"))
        if self.server_pixels:
            caps.append((self.server_pixels, "CLLM_MAX_DECODE_PIXELS"))
        return min(caps)


def check_images(sizes: list[tuple[int, int] | None], limits: MediaLimits, floor: int) -> None:
    """Refuse, before anything is decoded, an image (``(width, height)``; None is audio, not
    counted) bigger than one may be, or a request whose images add up to more than
    ``limits.request_pixels``, each counted as at least ``floor`` pixels (the projector's size)."""
    cap, why = limits.image_cap()
    total = 0
    for index, size in enumerate(sizes):
        if size is None:
            continue
        width, height = size
        if width * height > cap:
            raise MediaTooLarge(
                f"image {index} is {width}x{height}: larger than {cap} pixels ({why}); send a smaller image"
            )
        total += max(width * height, floor)
    if limits.request_pixels and total > limits.request_pixels:
        raise MediaTooLarge(
            f"the request's images add up to {total} pixels: more than {limits.request_pixels} "
            "(CLLM_MAX_REQUEST_PIXELS); send fewer or smaller images"
        )


def check_audio(seconds: list[float], limits: MediaLimits) -> None:
    """Refuse a request whose clips (by their headers' lengths) last longer than the limit."""
    total = sum(seconds)
    if limits.audio_seconds and total > limits.audio_seconds:
        raise MediaTooLarge(
            f"the request's audio lasts {total:.0f} seconds: more than {limits.audio_seconds} "
            "(CLLM_MAX_AUDIO_SECONDS); send shorter clips"
        )


class PixelBudget:
    """Pixels held by decodes at once across the server (one per server: ``ModelPool`` owns it).

    A request's tokenizing holds its peak while it runs (``hold``), all of it at once: nobody
    holds a part while waiting for more, so no two requests wait on each other. A hold larger
    than the budget takes all of it (it runs alone).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit  # 0: no limit
        self.in_use = 0
        self.peak = 0
        self._changed = threading.Condition()

    @contextmanager
    def hold(self, pixels: int) -> Iterator[None]:
        if not self.limit:
            yield
            return
        pixels = min(pixels, self.limit)
        with self._changed:
            self._changed.wait_for(lambda: self.in_use + pixels <= self.limit)
            self.in_use += pixels
            self.peak = max(self.peak, self.in_use)
        try:
            yield
        finally:
            with self._changed:
                self.in_use -= pixels
                self._changed.notify_all()


@dataclass(frozen=True)
class ProjectorGeometry:
    """What a projector's file says of the images it takes (``clip.vision.*``)."""

    kind: str = ""
    image_size: int = 0
    patch_size: int = 0
    scale_factor: int = 0  # ``clip.vision.projector.scale_factor``: patches merged a side (0: unstated)
    max_pixels: int = 0  # Qwen-VL and the like: the preprocessor's pixel ceiling
    longest_edge: int = 0  # ``preproc_image_size``
    pinpoints: tuple[int, ...] = ()  # llava-uhd's candidate resolutions, flattened

    @classmethod
    def read(cls, path: Path) -> ProjectorGeometry:
        """From the GGUF's metadata (its tensors are not read)."""
        import gguf

        fields = gguf.GGUFReader(path).fields

        def scalar(key: str) -> int:
            field = fields.get(key)
            return int(field.contents()) if field is not None and field.data else 0

        # clip.cpp's order: the file's one type, else its vision side's
        kind_field = fields.get("clip.projector_type") or fields.get("clip.vision.projector_type")
        pins = fields.get("clip.vision.image_grid_pinpoints")
        return cls(
            kind=str(kind_field.contents()) if kind_field is not None else "",
            image_size=scalar("clip.vision.image_size"),
            patch_size=scalar("clip.vision.patch_size"),
            scale_factor=scalar("clip.vision.projector.scale_factor"),
            max_pixels=scalar("clip.vision.image_max_pixels"),
            longest_edge=scalar("clip.vision.preproc_image_size"),
            pinpoints=tuple(int(v) for v in pins.contents()) if pins is not None else (),
        )

    def working_side(self) -> int:
        """The shorter side an image may be reduced to with nothing lost to its preprocessor: the
        image size for one that resizes to a fixed square, else ``GENERIC_SIDE`` or more. Both
        sides then keep at least as many pixels as the preprocessor's output has, and the area
        and aspect ratio its tiling or pixel range is chosen by lead it to the same choice."""
        if self.kind in FIXED_SIZE_KINDS and not self.pinpoints and self.image_size > 0:
            return self.image_size
        stated = (self.image_size, math.isqrt(self.max_pixels) + 1, self.longest_edge, *self.pinpoints)
        return max(GENERIC_SIDE, *stated)

    def column_tile_side(self) -> int:
        """Tokens a side of one tile whose tokens libmtmd leaves column by column (Llama 4's, put
        back by ``tile_order``: a tile's patches a side over the merge, 1 where unstated, as
        clip.cpp takes it); 0 for any other projector."""
        if self.kind != COLUMN_TILES_KIND or self.patch_size <= 0:
            return 0
        return self.image_size // self.patch_size // max(1, self.scale_factor)

    def floor_pixels(self) -> int:
        """What the smallest image costs its preprocessor at least: one ``image_size`` square."""
        return self.image_size * self.image_size


def reduced_size(width: int, height: int, side: int) -> tuple[int, int]:
    """``(width, height)`` scaled down, aspect kept, so that the shorter side is ``side``; as it
    is where that side is already no longer."""
    short = min(width, height)
    if short <= side:
        return width, height
    return max(1, round(width * side / short)), max(1, round(height * side / short))
