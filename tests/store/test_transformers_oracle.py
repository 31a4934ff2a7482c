"""Checkpoints and LoRA adapters converted by ``cllm create`` (``convert/hf``) compute what
transformers and PEFT, the reference implementations, compute from the same files: llama.cpp's
logits for every position of a prompt, on the converted model and with each converted adapter,
are theirs to F16's precision. The twin tests (test_checkpoint_import.py, test_lora_import.py)
check the converter against cllm's own export; this checks both against Hugging Face's meaning.

Needs compat/hf_oracle.sh's venv (torch, transformers, PEFT: ``.ci/run`` installs it); skipped,
saying why, without it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import pytest
from harness import transformers_oracle as reference

from cllm_ollama.convert.hf import Checkpoint, convert, convert_lora
from cllm_ollama.engine.binding import Batch, Context, Lora, Model, with_adapters
from cllm_ollama.engine.binding.media import MediaItem, Projector
from cllm_ollama.store.gguf_info import gguf_info
from cllm_ollama.testing import hf_folders as hf
from cllm_ollama.testing.images import png

pytestmark = pytest.mark.model
TOKENS = [11, 40, 97, 150, 201, 33, 64, 120, 7, 88]
SCALINGS = ("plain", "rslora", "pattern")
FAMILIES: dict[str, Callable[[Path], tuple[Path, Path]]] = {
    "llama": hf.write_hf_llama,
    "mistral": hf.write_hf_mistral,
    "qwen3": hf.write_hf_qwen3,
    "qwen3moe": hf.write_hf_qwen3moe,
    "mixtral": hf.write_hf_mixtral,
    "gemma2": hf.write_hf_gemma2,
    "gemma3": hf.write_hf_gemma3,
    "phi3": hf.write_hf_phi3,
    "phi3-longrope": lambda folder: hf.write_hf_phi3(folder, longrope=True),
}


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Each family's folder, and where transformers' logits and PEFT's adapters for it lie."""
    root = tmp_path_factory.mktemp("oracle")
    folders = {name: write(root / name)[0] for name, write in FAMILIES.items()}
    reference.run(",".join(map(str, TOKENS)), *[str(p) for n, f in folders.items() for p in (f, root / n / "oracle")])
    return {name: (folder, root / name / "oracle") for name, folder in folders.items()}


def _logits(model_path: Path, adapter: Path | None) -> np.ndarray:
    """llama.cpp's logits for every position of TOKENS, with ``adapter`` set on the context."""
    model = Model(model_path, n_gpu_layers=0)
    lora = Lora(model, adapter) if adapter is not None else None
    context = with_adapters(
        Context(model, n_seq_max=1, n_ctx_seq=64, n_batch=32, n_threads=2, outputs_per_seq=len(TOKENS)),
        [lora] if lora is not None else [],
    )
    try:
        batch = Batch(32)
        batch.fill(TOKENS, range(len(TOKENS)), [0] * len(TOKENS), list(range(len(TOKENS))))
        context.decode(batch)
        return np.array(context.logits(len(TOKENS)))
    finally:
        context.close()
        if lora is not None:
            lora.close()
        model.close()


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_converted_model_and_adapters_compute_what_transformers_and_peft_do(
    oracle: dict[str, tuple[Path, Path]], family: str, tmp_path: Path
) -> None:
    folder, answers = oracle[family]
    model = tmp_path / "model.gguf"
    convert(Checkpoint.folder(folder), model)
    reference.assert_close(_logits(model, None), np.load(answers / "base.npy"), family)
    base = gguf_info(model, verbose=True)
    for scaling in SCALINGS:
        adapter = tmp_path / f"{scaling}.gguf"
        convert_lora(Checkpoint.folder(answers / f"adapter-{scaling}"), base, adapter)
        reference.assert_close(_logits(model, adapter), np.load(answers / f"lora-{scaling}.npy"), f"{family}+{scaling}")


@pytest.mark.parametrize("family", ["gemma3", "mistral3"])
def test_a_converted_tower_sees_a_picture_as_transformers_does(tmp_path: Path, family: str) -> None:
    """The projector layer made of Gemma 3's SigLIP tower or Mistral 3's Pixtral
    (``convert/hf/vision.py``) turns a picture into the embeddings transformers makes of it, where
    libmtmd's preprocessing and transformers' agree: a picture of the tower's own size (Gemma 3's
    32 pixels), or within it and of 8 tokens or more (Pixtral's, 64 of at most 64). Pixtral's rows
    of [IMG_BREAK], which libmtmd adds between rows of tokens and transformers does not, are left
    out of the comparison."""
    if family == "gemma3":
        folder, _, _ = hf.write_hf_gemma3_vision(tmp_path)
        side = 32
    else:
        folder, _, _ = hf.write_hf_mistral3_vision(tmp_path, image_size=64)
        side = 64
    seed = 3
    pixels = np.random.default_rng(seed).integers(0, 256, (side, side, 3), dtype=np.uint8)  # png(side, side, seed)'s
    np.save(tmp_path / "pixels.npy", pixels)
    reference.run("image", str(folder), str(tmp_path / "pixels.npy"), str(tmp_path / "want.npy"))
    convert(Checkpoint.folder(folder), tmp_path / "text.gguf", tmp_path / "mmproj.gguf")
    breaks = [
        np.asarray(t.data)
        for t in gguf.GGUFReader(tmp_path / "mmproj.gguf").tensors
        if t.name == "v.token_embd.img_break"
    ]
    model = Model(tmp_path / "text.gguf", n_gpu_layers=0)
    projector = Projector(model, tmp_path / "mmproj.gguf", n_threads=2)
    try:
        prompt = projector.tokenize(projector.marker, [png(side, side, seed)])
        (item,) = [p for p in prompt.parts if isinstance(p, MediaItem)]
        got = prompt.encode(item)
        prompt.close()
    finally:
        projector.close()
        model.close()
    got = np.array([row for row in got if not any(np.array_equal(row, b) for b in breaks)])
    reference.assert_close(got, np.load(tmp_path / "want.npy"), f"{family} tower")


def test_a_converted_sentence_transformers_model_embeds_as_transformers_does(tmp_path: Path) -> None:
    """A BERT embedding model's folder, created on a live server as ``ollama create`` sends it: the
    server splits each text as its WordPiece tokenizer does ([CLS] and [SEP] aside) and embeds it as
    transformers does with the folder's mean pooling."""
    folder, _ = hf.write_hf_bert(tmp_path)
    reference.assert_embeds_as_transformers(
        folder, tmp_path, ["the capital of france is paris.", "def add(a, b): return a + b"]
    )
