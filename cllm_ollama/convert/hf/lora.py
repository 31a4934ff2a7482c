"""LoRA adapters in safetensors (PEFT's ``adapter_model.safetensors``, MLX's ``adapters.safetensors``,
each with its ``adapter_config.json``) converted to llama.cpp's LoRA GGUF for the base model they
were trained on, as ``ollama create`` converts an ``ADAPTER`` folder (Ollama's ``ConvertAdapter``).

llama.cpp adds ``alpha / rank * B @ A`` to a weight (``llm_graph_context::build_lora_mm``), one alpha
per file. PEFT's scale may differ per module (``alpha_pattern``) or divide by the square root of
the rank (``use_rslora``); MLX's is a bare ``scale``. Where the file's alpha does not give a
module's scale, the difference is folded into its B, so every module is scaled as it was trained.
B's rows, or A's columns, follow the base's own reordering (a Llama's Q and K, ``families.permute``;
Qwen 3.5's value heads). A and B are
written in F32, as llama.cpp's ``convert_lora_to_gguf.py`` writes them by default.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType

from ..framework import KV, HeaderSource, Tensor, write
from .checkpoint import Checkpoint
from .errors import ImportRefused
from .families import Family
from .safetensors import SourceTensor, read, to_f32

CONFIG = "adapter_config.json"
# The weights' file names: PEFT's (``adapter_model.safetensors``) and MLX-LM's.
WEIGHTS = ("adapter_model*.safetensors", "adapters.safetensors")
TOWER_LEFT_OUT = "the adapter's vision tower modules are left out: the model sees as its base does"

_F32 = GGMLQuantizationType.F32
# PEFT's names: ``base_model.model.<module>.lora_A.weight``, an embedding's ``...lora_embedding_A``;
# MLX's: ``<module>.lora_a``.
_PEFT = re.compile(r"(?:base_model\.model\.)?(.+)\.(lora_A|lora_B)\.weight")
_PEFT_EMBEDDING = re.compile(r"(?:base_model\.model\.)?(.+)\.lora_embedding_(A|B)")
_MLX = re.compile(r"(.+)\.lora_(a|b)")


@dataclass(frozen=True)
class _Scaling:
    """How a module's update is scaled in training: ``alpha / rank`` (or ``/ sqrt(rank)``), with
    per-module alphas; or MLX's fixed ``scale``."""

    alpha: float  # the file's: adapter.lora.alpha
    patterns: Mapping[str, float]  # PEFT's alpha_pattern: module name regex -> alpha
    rslora: bool = False
    fixed: float | None = None  # MLX's scale, whatever the rank

    def of(self, module: str, rank: int) -> float:
        if self.fixed is not None:
            return self.fixed
        alpha = next((a for key, a in self.patterns.items() if _matches(key, module)), self.alpha)
        return alpha / (math.sqrt(rank) if self.rslora else rank)

    def factor(self, module: str, rank: int) -> float:
        """What B is multiplied by so that llama.cpp's ``alpha / rank`` scales it as trained."""
        applied = self.alpha / rank if self.alpha else 1.0
        return self.of(module, rank) / applied


def _matches(key: str, module: str) -> bool:
    """PEFT's ``get_pattern_key``: the key names the module, or its last dotted parts, as a regex."""
    try:
        return re.fullmatch(rf"(.*\.)?(?:{key})", module) is not None
    except re.error:
        raise ImportRefused(f"{CONFIG}: alpha_pattern key {key!r} is not a regular expression") from None


def _scaling(config: dict[str, Any]) -> _Scaling:
    """The scaling ``adapter_config.json`` states; ``ImportRefused`` for what is no plain LoRA."""
    mlx = config.get("lora_parameters")
    if isinstance(mlx, dict):  # MLX-LM: y = x W + scale * (x a) b
        if config.get("fine_tune_type", "lora") != "lora":
            raise ImportRefused(f"{CONFIG}: fine_tune_type {config['fine_tune_type']!r} is not a LoRA")
        scale, rank = mlx.get("scale"), mlx.get("rank")
        if not isinstance(scale, int | float) or not isinstance(rank, int) or rank <= 0:
            raise ImportRefused(f"{CONFIG}: lora_parameters needs a numeric scale and a rank")
        return _Scaling(float(scale) * rank, {}, fixed=float(scale))
    if str(config.get("peft_type", "LORA")).upper() != "LORA":
        raise ImportRefused(f"{CONFIG}: peft_type {config['peft_type']!r} is not a LoRA; cllm converts LoRA adapters")
    refused = {
        "use_dora": "DoRA adapters (use_dora) scale each weight by a learned magnitude, which llama.cpp does not apply",
        "lora_bias": "the adapter trains biases (lora_bias), which a llama.cpp LoRA cannot hold",
        "fan_in_fan_out": "fan_in_fan_out (GPT-2's transposed layers) is not a layout cllm converts",
        "alora_invocation_tokens": "activated LoRA (alora_invocation_tokens) is not applied by cllm",
        "modules_to_save": "the adapter replaces whole modules (modules_to_save), which a LoRA file cannot "
        "hold: merge it into the model and import the merged folder",
    }
    for key, why in refused.items():
        if config.get(key):
            raise ImportRefused(f"{CONFIG}: {why}")
    alpha = config.get("lora_alpha", 8)
    patterns = config.get("alpha_pattern") or {}
    if not isinstance(alpha, int | float) or not isinstance(patterns, dict):
        raise ImportRefused(f"{CONFIG}: lora_alpha must be a number and alpha_pattern an object")
    if not all(isinstance(a, int | float) for a in patterns.values()):
        raise ImportRefused(f"{CONFIG}: alpha_pattern's values must be numbers")
    return _Scaling(
        float(alpha), {str(k): float(v) for k, v in patterns.items()}, rslora=bool(config.get("use_rslora"))
    )


@dataclass
class _Pair:
    module: str  # the base module, e.g. model.layers.0.self_attn.q_proj
    a: SourceTensor | None = None
    b: SourceTensor | None = None


def convert_lora(adapter: Checkpoint, base: HeaderSource, dst: Path) -> list[str]:
    """Write ``dst``, the LoRA GGUF of ``adapter`` for ``base`` (its GGUF header, read verbose);
    what was left out, in words for the user. ``ImportRefused`` for what cllm does not convert."""
    config = adapter.json(CONFIG)
    if config is None:
        raise ImportRefused(
            f"the adapter has no {CONFIG}: send it beside the adapter's safetensors (cllm's CLI sends "
            "both for ADAPTER ./folder; ollama's sends only the file ADAPTER names)"
        )
    scaling = _scaling(config)
    family = Family.of_gguf(base.architecture, base.model_info)
    pairs, notes = _pairs(adapter, family)
    if not pairs:
        raise ImportRefused("the adapter's safetensors hold no LoRA tensors")
    base_names = {str(t["name"]) for t in base.tensors}
    tensors: list[Tensor] = []
    for name, pair in sorted(pairs.items()):
        tensors += _tensors(name, pair, family, scaling, base_names)
    kv: KV = {
        "general.type": ("adapter", GGUFValueType.STRING),
        "general.name": (adapter.name, GGUFValueType.STRING),
        "adapter.type": ("lora", GGUFValueType.STRING),
        "adapter.lora.alpha": (scaling.alpha, GGUFValueType.FLOAT32),
    }
    write(dst, family.arch, kv, tensors)
    return notes


def _pairs(adapter: Checkpoint, family: Family) -> tuple[dict[str, _Pair], list[str]]:
    """Each adapted weight's A and B by its GGUF name; what was left out."""
    pairs: dict[str, _Pair] = {}
    notes: list[str] = []
    for file, path in adapter.weights():
        for source in read(path, file):
            m = _PEFT.fullmatch(source.name) or _PEFT_EMBEDDING.fullmatch(source.name) or _MLX.fullmatch(source.name)
            if m is None:
                raise ImportRefused(
                    f"tensor {source.name} is not a LoRA's A or B: the adapter is not one cllm converts "
                    "(a DoRA, a bias or a whole module)"
                )
            module, part = m[1], m[2][-1].lower()
            hf_name = f"{module}.weight"
            if family.in_tower(hf_name):
                if TOWER_LEFT_OUT not in notes:
                    notes.append(TOWER_LEFT_OUT)
                continue
            if family.expert(hf_name) is not None or ".experts." in module:
                raise ImportRefused(f"{module}: a LoRA on a mixture's experts is not one cllm converts")
            stack = family.stacked(hf_name)  # one of several matrices llama.cpp keeps in one tensor
            name = stack[0] if stack is not None else family.gguf_name(hf_name)
            if name is None or family.unadapted(name):
                raise ImportRefused(
                    f"{module} is no weight llama.cpp adapts"
                    + (
                        f" (its {family.arch} computes {name} without adapters): merge the adapter into the model "
                        "(PEFT's merge_and_unload) and create the model from the merged folder"
                        if name is not None
                        else ""
                    )
                )
            pair = pairs.setdefault(name, _Pair(module))
            if getattr(pair, part) is not None:
                raise ImportRefused(f"{module}'s lora_{part.upper()} is in the adapter twice")
            setattr(pair, part, source)
    return pairs, notes


def _tensors(name: str, pair: _Pair, family: Family, scaling: _Scaling, base_names: set[str]) -> list[Tensor]:
    """The pair as llama.cpp's ``<name>.lora_a`` ({n_in, rank}) and ``.lora_b`` ({rank, n_out}); an
    embedding's A is stored transposed (``llm_build_inp_embd``)."""
    if pair.a is None or pair.b is None:
        raise ImportRefused(f"{pair.module} has only one of its LoRA matrices A and B")
    if name not in base_names:
        tied = name == "output.weight" and "token_embd.weight" in base_names
        why = "ties its output to the token embedding" if tied else f"has no tensor {name}"
        raise ImportRefused(f"the adapter changes {pair.module}, but the base model {why}")
    if name == "token_embd.weight" and family.arch in ("gemma2", "gemma3"):
        raise ImportRefused("a LoRA on Gemma's token embedding is not converted (llama.cpp scales it, PEFT does not)")
    a, b = _f32(pair.a), _f32(pair.b)
    if a.ndim != 2 or b.ndim != 2:
        raise ImportRefused(f"{pair.module}'s LoRA matrices are not matrices")
    if scaling.fixed is not None:  # MLX keeps x @ a @ b: a is {n_in, rank} as numpy sees it
        a, b = a.T, b.T
    rank = a.shape[0]
    if b.shape[1] != rank:
        raise ImportRefused(f"{pair.module}: A has rank {rank}, B {b.shape[1]}")
    factor = scaling.factor(pair.module, rank)
    order = family.reorder(name, (b.shape[0], a.shape[1]))  # the base weight's (out, in)
    a_order, b_order = (order, None) if order is not None and order.axis == 1 else (None, order)

    def a_columns() -> np.ndarray:
        return np.ascontiguousarray(a_order.apply(a) if a_order is not None else a)

    def b_rows() -> np.ndarray:
        rows = b_order.apply(b) if b_order is not None else b
        return np.ascontiguousarray(rows * np.float32(factor) if factor != 1.0 else rows, dtype=np.float32)

    if name == "token_embd.weight":
        a = a.T  # rows looked up by token, as the base's own rows
    return [
        Tensor(f"{name}.lora_a", _F32, a.shape, np.dtype(np.float32), a_columns),
        Tensor(f"{name}.lora_b", _F32, b.shape, np.dtype(np.float32), b_rows),
    ]


def _f32(source: SourceTensor) -> np.ndarray:
    """The tensor's values in F32 (BF16's bits widened), still a lazy view for F32 sources."""
    source.require_float()
    return to_f32(source.data, source.dtype)
