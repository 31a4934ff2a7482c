"""Think blocks of earlier turns leave the history for the models Ollama strips them for."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.chatformat.builtin_templates import CHATML
from cllm_ollama.config import Settings
from cllm_ollama.store.create import import_gguf
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_gemma3


@pytest.mark.model
def test_a_deepseek_r1_distill_is_known_by_its_name_not_its_architecture(tmp_path: Path) -> None:
    """R1's distills are qwen2 and llama GGUFs named deepseek-r1: Ollama matches the name. One GGUF
    (of no thinking architecture) under two names: only the deepseek-r1 one drops the old thought."""
    # ChatML writes each turn whole (Qwen3's own template would drop the thought itself).
    gguf = write_gemma3(tmp_path / "tiny-gemma3.gguf", chat_template=CHATML)
    store = ModelStore(tmp_path / "models")
    for name in ("deepseek-r1:tiny", "other:tiny"):
        import_gguf(store, name, gguf)
    settings = Settings(models_dir=tmp_path / "models", num_parallel=1, context_length=512, num_thread=2)
    thought = "<think>" + "a long thought about it " * 20 + "</think>"
    messages = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": thought + "Hello"},
        {"role": "user", "content": "Again"},
    ]
    counts = {}
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        for name in ("deepseek-r1:tiny", "other:tiny"):
            body = {"model": name, "messages": messages, "stream": False, "options": {"num_predict": 1}}
            answer = client.post("/api/chat", json=body)
            assert answer.status_code == 200, answer.text
            counts[name] = answer.json()["prompt_eval_count"]
    assert counts["deepseek-r1:tiny"] + 20 < counts["other:tiny"]
