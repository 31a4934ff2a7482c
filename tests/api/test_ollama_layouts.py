"""Text models in Ollama's converter layout, mapped at create and served by the real engine.

(The vision layouts are served in ``test_vision.py``; the pull and refusal paths are in
``tests/store/test_layouts.py``.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import ollama
import pytest
from serving import serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.testing.ggufs import TINY, write_gemma3
from cllm_ollama.testing.ollama_ggufs import (
    write_gptoss,
    write_lfm2,
    write_ollama_embeddinggemma,
    write_ollama_gemma3_text,
    write_ollama_gptoss,
    write_ollama_lfm2,
    write_ollama_olmo3,
    write_olmo2,
)

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("ollama-layouts")
    settings = Settings(models_dir=root / "models", num_parallel=2, context_length=256)
    with serve_in_thread(create_app(settings)) as url:
        yield url


def create_from(url: str, name: str, path: Path) -> httpx.Response:
    data = path.read_bytes()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    assert httpx.post(f"{url}/api/blobs/{digest}", content=data).status_code == 201
    body = {"model": name, "files": {path.name: digest}, "stream": False}
    return httpx.post(f"{url}/api/create", json=body, timeout=60)


def test_an_embeddinggemma_in_ollamas_layout_embeds(server: str, tmp_path: Path) -> None:
    """Ollama's older EmbeddingGemma (a gemma3 with dense layers) becomes llama.cpp's
    gemma-embedding: an embedding model whose vectors come through its dense head."""
    r = create_from(server, "embeddinggemma", write_ollama_embeddinggemma(tmp_path / "embeddinggemma.gguf"))
    assert r.status_code == 200, r.text
    client = ollama.Client(server)
    show = client.show("embeddinggemma")
    assert show.capabilities and "embedding" in show.capabilities and "completion" not in show.capabilities
    assert show.modelinfo is not None and show.modelinfo["general.architecture"] == "gemma-embedding"
    vectors = client.embed(model="embeddinggemma", input=["the sea", "the sea", "a sky of stars"]).embeddings
    assert len(vectors) == 3 and all(len(v) == TINY.n_embd for v in vectors)
    a, b, c = (np.asarray(v) for v in vectors)
    assert np.allclose(a, b) and not np.allclose(a, c)


def test_a_text_gemma3_in_ollamas_layout_answers_as_llama_cpp_s(server: str, tmp_path: Path) -> None:
    """Ollama's 1B-style gemma3 (its RoPE key names, a per-layer pattern): mapped, it generates what
    the same weights in llama.cpp's layout generate."""
    for name, path in (
        ("g3", write_gemma3(tmp_path / "g3.gguf")),
        ("g3-ollama", write_ollama_gemma3_text(tmp_path / "g3-ollama.gguf")),
    ):
        r = create_from(server, name, path)
        assert r.status_code == 200, r.text
    client = ollama.Client(server)
    info = client.show("g3-ollama").modelinfo or {}
    assert info["gemma3.rope.freq_base_swa"] == 1e4 and "gemma3.rope.local.freq_base" not in info  # mapped
    options = {"temperature": 0, "num_predict": 12, "seed": 1}
    prompt = "a long story about the sea and the sky and the stars " * 3  # past the 16-token window
    answers = [client.generate(model=m, prompt=prompt, options=options) for m in ("g3", "g3-ollama")]
    assert answers[0].response and answers[0].response == answers[1].response


@pytest.mark.parametrize(
    ("kind", "arch"), [("gptoss", "gpt-oss"), ("olmo3", "olmo2"), ("lfm2", "lfm2")], ids=["gptoss", "olmo3", "lfm2"]
)
def test_a_text_model_in_ollamas_layout_generates_what_its_llama_cpp_twin_does(
    server: str, tmp_path: Path, kind: str, arch: str
) -> None:
    """gpt-oss as Ollama converted it in 2025 (its own names, fused and interleaved MXFP4 experts)
    OLMo 3 (an architecture llama.cpp does not name) and LFM2 (a hybrid: its final norm renamed):
    mapped at create, each generates what the same weights written by llama.cpp's converter generate."""
    writers = {
        "gptoss": (write_gptoss, write_ollama_gptoss),
        "olmo3": (write_olmo2, write_ollama_olmo3),
        "lfm2": (write_lfm2, write_ollama_lfm2),
    }
    llama, ollama_layout = writers[kind]
    for name, path in (
        (f"{kind}-llama", llama(tmp_path / "llama.gguf")),
        (kind, ollama_layout(tmp_path / "ollama.gguf")),
    ):
        r = create_from(server, name, path)
        assert r.status_code == 200, r.text
    client = ollama.Client(server)
    info = client.show(kind).modelinfo or {}
    assert info["general.architecture"] == arch
    options = {"temperature": 0, "num_predict": 12, "seed": 1}
    prompt = "a long story about the sea and the sky and the stars " * 3  # past the 16-token window
    answers = [client.generate(model=m, prompt=prompt, options=options) for m in (f"{kind}-llama", kind)]
    assert answers[0].response and answers[0].response == answers[1].response
    assert answers[0].eval_count == answers[1].eval_count
