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
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import llama_cpp as ll
import numpy as np

from ...errors import EngineError, MediaError
from ..audio import claimed_seconds, is_audio
from ..image_breaks import image_break_row, mend_image_breaks
from ..transcode import decode_rgb, is_webp
from .core import Context, Model, log_callback

# Formats stb_image (inside libmtmd) decodes, by their first bytes, and WebP (decoded by Pillow,
# ``transcode``). Anything else is refused before libmtmd sees it: its helper would take unknown
# bytes for audio or hand them to an ffmpeg subprocess as a video.
_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"BM")


@functools.cache
def _mtmd():  # type: ignore[no-untyped-def]
    """``llama_cpp.mtmd_cpp``, imported on first use (it loads libmtmd, which text models never
    need), its log sent where llama.cpp's goes."""
    import llama_cpp.mtmd_cpp as mtmd

    callback = log_callback()
    mtmd.mtmd_log_set(callback, ctypes.c_void_p(0))
    mtmd.mtmd_helper_log_set(callback, ctypes.c_void_p(0))
    return mtmd


@functools.cache
def _stb() -> ctypes.CDLL:
    """stb_image's decoder, which libmtmd exports (the one its own helper decodes images with)."""
    lib = _mtmd()._libmtmd
    lib.stbi_load_from_memory.restype = ctypes.c_void_p
    lib.stbi_load_from_memory.argtypes = (
        [ctypes.c_char_p, ctypes.c_int] + [ctypes.POINTER(ctypes.c_int)] * 3 + [ctypes.c_int]
    )
    lib.stbi_info_from_memory.restype = ctypes.c_int
    lib.stbi_info_from_memory.argtypes = [ctypes.c_char_p, ctypes.c_int] + [ctypes.POINTER(ctypes.c_int)] * 3
    lib.stbi_image_free.restype = None
    lib.stbi_image_free.argtypes = [ctypes.c_void_p]
    return lib  # type: ignore[no-any-return]


def media_marker() -> str:
    """libmtmd's default text for one image in a prompt (``<__media__>``); a ``Projector`` uses its
    own ``marker`` instead, unguessable, so that a user who types this text places no image."""
    return _mtmd().mtmd_default_marker().decode()


def is_image(data: bytes) -> bool:
    """Whether ``data`` starts as an image the projector can decode (cheap; decoding may still fail)."""
    return data.startswith(_IMAGE_MAGIC) or is_webp(data)


# The largest picture decoded (8192 x 8192): 200 MB of RGB, far beyond what any projector keeps
# (it resizes to well under 4 Mpx); larger is refused before it is decoded.
MAX_IMAGE_PIXELS = 1 << 26
# The longest clip decoded: 30 minutes is 115 MB of 16 kHz floats and 60 encoder windows (45,000
# tokens for Qwen2.5-Omni: more than most contexts hold); longer is refused before it is decoded.
MAX_AUDIO_SECONDS = 1800


def _check_length(seconds: float | None, index: int) -> None:
    """A clip's length: None (a header that cannot be read, no samples) is no audio, and more than
    ``MAX_AUDIO_SECONDS`` is refused."""
    if seconds is None:
        raise MediaError(f"audio {index}: the audio could not be decoded")
    if seconds > MAX_AUDIO_SECONDS:
        raise MediaError(f"audio {index}: {seconds:.0f} seconds is more than {MAX_AUDIO_SECONDS}")


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
        mended where llama.cpp's graph spoiled them (``image_breaks``)."""
        mtmd, proj = _mtmd(), self._projector
        if mtmd.mtmd_encode_chunk(proj.ptr, self._chunk(item)) != 0:
            raise EngineError(f"the projector could not encode {item.kind} {item.id[:12]}")
        ptr = mtmd.mtmd_get_output_embd(proj.ptr)
        embd = np.ctypeslib.as_array(ptr, shape=(item.n_tokens, proj.n_embd)).copy()
        return embd if np.isfinite(embd).all() else mend_image_breaks(embd, proj.image_break)

    def decode(self, ctx: Context, item: MediaItem, embd: np.ndarray, pos: int, seq_id: int) -> int:
        """Decode a media chunk's embeddings into ``seq_id`` from position ``pos``; the position after it.

        libmtmd's helper does what the model needs, as llama-server does: non-causal attention over
        the image for Gemma 3 (switched on for this decode only: it applies to the whole context,
        so no other sequence may decode in the same call), 2-D M-RoPE positions for Qwen-VL
        images, 1-D ones for audio. No logits: a prompt's last chunk is text.
        """
        mtmd = _mtmd()
        embd = np.ascontiguousarray(embd, dtype=np.float32)
        if embd.shape != (item.n_tokens, self._projector.n_embd):
            raise EngineError(f"embeddings of shape {embd.shape} for an {item.kind} of {item.n_tokens} tokens")
        if item.n_tokens > ctx.n_ubatch and self._projector.non_causal(self, item):
            # The helper would split the image over micro-batches, each seeing only its own part.
            raise EngineError(
                f"an image of {item.n_tokens} tokens needs micro-batches of as many (n_ubatch {ctx.n_ubatch})"
            )
        new_pos = ll.llama_pos(0)
        rc = mtmd.mtmd_helper_decode_image_chunk(
            self._projector.ptr,
            ctx.ptr,
            self._chunk(item),
            embd.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
            pos,
            seq_id,
            ctx.n_batch,
            ctypes.byref(new_pos),
            mtmd.mtmd_helper_post_decode_callback(),  # NULL: no callback
            None,
        )
        if rc != 0:
            raise EngineError(f"decoding {item.kind} {item.id[:12]} failed ({rc})")
        return int(new_pos.value)

    def eval_all(self, ctx: Context, pos: int, seq_id: int) -> int:
        """The whole prompt into ``seq_id`` the way libmtmd's own helper does it (logits for the
        last token): the reference a batching engine's media step must match. The next position."""
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
        self, model: Model, path: Path, *, n_threads: int, use_gpu: bool = True, marker: str | None = None
    ) -> None:
        mtmd = _mtmd()
        # Random per projector, as Ollama makes llama-server's (LLAMA_MEDIA_MARKER): prompt text
        # cannot forge an image's place. libmtmd copies it.
        self.marker: str = marker or f"<__media_{secrets.token_hex(8)}__>"
        params = mtmd.mtmd_context_params_default()
        params.media_marker = self.marker.encode()
        params.use_gpu = use_gpu and bool(ll.llama_supports_gpu_offload())
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

    def tokenize(self, text: str, images: Sequence[bytes], *, add_special: bool = True) -> MediaPrompt:
        """``text`` with one ``self.marker`` per medium (an image or, where the projector hears, a
        WAV, MP3 or FLAC clip), in order, tokenized with them.

        Raises ``MediaError`` (a 400) for bytes that are neither; ``EngineError`` where markers
        and media disagree (the caller placed them).
        """
        mtmd = _mtmd()
        bitmaps: list[int] = []
        chunks = mtmd.mtmd_input_chunks_init()
        try:
            for i, data in enumerate(images):
                bitmaps.append(self._bitmap(data, i))
            if (n_markers := text.count(self.marker)) != len(images):
                raise EngineError(f"the prompt has {n_markers} image markers for {len(images)} images")
            raw = text.encode("utf-8")
            inp = mtmd.mtmd_input_text(text=raw, text_len=len(raw), add_special=add_special, parse_special=True)
            array = (mtmd.mtmd_bitmap_p_ctypes * max(1, len(bitmaps)))(*bitmaps)
            rc = mtmd.mtmd_tokenize(self._ptr, chunks, ctypes.byref(inp), array, len(bitmaps))
            if rc != 0:
                raise MediaError(f"the projector could not preprocess the images ({rc})")
            prompt = MediaPrompt(self, chunks)
            chunks = None
            return prompt
        finally:
            for bitmap in bitmaps:
                mtmd.mtmd_bitmap_free(bitmap)
            if chunks:
                mtmd.mtmd_input_chunks_free(chunks)

    def _bitmap(self, data: bytes, index: int) -> int:
        """A bitmap decoded from image bytes (RGB) or, where the projector hears, audio bytes (PCM),
        its id the SHA-256 of the bytes tagged with ``index`` (``_tagged``).

        What libmtmd's ``mtmd_helper_bitmap_init_from_buf`` does, without its fallbacks: bytes
        that are neither are an error here, never an ffmpeg run; audio to a projector that does
        not hear is no image either.
        """
        if self.audio and is_audio(data):
            if self.audio_refused is not None:
                raise EngineError(f"audio {index}: {self.audio_refused}")
            return self._audio_bitmap(data, index)
        if not self.vision:  # an audio projector (Ultravox, Qwen2-Audio): libmtmd would refuse it
            raise MediaError(f"image {index}: this model's projector takes audio, not images")
        if not is_image(data):
            raise MediaError(f"image {index}: unknown or unsupported image format")
        mtmd = _mtmd()
        if is_webp(data):
            width, height, rgb = decode_rgb(data, index, MAX_IMAGE_PIXELS)
            bitmap = mtmd.mtmd_bitmap_init(width, height, (ctypes.c_uint8 * len(rgb)).from_buffer_copy(rgb))
            return self._identified(bitmap, data, index)
        stb = _stb()
        nx, ny, nc = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        # The header first: a few KB of PNG can claim a picture that would take gigabytes decoded.
        # (stb_image itself refuses more than 1 GB.)
        info = stb.stbi_info_from_memory(data, len(data), ctypes.byref(nx), ctypes.byref(ny), ctypes.byref(nc))
        if info and nx.value * ny.value > MAX_IMAGE_PIXELS:
            raise MediaError(f"image {index}: {nx.value}x{ny.value} pixels is more than {MAX_IMAGE_PIXELS}")
        pixels = stb.stbi_load_from_memory(data, len(data), ctypes.byref(nx), ctypes.byref(ny), ctypes.byref(nc), 3)
        if not pixels:
            raise MediaError(f"image {index}: the image could not be decoded")
        try:
            bitmap = mtmd.mtmd_bitmap_init(nx.value, ny.value, ctypes.cast(pixels, ctypes.POINTER(ctypes.c_uint8)))
        finally:
            stb.stbi_image_free(pixels)
        return self._identified(bitmap, data, index)

    def _audio_bitmap(self, data: bytes, index: int) -> int:
        """16 kHz mono PCM decoded by libmtmd's helper (miniaudio), as llama-server decodes it, once
        the header's claimed length is known to be within ``MAX_AUDIO_SECONDS`` (its buffer is
        sized by that claim)."""
        _check_length(claimed_seconds(data, MAX_AUDIO_SECONDS), index)
        mtmd = _mtmd()
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        # ``is_audio`` is the helper's own test: it takes its audio branch, never stb_image or ffmpeg.
        bitmap = mtmd.mtmd_helper_bitmap_init_from_buf(self._ptr, buf, len(data), False)
        if not bitmap:
            raise MediaError(f"audio {index}: the audio could not be decoded")
        try:
            n_samples = int(mtmd.mtmd_bitmap_get_nx(bitmap))
            _check_length(n_samples / self.sample_rate if n_samples else None, index)
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
