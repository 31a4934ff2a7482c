"""Writes real, loadable GGUFs with random weights, for tests and benchmarks: the names tests
import (the workhorse models of ``core_ggufs``, the vocabulary and shapes of ``gguf_base``), and the
command ``python -m cllm_ollama.testing.ggufs KIND DIR``, which writes any test model by name
(``kinds``: one table, a writer module each).
"""

from __future__ import annotations

from .core_ggufs import (
    RERANK_TEMPLATE,
    write_gemma3,
    write_gemma3_projector,
    write_jamba,
    write_lora,
    write_mamba,
    write_qwen2vl,
    write_qwen2vl_projector,
    write_qwen3,
    write_reranker,
    write_vision,
)
from .gguf_base import (
    QWEN3_0_6B,
    QWEN3_VOCAB_SIZE,
    QWEN_SPECIALS,
    TINY,
    TINY_SSM,
    TINY_VISION,
    Shape,
    SsmShape,
    VisionShape,
    Vocab,
    qwen3_chat_template,
    synthetic_vocab,
    vocab_from_gguf,
)

__all__ = [
    "QWEN3_0_6B",
    "QWEN3_VOCAB_SIZE",
    "QWEN_SPECIALS",
    "RERANK_TEMPLATE",
    "TINY",
    "TINY_SSM",
    "TINY_VISION",
    "Shape",
    "SsmShape",
    "VisionShape",
    "Vocab",
    "qwen3_chat_template",
    "synthetic_vocab",
    "vocab_from_gguf",
    "write_gemma3",
    "write_gemma3_projector",
    "write_jamba",
    "write_lora",
    "write_mamba",
    "write_qwen2vl",
    "write_qwen2vl_projector",
    "write_qwen3",
    "write_reranker",
    "write_vision",
]

if __name__ == "__main__":
    from .kinds import main  # kinds imports the writer modules, never this one

    main()
