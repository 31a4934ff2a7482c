"""A real server restarted on the same prompt cache directory answers a known long prompt from
the disk tier: the cached tokens are reported, and the tokens are the cold run's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from serving import serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings

pytestmark = pytest.mark.model

# An agent's preamble stands in: well past the 256 tokens from which states are saved.
PREAMBLE = " ".join(f"Tool {i}: reads file number {i} and returns its lines, one per line." for i in range(40))


def ask(url: str) -> dict[str, Any]:
    body = {
        "model": "tiny",
        "messages": [{"role": "system", "content": PREAMBLE}, {"role": "user", "content": "Which tool reads file 7?"}],
        "temperature": 0,
        "max_tokens": 16,
    }
    response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def test_a_restarted_server_answers_a_known_prompt_from_disk(settings: Settings, tmp_path: Path) -> None:
    settings = replace(settings, context_length=1024, cache_dir=tmp_path / "prompt-cache")
    with serve_in_thread(create_app(settings)) as url:
        cold = ask(url)
    assert cold["usage"]["prompt_tokens"] > 300
    assert cold["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert list((tmp_path / "prompt-cache").glob("*/*.kv")), "the unload at shutdown wrote no state"

    with serve_in_thread(create_app(settings)) as url:  # a new process's worth: nothing in RAM
        warm = ask(url)
    assert warm["choices"][0]["message"] == cold["choices"][0]["message"]
    assert warm["usage"]["completion_tokens"] == cold["usage"]["completion_tokens"]
    # All of the prompt but its last token (which must be decoded for logits) came from disk.
    assert warm["usage"]["prompt_tokens_details"]["cached_tokens"] == cold["usage"]["prompt_tokens"] - 1
