"""transformers' and PEFT's logits for Hugging Face folders: the oracle of
tests/store/test_transformers_oracle.py, run under compat/hf_oracle.sh's venv (torch, transformers
and PEFT, which never meet cllm's packages), as ``python hf_logits.py TOKENS FOLDER OUT [FOLDER OUT...]``,
or ``python hf_logits.py image FOLDER PIXELS OUT`` for a Gemma 3, Mistral 3 or Qwen-VL that sees: the
embeddings its tower and projector make of the picture ``PIXELS`` (``(side, side, 3)`` bytes, of a
size its processor would keep, normalized by its processor's statistics), in ``OUT``; or
``python hf_logits.py prompt FOLDER SPEC PIXELS OUT`` for a model that sees: the logits of every
position of a prompt with that picture in it (``prompt``); or
``python hf_logits.py embed FOLDER TEXTS OUT`` for a sentence-transformers BERT model: each text of
the JSON list TEXTS as its tokenizer splits it and as the model embeds it (mean pooling,
normalized, as its modules say), in the JSON file OUT; or ``python hf_logits.py tokenize FOLDER
TEXTS OUT``: each text's ids as the folder's tokenizer.json splits it; or ``python hf_logits.py
resave FOLDER OUT``: its tokenizer as transformers saves it (``resave-omni``: a Nemotron Omni's
model); or ``python hf_logits.py
audio FOLDER SAMPLES OUT``: a Gemma 4's embeddings of a clip (``audio``).

For each folder: ``OUT/base.npy``, the logits of every position of TOKENS (comma-separated ids);
then for each scaling PEFT has (``alpha / r``, rank-stabilized, per-module alphas) a LoRA on the
attention (and, but in a mixture, FFN) projections, its B drawn at random (PEFT starts it at zero),
saved as PEFT saves it in ``OUT/adapter-<scaling>/`` with its logits in ``OUT/lora-<scaling>.npy``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import load_file
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    AutoTokenizer,
    Gemma3ForConditionalGeneration,
    Mistral3ForConditionalGeneration,
    PreTrainedTokenizerFast,
)

SCALINGS = {"plain": {}, "rslora": {"use_rslora": True}, "pattern": {"alpha_pattern": {"q_proj": 32, "down_proj": 2}}}
_TARGETS = {
    "Phi3ForCausalLM": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"],
    "MixtralForCausalLM": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "Qwen3MoeForCausalLM": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "GptOssForCausalLM": ["q_proj", "k_proj", "v_proj", "o_proj"],  # its experts are no Linear modules
    "Lfm2ForCausalLM": ["q_proj", "k_proj", "v_proj", "out_proj", "in_proj", "w1", "w2", "w3"],
    # Its dense layer's FFN too, not the experts (transformers keeps them as parameters, not Linears).
    "Lfm2MoeForCausalLM": ["q_proj", "k_proj", "v_proj", "out_proj", "in_proj", "w1", "w2", "w3"],
    # Its attention's and its delta net's fused projections, kept as transformers has them (PEFT
    # reaches its routed experts through any FFN name given; Qwen 3.5's shared expert is held above).
    "Qwen3NextForCausalLM": ["q_proj", "k_proj", "v_proj", "o_proj", "in_proj_qkvz", "in_proj_ba", "out_proj"],
    # Qwen 3.5's delta net too: its value heads' rows (B's) and columns (out_proj's A's) reordered.
    "Qwen3_5MoeForCausalLM": [  # its shared expert's projections too, not the routed experts'
        *("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
        *("in_proj_qkv", "in_proj_z", "in_proj_a", "in_proj_b", "out_proj"),
    ],
    "Qwen3_5ForCausalLM": [
        *("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
        *("in_proj_qkv", "in_proj_z", "in_proj_a", "in_proj_b", "out_proj"),
    ],
    # The text model's alone, as Gemma 4's fine-tuning guides target it: its towers' linears are
    # clipped ones (Gemma4ClippableLinear), which PEFT does not adapt.
    "Gemma4ForConditionalGeneration": r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)",
    # GLM-OCR's text model's (its tower's FFN shares the names), its gate and up fused.
    "GlmOcrForConditionalGeneration": r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_up_proj|down_proj)",
    "Glm4vForConditionalGeneration": r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_up_proj|down_proj)",
    # Llama 4's text model's (its tower's attention shares the names): attention, the dense FFNs and
    # the shared experts (its routed experts are no Linear modules).
    "Llama4ForConditionalGeneration": r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)",
    # Of what llama.cpp's deepseek2 adapts, the attention's output: it multiplies its latent
    # attention's projections without adapters, and PEFT takes any FFN name given for the routed
    # experts (transformers 5's fused ones), not the dense or shared FFN's Linears.
    # Its Mamba-2 layers' in-projection too (PEFT refuses their out_proj); its experts are no
    # Linear modules (a mixture's shared expert is adapted through up_proj and down_proj).
    "NemotronHForCausalLM": ["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "in_proj"],
    "DeepseekV3ForCausalLM": ["o_proj"],
    "DeepseekV2ForCausalLM": ["o_proj"],
    "Glm4MoeLiteForCausalLM": ["o_proj"],
}
_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def main(tokens: str, pairs: list[str]) -> None:
    ids = torch.tensor([[int(t) for t in tokens.split(",")]])
    for folder, out in zip(pairs[::2], pairs[1::2], strict=True):
        folder_path, out_path = Path(folder), Path(out)
        out_path.mkdir(parents=True, exist_ok=True)
        architecture = json.loads((folder_path / "config.json").read_text())["architectures"][0]
        # A model that sees, on text alone (Qwen-VL's M-RoPE positions are then a text model's).
        auto = (
            AutoModelForImageTextToText if architecture.endswith("ForConditionalGeneration") else AutoModelForCausalLM
        )
        torch.manual_seed(0)
        with torch.no_grad():
            model = auto.from_pretrained(folder_path, dtype=torch.float32).eval()
            np.save(out_path / "base.npy", _text_logits(model, ids, architecture))
        for name, scaling in SCALINGS.items():
            model = auto.from_pretrained(folder_path, dtype=torch.float32).eval()
            config = LoraConfig(r=4, lora_alpha=8, target_modules=_TARGETS.get(architecture, _PROJECTIONS), **scaling)
            adapted = get_peft_model(model, config)
            for parameter_name, parameter in adapted.named_parameters():
                if "lora_B" in parameter_name:
                    torch.nn.init.normal_(parameter, std=0.3)
            adapted.save_pretrained(out_path / f"adapter-{name}")
            with torch.no_grad():
                np.save(out_path / f"lora-{name}.npy", _text_logits(adapted, ids, architecture))


def _text_logits(model: Any, ids: torch.Tensor, architecture: str) -> np.ndarray:
    """The logits of every position of ``ids`` alone; Llama 4's from its text model (transformers
    5.24's Llama 4 that sees builds its output from the text model's, which has no image outputs);
    PEFT's adapters sit in that text model's modules."""
    if architecture == "Llama4ForConditionalGeneration":
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        return base.language_model(ids).logits[0].numpy()
    return model(ids).logits[0].numpy()


_QWEN_TYPES = (
    "qwen2_vl",
    "qwen2_5_vl",
    "qwen3_vl",
    "qwen3_5",
    "glm_ocr",
    "glm4v",
)  # GLM-OCR's patches are laid out as Qwen's


def picture(folder: str, pixels: str) -> tuple[dict[str, Any], dict[str, Any], torch.Tensor]:
    """The folder's config.json and preprocessor_config.json, and the picture ``pixels`` (saved
    ``(height, width, 3)`` bytes) normalized by the processor's statistics, ``(3, height, width)``."""
    config = json.loads((Path(folder) / "config.json").read_text())
    processor = json.loads((Path(folder) / "preprocessor_config.json").read_text())
    mean = np.array(processor.get("image_mean", processor.get("norm_mean")), np.float32)  # Nemotron's: norm_*
    std = np.array(processor.get("image_std", processor.get("norm_std")), np.float32)
    values = torch.tensor((np.load(pixels).astype(np.float32) / 255.0 - mean) / std).permute(2, 0, 1)
    return config, processor, values


def image(folder: str, pixels: str, out: str) -> None:
    config, processor, values = picture(folder, pixels)
    if config["model_type"] in _QWEN_TYPES:
        np.save(out, qwen_image(folder, values, processor["patch_size"]))
        return
    if config["model_type"] == "gemma4":
        patches, positions = gemma4_patches(values, processor["patch_size"])
        with torch.no_grad():
            model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()
            features = model.model.get_image_features(pixel_values=patches, image_position_ids=positions)
        np.save(out, features.pooler_output[0].numpy())
        return
    if config["model_type"] == "lfm2_vl":
        with torch.no_grad():
            model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()
            features = model.model.get_image_features(**naflex_patches(values, config["vision_config"]["patch_size"]))
        np.save(out, features.pooler_output[0].numpy())
        return
    if config["model_type"] == "nemotron_h_omni":
        with torch.no_grad():
            features = nemotron_omni(folder).get_image_features(**radio_patches(values, config))
        np.save(out, features.pooler_output[0].numpy())
        return
    if config["model_type"] == "llama4":
        with torch.no_grad():
            model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()
            np.save(out, llama4_image(model, values).numpy())
        return
    values = values[None]
    with torch.no_grad():
        if config["architectures"][0] == "Mistral3ForConditionalGeneration":
            model = Mistral3ForConditionalGeneration.from_pretrained(folder, dtype=torch.float32).eval()
            sizes = torch.tensor([list(values.shape[2:])])
            features = model.model.get_image_features(pixel_values=values, image_sizes=sizes)
        else:
            model = Gemma3ForConditionalGeneration.from_pretrained(folder, dtype=torch.float32).eval()
            features = model.model.get_image_features(pixel_values=values)
    embeddings = features.pooler_output if getattr(features, "pooler_output", None) is not None else features
    embeddings = embeddings[0] if isinstance(embeddings, (tuple, list)) else embeddings
    np.save(out, embeddings.reshape(-1, embeddings.shape[-1]).numpy())


def nemotron_omni(folder: str, *, tie: bool = True, convolution_bias: bool = True) -> Any:
    """A Nemotron Omni release folder as transformers' own class reads it: its sound_config's
    ``model_type`` (``parakeet``, which transformers registers under another name) dropped, no
    projector bias where it states none; with ``tie``, the text model's output tied to its
    embedding as ``llm_config`` says (the outer class does not tie it)."""
    from transformers.models.nemotron_h_omni.configuration_nemotron_h_omni import NemotronH_Omni_Reasoning_V3_Config
    from transformers.models.nemotron_h_omni.modeling_nemotron_h_omni import NemotronH_Omni_Reasoning_V3

    given = json.loads((Path(folder) / "config.json").read_text())
    sound = given.get("sound_config")
    if sound is not None:
        sound.pop("model_type", None)
        sound.setdefault("projection_bias", False)
        sound["convolution_bias"] = convolution_bias
    config = NemotronH_Omni_Reasoning_V3_Config.from_dict(given)
    model = NemotronH_Omni_Reasoning_V3.from_pretrained(folder, config=config, dtype=torch.float32).eval()
    if tie and given["llm_config"].get("tie_word_embeddings"):
        model.language_model.lm_head.weight = model.language_model.get_input_embeddings().weight
    return model


def resave_omni(folder: str, out: str) -> None:
    """A Nemotron Omni release folder as transformers 5 saves it (``save_pretrained``), in ``out``."""
    nemotron_omni(folder, tie=False).save_pretrained(out)


def radio_patches(values: torch.Tensor, config: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A picture (``(3, height, width)``, normalized) as Nemotron Omni's processor packs it: each
    patch's channels, rows and columns, the patches row by row, and its grid."""
    patch = config["vision_config"]["patch_size"]
    channels, height, width = values.shape
    rows, columns = height // patch, width // patch
    patches = values.reshape(channels, rows, patch, columns, patch).permute(1, 3, 0, 2, 4)
    return {"pixel_values": patches.reshape(rows * columns, -1), "image_grid_hw": torch.tensor([[rows, columns]])}


def gemma4_patches(values: torch.Tensor, patch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A picture (``(3, height, width)`` in [0, 1]) as Gemma4ImageProcessor lays out its patches
    (each patch's rows, columns, then channels), and their (column, row) positions; a batch of one."""
    channels, height, width = values.shape
    rows, columns = height // patch, width // patch
    patches = values.permute(1, 2, 0).reshape(rows, patch, columns, patch, channels).permute(0, 2, 1, 3, 4)
    positions = torch.tensor([[c, r] for r in range(rows) for c in range(columns)])
    return patches.reshape(1, rows * columns, -1), positions[None]


def naflex_patches(values: torch.Tensor, patch: int) -> dict[str, torch.Tensor]:
    """A picture (``(3, height, width)``, normalized) as Siglip2ImageProcessor lays it out for LFM2-VL:
    each patch's rows, columns, then channels, the patches row by row, all of them real; a batch of one."""
    channels, height, width = values.shape
    rows, columns = height // patch, width // patch
    patches = values.reshape(channels, rows, patch, columns, patch).permute(1, 3, 2, 4, 0)
    return {
        "pixel_values": patches.reshape(1, rows * columns, -1),
        "spatial_shapes": torch.tensor([[rows, columns]]),
        "pixel_attention_mask": torch.ones(1, rows * columns, dtype=torch.bool),
    }


def audio(folder: str, samples: str, out: str) -> None:
    """A Gemma 4's embeddings of a clip (``samples``: 16 kHz float32 samples, saved), its log-mel
    features from transformers' Gemma4AudioFeatureExtractor at its defaults, in ``out``; a
    Nemotron Omni's (``parakeet_audio``)."""
    from transformers.models.gemma4.feature_extraction_gemma4 import Gemma4AudioFeatureExtractor

    if json.loads((Path(folder) / "config.json").read_text())["model_type"] == "nemotron_h_omni":
        parakeet_audio(folder, samples, out)
        return
    features = Gemma4AudioFeatureExtractor()([np.load(samples)], sampling_rate=16000, return_tensors="pt")
    with torch.no_grad():
        model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()
        output = model.model.get_audio_features(features["input_features"], features["input_features_mask"])
        keep = output.attention_mask[0] if getattr(output, "attention_mask", None) is not None else slice(None)
    np.save(out, output.pooler_output[0][keep].numpy())


def parakeet_audio(folder: str, samples: str, out: str) -> None:
    """A Nemotron Omni's embeddings of a clip, its log-mel features as transformers'
    ParakeetFeatureExtractor makes them (preemphasis, its STFT and filterbank, each mel band
    standardized over the frames the clip fills) but for the STFT's last frame, past the clip, which
    the extractor zeroes and masks and libmtmd keeps; in ``out``, and beside it (``OUT-fb.npy``,
    ``OUT-window.npy``) the extractor's mel filterbank and window, which a release keeps in its
    featurizer. Its convolutions without biases, as clip.cpp's Parakeet computes them."""
    from transformers.models.parakeet.feature_extraction_parakeet import EPSILON, ParakeetFeatureExtractor

    sound = json.loads((Path(folder) / "config.json").read_text())["sound_config"]
    extractor = ParakeetFeatureExtractor(feature_size=sound["num_mel_bins"])
    clip = torch.tensor(np.load(samples))[None]
    clip = torch.cat([clip[:, :1], clip[:, 1:] - extractor.preemphasis * clip[:, :-1]], dim=1)
    mel = extractor._torch_extract_fbank_features(clip)
    filled = mel[:, : clip.shape[1] // extractor.hop_length]  # the extractor's features_lengths
    features = (mel - filled.mean(1, keepdim=True)) / (filled.std(1, keepdim=True) + EPSILON)
    with torch.no_grad():
        model = nemotron_omni(folder, convolution_bias=False)
        output = model.get_audio_features(features, torch.ones(mel.shape[:2], dtype=torch.bool))
    np.save(out, output.pooler_output.numpy())
    stem = out.removesuffix(".npy")
    np.save(f"{stem}-fb.npy", extractor.mel_filters.numpy()[None])
    np.save(f"{stem}-window.npy", torch.hann_window(extractor.win_length, periodic=False).numpy())


def qwen_image(folder: str, values: torch.Tensor, patch: int) -> np.ndarray:
    """A Qwen-VL's embeddings of one picture (``(3, height, width)``, normalized; ``qwen_patches``);
    Qwen3-VL's deepstack features follow each token's embedding, as libmtmd's do."""
    patches, grid = qwen_patches(values, patch)
    with torch.no_grad():
        model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()
        features = model.model.get_image_features(pixel_values=patches, image_grid_thw=grid)
    parts = [features.pooler_output[0], *(f[0] for f in getattr(features, "deepstack_features", None) or [])]
    return torch.cat(parts, dim=-1).numpy()


def llama4_image(model: Any, values: torch.Tensor) -> torch.Tensor:
    """A Llama 4's embeddings of one picture (a tile, ``(3, height, width)``, normalized): its
    tower's, through the adapter, projected into the text model."""
    features = model.vision_model(values[None]).last_hidden_state
    return model.multi_modal_projector(features.reshape(-1, features.shape[-1]))


def prompt(folder: str, spec: str, pixels: str, out: str) -> None:
    """A model's logits for every position of a prompt with a picture in it: ``spec`` (JSON) gives
    its token ids, the picture's tokens as ``config``'s ``image_token_id`` (Qwen-VL's after the id
    it says begins one, ``vision_start_token_id``): the picture's embeddings placed as transformers
    places them (Qwen's M-RoPE positions, Gemma 3's attention both ways within the picture)."""
    given = json.loads(spec)
    config, processor, values = picture(folder, pixels)
    omni = config["model_type"] == "nemotron_h_omni"
    model = nemotron_omni(folder) if omni else AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32)
    model.eval()
    for settings in (model, model.config, getattr(model, "model", model).config):
        for key, value in given["config"].items():
            setattr(settings, key, value)
    ids = torch.tensor([given["ids"]])
    kinds = (ids == given["config"]["image_token_id"]).long()  # 1: a picture's token
    inputs: dict[str, torch.Tensor] = {"pixel_values": values[None]}
    if config["model_type"] in _QWEN_TYPES:
        patches, grid = qwen_patches(values, processor["patch_size"])
        inputs = {"pixel_values": patches, "image_grid_thw": grid, "mm_token_type_ids": kinds}
    elif config["model_type"] == "gemma3":
        inputs["token_type_ids"] = kinds
    elif config["model_type"] == "gemma4":  # its picture's tokens both ways in its sliding layers
        patches, positions = gemma4_patches(values, processor["patch_size"])
        inputs = {"pixel_values": patches, "image_position_ids": positions, "mm_token_type_ids": kinds}
    elif config["model_type"] == "lfm2_vl":
        inputs = naflex_patches(values, config["vision_config"]["patch_size"])
    elif omni:
        inputs = radio_patches(values, config)
    else:  # Mistral 3's Pixtral
        inputs["image_sizes"] = torch.tensor([list(values.shape[1:])])
    with torch.no_grad():
        if config["model_type"] == "llama4":  # as its forward places them (which fails on its own output in 5.24)
            embeds = model.get_input_embeddings()(ids)
            embeds[kinds.bool()] = llama4_image(model, values)
            logits = model.language_model(inputs_embeds=embeds).logits
        else:
            logits = model(input_ids=ids, **inputs).logits
    np.save(out, logits[0].numpy())


def qwen_patches(values: torch.Tensor, patch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A picture (``(3, height, width)``, normalized) as Qwen2VLImageProcessor lays out its patches
    (two equal frames, each 2x2 group of patches together), and its grid (frames, rows, columns)."""
    channels, height, width = values.shape
    rows, columns = height // patch, width // patch
    frames = values[None].repeat(2, 1, 1, 1).reshape(1, 2, channels, rows // 2, 2, patch, columns // 2, 2, patch)
    patches = frames.permute(0, 3, 6, 4, 7, 2, 1, 5, 8).reshape(rows * columns, channels * 2 * patch * patch)
    return patches, torch.tensor([[1, rows, columns]])


def embed(folder: str, texts: str, out: str) -> None:
    # The folder's tokenizer.json as the tokenizers library runs it (the tiny EmbeddingGemma's is a
    # BPE, which the Gemma tokenizer class AutoTokenizer would pick cannot load).
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(Path(folder) / "tokenizer.json"))
    model = AutoModel.from_pretrained(folder, dtype=torch.float32).eval()
    head = _dense_head(Path(folder))
    results = []
    for text in json.loads(texts):
        encoded = tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            vector = model(**encoded).last_hidden_state[0].mean(0)
            for weight in head:
                vector = weight @ vector
        words = tokenizer(text, add_special_tokens=False)["input_ids"]
        results.append({"words": words, "embedding": (vector / vector.norm()).tolist()})
    Path(out).write_text(json.dumps(results))


def tokenize(folder: str, texts: str, out: str) -> None:
    """Each text of the JSON list ``texts`` as the folder's tokenizer.json splits it (the tokenizers
    library, no special tokens), in the JSON file ``out``."""
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(Path(folder) / "tokenizer.json"))
    ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in json.loads(texts)]
    Path(out).write_text(json.dumps(ids))


def resave(folder: str, out: str) -> None:
    """The folder's tokenizer as transformers loads and saves it (transformers 5 converts a
    SentencePiece ``tokenizer.model`` and saves tokenizer.json alone), in ``out``."""
    AutoTokenizer.from_pretrained(folder).save_pretrained(out)


def _dense_head(folder: Path) -> list[torch.Tensor]:
    """The weights of the Dense modules after the pooling (EmbeddingGemma's), in the order
    ``modules.json`` applies them: sentence-transformers' ``Dense`` without bias or activation."""
    if not (folder / "modules.json").is_file():
        return []
    modules = json.loads((folder / "modules.json").read_text())
    return [
        load_file(folder / m["path"] / "model.safetensors")["linear.weight"].float()
        for m in modules
        if m["type"].endswith("Dense")
    ]


if __name__ == "__main__":
    if sys.argv[1] == "image":
        image(*sys.argv[2:5])
    elif sys.argv[1] == "prompt":
        prompt(*sys.argv[2:6])
    elif sys.argv[1] == "embed":
        embed(*sys.argv[2:5])
    elif sys.argv[1] == "tokenize":
        tokenize(*sys.argv[2:5])
    elif sys.argv[1] == "resave":
        resave(*sys.argv[2:4])
    elif sys.argv[1] == "resave-omni":
        resave_omni(*sys.argv[2:4])
    elif sys.argv[1] == "audio":
        audio(*sys.argv[2:5])
    else:
        main(sys.argv[1], sys.argv[2:])
