"""A sentence-transformers model's modules after its transformer (``modules.json``), as llama.cpp
runs them: how it pools its tokens into one embedding (its Pooling module's ``config.json``, as
llama.cpp's pooling type: what llama.cpp's converter reads, ``_try_set_pooling_type``), and
EmbeddingGemma's two Dense projections after the pooling (``2_Dense`` and ``3_Dense``: llama.cpp's
``dense_2`` and ``dense_3``, as Ollama's converter requires them). A folder without modules states
no pooling, and the GGUF says none either."""

from __future__ import annotations

import json
from typing import Any

from gguf import GGUFValueType, PoolingType

from ..framework import KV
from .checkpoint import Checkpoint
from .errors import ImportRefused
from .safetensors import SourceTensor, read

# The config's flags and mode names -> llama.cpp's pooling types, in sentence-transformers' order.
_FLAGS = {
    "pooling_mode_mean_tokens": PoolingType.MEAN,
    "pooling_mode_cls_token": PoolingType.CLS,
    "pooling_mode_lasttoken": PoolingType.LAST,
}
_MODES = {"mean": PoolingType.MEAN, "cls": PoolingType.CLS, "lasttoken": PoolingType.LAST}
# EmbeddingGemma's Dense modules by their folders, and llama.cpp's names for them.
_DENSE = {"2_Dense": "dense_2", "3_Dense": "dense_3"}
_IDENTITY = ("torch.nn.modules.linear.Identity", "torch.nn.Identity")


def _modules(checkpoint: Checkpoint) -> list[dict[str, Any]]:
    if not checkpoint.has("modules.json"):
        return []
    try:
        modules = json.loads(checkpoint.text("modules.json"))
    except ValueError as e:
        raise ImportRefused(f"modules.json is not valid JSON: {e}") from None
    if not isinstance(modules, list):
        raise ImportRefused("modules.json is not a list of modules")
    return [m for m in modules if isinstance(m, dict)]


def module_folders(checkpoint: Checkpoint) -> set[str]:
    """The subfolders ``modules.json`` names: where a module's weights and settings lie."""
    return {m["path"] for m in _modules(checkpoint) if isinstance(m.get("path"), str) and m["path"]}


def pooling_kv(checkpoint: Checkpoint, arch: str) -> KV:
    """``<arch>.pooling_type`` where the folder states a pooling; ``ImportRefused`` for one llama.cpp has not."""
    paths = [m.get("path") for m in _modules(checkpoint) if str(m.get("type", "")).endswith("Pooling")]
    if not paths or not isinstance(paths[0], str):
        return {}
    config = checkpoint.json(f"{paths[0]}/config.json" if paths[0] else "config.json") or {}
    kind = next((t for flag, t in _FLAGS.items() if config.get(flag)), _MODES.get(str(config.get("pooling_mode"))))
    if kind is None:
        raise ImportRefused(
            f"{paths[0]}/config.json pools otherwise than by mean, CLS or last token, as llama.cpp does"
        )
    return {f"{arch}.pooling_type": (int(kind), GGUFValueType.UINT32)}


def dense_head(checkpoint: Checkpoint, arch: str, width: int) -> tuple[KV, dict[str, SourceTensor]]:
    """EmbeddingGemma's projections after pooling: each Dense module's widths as llama.cpp's keys,
    and its weight (``linear.weight``) by llama.cpp's name. llama.cpp multiplies by them without a
    bias or an activation, and asserts (killing the process) that the first takes and the last
    gives the model's ``width``: a head otherwise is refused."""
    paths = [m.get("path") for m in _modules(checkpoint) if str(m.get("type", "")).endswith("Dense")]
    if sorted(p for p in paths if isinstance(p, str)) != sorted(_DENSE):
        raise ImportRefused("EmbeddingGemma needs its sentence-transformers modules 2_Dense and 3_Dense (modules.json)")
    kv: KV = {}
    weights: dict[str, SourceTensor] = {}
    for path, name in _DENSE.items():
        config = checkpoint.json(f"{path}/config.json") or {}
        sizes = config.get("in_features"), config.get("out_features")
        if config.get("bias") or str(config.get("activation_function", _IDENTITY[0])) not in _IDENTITY:
            raise ImportRefused(f"{path} has a bias or an activation, which llama.cpp's {arch} does not apply")
        file = f"{path}/model.safetensors"
        found = {t.name: t for t in read(checkpoint.files[file], file)} if checkpoint.has(file) else {}
        weight = found.get("linear.weight")
        if weight is None or not all(isinstance(n, int) for n in sizes) or weight.shape != sizes[::-1]:
            raise ImportRefused(f"{path} has no linear.weight of its config.json's in_features and out_features")
        kv[f"{arch}.{name}_feat_in"] = (sizes[0], GGUFValueType.UINT32)
        kv[f"{arch}.{name}_feat_out"] = (sizes[1], GGUFValueType.UINT32)
        weights[f"{name}.weight"] = weight
    widths = [
        kv[f"{arch}.{key}"][0] for key in ("dense_2_feat_in", "dense_2_feat_out", "dense_3_feat_in", "dense_3_feat_out")
    ]
    if widths[0] != width or widths[1] != widths[2] or widths[3] != width:
        raise ImportRefused(
            f"2_Dense and 3_Dense must take the model's {width} dimensions back to {width}, each to the next"
        )
    return kv, weights
