"""The oracle tests' model and cold reference (a test module with its own kinds defines its own)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import llama_cpp
import pytest
from oracle import cold_llm

from cllm_ollama.testing.ggufs import write_qwen3


@pytest.fixture(scope="module")
def gguf_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # F32 weights of scale 0.5: peaked logits and no quantised activations, so a KV computed in
    # another batch layout gives the same argmax (Q8_0 flipped a near-tie in 1 of 4 prompts, with
    # or without sharing). Endless: no end-of-generation token wins, every request runs N tokens.
    return write_qwen3(tmp_path_factory.mktemp("m") / "oracle.gguf", endless=True)


@pytest.fixture(scope="module")
def cold(gguf_path: Path) -> Iterator[llama_cpp.Llama]:
    with cold_llm(gguf_path) as llm:
        yield llm
