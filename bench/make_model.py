"""Writes the benchmark models: random-weight qwen3 GGUFs with Qwen's real tokenizer, in Q4_K_M.

The real vocabulary matters: with the synthetic one, a random model picks padding tokens that
render as no text at all, and a streaming client would never see a first token.
"""

from __future__ import annotations

from pathlib import Path

import gguf

from cllm_ollama.engine.binding import quantize
from cllm_ollama.testing.ggufs import QWEN3_0_6B, TINY, Shape, vocab_from_gguf, write_qwen3

SHAPES: dict[str, Shape] = {"qwen3-0.6b": QWEN3_0_6B, "qwen3-tiny": TINY}


def model_path(cache: Path, shape: str, pooling: int | None = None) -> Path:
    kind = "" if pooling is None else f"-embed-pooling{pooling}"
    return cache / "models" / f"{shape}-random-qwen-vocab{kind}-q4_k_m.gguf"


def ensure_model(
    cache: Path, vocab_gguf: Path, shape: str = "qwen3-0.6b", n_threads: int = 2, pooling: int | None = None
) -> Path:
    """The Q4_K_M model for ``shape``; written (F16, then quantized) only when missing.

    ``vocab_gguf`` is llama.cpp's ``models/ggml-vocab-qwen2.gguf`` (Qwen3 shares that tokenizer).
    ``pooling`` (a ``gguf.PoolingType``) makes it an embedding model (Qwen3-Embedding: last token).
    """
    dst = model_path(cache, shape, pooling)
    if dst.exists():
        return dst
    dst.parent.mkdir(parents=True, exist_ok=True)
    f16 = dst.with_suffix(".f16.tmp")
    part = dst.with_suffix(".part")
    try:
        write_qwen3(
            f16,
            shape=SHAPES[shape],
            vocab=vocab_from_gguf(vocab_gguf),
            weight_std=0.02,
            qtype=gguf.GGMLQuantizationType.F16,
            name=f"{shape}-random",
            metadata={"qwen3.pooling_type": pooling} if pooling is not None else None,
        )
        quantize(f16, part, "Q4_K_M", n_threads=n_threads)
        part.rename(dst)
    finally:
        f16.unlink(missing_ok=True)
        part.unlink(missing_ok=True)
    return dst
