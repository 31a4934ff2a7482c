"""Writes the benchmark models: random-weight qwen3 GGUFs with Qwen's real tokenizer, in Q4_K_M,
and for the vision workload a random-weight gemma3 of that size with a bench-size projector.

The real vocabulary matters: with the synthetic one, a random model picks padding tokens that
render as no text at all, and a streaming client would never see a first token.
"""

from __future__ import annotations

from pathlib import Path

import gguf

from cllm_ollama.engine.binding import quantize
from cllm_ollama.testing.ggufs import (
    QWEN3_0_6B,
    TINY,
    Shape,
    VisionShape,
    vocab_from_gguf,
    write_gemma3,
    write_gemma3_projector,
    write_qwen3,
)

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


# The vision workload's projector: a ViT-B/14 (width 768, 12 heads, MLP 3072) over 448 px images,
# 1024 patches pooled 2x2 into 256 image tokens (what Gemma 3 gives an image), BENCH_VIT_BLOCKS
# deep, so that one encode takes about a second on a 2-core CPU. Gemma 3's own tower
# (SigLIP-so400m: 27 blocks of width 1152 over 896 px) costs ~30x more; the tiny test projectors
# (~10 ms) would make an image nearly free and hide what re-encoding costs.
BENCH_VIT_BLOCKS = 6  # 4 blocks: ~0.63 s per encode measured here (2 shared cores, noisy)
BENCH_VIT = VisionShape(
    image_size=448, patch_size=14, n_embd=768, n_head=12, n_ff=3072, merge=2, n_layer=BENCH_VIT_BLOCKS
)


def ensure_vision_model(cache: Path, vocab_gguf: Path, n_threads: int = 2) -> tuple[Path, Path]:
    """A random-weight gemma3 of qwen3-0.6b's size (Qwen's real tokenizer, Q4_K_M, Gemma 3's 5 local :
    1 global layers over a 512-token window) and its ``BENCH_VIT`` projector (F32); written when missing."""
    folder = cache / "models" / f"gemma3-0.6b-vision-vit{BENCH_VIT_BLOCKS}"
    text, mmproj = folder / "text-q4_k_m.gguf", folder / "mmproj.gguf"
    folder.mkdir(parents=True, exist_ok=True)
    if not text.exists():
        f16, part = text.with_suffix(".f16.tmp"), text.with_suffix(".part")
        try:
            write_gemma3(
                f16,
                shape=QWEN3_0_6B,
                sliding_window=512,
                swa_pattern=6,
                vocab=vocab_from_gguf(vocab_gguf),
                weight_std=0.02,
                qtype=gguf.GGMLQuantizationType.F16,
                name="gemma3-0.6b-random",
            )
            quantize(f16, part, "Q4_K_M", n_threads=n_threads)
            part.rename(text)
        finally:
            f16.unlink(missing_ok=True)
            part.unlink(missing_ok=True)
    if not mmproj.exists():
        part = mmproj.with_suffix(".part")
        write_gemma3_projector(part, n_embd_text=QWEN3_0_6B.n_embd, shape=BENCH_VIT)
        part.rename(mmproj)
    return text, mmproj
