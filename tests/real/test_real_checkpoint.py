"""A real model's checkpoint converted as ``ollama create`` converts a folder: Qwen2.5-Coder-0.5B
exported to Hugging Face's layout in BF16 (as Qwen publishes it: biases on Q, K and V, tied
embeddings, Qwen's 151k-token vocabulary), created on the live server beside the GGUF it came from."""

from __future__ import annotations

from pathlib import Path

import httpx
import ollama

from cllm_ollama.store.modelfile import model_folder_files
from cllm_ollama.testing.hf_folders import export

MODEL = "coder"  # as tests/real/conftest.py installs it
TEXTS = [
    "def fibonacci(n):\n    return n",
    "Größe 日本語 🙂 it's  spaced\t\tout",
    "<|im_start|>user\nHi<|im_end|>",
    "12345678",
]


def test_a_converted_checkpoint_tokenizes_and_answers_as_the_model(
    real_url: str, real_gguf: Path, tmp_path: Path
) -> None:
    folder = export(real_gguf, tmp_path / "Qwen2.5-Coder-0.5B-Instruct", dtype="BF16")
    with ollama.Client(host=real_url, timeout=600) as client:
        files = {name: client.create_blob(path) for name, path in model_folder_files(folder, str(folder)).items()}
        statuses = [p.status for p in client.create("coder-hf", files=files, stream=True)]
        assert statuses[0] == "converting model" and statuses[-1] == "success"
        show = client.show("coder-hf")
        assert show.details is not None and (show.details.family, show.details.quantization_level) == ("qwen2", "BF16")
        with httpx.Client(base_url=real_url, timeout=300) as http:
            for text in TEXTS:
                tokens = [
                    http.post("/api/tokenize", json={"model": m, "content": text}).json()["tokens"]
                    for m in (MODEL, "coder-hf")
                ]
                assert tokens[0] == tokens[1], text
        reply = client.chat(
            "coder-hf",
            [{"role": "user", "content": "Write a Python function add(a, b) that returns their sum. Only the code."}],
            options={"temperature": 0, "num_predict": 48},
        )
        assert "def add(a, b)" in reply.message.content
        assert client.delete("coder-hf").status == "success"
