"""Which map a GGUF gets: one table, architecture -> its converters, each behind the marker (as
Ollama's shim's ``detect_ollama_*``) that tells Ollama's layout from llama.cpp's for a shared name.
What no map takes is loaded as it is, or refused naming its architecture."""

from __future__ import annotations

from collections.abc import Callable

from . import deepseek, gemma, glm, gptoss, llama, mistral, nemotron, qwen, text
from .framework import Converter, Header, LayoutRefused, Marker, Rewrite, always, refusal

# Every architecture the llama.cpp inside llama-cpp-python 0.3.36 names (``src/llama-arch.cpp``).
LLAMA_CPP_ARCHITECTURES = frozenset(
    """clip llama llama4 deci falcon grok gpt2 gptj gptneox mpt baichuan starcoder refact bert modern-bert
    nomic-bert nomic-bert-moe neo-bert jina-bert-v2 jina-bert-v3 eurobert bloom stablelm qwen qwen2 qwen2moe
    qwen2vl qwen3 qwen3moe qwen3next qwen3vl qwen3vlmoe qwen35 qwen35moe qwen4exp phi2 phi3 phimoe plamo
    plamo2 plamo3 codeshell orion internlm2 minicpm minicpm3 gemma gemma2 gemma3 gemma3n gemma4
    gemma4-assistant gemma-embedding starcoder2 mamba mamba2 maple jamba falcon-h1 xverse command-r cohere2
    cohere2moe dbrx olmo olmo2 olmoe muse-glimmer openelm arctic deepseek deepseek2 deepseek2-ocr deepseek32
    deepseek4 chatglm glm4 glm4moe glm-dsa bitnet t5 t5encoder jais jais2 nemotron nemotron_h nemotron_h_moe
    exaone exaone4 exaone-moe rwkv6 rwkv6qwen2 rwkv7 arwkv7 granite granitemoe granitehybrid graniteswitch
    granite_swa chameleon wavtokenizer-dec plm bailingmoe bailingmoe2 bailingmoe3 dots1 dots3note arcee afmoe
    laguna ernie4_5 ernie4_5-moe hunyuan-moe hunyuan-dense hunyuan_vl hy_v3 hy_v4 smollm3 gpt-oss lfm2 lfm2moe
    dream smallthinker llada llada-moe seed_oss grovemoe apertus minimax-01 hrm_text minimax-m2 minimax-m3
    cogvlm rnd1 pangu-embedded mistral3 eagle3 dflash mistral4 paddleocr mimo2 step35 spark2_5 llama-embed
    maincoder kimi-linear kimi-k3 glm5-next talkie mellum nanbeige qwen3tts pockettts""".split()  # noqa: SIM905 - a list to read against llama-arch.cpp
)


def _one(build: Callable[[Header], Rewrite]) -> Converter:
    """A map that writes one file (a text model, or a projector) as a converter."""
    return lambda h: [build(h)]


_QWEN35 = ((qwen.has_qwen35_tower, qwen.qwen35_vision), (qwen.is_ollama_qwen35, _one(qwen.qwen35_text)))
_QWEN3VL = ((qwen.is_ollama_qwen3vl, qwen.qwen3vl),)

# Architecture -> its (marker, converter) pairs, tried in order: the first whose marker holds maps
# the file. A file with a tower inside is split before its text-only marker is asked.
CONVERTERS: dict[str, tuple[tuple[Marker, Converter], ...]] = {
    "gemma3": (
        (gemma.is_embeddinggemma, _one(gemma.embeddinggemma)),
        (gemma.is_ollama_gemma3, gemma.gemma3),
    ),
    "gemma3n": ((gemma.is_ollama_gemma3n, _one(gemma.gemma3n)),),
    "gemma4": (
        (gemma.has_gemma4_towers, gemma.gemma4),
        (gemma.is_ollama_gemma4, _one(gemma.gemma4_text)),
    ),
    "qwen25vl": ((always, qwen.qwen25vl),),
    "qwen3vl": _QWEN3VL,
    "qwen3vlmoe": _QWEN3VL,
    "qwen35": _QWEN35,
    "qwen35moe": _QWEN35,
    "qwen3next": ((qwen.is_ollama_qwen3next, _one(qwen.qwen3next)),),
    "mistral3": (
        (mistral.is_ollama_mistral3_text, _one(mistral.mistral3_text)),
        (mistral.has_pixtral, mistral.mistral3),
    ),
    "llama": ((llama.llama3_metadata_gap, _one(llama.llama3_metadata)),),
    "llama4": ((llama.has_llama4_tower, llama.llama4),),
    "clip": ((llama.is_untyped_llava, _one(llama.llava_projector)),),
    "gptoss": ((always, _one(gptoss.gptoss)),),
    "lfm2": ((text.is_ollama_lfm2, _one(text.lfm2)),),
    "olmo3": ((always, _one(text.olmo3)),),
    "laguna": ((text.is_ollama_laguna, _one(text.laguna)),),
    "glm4moelite": ((always, _one(text.glm4moelite)),),
    "nemotron_h_moe": ((nemotron.is_ollama_nemotron_h_moe, _one(nemotron.nemotron_h_moe)),),
    "nemotron_h_omni": ((always, nemotron.nemotron_h_omni),),
    "deepseekocr": ((always, deepseek.deepseekocr),),
    "glmocr": ((always, glm.glmocr),),
}

# Ollama-converter layouts llama.cpp cannot load as they are, and why cllm refuses them: the map
# is not mechanical (tensors merged, split or repacked, towers llama.cpp reads differently).
REFUSED: dict[str, str] = {
    "mllama": "llama.cpp has no Llama 3.2 Vision (mllama) architecture",
}


def plan(h: Header) -> list[Rewrite] | None:
    """What to write instead of a GGUF laid out by Ollama's converter: None when llama.cpp loads it
    as it is; raises ``LayoutRefused`` (naming the architecture) when cllm cannot run it."""
    for marker, convert in CONVERTERS.get(h.arch, ()):
        if marker(h):
            return convert(h)
    if h.arch in REFUSED:
        raise LayoutRefused(refusal(h.arch, REFUSED[h.arch]))
    if h.arch not in LLAMA_CPP_ARCHITECTURES:
        raise LayoutRefused(refusal(h.arch, "llama.cpp has no such architecture"))
    if h.arch != "clip" and h.any_tensor("v.", "mm.", "a."):
        # llama.cpp's loader refuses a model file with tensors it does not read.
        raise LayoutRefused(refusal(h.arch, "its vision or audio tower is inside the model file"))
    return None
