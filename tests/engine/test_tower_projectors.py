"""Gemma 4's towers, split out of Ollama's one file when it is created, load in libmtmd beside the
text model: it reports vision and audio, and a second of sound and an image encode into the same
embeddings as through the projector llama.cpp's converter writes for the same weights.

(That the audio reaches the model through the APIs is the audio path's; the split itself, tensor
for tensor, is ``tests/store/test_layouts_vision.py``.) libmtmd's audio calls are made here
directly: the binding takes images only so far.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import numpy as np
import pytest

from cllm_ollama.engine.binding import MediaItem, Model, Projector
from cllm_ollama.store import manifests as mt
from cllm_ollama.store.create import CreateRequest, create_model
from cllm_ollama.store.names import parse_name
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.images import png
from cllm_ollama.testing.ollama_vision_ggufs import write_ollama_gemma4
from cllm_ollama.testing.tower_ggufs import write_gemma4_vision

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Projector, Projector]]:
    """(llama.cpp's projector, the one split out of Ollama's file), each beside its text model."""
    root = tmp_path_factory.mktemp("gemma4-towers")
    store = ModelStore(root / "models")
    digest = store.write_blob_from([write_ollama_gemma4(root / "ollama.gguf").read_bytes()])
    record = create_model(store, CreateRequest(model=parse_name("g4"), files={"model.gguf": digest}), print)
    split = {layer.media_type: store.blob_path(layer.digest) for layer in record.manifest.layers}
    loaded = []
    for text, mmproj in (write_gemma4_vision(root / "llama.cpp"), (split[mt.MODEL], split[mt.PROJECTOR])):
        model = Model(text)
        loaded.append(Projector(model, mmproj, n_threads=1))
    yield loaded[0], loaded[1]
    for proj in loaded:
        model = proj.model
        proj.close()
        model.close()


def _mtmd():  # type: ignore[no-untyped-def]
    import llama_cpp.mtmd_cpp as mtmd

    return mtmd


def encoded(proj: Projector, bitmap: int, kind: int) -> np.ndarray:
    """The embeddings libmtmd encodes ``bitmap`` (an image or audio) into, one row per token."""
    mtmd = _mtmd()
    chunks = mtmd.mtmd_input_chunks_init()
    try:
        raw = f"Listen: {proj.marker}".encode()
        inp = mtmd.mtmd_input_text(text=raw, text_len=len(raw), add_special=True, parse_special=True)
        array = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
        assert mtmd.mtmd_tokenize(proj.ptr, chunks, ctypes.byref(inp), array, 1) == 0
        chunk = next(
            c
            for c in (mtmd.mtmd_input_chunks_get(chunks, i) for i in range(mtmd.mtmd_input_chunks_size(chunks)))
            if mtmd.mtmd_input_chunk_get_type(c) == kind
        )
        n_tokens = int(mtmd.mtmd_input_chunk_get_n_tokens(chunk))
        assert mtmd.mtmd_encode_chunk(proj.ptr, chunk) == 0
        out = mtmd.mtmd_get_output_embd(proj.ptr)
        return np.ctypeslib.as_array(out, shape=(n_tokens * proj.n_embd,)).reshape(n_tokens, proj.n_embd).copy()
    finally:
        mtmd.mtmd_input_chunks_free(chunks)


def sound(proj: Projector) -> int:
    """A second of two tones at libmtmd's sample rate, as an audio bitmap."""
    rate = int(_mtmd().mtmd_get_audio_sample_rate(proj.ptr))
    t = np.arange(rate, dtype=np.float32) / rate
    wave = (0.3 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * 1250 * t)).astype(np.float32)
    return _mtmd().mtmd_bitmap_init_from_audio(len(wave), wave.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))


def test_the_split_gemma4_projector_sees_and_hears(pair: tuple[Projector, Projector]) -> None:
    mtmd = _mtmd()
    for proj in pair:
        assert proj.vision and mtmd.mtmd_support_audio(proj.ptr)
        assert mtmd.mtmd_get_audio_sample_rate(proj.ptr) == 16000


def test_the_split_gemma4_audio_tower_encodes_as_llama_cpp_s(pair: tuple[Projector, Projector]) -> None:
    mtmd = _mtmd()
    got = []
    for proj in pair:
        bitmap = sound(proj)
        try:
            got.append(encoded(proj, bitmap, mtmd.MTMD_INPUT_CHUNK_TYPE_AUDIO))
        finally:
            mtmd.mtmd_bitmap_free(bitmap)
    want, mapped = got
    assert want.shape[0] > 1 and np.isfinite(want).all() and np.abs(want).max() > 0
    np.testing.assert_allclose(mapped, want, rtol=1e-5, atol=1e-5)


def test_the_split_gemma4_vision_tower_encodes_as_llama_cpp_s(pair: tuple[Projector, Projector]) -> None:
    got = []
    image = png(48, 40, seed=5)
    for proj in pair:
        prompt = proj.tokenize(f"Look: {proj.marker}", [image])
        try:
            (item,) = [part for part in prompt.parts if isinstance(part, MediaItem)]
            got.append(prompt.encode(item))
        finally:
            prompt.close()
    want, mapped = got
    assert want.shape[0] >= 70 and np.isfinite(want).all()  # libmtmd gives a Gemma 4 image 70 tokens at least
    np.testing.assert_allclose(mapped, want, rtol=1e-5, atol=1e-5)
