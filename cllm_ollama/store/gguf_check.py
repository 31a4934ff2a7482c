"""Hyperparameters llama.cpp asserts on, checked before anything loads them.

llama.cpp's loader answers most broken files with an error, but some values trip a
``GGML_ASSERT`` (``src/llama-model.cpp``, ``load_hparams``) or a division by zero, which kill
the whole process. These rules mirror those asserts for the values a GGUF states itself.
"""

from __future__ import annotations

import math
from typing import Any

LLAMA_MAX_LAYERS = 512
LLAMA_MAX_EXPERTS = 1024


def _ints(value: Any) -> list[int] | None:
    """A scalar or per-layer array of integers, as a list; None when absent or not integers."""
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    return values


def hyperparameter_problems(kv: dict[str, Any], arch: str) -> list[str]:
    """What in a GGUF's metadata would abort llama.cpp; empty when nothing does."""
    problems: list[str] = []

    def get(key: str) -> Any:
        return kv.get(f"{arch}.{key}")

    for key, value in kv.items():
        if key.startswith(f"{arch}.") and isinstance(value, float):
            if not math.isfinite(value):
                problems.append(f"{key} is {value}")
            elif key.endswith("epsilon") and value < 0:  # ggml's norm ops assert eps >= 0
                problems.append(f"{key} is negative")
    blocks = _ints(get("block_count"))
    if blocks is not None:
        n_layer = blocks[0]
        if not 0 < n_layer <= LLAMA_MAX_LAYERS:
            problems.append(f"{arch}.block_count {n_layer} is not between 1 and {LLAMA_MAX_LAYERS}")
        nextn = _ints(get("nextn_predict_layers"))
        if nextn and nextn[0] > n_layer:
            problems.append(f"{arch}.nextn_predict_layers {nextn[0]} is more than block_count {n_layer}")
    n_expert = (_ints(get("expert_count")) or [0])[0]
    n_used = max(_ints(get("expert_used_count")) or [0])
    n_groups = (_ints(get("expert_group_count")) or [0])[0]
    n_group_used = (_ints(get("expert_group_used_count")) or [0])[0]
    if n_expert > LLAMA_MAX_EXPERTS:
        problems.append(f"{arch}.expert_count {n_expert} is more than {LLAMA_MAX_EXPERTS}")
    if n_used > n_expert:
        problems.append(f"{arch}.expert_used_count {n_used} is more than expert_count {n_expert}")
    if n_expert > 0:
        if n_used == 0:
            problems.append(f"{arch}.expert_used_count is 0 with {n_expert} experts")
        if n_groups >= n_expert:
            problems.append(f"{arch}.expert_group_count {n_groups} is not less than expert_count {n_expert}")
        elif n_groups > 1 and (n_expert % n_groups or not 0 < n_group_used < n_groups):
            problems.append(f"{arch}.expert_group_count {n_groups} does not divide the experts into usable groups")
    elif n_groups:
        problems.append(f"{arch}.expert_group_count {n_groups} without experts")
    heads, heads_kv = _ints(get("attention.head_count")), _ints(get("attention.head_count_kv"))
    n = max(len(heads or []), len(heads_kv or []))
    if heads and heads_kv and len(heads) in (1, n) and len(heads_kv) in (1, n):
        # Per layer (a hybrid's recurrent layers have no KV heads: 0 there is theirs, not a fault).
        for head, head_kv in zip(heads * (n // len(heads)), heads_kv * (n // len(heads_kv)), strict=True):
            if head > 0 and ((n == 1 and head_kv <= 0) or (head_kv > 0 and head % head_kv)):
                problems.append(f"{arch}.attention.head_count_kv {head_kv} does not divide head_count {head}")
                break
    span = _ints(get("shortconv.l_cache"))  # LFM2's convolution: llama.cpp asserts it spans 2 or more
    if span is not None and span[0] <= 1:
        problems.append(f"{arch}.shortconv.l_cache {span[0]} is less than 2")
    for key in ("embedding_length", "context_length"):
        value = _ints(get(key))
        if value is not None and value[0] <= 0:
            problems.append(f"{arch}.{key} is {value[0]}")
    return problems
