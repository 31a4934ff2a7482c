"""A model with a LoRA adapter (Ollama's ``ADAPTER``) through a real server and llama.cpp.

The oracle is a direct greedy decode with the binding (a context with the adapter set on it),
not the server: the server's adapted output equals it and differs from the base model's, and
the base and the adapted model serve at the same time over one ``llama_model``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
from serving import serve_in_thread
from starlette.applications import Starlette

from cllm_ollama.api.services import services
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.engine.binding import Batch, Context, Lora, Model, with_adapters
from cllm_ollama.store import manifests as mt
from cllm_ollama.store.manifests import Layer
from cllm_ollama.store.names import parse_name
from cllm_ollama.testing.ggufs import write_gemma3, write_lora

pytestmark = pytest.mark.model

N = 8
PROMPTS = ["the sea and the sky", "a slot holds one sequence", "adapters change the weights", "one two three"]


def upload(url: str, path: Path) -> str:
    data = path.read_bytes()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    assert httpx.post(f"{url}/api/blobs/{digest}", content=data).status_code == 201
    return digest


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    # Endless: no end-of-generation token wins, every request runs N tokens.
    return write_lora(tmp_path_factory.mktemp("lora"), endless=True)


@pytest.fixture(scope="module")
def served(files: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Starlette]]:
    """A server with "base" (the weights) and "tuned" (the same weights with the adapter)."""
    root = tmp_path_factory.mktemp("adapter-server")
    app = create_app(Settings(models_dir=root / "models", num_parallel=2, context_length=256))
    base, adapter = files
    with serve_in_thread(app) as url:
        weights = {"base.gguf": upload(url, base)}
        for name, extra in (("base", {}), ("tuned", {"adapters": {"adapter.gguf": upload(url, adapter)}})):
            body = {"model": name, "files": weights, **extra, "stream": False}
            r = httpx.post(f"{url}/api/create", json=body, timeout=60)
            assert r.status_code == 200, r.text
        yield url, app


def generate(url: str, model: str, prompt: str) -> tuple[list[int], list[int]]:
    """The prompt's tokens as the server rendered them, and the tokens it generated greedily."""
    options = {"temperature": 0, "num_predict": N}
    r = httpx.post(
        f"{url}/api/generate",
        json={"model": model, "prompt": prompt, "stream": False, "options": options},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["eval_count"] == N
    return list(body["context"][:-N]), list(body["context"][-N:])


def direct(base: Path, adapter: Path | None, prompts: list[list[int]]) -> list[list[int]]:
    """Greedy tokens from the binding alone: a fresh context, with the adapter set on it or not."""
    model = Model(base, n_gpu_layers=0)
    lora = Lora(model, adapter) if adapter is not None else None
    try:
        out = []
        for prompt in prompts:
            ctx = with_adapters(
                Context(model, n_seq_max=1, n_ctx_seq=128, n_batch=64, n_threads=2), [lora] if lora else []
            )
            try:
                tokens = list(prompt)
                batch = Batch(64)
                produced: list[int] = []
                pos = 0
                while len(produced) < N:
                    batch.fill(tokens, range(pos, pos + len(tokens)), [0] * len(tokens), [len(tokens) - 1])
                    ctx.decode(batch)
                    pos += len(tokens)
                    tokens = [int(np.argmax(ctx.logits(1)[0]))]
                    produced += tokens
                out.append(produced)
            finally:
                ctx.close()
        return out
    finally:
        if lora is not None:
            lora.close()
        model.close()


def test_the_adapted_model_decodes_as_llama_cpp_with_the_adapter_beside_its_base(
    served: tuple[str, Starlette], files: tuple[Path, Path]
) -> None:
    url, app = served
    base, adapter = files
    # Both models at once, several requests each, interleaved.
    jobs = [(model, i) for i in range(len(PROMPTS)) for model in ("base", "tuned")]
    with ThreadPoolExecutor(len(jobs)) as pool:
        got = list(pool.map(lambda job: generate(url, job[0], PROMPTS[job[1]]), jobs))
    prompts = [got[2 * i][0] for i in range(len(PROMPTS))]  # the same rendering for both models
    assert all(got[2 * i + 1][0] == prompts[i] for i in range(len(PROMPTS)))
    want_base, want_tuned = direct(base, None, prompts), direct(base, adapter, prompts)
    assert all(b != t for b, t in zip(want_base, want_tuned, strict=True))  # the adapter changes the output
    for (model, i), (_, tokens) in zip(jobs, got, strict=True):
        assert tokens == (want_tuned if model == "tuned" else want_base)[i], (model, PROMPTS[i])
    # Two loaded models, each with its own slots, over one llama_model holding the weights once.
    pool_state = services(app).pool
    entries = {entry.name: entry for entry in pool_state.running()}
    assert set(entries) == {"base:latest", "tuned:latest"}
    assert entries["base:latest"].model.model is entries["tuned:latest"].model.model
    assert [refs for _, refs in pool_state.weights.loaded()] == [2]
    # The adapter applies to the adapted model's embeddings too.
    vectors = [
        httpx.post(f"{url}/api/embed", json={"model": m, "input": PROMPTS[0]}, timeout=60).json()["embeddings"][0]
        for m in ("base", "tuned")
    ]
    assert not np.allclose(vectors[0], vectors[1], atol=1e-4)
    # Unloading the base keeps the weights for the adapted model, which still answers alike.
    r = httpx.post(f"{url}/api/generate", json={"model": "base", "keep_alive": 0}, timeout=60)
    assert r.status_code == 200 and r.json()["done_reason"] == "unload"
    assert [entry.name for entry in pool_state.running()] == ["tuned:latest"]
    assert [refs for _, refs in pool_state.weights.loaded()] == [1]
    assert generate(url, "tuned", PROMPTS[0])[1] == want_tuned[0]


def test_an_adapter_for_another_base_is_a_400_at_load(served: tuple[str, Starlette], tmp_path: Path) -> None:
    """A store written elsewhere (create checks the base): llama.cpp refuses the adapter, the server lives."""
    url, app = served
    store = services(app).store
    other = write_gemma3(tmp_path / "gemma.gguf")
    digest = upload(url, other)
    tuned = store.get("tuned")
    adapter = next(layer for layer in tuned.manifest.layers if layer.media_type == mt.ADAPTER)
    layers = [Layer(mt.MODEL, digest, other.stat().st_size), adapter]
    store.write_manifest(parse_name("mismatched"), tuned.config, layers)
    r = httpx.post(f"{url}/api/generate", json={"model": "mismatched", "prompt": "hi", "stream": False}, timeout=120)
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith("llama.cpp cannot apply the model's adapter to it: "), r.text
    assert r.json()["error"].endswith("model arch and LoRA arch mismatch"), r.text  # llama.cpp's reason
    r = httpx.post(f"{url}/api/generate", json={"model": "tuned", "prompt": "hi", "stream": False}, timeout=60)
    assert r.status_code == 200
