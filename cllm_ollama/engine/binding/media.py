"""libmtmd, for models with a projector (an ``mmproj`` GGUF): the binding's media part.

A prompt with images or audio is tokenized by libmtmd into chunks: runs of text tokens and media
chunks (an image, or a tile of one and its overview where the projector slices a large one, text
between them; up to 30 s of audio, a longer clip being several). A media chunk is encoded by
the projector (a ViT or an audio encoder: slow on a CPU) into one embedding row per token, which
are then decoded into a sequence like a prompt's tokens. Everything here owns its native object
and frees it once, in ``close``.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import llama_cpp as ll
import numpy as np

from ...errors import EngineError, MediaError, MediaTooLarge
from ..audio import claimed_seconds, is_audio
from ..image_breaks import image_break_row, mend_image_breaks
from ..media_budget import (
    DEFAULT_AUDIO_SECONDS,
    MediaLimits,
    PixelBudget,
    ProjectorGeometry,
    check_audio,
    check_images,
    reduced_size,
)
from ..tile_order import by_rows
from .core import Context, Model, log_callback, offload_devices
from .pixels import decode_cost, decode_image, image_size


@functools.cache
def _mtmd():  # type: ignore[no-untyped-def]
    """``llama_cpp.mtmd_cpp``, imported on first use (it loads libmtmd, which text models never
    need), its log sent where llama.cpp's goes."""
    import llama_cpp.mtmd_cpp as mtmd

    callback = log_callback()
    mtmd.mtmd_log_set(callback, ctypes.c_void_p(0))
    mtmd.mtmd_helper_log_set(callback, ctypes.c_void_p(0))
    return mtmd


def media_marker() -> str:
    """libmtmd's default text for one image in a prompt (``<__media__>``); a ``Projector`` uses its
    own ``marker`` instead, unguessable, so that a user who types this text places no image."""
    return _mtmd().mtmd_default_marker().decode()


# The longest clip decoded, unless the operator's limit is lower (``MediaLimits.audio_seconds``).
MAX_AUDIO_SECONDS = DEFAULT_AUDIO_SECONDS


def _check_length(seconds: float | None, index: int, limit: int) -> None:
    """A clip's length: None (a header that cannot be read, no samples) is no audio, and more than
    ``limit`` seconds is refused."""
    if seconds is None:
        raise MediaError(f"audio {index}: the audio could not be decoded")
    if limit and seconds > limit:
        raise MediaTooLarge(
            f"audio {index} lasts {seconds:.0f} seconds: more than {limit} (CLLM_MAX_AUDIO_SECONDS); "
            "send a shorter clip"
        )


def _tagged(digest: str, n: int) -> str:
    """The id the prompt's ``n``-th medium's bitmap gets: the SHA-256 of its bytes, and ``n``.
    libmtmd gives every chunk it makes of a bitmap the bitmap's id (an image's tiles and its
    overview, text between them; a clip's 30 s windows): the tag says whose chunk each is."""
    return f"{digest}#{n}"


def _chunk_id(tag: str, k: int) -> str:
    """The id of the ``k``-th chunk of the medium tagged ``tag``: its bytes' SHA-256 and k. Each
    tile or window must be known apart (its embeddings, its KV cells), and the same again in the
    next turn wherever the medium sits: the first chunk keeps the bytes' hash, the others get a
    hash of it and k. The same bytes sent twice get the same ids twice, as their chunks are alike."""
    digest = tag.rpartition("#")[0] or tag
    return digest if k == 0 else hashlib.sha256(f"{digest}/{k}".encode()).hexdigest()


class TextRun(tuple[int, ...]):
    """A run of text tokens in a tokenized prompt with media."""


@dataclass(frozen=True)
class MediaItem:
    """One media chunk in a tokenized prompt (an image, a tile of one, or a window of audio): ``n_tokens``
    embeddings that take ``n_pos`` positions (fewer than tokens for M-RoPE images such as
    Qwen2-VL's: ``max(rows, columns)`` of its token grid), identified by the SHA-256 of its medium's
    bytes and its place among that medium's chunks (``_chunk_id``)."""

    id: str
    n_tokens: int
    n_pos: int
    index: int  # the chunk's place in its ``MediaPrompt``
    kind: str = "image"  # or "audio"
    # Its tokens attend to each other both ways (Gemma 3's images): decoded in one piece, alone.
    whole: bool = False


class MediaPrompt:
    """A prompt tokenized with its images (libmtmd's ``mtmd_input_chunks``, owned here).

    ``parts`` is plain Python: text runs and media items in prompt order. The projector that
    made it must outlive it; encode and decode go through that projector.
    """

    def __init__(self, projector: Projector, ptr: int) -> None:
        mtmd = _mtmd()
        self._projector = projector
        self._ptr = ptr
        parts: list[TextRun | MediaItem] = []
        seen: dict[str, int] = {}  # the chunks met of each medium, by its bitmap's tag
        for i in range(mtmd.mtmd_input_chunks_size(ptr)):
            chunk = mtmd.mtmd_input_chunks_get(ptr, i)
            kind = mtmd.mtmd_input_chunk_get_type(chunk)
            if kind == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
                n = ctypes.c_size_t()
                tokens = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
                parts.append(TextRun(tokens[: n.value]))
            else:
                tag = (mtmd.mtmd_input_chunk_get_id(chunk) or b"").decode()
                seen[tag] = k = seen.get(tag, -1) + 1
                parts.append(
                    MediaItem(
                        id=_chunk_id(tag, k),
                        n_tokens=int(mtmd.mtmd_input_chunk_get_n_tokens(chunk)),
                        n_pos=int(mtmd.mtmd_input_chunk_get_n_pos(chunk)),
                        index=i,
                        kind="audio" if kind == mtmd.MTMD_INPUT_CHUNK_TYPE_AUDIO else "image",
                        whole=bool(mtmd.mtmd_decode_use_non_causal(projector.ptr, chunk)),
                    )
                )
        self.parts: tuple[TextRun | MediaItem, ...] = tuple(parts)
        self.n_tokens: int = sum(p.n_tokens if isinstance(p, MediaItem) else len(p) for p in parts)
        self.n_pos: int = int(mtmd.mtmd_helper_get_n_pos(ptr))

    def _chunk(self, item: MediaItem) -> int:
        return _mtmd().mtmd_input_chunks_get(self._ptr, item.index)  # type: ignore[no-any-return]

    def encode(self, item: MediaItem) -> np.ndarray:
        """Run the projector over one media chunk: its embeddings, ``(n_tokens, n_embd)`` float32,
        a copy (libmtmd's output buffer is reused by the next encode), Pixtral's [IMG_BREAK] rows
        mended where llama.cpp's graph spoiled them (``image_breaks``), a Llama 4 tile's tokens in
        the order the model reads them (``tile_order``)."""
        mtmd, proj = _mtmd(), self._projector
        if mtmd.mtmd_encode_chunk(proj.ptr, self._chunk(item)) != 0:
            raise EngineError(f"the projector could not encode {item.kind} {item.id[:12]}")
        ptr = mtmd.mtmd_get_output_embd(proj.ptr)
        embd = np.ctypeslib.as_array(ptr, shape=(item.n_tokens, proj.n_embd)).copy()
        if item.kind == "image" and proj.column_tile_side:
            embd = by_rows(embd, proj.column_tile_side)
        return embd if np.isfinite(embd).all() else mend_image_breaks(embd, proj.image_break)

    def decode(
        self, ctx: Context, item: MediaItem, embd: np.ndarray, pos: int, seq_id: int, rows: range | None = None
    ) -> int:
        """Decode ``rows`` (all by default) of a media chunk's embeddings into ``seq_id``, the chunk
        starting at position ``pos``; the position after the chunk.

        What libmtmd's ``mtmd_helper_decode_image_chunk`` does for a whole chunk, as llama-server
        does, but a piece at a time, so that the engine can spread a chunk over steps: positions
        are computed for the whole chunk as the helper computes them (``_positions``) and the
        piece's are taken. Rows must come in order: each attends to the rows before it (an M-RoPE
        image's causal mask is raster order, which is row order). A ``whole`` chunk (Gemma 3's
        non-causal images) is decoded in one piece, its attention switched for this decode only:
        it applies to the whole context, so no other sequence may decode in the same call. No
        logits: a prompt's last chunk is text.
        """
        rows = range(item.n_tokens) if rows is None else rows
        embd, positions = self.piece(item, embd, pos, rows)
        if item.whole and len(rows) != item.n_tokens:
            raise EngineError(f"an {item.kind} whose tokens attend both ways is decoded whole, not in pieces")
        if item.whole and item.n_tokens > ctx.n_ubatch:
            # llama.cpp would split the image over micro-batches, each seeing only its own part.
            raise EngineError(
                f"an image of {item.n_tokens} tokens needs micro-batches of as many (n_ubatch {ctx.n_ubatch})"
            )
        if item.whole:
            ctx.causal_attention(False)
        try:
            for start in range(0, len(rows), ctx.n_batch):
                stop = min(start + ctx.n_batch, len(rows))
                ctx.decode_embeddings(embd[start:stop], positions[:, start:stop], seq_id)
        finally:
            if item.whole:
                ctx.causal_attention(True)
        return pos + item.n_pos

    def piece(self, item: MediaItem, embd: np.ndarray, pos: int, rows: range) -> tuple[np.ndarray, np.ndarray]:
        """What a decode of ``rows`` of a media chunk starting at position ``pos`` feeds llama.cpp:
        their embeddings, ``(len(rows), n_embd)`` float32, and positions, ``(sections, len(rows))``
        (``_positions``); for ``decode``, or for a call that carries other rows too."""
        embd = np.ascontiguousarray(embd, dtype=np.float32)
        if embd.shape != (item.n_tokens, self._projector.n_embd):
            raise EngineError(f"embeddings of shape {embd.shape} for an {item.kind} of {item.n_tokens} tokens")
        if rows.step != 1 or not 0 <= rows.start < rows.stop <= item.n_tokens:
            raise EngineError(f"rows {rows.start}..{rows.stop} of an {item.kind} of {item.n_tokens} tokens")
        return embd[rows.start : rows.stop], self._positions(item, pos, rows)

    def _positions(self, item: MediaItem, pos: int, rows: range) -> np.ndarray:
        """The positions of a chunk's ``rows``, the chunk starting at ``pos``, ``(sections,
        len(rows))`` int32, as ``mtmd_helper_decode_image_chunk`` sets them: one section, ``pos +
        i``, for most models; for M-RoPE models (``mtmd_decode_use_mrope``: Qwen2-VL, Qwen2.5-VL,
        Qwen3-VL) four, in the order t, y, x, z: libmtmd's decoder positions for an image (t the
        chunk's start, y and x its row and column from it), ``pos + i`` in all four for audio.
        Only an M-RoPE image's are computed for the whole chunk (libmtmd gives them so), then cut:
        a piece is a few rows of a 750-row audio window, each step."""
        flat = pos + np.arange(rows.start, rows.stop, dtype=np.int32)
        if not self._projector.uses_mrope:
            return flat[None, :]
        if item.kind == "audio":
            return np.tile(flat, (4, 1))
        n = item.n_tokens
        mtmd = _mtmd()
        image = mtmd.mtmd_input_chunk_get_tokens_image(self._chunk(item))
        if not image:
            raise EngineError(f"image {item.id[:12]} has no image tokens")
        out = (mtmd.mtmd_decoder_pos * n)()
        mtmd.mtmd_helper_image_get_decoder_pos(image, pos, out)
        txyz = np.frombuffer(out, dtype=np.uint32).reshape(n, 4)[rows.start : rows.stop]
        return np.ascontiguousarray(txyz[:, [0, 2, 1, 3]].T.astype(np.int32))

    def eval_all(self, ctx: Context, pos: int, seq_id: int) -> int:
        """The whole prompt into ``seq_id`` the way libmtmd's own helper does it (logits for the
        last token): the reference a batching engine's media step must match, but for Llama 4's,
        whose tiles the helper leaves in libmtmd's order (``tile_order``). The next position."""
        if self._projector.column_tile_side:
            raise EngineError("libmtmd's helper feeds Llama 4's tiles column by column; cllm puts them back")
        new_pos = ll.llama_pos(0)
        rc = _mtmd().mtmd_helper_eval_chunks(
            self._projector.ptr, ctx.ptr, self._ptr, pos, seq_id, ctx.n_batch, True, ctypes.byref(new_pos)
        )
        if rc != 0:
            raise EngineError(f"evaluating a prompt with media failed ({rc})")
        return int(new_pos.value)

    def close(self) -> None:
        if self._ptr:
            _mtmd().mtmd_input_chunks_free(self._ptr)
            self._ptr = None


class Projector:
    """A model's projector loaded by libmtmd (``mtmd_context``), beside the model it feeds.

    Tokenizing only reads it; encoding writes its output buffer, so one thread encodes at a time.
    The model must outlive it.
    """

    def __init__(
        self,
        model: Model,
        path: Path,
        *,
        n_threads: int,
        use_gpu: bool = True,
        device: int | None = None,
        marker: str | None = None,
        limits: MediaLimits | None = None,
        budget: PixelBudget | None = None,
    ) -> None:
        """``device``: which of ``offload_devices`` runs it on a GPU (None: libmtmd's choice, the
        registry's first GPU). ``limits`` and ``budget``: the server's media limits and its pixels
        being decoded (``media_budget``; the pool's, shared by every projector), by default a budget
        of its own."""
        mtmd = _mtmd()
        # Random per projector, as Ollama makes llama-server's (LLAMA_MEDIA_MARKER): prompt text
        # cannot forge an image's place. libmtmd copies it.
        self.marker: str = marker or f"<__media_{secrets.token_hex(8)}__>"
        params = mtmd.mtmd_context_params_default()
        params.media_marker = self.marker.encode()
        params.use_gpu = use_gpu and bool(ll.llama_supports_gpu_offload())
        devices = offload_devices() if params.use_gpu and device is not None else []
        if device is not None and device < len(devices):
            params.device = devices[device].handle
        params.n_threads = n_threads
        params.print_timings = False
        params.warmup = False
        ptr = mtmd.mtmd_init_from_file(str(path).encode(), model.ptr, params)
        if not ptr:
            raise EngineError(f"libmtmd could not load projector {path.name} for {model.path.name}")
        self._ptr = ptr
        self.model = model
        self.path = path
        self.n_embd: int = int(ll.llama_model_n_embd_inp(model.ptr))
        self.vision: bool = bool(mtmd.mtmd_support_vision(ptr))
        self.audio: bool = bool(mtmd.mtmd_support_audio(ptr))
        self.sample_rate: int = int(mtmd.mtmd_get_audio_sample_rate(ptr))  # -1 without audio
        self.uses_mrope: bool = bool(mtmd.mtmd_decode_use_mrope(ptr))
        # Why this projector's audio must not reach libmtmd (``probe``: it aborts there), or None.
        self.audio_refused: str | None = None
        self.limits = limits or MediaLimits()
        self.budget = budget or PixelBudget(self.limits.server_pixels)
        # What its preprocessor keeps of an image: images are reduced to no less as they are decoded.
        self.geometry = ProjectorGeometry.read(path) if self.vision else ProjectorGeometry()
        self.image_side: int = self.geometry.working_side()
        # Llama 4's tiles' tokens a side, which libmtmd leaves column by column (``tile_order``); else 0.
        self.column_tile_side: int = self.geometry.column_tile_side()

    def tokenize(self, text: str, images: Sequence[bytes], *, add_special: bool = True) -> MediaPrompt:
        """``text`` with one ``self.marker`` per medium (an image or, where the projector hears, a
        WAV, MP3 or FLAC clip), in order, tokenized with them.

        Raises ``MediaError`` (a 400) for bytes that are neither, ``MediaTooLarge`` (a 400) for
        media past the limits (``media_budget``: all measured before any is decoded);
        ``EngineError`` where markers and media disagree (the caller placed them).
        """
        mtmd = _mtmd()
        sizes = self._measure(images)
        bitmaps: list[int] = []
        chunks = mtmd.mtmd_input_chunks_init()
        try:
            # The request's peak, held of the server's decode budget at once (never a part while
            # waiting for more: no two requests can wait on each other).
            with self.budget.hold(self._peak(images, sizes)):
                for i, data in enumerate(images):  # one at a time: each reduced before the next is decoded
                    bitmaps.append(self._bitmap(data, i, sizes[i]))
                if (n_markers := text.count(self.marker)) != len(images):
                    raise EngineError(f"the prompt has {n_markers} image markers for {len(images)} images")
                raw = text.encode("utf-8")
                inp = mtmd.mtmd_input_text(text=raw, text_len=len(raw), add_special=add_special, parse_special=True)
                array = (mtmd.mtmd_bitmap_p_ctypes * max(1, len(bitmaps)))(*bitmaps)
                rc = mtmd.mtmd_tokenize(self._ptr, chunks, ctypes.byref(inp), array, len(bitmaps))
                if rc != 0:
                    raise MediaError(f"the projector could not preprocess the images ({rc})")
                while bitmaps:  # preprocessed into the chunks: freed before the budget is
                    mtmd.mtmd_bitmap_free(bitmaps.pop())
            prompt = MediaPrompt(self, chunks)
            chunks = None
            return prompt
        finally:
            for bitmap in bitmaps:
                mtmd.mtmd_bitmap_free(bitmap)
            if chunks:
                mtmd.mtmd_input_chunks_free(chunks)

    def _measure(self, media: Sequence[bytes]) -> list[tuple[int, int] | float]:
        """Each image's size by its header and each clip's length (seconds), checked against the
        limits before anything is decoded; ``MediaError`` for bytes that are neither
        (audio to a projector that does not hear is no image either)."""
        sizes: list[tuple[int, int] | float] = []
        cap = self.limits.audio_seconds
        for index, data in enumerate(media):
            if self.audio and is_audio(data):
                if self.audio_refused is not None:
                    raise EngineError(f"audio {index}: {self.audio_refused}")
                length = claimed_seconds(data, cap or math.inf)
                _check_length(length, index, cap)
                sizes.append(length or 0.0)
            elif not self.vision:  # an audio projector (Ultravox, Qwen2-Audio): libmtmd would refuse it
                raise MediaError(f"image {index}: this model's projector takes audio, not images")
            else:
                sizes.append(image_size(data, index))
        check_images([s if isinstance(s, tuple) else None for s in sizes], self.limits, self.geometry.floor_pixels())
        check_audio([s for s in sizes if not isinstance(s, tuple)], self.limits)
        return sizes

    def _peak(self, media: Sequence[bytes], sizes: list[tuple[int, int] | float]) -> int:
        """What tokenizing ``media`` holds at its peak, in RGB pixels: every medium's kept copy
        (an image reduced to ``image_side``; a clip's 16 kHz floats, 4 bytes a sample) and the
        costliest image's decode (``decode_cost``)."""
        kept, decoding = 0, 0
        for data, size in zip(media, sizes, strict=True):
            if not isinstance(size, tuple):
                kept += int(size * max(self.sample_rate, 0) * 4 // 3)
            else:
                width, height = reduced_size(*size, self.image_side)
                kept += width * height
                decoding = max(decoding, decode_cost(data, size, self.image_side))
        return kept + decoding

    def _bitmap(self, data: bytes, index: int, size: tuple[int, int] | float) -> int:
        """A bitmap decoded from image bytes of header size ``size`` (RGB, reduced to what the
        projector keeps: ``image_side``) or, for a clip (``size`` its length), audio bytes (PCM), its
        id the SHA-256 of the bytes tagged with ``index`` (``_tagged``).

        What libmtmd's ``mtmd_helper_bitmap_init_from_buf`` does, without its fallbacks: bytes
        that are neither were refused by ``_measure``, never handed to an ffmpeg run.
        """
        if not isinstance(size, tuple):
            return self._audio_bitmap(data, index)
        bitmap = decode_image(data, index, size, self.image_side, _mtmd().mtmd_bitmap_init)
        return self._identified(bitmap, data, index)

    def _audio_bitmap(self, data: bytes, index: int) -> int:
        """16 kHz mono PCM decoded by libmtmd's helper (miniaudio), as llama-server decodes it, once
        the header's claimed length is known to be within the limit (``_measure``: its buffer is
        sized by that claim)."""
        mtmd = _mtmd()
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        # ``is_audio`` is the helper's own test: it takes its audio branch, never stb_image or ffmpeg.
        bitmap = mtmd.mtmd_helper_bitmap_init_from_buf(self._ptr, buf, len(data), False)
        if not bitmap:
            raise MediaError(f"audio {index}: the audio could not be decoded")
        try:
            n_samples = int(mtmd.mtmd_bitmap_get_nx(bitmap))
            _check_length(n_samples / self.sample_rate if n_samples else None, index, self.limits.audio_seconds)
        except MediaError:
            mtmd.mtmd_bitmap_free(bitmap)
            raise
        return self._identified(bitmap, data, index)

    def encode_silence(self) -> None:
        """Tokenize and encode one second of silence, as a clip would be: what ``probe`` runs in a
        child process, since libmtmd aborts on the audio of some projectors (the window's token
        count it computes disagrees with the encoder's output for Ultravox and Voxtral stacking)."""
        mtmd = _mtmd()
        samples = (ctypes.c_float * self.sample_rate)()
        bitmap = mtmd.mtmd_bitmap_init_from_audio(self.sample_rate, samples)
        chunks = mtmd.mtmd_input_chunks_init()
        try:
            raw = self.marker.encode()
            inp = mtmd.mtmd_input_text(text=raw, text_len=len(raw), add_special=False, parse_special=True)
            array = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
            if mtmd.mtmd_tokenize(self._ptr, chunks, ctypes.byref(inp), array, 1) != 0:
                raise EngineError("the projector could not preprocess a second of silence")
            prompt = MediaPrompt(self, chunks)
            chunks = None  # the prompt's now
            try:
                prompt.encode(next(p for p in prompt.parts if isinstance(p, MediaItem)))
            finally:
                prompt.close()
        finally:
            mtmd.mtmd_bitmap_free(bitmap)
            if chunks:
                mtmd.mtmd_input_chunks_free(chunks)

    @staticmethod
    def _identified(bitmap: int | None, data: bytes, index: int) -> int:
        """The bitmap, its id the SHA-256 of the bytes the client sent (whatever decoded them)
        tagged with its place among the prompt's media (``_tagged``)."""
        if not bitmap:
            raise EngineError("libmtmd could not make a bitmap")
        _mtmd().mtmd_bitmap_set_id(bitmap, _tagged(hashlib.sha256(data).hexdigest(), index).encode())
        return bitmap

    @functools.cached_property
    def image_break(self) -> np.ndarray | None:
        """Pixtral's [IMG_BREAK] embedding, read from the file the first time an encode needs it."""
        return image_break_row(self.path)

    def non_causal(self, prompt: MediaPrompt, item: MediaItem) -> bool:
        """Whether the item's tokens attend to each other both ways (Gemma 3's images): decoded alone."""
        return bool(_mtmd().mtmd_decode_use_non_causal(self._ptr, prompt._chunk(item)))

    def close(self) -> None:
        if self._ptr:
            _mtmd().mtmd_free(self._ptr)
            self._ptr = None

    @property
    def ptr(self) -> int:
        return self._ptr  # type: ignore[no-any-return]
