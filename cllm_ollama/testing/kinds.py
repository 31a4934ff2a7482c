"""``python -m cllm_ollama.testing.ggufs KIND DIR``: every tiny test model a test loads, by name, so
anyone can write the model a test used by hand. One table: the kind, what it writes, the writer."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from pathlib import Path

from . import audio_ggufs as au
from . import core_ggufs as gg
from . import glm4_ggufs as g4
from . import hf_folders as hf
from . import ocr_ggufs as oc
from . import ollama_ggufs as og
from . import ollama_vision_ggufs as ov
from . import omni_ggufs as om
from . import sliced_ggufs as sl
from . import split_ggufs as sp
from . import tower_ggufs as tg

Writer = Callable[[Path], tuple[Path, ...]]


def _one(write: Callable[[Path], Path], name: str) -> Writer:
    """A writer of one file, ``DIR/<name>.gguf``."""

    def run(folder: Path) -> tuple[Path, ...]:
        folder.mkdir(parents=True, exist_ok=True)
        return (write(folder / f"{name}.gguf"),)

    return run


# kind -> (what DIR gets, writer). Ollama-layout kinds write DIR/model.gguf: one file as Ollama's
# converter writes it; their llama.cpp-layout twins are named beside them.
KINDS: dict[str, tuple[str, Writer]] = {
    "qwen3": ("DIR/qwen3.gguf: a tiny Qwen3", _one(gg.write_qwen3, "qwen3")),
    "qwen3-split": (
        "DIR/qwen3-split-00001-of-00002.gguf and -00002-of-00002.gguf: a tiny Qwen3 in two shards, as gguf-split "
        "writes them",
        sp.write_qwen3_split,
    ),
    "gemma3": ("DIR/gemma3.gguf: a tiny Gemma 3 (sliding-window layers)", _one(gg.write_gemma3, "gemma3")),
    "mamba": ("DIR/mamba.gguf: a recurrent model", _one(gg.write_mamba, "mamba")),
    "jamba": ("DIR/jamba.gguf: a hybrid model", _one(gg.write_jamba, "jamba")),
    "reranker": ("DIR/reranker.gguf: a tiny Qwen3-Reranker", _one(gg.write_reranker, "reranker")),
    "gpt-oss": ("DIR/gpt-oss.gguf: twin of ollama-gptoss", _one(og.write_gptoss, "gpt-oss")),
    "olmo2": ("DIR/olmo2.gguf: twin of ollama-olmo3", _one(og.write_olmo2, "olmo2")),
    "lfm2": ("DIR/lfm2.gguf: twin of ollama-lfm2", _one(og.write_lfm2, "lfm2")),
    "lora": ("DIR/base.gguf and DIR/adapter.gguf, a LoRA for it", gg.write_lora),
    "vision": ("DIR/text.gguf and DIR/mmproj.gguf: a gemma3 that sees", gg.write_vision),
    "vision-qwen2vl": (
        "DIR/text.gguf and DIR/mmproj.gguf: an M-RoPE model that sees",
        lambda folder: gg.write_vision(folder, kind="qwen2vl"),
    ),
    "gemma4-towers": ("DIR/text.gguf and DIR/mmproj.gguf: twin of ollama-gemma4", tg.write_gemma4_vision),
    "qwen35-vision": ("DIR/text.gguf and DIR/mmproj.gguf: twin of ollama-qwen35-vision", tg.write_qwen35_vision),
    "vision-deepseekocr": (
        "DIR/text.gguf and DIR/mmproj.gguf: twin of ollama-deepseekocr",
        oc.write_deepseekocr_vision,
    ),
    "vision-glmocr": (
        "DIR/text.gguf and DIR/mmproj.gguf (glm4 with M-RoPE, glm4v): twin of ollama-glmocr",
        g4.write_glmocr_vision,
    ),
    "vision-nemotron": (
        "DIR/text.gguf and DIR/mmproj.gguf (RADIO and Parakeet): twin of ollama-nemotron-omni",
        om.write_nemotron_omni_vision,
    ),
    "vision-sliced": (
        "DIR/text.gguf and DIR/mmproj.gguf: a qwen3 that sees in tiles (idefics3 projector)",
        sl.write_sliced_vision,
    ),
    "audio": ("DIR/text.gguf and DIR/mmproj.gguf: a qwen3 that hears (qwen2a projector)", au.write_audio),
    "hf-qwen3": (
        "DIR/hf-qwen3/, a Hugging Face checkpoint (safetensors), and DIR/qwen3.gguf, its twin",
        hf.write_hf_qwen3,
    ),
    "hf-llama": ("DIR/hf-llama/, a Llama checkpoint (safetensors), and DIR/llama.gguf, its twin", hf.write_hf_llama),
    "hf-qwen3moe": (
        "DIR/hf-qwen3moe/, a Qwen3 mixture of experts, and DIR/qwen3moe.gguf, its twin",
        hf.write_hf_qwen3moe,
    ),
    "hf-mixtral": (
        "DIR/hf-mixtral/, a Mixtral checkpoint (a Llama of experts), and DIR/mixtral.gguf, its twin",
        hf.write_hf_mixtral,
    ),
    "hf-gemma3": ("DIR/hf-gemma3/, a Gemma 3 checkpoint, and DIR/gemma3.gguf, its twin", hf.write_hf_gemma3),
    "hf-gemma3-vision": (
        "DIR/hf-gemma3-vision/, a Gemma 3 that sees (text model, SigLIP tower, projector), and its twins "
        "DIR/text.gguf and DIR/mmproj.gguf",
        hf.write_hf_gemma3_vision,
    ),
    "hf-mistral3-vision": (
        "DIR/hf-mistral3-vision/, a Mistral 3 that sees (Llama text model, Pixtral tower, projector), and its "
        "twins DIR/text.gguf and DIR/mmproj.gguf",
        hf.write_hf_mistral3_vision,
    ),
    "hf-qwen2vl-vision": (
        "DIR/hf-qwen2vl-vision/, a Qwen2-VL (Qwen 2 text model with M-RoPE, LayerNorm tower, merger), and its "
        "twins DIR/text.gguf and DIR/mmproj.gguf",
        hf.write_hf_qwen2vl_vision,
    ),
    "hf-qwen25vl-vision": (
        "DIR/hf-qwen25vl-vision/, a Qwen2.5-VL (Qwen 2 text model with M-RoPE, windowed SwiGLU tower, merger), "
        "and its twins DIR/text.gguf and DIR/mmproj.gguf",
        hf.write_hf_qwen25vl_vision,
    ),
    "hf-qwen3vl-vision": (
        "DIR/hf-qwen3vl-vision/, a Qwen3-VL (Qwen3 text model with interleaved M-RoPE, tower with deepstack "
        "mergers), and its twins DIR/text.gguf and DIR/mmproj.gguf",
        hf.write_hf_qwen3vl_vision,
    ),
    "hf-qwen35": (
        "DIR/hf-qwen35/, a Qwen 3.5 text model (gated delta nets, a full-attention layer), and DIR/qwen35.gguf, "
        "its twin",
        hf.write_hf_qwen35,
    ),
    "hf-qwen35moe": (
        "DIR/hf-qwen35moe/, a Qwen 3.5 mixture of experts (routed experts apart, a gated shared expert), and "
        "DIR/qwen35moe.gguf, its twin",
        hf.write_hf_qwen35moe,
    ),
    "hf-qwen3next": (
        "DIR/hf-qwen3next/, a Qwen3-Next (gated delta nets with fused projections, a mixture of experts), and "
        "DIR/qwen3next.gguf, its twin",
        hf.write_hf_qwen3next,
    ),
    "hf-qwen35-vision": (
        "DIR/hf-qwen35-vision/, a Qwen 3.5 that sees (its text model, Qwen3-VL's tower without deepstack), "
        "and its twins DIR/text.gguf and DIR/mmproj.gguf",
        hf.write_hf_qwen35_vision,
    ),
    "hf-gptoss": (
        "DIR/hf-gptoss/, a gpt-oss checkpoint (its experts in MXFP4, as released), and DIR/gpt-oss.gguf, its twin",
        hf.write_hf_gptoss,
    ),
    "hf-gptoss-16bit": (
        "DIR/hf-gptoss/, a gpt-oss checkpoint with its experts dequantized (as a fine-tune is saved in 16 bits), "
        "and DIR/gpt-oss.gguf, its twin",
        functools.partial(hf.write_hf_gptoss, dequantized=True),
    ),
    "hf-embeddinggemma": (
        "DIR/hf-embeddinggemma/, an EmbeddingGemma as sentence-transformers saves it (Gemma 3 layers attending both "
        "ways, mean pooling, 2_Dense and 3_Dense), and DIR/embeddinggemma.gguf, its twin",
        hf.write_hf_embeddinggemma,
    ),
    "hf-ministral3": (
        "DIR/hf-ministral3/, a Ministral 3 checkpoint (a Llama with Ministral's YaRN and query temperature), "
        "and DIR/mistral3.gguf, its twin",
        hf.write_hf_ministral3,
    ),
    "hf-command-r": (
        "DIR/hf-command-r/, a Command R checkpoint (Cohere: layer norms, attention and FFN side by side), "
        "and DIR/command-r.gguf, its twin",
        hf.write_hf_command_r,
    ),
    "hf-lfm2moe": (
        "DIR/hf-lfm2moe/, an LFM2 mixture of experts (a dense block, then experts chosen by sigmoid scores and a "
        "bias), and DIR/lfm2moe.gguf, its twin",
        hf.write_hf_lfm2moe,
    ),
    "hf-olmo3": (
        "DIR/hf-olmo3/, an OLMo 3 checkpoint (norms after attention and the FFN, a sliding window), and "
        "DIR/olmo2.gguf, its twin",
        hf.write_hf_olmo3,
    ),
    "hf-lfm2": (
        "DIR/hf-lfm2/, an LFM2 checkpoint (a short convolution's block, an attention block), and DIR/lfm2.gguf, "
        "its twin",
        hf.write_hf_lfm2,
    ),
    "hf-gemma": ("DIR/hf-gemma/, a Gemma (1) checkpoint, and DIR/gemma.gguf, its twin", hf.write_hf_gemma),
    "hf-gemma4": (
        "DIR/hf-gemma4/, a Gemma 4 checkpoint with E2B's parts (per-layer embeddings, shared KV, keys as values), "
        "and DIR/gemma4.gguf, its twin",
        hf.write_hf_gemma4,
    ),
    "hf-gemma4-vision": (
        "DIR/hf-gemma4-vision/, a Gemma 4 that sees and hears (text model, ViT, Conformer), and its twins "
        "DIR/text.gguf and DIR/mmproj.gguf",
        hf.write_hf_gemma4_vision,
    ),
    "hf-gemma4-moe": (
        "DIR/hf-gemma4-moe/, a Gemma 4 checkpoint with 26B-A4B's mixture beside the dense FFN, "
        "and DIR/gemma4-moe.gguf, its twin",
        lambda folder: hf.write_hf_gemma4(folder, moe=True),
    ),
    "hf-glm4-moe-lite": (
        "DIR/hf-glm4-moe-lite/, a GLM-4.7-Flash checkpoint (latent attention, a dense layer, then sigmoid-routed "
        "experts beside a shared one), and DIR/glm4-moe-lite.gguf, its twin",
        hf.write_hf_deepseek2,
    ),
    "hf-nemotron-h": (
        "DIR/hf-nemotron-h-nano2/, a Nemotron-H checkpoint with Nemotron Nano 2's parts (Mamba-2, attention and "
        "ReLU² MLP layers, under backbone.), and DIR/nemotron-h-nano2.gguf, its twin",
        hf.write_hf_nemotron_h,
    ),
    "hf-nemotron-h-moe": (
        "DIR/hf-nemotron-h-nano3/, a Nemotron-H checkpoint with Nemotron 3 Nano's mixture, as transformers 5 saves "
        "it (under model., a layer's experts fused), and DIR/nemotron-h-nano3.gguf, its twin",
        lambda folder: hf.write_hf_nemotron_h(folder, shape="nano3", transformers_5=True),
    ),
    "hf-deepseek-v2": (
        "DIR/hf-deepseek-v2/, a DeepSeek-V2-Lite checkpoint (latent attention with Q in one projection, a softmax "
        "router), and DIR/deepseek-v2.gguf, its twin",
        lambda folder: hf.write_hf_deepseek2(folder, v2=True),
    ),
    "hf-laguna": (
        "DIR/hf-laguna/, a Laguna checkpoint (full and sliding layers, per-layer heads, a gated attention output, "
        "sigmoid-routed experts beside a shared one), and DIR/laguna.gguf, its twin",
        hf.write_hf_laguna,
    ),
    "hf-glm4": (
        "DIR/hf-glm4/, a GLM-4-0414 checkpoint (Q, K and V biases, half of each head rotating, norms after attention "
        "and the FFN, gate and up fused), and DIR/glm4.gguf, its twin",
        hf.write_hf_glm4,
    ),
    "hf-glmocr": (
        "DIR/hf-glmocr/, a GLM-OCR (M-RoPE text model with a multi-token-prediction layer, its tower and merger), "
        "and its twins DIR/text.gguf and DIR/mmproj.gguf",
        hf.write_hf_glmocr,
    ),
    "hf-glm4v": (
        "DIR/hf-glm4v/, a GLM-4.1V (M-RoPE over half of each head, its tower with a position table), "
        "and its twins DIR/text.gguf and DIR/mmproj.gguf",
        hf.write_hf_glm4v,
    ),
    "hf-nemotron-omni": (
        "DIR/hf-nemotron-omni/, a Nemotron 3 Nano Omni as released (Nemotron-H text model, RADIO and its MLP, "
        "Parakeet), and its twins DIR/text.gguf and DIR/mmproj.gguf",
        hf.write_hf_nemotron_omni,
    ),
    "hf-llama4-text": (
        "DIR/hf-llama4/, a Llama 4's text model alone (Llama4ForCausalLM), and DIR/llama4.gguf, its twin",
        hf.write_hf_llama4_text,
    ),
    "hf-llama4": (
        "DIR/hf-llama4/, a Llama 4 as released (dense and mixture layers in turn, its experts transposed, "
        "its tower and projection), and its twins DIR/text.gguf and DIR/mmproj.gguf",
        hf.write_hf_llama4,
    ),
    "hf-gemma3n": (
        "DIR/hf-gemma3n/, a Gemma 3n checkpoint as the releases are (Gemma3nForConditionalGeneration: AltUp, "
        "LAuReL, per-layer embeddings, KV reused from layer 20 on; stand-in towers), and DIR/gemma3n.gguf, its twin",
        lambda folder: hf.write_hf_gemma3n(folder, sees=True),
    ),
    "hf-lfm2-vl": (
        "DIR/hf-lfm2-vl/, an LFM2-VL that sees (LFM2, SigLIP2 and its projector), and its twins DIR/text.gguf and "
        "DIR/mmproj.gguf",
        hf.write_hf_lfm2_vision,
    ),
    "hf-deepseek-v3": (
        "DIR/hf-deepseek-v3/, a DeepSeek V3 checkpoint (latent attention, experts chosen in groups, YaRN), and "
        "DIR/deepseek-v3.gguf, its twin",
        lambda folder: hf.write_hf_deepseek2(folder, glm=False),
    ),
    "hf-gemma2": ("DIR/hf-gemma2/, a Gemma 2 checkpoint, and DIR/gemma2.gguf, its twin", hf.write_hf_gemma2),
    "hf-phi3": (
        "DIR/hf-phi3/, a Phi-3 checkpoint (fused projections), and DIR/phi3.gguf, its twin",
        hf.write_hf_phi3,
    ),
    "hf-bert": (
        "DIR/hf-bert/, a sentence-transformers BERT embedding model (WordPiece, mean pooling), "
        "and DIR/bert.gguf, its twin",
        hf.write_hf_bert,
    ),
    "hf-nomic-bert": (
        "DIR/hf-nomic-bert/, a Nomic BERT embedding model as nomic-embed-text saves it (rotary positions, "
        "fused Q/K/V, a SwiGLU), and DIR/nomic-bert.gguf, its twin",
        functools.partial(hf.write_hf_bert, nomic=True),
    ),
    "hf-mistral": (
        "DIR/hf-mistral/, a Mistral checkpoint with a SentencePiece tokenizer.model (needs sentencepiece), "
        "and DIR/mistral.gguf, its twin",
        hf.write_hf_mistral,
    ),
    "hf-lora": (
        "DIR/hf-lora/, a PEFT LoRA adapter (safetensors) for DIR/base.gguf, a Llama, and DIR/adapter.gguf, its twin",
        hf.write_hf_lora,
    ),
    "ollama-gemma3-vision": (
        "the vision kind's gemma3 and projector in one file",
        _one(og.write_ollama_gemma3_vision, "model"),
    ),
    "ollama-qwen25vl-vision": ("a Qwen2.5-VL", _one(og.write_ollama_qwen25vl_vision, "model")),
    "ollama-gptoss": ("a gpt-oss", _one(og.write_ollama_gptoss, "model")),
    "ollama-olmo3": ("an OLMo 3", _one(og.write_ollama_olmo3, "model")),
    "ollama-lfm2": ("an LFM2", _one(og.write_ollama_lfm2, "model")),
    "ollama-mistral3-vision": ("a Mistral Small 3.1 with Pixtral", _one(ov.write_ollama_mistral3_vision, "model")),
    "ollama-qwen3vl-vision": ("a Qwen3-VL", _one(ov.write_ollama_qwen3vl_vision, "model")),
    "ollama-llama4-vision": ("a Llama 4 with its tower", _one(ov.write_ollama_llama4_vision, "model")),
    "ollama-gemma4": ("a Gemma 4 with both towers", _one(ov.write_ollama_gemma4, "model")),
    "ollama-qwen35-vision": ("a Qwen 3.5 with its tower", _one(ov.write_ollama_qwen35_vision, "model")),
    "ollama-deepseekocr": ("a DeepSeek-OCR", _one(oc.write_ollama_deepseekocr, "model")),
    "ollama-glmocr": ("a GLM-OCR with its tower", _one(g4.write_ollama_glmocr, "model")),
    "ollama-nemotron-omni": ("a Nemotron Omni with both towers", _one(om.write_ollama_nemotron_omni, "model")),
}


def main(argv: list[str] | None = None) -> None:
    """Write a tiny random-weight test model of KIND into DIR and print the paths written."""
    listing = "\n".join(f"  {kind}: {what}" for kind, (what, _) in KINDS.items())
    parser = argparse.ArgumentParser(
        prog="python -m cllm_ollama.testing.ggufs",
        description=main.__doc__,
        epilog="kinds (ollama-* write DIR/model.gguf, laid out as Ollama's converter writes it):\n" + listing,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("kind", choices=list(KINDS), metavar="KIND")
    parser.add_argument("dir", type=Path)
    args = parser.parse_args(argv)
    for path in KINDS[args.kind][1](args.dir):
        print(path)
