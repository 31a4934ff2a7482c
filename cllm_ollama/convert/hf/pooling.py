"""How a sentence-transformers model pools its tokens into one embedding (``modules.json``, then its
Pooling module's ``config.json``), as llama.cpp's pooling type: what llama.cpp's converter reads
(``_try_set_pooling_type``). A folder without them states none, and the GGUF says none either."""

from __future__ import annotations

import json

from gguf import GGUFValueType, PoolingType

from ..framework import KV
from .checkpoint import Checkpoint
from .errors import ImportRefused

# The config's flags and mode names -> llama.cpp's pooling types, in sentence-transformers' order.
_FLAGS = {
    "pooling_mode_mean_tokens": PoolingType.MEAN,
    "pooling_mode_cls_token": PoolingType.CLS,
    "pooling_mode_lasttoken": PoolingType.LAST,
}
_MODES = {"mean": PoolingType.MEAN, "cls": PoolingType.CLS, "lasttoken": PoolingType.LAST}


def pooling_kv(checkpoint: Checkpoint, arch: str) -> KV:
    """``<arch>.pooling_type`` where the folder states a pooling; ``ImportRefused`` for one llama.cpp has not."""
    if not checkpoint.has("modules.json"):
        return {}
    try:
        modules = json.loads(checkpoint.text("modules.json"))
    except ValueError as e:
        raise ImportRefused(f"modules.json is not valid JSON: {e}") from None
    if not isinstance(modules, list):
        raise ImportRefused("modules.json is not a list of modules")
    paths = [m.get("path") for m in modules if isinstance(m, dict) and str(m.get("type", "")).endswith("Pooling")]
    if not paths or not isinstance(paths[0], str):
        return {}
    config = checkpoint.json(f"{paths[0]}/config.json" if paths[0] else "config.json") or {}
    kind = next((t for flag, t in _FLAGS.items() if config.get(flag)), _MODES.get(str(config.get("pooling_mode"))))
    if kind is None:
        raise ImportRefused(
            f"{paths[0]}/config.json pools otherwise than by mean, CLS or last token, as llama.cpp does"
        )
    return {f"{arch}.pooling_type": (int(kind), GGUFValueType.UINT32)}
