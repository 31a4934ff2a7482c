"""Checkpoints and LoRA adapters converted by ``cllm create`` (``convert/hf``) compute what
transformers and PEFT, the reference implementations, compute from the same files: llama.cpp's
logits for every position of a prompt, on the converted model and with each converted adapter,
are theirs to F16's precision. The twin tests (test_checkpoint_import.py, test_lora_import.py)
check the converter against cllm's own export; this checks both against Hugging Face's meaning.

Needs compat/hf_oracle.sh's venv (torch, transformers, PEFT: ``.ci/run`` installs it); skipped,
saying why, without it.
"""

from __future__ import annotations

import io
import json
import shutil
import wave
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import pytest
from harness import transformers_oracle as reference

from cllm_ollama.convert.hf import Checkpoint, Converted, convert, convert_lora
from cllm_ollama.convert.hf.lora import TOWER_LEFT_OUT
from cllm_ollama.engine.binding import Batch, Context, Lora, Model, with_adapters
from cllm_ollama.engine.binding.media import MediaItem, Projector, TextRun
from cllm_ollama.store.gguf_info import gguf_info
from cllm_ollama.testing import hf_folders as hf
from cllm_ollama.testing.audio import wav
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
    "qwen2vl": lambda folder: hf.write_hf_qwen2vl_vision(folder)[:2],  # on text alone
    "qwen2.5vl": lambda folder: hf.write_hf_qwen25vl_vision(folder)[:2],
    "qwen3vl": lambda folder: hf.write_hf_qwen3vl_vision(folder)[:2],
    "qwen3vlmoe": lambda folder: hf.write_hf_qwen3vl_vision(folder, moe=True)[:2],
    "qwen35": hf.write_hf_qwen35,
    "qwen35moe": hf.write_hf_qwen35moe,
    "gptoss": lambda folder: _every_expert(hf.write_hf_gptoss(folder)),  # MXFP4 experts, as released
    "gptoss-16bit": lambda folder: hf.write_hf_gptoss(folder, dequantized=True),  # as a fine-tune saves them
    "lfm2": hf.write_hf_lfm2,
    "olmo3": hf.write_hf_olmo3,
    "ministral3": hf.write_hf_ministral3,
    "command-r": hf.write_hf_command_r,
    "gemma": hf.write_hf_gemma,
    "lfm2moe": hf.write_hf_lfm2moe,
    "qwen3next": hf.write_hf_qwen3next,
    "gemma4": hf.write_hf_gemma4,  # E2B's parts: per-layer embeddings, shared KV, keys as values
    "gemma4-moe": lambda folder: hf.write_hf_gemma4(folder, moe=True),  # 26B-A4B's mixture
    "gemma4-vision": lambda folder: hf.write_hf_gemma4_vision(folder)[:2],  # on text alone
    "glm4": hf.write_hf_glm4,  # Q, K and V biases, half of each head rotating in pairs, four norms, gate and up fused
    "glmocr": lambda folder: hf.write_hf_glmocr(folder)[:2],  # on text alone: M-RoPE, its Q and K rows to halves
    "glm4v": lambda folder: hf.write_hf_glm4v(folder)[:2],  # the same over half of each head, with biases
    "gemma3n": hf.write_hf_gemma3n,  # AltUp, LAuReL, per-layer embeddings, KV reused, sparse FFN gates
    "glm4-moe-lite": hf.write_hf_deepseek2,  # latent attention, sigmoid-routed experts
    "deepseek-v3": lambda folder: hf.write_hf_deepseek2(folder, glm=False),  # experts in groups, YaRN
    "deepseek-v2": lambda folder: hf.write_hf_deepseek2(folder, v2=True),  # one Q projection, a softmax router
    "laguna": hf.write_hf_laguna,  # per-layer heads, sliding layers, a gated attention output, a mixture
    "nemotron-h": hf.write_hf_nemotron_h,  # Mamba-2, attention and ReLU² MLP layers
    "nemotron-h-moe": lambda folder: hf.write_hf_nemotron_h(folder, shape="nano3", transformers_5=True),
    "nemotron-h-super": lambda folder: hf.write_hf_nemotron_h(folder, shape="super"),  # latent experts
    # Q and K rotated in pairs as stored, then normed; every 4th layer unrotated; a sigmoid router's
    # expert (its input scaled) beside a shared one, every other layer; the tower beside, on text alone
    # (10 positions: its chunks of 8192 and its queries tempered from 8192 on are not reached).
    "llama4": lambda folder: hf.write_hf_llama4(folder)[:2],
    "llama4-text": hf.write_hf_llama4_text,  # its text model alone (Llama4ForCausalLM)
    # ... its rotation scaled as Scout's is (Llama 3's factors, low and high frequency factors equal),
    # from a trained context of 16 so that the tiny model's few positions tell the factors apart.
    "llama4-scout-rope": lambda folder: _scout_rope(hf.write_hf_llama4(folder)[:2]),
}


# llama.cpp multiplies MXFP4 weights by activations rounded to 8 bits (Q8_0): gpt-oss's logits move
# ~1.5% more than from F16 weights (the rank-stabilized adapter's worst position: 4.6%, against
# 3.5% from the same experts in F16).
_TOLERANCES = {"gptoss": 0.06}


def _every_expert(written: tuple[Path, Path]) -> tuple[Path, Path]:
    """The checkpoint with every expert used by every token: activations rounded to 8 bits can flip
    a router's near-tie (7% at one position of the tiny model); the 16-bit checkpoint holds the routing."""
    config = json.loads((written[0] / "config.json").read_text())
    config["num_experts_per_tok"] = config["experts_per_token"] = config["num_local_experts"]
    (written[0] / "config.json").write_text(json.dumps(config))
    return written


def _scout_rope(written: tuple[Path, Path]) -> tuple[Path, Path]:
    """The Llama 4 with the rotary scaling Llama 4 Scout's config.json states, its trained context 16
    (Scout's 8192 scales only frequencies the tiny model's 10 positions hardly turn)."""
    config = json.loads((written[0] / "config.json").read_text())
    config["text_config"]["rope_scaling"] = {
        "rope_type": "llama3",
        "factor": 16.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 1.0,
        "original_max_position_embeddings": 16,
    }
    (written[0] / "config.json").write_text(json.dumps(config))
    return written


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Each family's folder, and where transformers' logits and PEFT's adapters for it lie."""
    root = tmp_path_factory.mktemp("oracle")
    folders = {name: write(root / name)[0] for name, write in FAMILIES.items()}
    reference.run(",".join(map(str, TOKENS)), *[str(p) for n, f in folders.items() for p in (f, root / n / "oracle")])
    return {name: (folder, root / name / "oracle") for name, folder in folders.items()}


def _logits(model_path: Path, adapter: Path | None, tokens: list[int] = TOKENS) -> np.ndarray:
    """llama.cpp's logits for every position of ``tokens``, with ``adapter`` set on the context."""
    model = Model(model_path, n_gpu_layers=0)
    lora = Lora(model, adapter) if adapter is not None else None
    context = with_adapters(
        Context(model, n_seq_max=1, n_ctx_seq=64, n_batch=32, n_threads=2, outputs_per_seq=len(tokens)),
        [lora] if lora is not None else [],
    )
    try:
        batch = Batch(32)
        batch.fill(tokens, range(len(tokens)), [0] * len(tokens), list(range(len(tokens))))
        context.decode(batch)
        return np.array(context.logits(len(tokens)))
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
    tolerance = _TOLERANCES.get(family, reference.TOLERANCE)
    reference.assert_close(_logits(model, None), np.load(answers / "base.npy"), family, tolerance)
    base = gguf_info(model, verbose=True)
    for scaling in SCALINGS:
        adapter = tmp_path / f"{scaling}.gguf"
        notes = convert_lora(Checkpoint.folder(answers / f"adapter-{scaling}"), base, adapter)
        # PEFT's targets also name Qwen2.5-VL's tower's FFN: its pairs there are left out, and said so.
        assert notes == ([TOWER_LEFT_OUT] if family == "qwen2.5vl" else []), family
        got = _logits(model, adapter)
        reference.assert_close(got, np.load(answers / f"lora-{scaling}.npy"), f"{family}+{scaling}", tolerance)


def test_gemma3n_ids_past_its_per_layer_table_read_its_first_row_as_transformers_does(tmp_path: Path) -> None:
    """Gemma 3n's per-layer embeddings have fewer rows than its vocabulary (``vocab_size_per_layer_input``):
    transformers reads an id past them as id 0's row, and the converted model, whose table is
    padded with that row, computes the same for a prompt of such ids (llama.cpp's converter pads
    zeros, which would not)."""
    folder, _ = hf.write_hf_gemma3n(tmp_path)
    own = json.loads((folder / "config.json").read_text())["vocab_size_per_layer_input"]
    tokens = [11, own, 40, own + 2, 97, own + 3, 150, own + 1]
    reference.run(",".join(map(str, tokens)), str(folder), str(tmp_path / "oracle"))
    convert(Checkpoint.folder(folder), tmp_path / "model.gguf")
    want = np.load(tmp_path / "oracle" / "base.npy")
    reference.assert_close(_logits(tmp_path / "model.gguf", None, tokens), want, "gemma3n past its per-layer rows")


# The byte-level BPE pre-tokenizers the converter names (Qwen 2's, Llama 3's, GPT-4o's, Cohere's
# digits one by one), each a tiny folder: numbers, contractions, capitals, spaces and newlines.
_SPLITTERS = {
    "qwen2": hf.write_hf_qwen3,
    "llama-bpe": hf.write_hf_lfm2,  # (its tiny twin names it "lfm2", which llama.cpp runs as Llama 3's)
    "gpt-4o": hf.write_hf_gptoss,
    "command-r": hf.write_hf_command_r,
    "deepseek-v3": lambda folder: hf.write_hf_deepseek2(folder, glm=False),
    "glm4": hf.write_hf_deepseek2,  # Llama 3's split, run by llama.cpp without a bos
    "chatglm-bpe": lambda folder: hf.write_hf_glmocr(folder)[:2],  # GLM-OCR's: the same, with merges
    "pixtral": hf.write_hf_nemotron_h,  # Llama 3's split, as llama.cpp's converter names Nemotron-H's
}
_TEXTS = [
    "In 2024, 12345 apples cost $3.50.",
    "It's THE capital's  sea\n\n  of Rome, abcXyz",
    "def add(a, b):\n    return a+b",
]
# Merges that only some splits allow: across digits (Llama 3's and GPT-4o's groups of three, GPT-2's
# runs, not Qwen's or Cohere's single digits) and across a capital (not GPT-4o's words by case).
_BOUNDARY_MERGES = [("2", "0"), ("2", "4"), ("20", "24"), ("1", "2"), ("12", "3"), ("c", "X")]


def _with_merges(folder: Path, merges: list[tuple[str, str]]) -> None:
    """The folder's tokenizer.json with ``merges`` learned last, in place of its last ones (their
    ids reused, so the embedding still has a row for every token)."""
    path = folder / "tokenizer.json"
    spec = json.loads(path.read_text())
    model = spec["model"]
    dropped = model["merges"][-len(merges) :]
    for (a, b), (x, y) in zip(merges, dropped, strict=True):
        model["vocab"][a + b] = model["vocab"].pop(x + y)
    model["merges"] = model["merges"][: -len(merges)] + [list(m) for m in merges]
    path.write_text(json.dumps(spec))


@pytest.mark.parametrize("pre", list(_SPLITTERS))
def test_the_converted_vocabulary_splits_text_as_tokenizers_does(tmp_path: Path, pre: str) -> None:
    """llama.cpp splits text with the converted vocabulary as the tokenizers library splits it with
    the folder's tokenizer.json: the pre-tokenizer is named right (Cohere's, which has no pattern
    to name it by, keeps digits apart), and the merges are the folder's. The folder learns merges
    across the boundaries the splits disagree on, so that a wrong name splits otherwise."""
    folder, _ = _SPLITTERS[pre](tmp_path)
    _with_merges(folder, _BOUNDARY_MERGES)
    converted = _assert_splits_as_tokenizers(folder, _TEXTS, tmp_path)
    assert gguf.GGUFReader(converted).fields["tokenizer.ggml.pre"].contents() == pre


def test_a_gemma4_vocabulary_splits_text_as_tokenizers_does(tmp_path: Path) -> None:
    """Gemma 4's tokenizer.json (BPE over text whose spaces are ``▁``, no split but at newlines,
    ``<0xXX>`` tokens for characters it lacks), converted as llama.cpp's ``gemma4`` vocabulary,
    splits text as the tokenizers library splits it: merges across words, runs of spaces and
    newlines, and bytes to fall back on."""
    folder, _ = hf.write_hf_gemma4(tmp_path)
    texts = [*_TEXTS, "The capital of France is Paris,  the sea\n\nis blue.", " Größe 日本語 🙂"]
    _assert_splits_as_tokenizers(folder, texts, tmp_path)


@pytest.mark.parametrize("space_prefix", [True, False], ids=["llama2", "gemma"])
def test_a_sentencepiece_vocabulary_transformers_5_saves_alone_splits_as_sentencepiece(
    tmp_path: Path, space_prefix: bool
) -> None:
    """A fine-tune of Llama 2, Mistral 7B or Gemma saved by transformers 5 has tokenizer.json
    alone, no tokenizer.model: converted from it, the vocabulary has the pieces and types the
    tokenizer.model gives, and llama.cpp splits text as the sentencepiece package splits it with
    the tokenizer.model transformers read (with Llama 2's leading space, and without, as Gemma's)."""
    import sentencepiece

    proto = hf.train_sentencepiece(space_prefix=space_prefix)
    twin = hf.write_sentencepiece_llama(tmp_path / "twin.gguf", proto)
    folder = hf.export(twin, tmp_path / "hf", sentencepiece=proto)
    reference.run("resave", str(folder), str(tmp_path / "saved"))
    (folder / "tokenizer.model").unlink()
    for saved in (tmp_path / "saved").iterdir():  # tokenizer.json, its settings, the chat template apart
        shutil.copy(saved, folder / saved.name)
    convert(Checkpoint.folder(folder), tmp_path / "model.gguf")
    got, want = gguf.GGUFReader(tmp_path / "model.gguf").fields, gguf.GGUFReader(twin).fields
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.chat_template"):
        assert got[key].contents() == want[key].contents(), key
    assert got["tokenizer.ggml.add_space_prefix"].contents() is space_prefix
    pieces = sentencepiece.SentencePieceProcessor(model_proto=proto)
    texts = [*_TEXTS, "The capital of France is Paris,  the sea\n\nis blue.", " Größe 日本語 🙂 x", "zzqq wørds"]
    model = Model(tmp_path / "model.gguf", n_gpu_layers=0)
    try:
        for text in texts:
            assert model.tokenize(text, add_special=False, parse_special=False) == pieces.encode(text), text
    finally:
        model.close()


def _assert_splits_as_tokenizers(folder: Path, texts: list[str], tmp_path: Path) -> Path:
    """``folder`` converted, its vocabulary splits ``texts`` in llama.cpp as the tokenizers library
    splits them with the folder's tokenizer.json (no special tokens); the converted GGUF."""
    reference.run("tokenize", str(folder), json.dumps(texts), str(tmp_path / "want.json"))
    convert(Checkpoint.folder(folder), tmp_path / "model.gguf")
    model = Model(tmp_path / "model.gguf", n_gpu_layers=0)
    try:
        got = [model.tokenize(text, add_special=False, parse_special=False) for text in texts]
    finally:
        model.close()
    assert got == json.loads((tmp_path / "want.json").read_text())
    return tmp_path / "model.gguf"


# A model that sees, and the picture's side in pixels: Gemma 3's tower's own, else 4x4 tokens
# (libmtmd keeps such a picture as it is: at least 8 tokens, within the tower's size).
_SEEING: dict[str, tuple[Callable[[Path], tuple[Path, Path, Path]], int]] = {
    "gemma3": (hf.write_hf_gemma3_vision, 32),
    "mistral3": (lambda folder: hf.write_hf_mistral3_vision(folder, image_size=64), 64),
    "qwen2vl": (hf.write_hf_qwen2vl_vision, 64),
    "qwen2.5vl": (hf.write_hf_qwen25vl_vision, 64),
    "qwen3vl": (hf.write_hf_qwen3vl_vision, 64),
    "qwen35": (hf.write_hf_qwen35_vision, 64),
    # Gemma 4's picture libmtmd keeps as it is: 27x27 patches pooled 3x3 into 81 tokens, within its
    # 70 to 1120 and a whole number of pooled patches a side.
    "gemma4": (hf.write_hf_gemma4_vision, 216),
    # LFM2-VL's at libmtmd's fewest tokens, 64 (16x16 patches unshuffled 2x2): its 8x8 position
    # table resized to the picture, by libmtmd and by transformers.
    "lfm2": (hf.write_hf_lfm2_vision, 128),
    "lfm2.5": (lambda folder: hf.write_hf_lfm2_vision(folder, layernorm=False), 128),  # no layer norm
    # GLM-OCR's at 4x4 tokens (16x16 patches merged 2x2), within libmtmd's glm4v's 8 to 4096.
    "glmocr": (hf.write_hf_glmocr, 64),
    # GLM-4.1V's at its position table's own size, which libmtmd and transformers then read as it is.
    "glm4v": (hf.write_hf_glm4v, 64),
    # Llama 4's at its tower's own size: one tile, which libmtmd reads without an overview (its
    # tokens put back row by row: ``tile_order``).
    "llama4": (hf.write_hf_llama4, 32),
    # Nemotron Omni's RADIO with its position table at the picture's own grid: to another grid,
    # transformers resizes it with corners not aligned, where llama.cpp's converter and Ollama's
    # shim align them, as RADIO's first code did (``test_layouts_omni.py`` holds that resize).
    "nemotron-omni": (lambda folder: hf.write_hf_nemotron_omni(folder, grid=4), 32),
    # ... with the LayerNorm Megatron adds after RADIO where the text model has an MTP layer.
    "nemotron-omni-norm": (lambda folder: hf.write_hf_nemotron_omni(folder, grid=4, final_norm=True), 32),
}


# A larger picture for the tower alone: Qwen2.5-VL's at 8x8 tokens, four of libmtmd's windows of 7x7 at most.
_TOWER_SIDES = {"qwen2.5vl": 128}


@pytest.mark.parametrize("family", list(_SEEING))
def test_a_converted_tower_sees_a_picture_as_transformers_does(tmp_path: Path, family: str) -> None:
    """The projector layer made of a tower (``convert/hf/vision.py``) turns a picture into the
    embeddings transformers makes of it, where libmtmd's preprocessing and transformers' agree: a
    picture of the tower's own size (Gemma 3's 32 pixels), or within it and of 8 tokens or more
    (Pixtral's, 64 of at most 64; the Qwens'). Pixtral's rows of [IMG_BREAK], which libmtmd adds
    between rows of tokens and transformers does not, are left out of the comparison. Llama 4's
    tokens, which libmtmd leaves column by column, are compared as cllm puts them back (``tile_order``)."""
    write, side = _SEEING[family]
    side = _TOWER_SIDES.get(family, side)
    folder, _, _ = write(tmp_path)
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
    got = _encoded(tmp_path, png(side, side, seed))
    got = np.array([row for row in got if not any(np.array_equal(row, b) for b in breaks)])
    reference.assert_close(got, np.load(tmp_path / "want.npy"), f"{family} tower")


@pytest.mark.parametrize("family", list(_SEEING))
def test_a_converted_model_reads_a_picture_in_a_prompt_as_transformers_does(tmp_path: Path, family: str) -> None:
    """A prompt with a picture in it, as cllm's engine decodes it into a converted model that sees:
    the text before it, the picture's embeddings where ``MediaPrompt`` puts them (Qwen's M-RoPE
    rows and columns, the text after it as far on as the picture's longer side; Gemma 3's attending
    to each other both ways; Pixtral's rows each ended by [IMG_BREAK]'s embedding), then the text
    after it, whose every logit is transformers' for the same tokens and picture."""
    write, side = _SEEING[family]
    folder, _, _ = write(tmp_path)
    seed = 5
    np.save(tmp_path / "pixels.npy", np.random.default_rng(seed).integers(0, 256, (side, side, 3), dtype=np.uint8))
    convert(Checkpoint.folder(folder), tmp_path / "text.gguf", tmp_path / "mmproj.gguf")
    model = Model(tmp_path / "text.gguf", n_gpu_layers=0)
    projector = Projector(model, tmp_path / "mmproj.gguf", n_threads=2)
    try:
        prompt = projector.tokenize(
            f"The capital{projector.marker} is Paris.", [png(side, side, seed)], add_special=False
        )
        before, item, after = prompt.parts
        assert isinstance(before, TextRun) and isinstance(item, MediaItem) and isinstance(after, TextRun)
        context = Context(model, n_seq_max=1, n_ctx_seq=256, n_batch=128, n_threads=2, outputs_per_seq=len(after))
        batch = Batch(128)
        batch.fill(list(before), range(len(before)), [0] * len(before), [])
        context.decode(batch)
        pos = prompt.decode(context, item, prompt.encode(item), len(before), 0)
        if family.startswith("qwen"):
            assert pos == len(before) + side // 16  # the picture's longer side, in tokens
        batch.fill(list(after), range(pos, pos + len(after)), [0] * len(after), range(len(after)))
        context.decode(batch)
        got = np.array(context.logits(len(after)))
        context.close()
        prompt.close()
    finally:
        projector.close()
        model.close()
    tokens = gguf.GGUFReader(tmp_path / "text.gguf").fields["tokenizer.ggml.tokens"].contents()
    spec = {"ids": [*before, *_picture_ids(family, item.n_tokens, tokens), *after]}
    spec["config"] = _picture_config(family, tokens, before[-1])
    reference.run("prompt", str(folder), json.dumps(spec), str(tmp_path / "pixels.npy"), str(tmp_path / "want.npy"))
    # Gemma 3's picture attended to causally, not both ways, moved the logits 2.6% (F16's error: 0.13%).
    tolerance = 0.01 if family == "gemma3" else reference.TOLERANCE
    reference.assert_close(got, np.load(tmp_path / "want.npy")[-len(after) :], f"{family} prompt", tolerance)


def test_a_nemotron_omni_as_transformers_saves_it_converts_to_the_same_projector(tmp_path: Path) -> None:
    """Nemotron Omni as transformers 5 saves it (its own class's name, ``text_config`` and
    ``audio_config`` with transformers' ``parakeet_encoder``, the release's tensor names restored,
    RADIO's LayerScale ones, its video embedder and summary indices beside, the pixel statistics in
    ``vision_config`` alone) converts to the projector its release does: every tensor of it, of its
    type and values, and its keys; beside them only the convolution biases transformers' Parakeet
    adds (clip.cpp reads them, its graph adds none). transformers saves no mel filterbank or window:
    the converter computes them as the release keeps them (its twin's are the release's kind)."""
    folder, _, mmproj = hf.write_hf_nemotron_omni(tmp_path)
    saved = tmp_path / "saved"
    reference.run("resave-omni", str(folder), str(saved))
    for name in ("tokenizer.json", "tokenizer_config.json"):  # a model's save_pretrained writes none
        shutil.copy(folder / name, saved / name)
    assert not [name for name in hf.read_safetensors(saved / "model.safetensors") if ".featurizer." in name]
    config = json.loads((saved / "config.json").read_text())
    assert config["architectures"] == ["NemotronH_Omni_Reasoning_V3"] and "audio_config" in config
    converted = convert(Checkpoint.folder(saved), tmp_path / "out.gguf", tmp_path / "proj.gguf")
    assert converted == Converted([], sees=True), converted
    want, got = (gguf.GGUFReader(p) for p in (mmproj, tmp_path / "proj.gguf"))
    wanted = {t.name: t for t in want.tensors}
    made = {t.name: t for t in got.tensors}
    assert set(made) - set(wanted) == {"a.blk.0.conv_dw.bias", "a.blk.0.conv_pw2.bias"}
    for name, t in wanted.items():
        assert made[name].tensor_type == t.tensor_type and np.array_equal(made[name].data, t.data), name
    keys = [k for k in want.fields if k.startswith("clip.")]
    assert {k: got.fields[k].contents() for k in keys} == {k: want.fields[k].contents() for k in keys}


def _picture_ids(family: str, n_tokens: int, tokens: list[str]) -> list[int]:
    """The ids transformers reads for a picture of ``n_tokens`` of libmtmd's (``tokens``: the
    vocabulary): the picture's own token for each embedding; Pixtral's square of rows, each but the
    last ended by [IMG_BREAK]."""
    picture = _picture_token(family, tokens)
    if family != "mistral3":
        return [picture] * n_tokens
    side = round(((4 * n_tokens + 5) ** 0.5 - 1) / 2)  # side * side embeddings and side - 1 breaks
    assert side * side + side - 1 == n_tokens, n_tokens
    rows = [[picture] * side for _ in range(side)]
    return [i for row in rows[:-1] for i in (*row, tokens.index("[IMG_BREAK]"))] + rows[-1]


def _picture_config(family: str, tokens: list[str], start: int) -> dict[str, int]:
    config = {"image_token_id": _picture_token(family, tokens)}
    if family.startswith("qwen"):
        config["vision_start_token_id"] = start  # what stands before the picture's tokens
    return config


def _picture_token(family: str, tokens: list[str]) -> int:
    """Pixtral's [IMG], Gemma 4's <mask>; for the others a padding token's id, in neither text."""
    return (
        tokens.index("[IMG]")
        if family == "mistral3"
        else tokens.index("<mask>")
        if family == "gemma4"
        else len(tokens) - 1
    )


def test_a_converted_gemma4_hears_a_clip_as_transformers_does(tmp_path: Path) -> None:
    """Gemma 4's Conformer, converted to the projector's ``gemma4a`` side, turns a clip into the
    embeddings transformers makes of it: libmtmd's log-mel features against
    Gemma4AudioFeatureExtractor's, then the subsampler, the chunked attention with relative
    positions (its per-dimension scale after the converter's softplus), the depthwise
    convolution, the clamps and the projection into the text model."""
    folder, _, _ = hf.write_hf_gemma4_vision(tmp_path)
    clip = _clip_heard(folder, tmp_path)
    convert(Checkpoint.folder(folder), tmp_path / "text.gguf", tmp_path / "mmproj.gguf")
    reference.assert_close(_encoded(tmp_path, clip), np.load(tmp_path / "want.npy"), "gemma4 audio")


def test_a_converted_nemotron_omni_hears_a_clip_as_transformers_does(tmp_path: Path) -> None:
    """Nemotron Omni's Parakeet, converted to the projector's ``parakeet`` side, turns a clip into
    the embeddings transformers makes of it: libmtmd's log-mel features (by the release's mel
    filterbank and window, which are ParakeetFeatureExtractor's own) against that extractor's, then the
    three stride-2 convolutions, the Conformer block's relative-position attention, depthwise
    convolution and batch norm, and the RMS-normed ReLU² MLP into the text model. Where libmtmd
    computes otherwise than transformers, the reference is made to compute as libmtmd does
    (``hf_logits.parakeet_audio``): the STFT's last frame kept, no convolution bias added."""
    folder, _, _ = hf.write_hf_nemotron_omni(tmp_path)
    clip = _clip_heard(folder, tmp_path)
    tensors = hf.read_safetensors(folder / "model.safetensors")
    featurizer = "sound_encoder.encoder.feature_extractor.featurizer."  # the twin's: the release's kind
    assert np.array_equal(tensors[featurizer + "fb"][1], np.load(tmp_path / "want-fb.npy"))
    assert np.allclose(tensors[featurizer + "window"][1], np.load(tmp_path / "want-window.npy"), atol=1e-6)
    convert(Checkpoint.folder(folder), tmp_path / "text.gguf", tmp_path / "mmproj.gguf")
    reference.assert_close(_encoded(tmp_path, clip), np.load(tmp_path / "want.npy"), "nemotron-omni audio")


def _clip_heard(folder: Path, tmp_path: Path) -> bytes:
    """A second's clip, and transformers' embeddings of it by the model in ``folder`` (``tmp_path/want.npy``)."""
    clip = wav(1.0, seed=3)
    with wave.open(io.BytesIO(clip)) as w:
        samples = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768
    np.save(tmp_path / "samples.npy", samples)
    reference.run("audio", str(folder), str(tmp_path / "samples.npy"), str(tmp_path / "want.npy"))
    return clip


def _encoded(folder: Path, medium: bytes) -> np.ndarray:
    """The embeddings libmtmd makes of one picture or clip with the converted ``folder/text.gguf``
    and its projector ``folder/mmproj.gguf``."""
    model = Model(folder / "text.gguf", n_gpu_layers=0)
    projector = Projector(model, folder / "mmproj.gguf", n_threads=2)
    try:
        prompt = projector.tokenize(projector.marker, [medium])
        (item,) = [p for p in prompt.parts if isinstance(p, MediaItem)]
        got = np.asarray(prompt.encode(item))
        prompt.close()
        return got
    finally:
        projector.close()
        model.close()


def test_a_converted_sentence_transformers_model_embeds_as_transformers_does(tmp_path: Path) -> None:
    """A BERT embedding model's folder, created on a live server as ``ollama create`` sends it: the
    server splits each text as its WordPiece tokenizer does ([CLS] and [SEP] aside) and embeds it as
    transformers does with the folder's mean pooling."""
    folder, _ = hf.write_hf_bert(tmp_path)
    reference.assert_embeds_as_transformers(
        folder, tmp_path, ["the capital of france is paris.", "def add(a, b): return a + b"]
    )


def test_a_converted_nomic_bert_embeds_as_transformers_does(tmp_path: Path) -> None:
    """nomic-embed-text's kind of folder (its own code's names), created on a live server: its
    vectors are transformers' native ``nomic_bert``'s (rotary positions, fused Q/K/V, SwiGLU)."""
    folder, _ = hf.write_hf_bert(tmp_path, nomic=True)
    reference.assert_embeds_as_transformers(
        folder, tmp_path, ["the capital of france is paris.", "def add(a, b): return a + b"]
    )


def test_a_converted_embeddinggemma_embeds_as_transformers_does(tmp_path: Path) -> None:
    """EmbeddingGemma's folder as sentence-transformers saves it, created on a live server: its
    layers attend both ways within a window that reaches as far each side (the text is longer than
    it), its two Dense projections follow the mean pooling, and the vector is transformers'."""
    folder, _ = hf.write_hf_embeddinggemma(tmp_path)
    texts = ["The capital of France is Paris, and the capital of Italy is Rome.", "def add(a, b): return a + b"]
    reference.assert_embeds_as_transformers(folder, tmp_path, texts)
