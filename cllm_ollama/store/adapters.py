"""LoRA adapters at ``/api/create``: accepted as Ollama accepts them (one GGUF adapter, or a
safetensors adapter's files, converted), and checked against their base model here, where a wrong
base is still a 400, not a failed load later.

The checks are llama.cpp's own (``llama_adapter_lora_init``, src/llama-adapter.cpp): a LoRA GGUF,
the base's architecture, and for every ``X.lora_a``/``X.lora_b`` pair a tensor ``X`` in the base
whose shape the pair fits. Ollama stores an adapter unchecked and fails at load instead.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest
from .gguf_info import GGUFInfo

# Ollama's error for more than one GGUF adapter (server/create.go).
ONLY_ONE_ADAPTER = "only one adapter is currently supported"


def check_adapter_names(adapters: dict[str, str]) -> None:
    """What the request alone tells of GGUF adapters: Ollama's one-adapter rule."""
    if len(adapters) > 1:
        raise InvalidRequest(ONLY_ONE_ADAPTER)


def check_adapter(filename: str, adapter: GGUFInfo, base: GGUFInfo) -> None:
    """Refuse an adapter llama.cpp would refuse for ``base`` (both read with ``verbose=True``)."""
    kv = adapter.model_info
    if kv.get("general.type") != "adapter" or kv.get("adapter.type") != "lora":
        kind = kv.get("adapter.type") or kv.get("general.type") or "model"
        raise InvalidRequest(f"{filename}: not a LoRA adapter (the GGUF is a {kind})")
    if adapter.architecture != base.architecture:
        raise InvalidRequest(
            f"{filename}: the adapter is for architecture {adapter.architecture!r}, "
            f"the base model is {base.architecture!r}"
        )
    shapes = {t["name"]: t["shape"] for t in base.tensors}
    pairs: dict[str, dict[str, list[int]]] = {}
    for tensor in adapter.tensors:
        name, _, part = str(tensor["name"]).rpartition(".")
        if part in ("lora_a", "lora_b"):
            pairs.setdefault(name, {})[part] = tensor["shape"]
    if not pairs:
        raise InvalidRequest(f"{filename}: the adapter has no LoRA tensors")
    if "token_embd.weight" in pairs and "output.weight" not in shapes:
        # llama.cpp would apply the embedding's pair to the output matrix too, and abort.
        raise InvalidRequest(
            f"{filename}: the adapter changes the token embedding, which the base model also uses as "
            "its output: llama.cpp cannot apply it there"
        )
    for name, pair in pairs.items():
        problem = _pair_problem(name, pair, shapes.get(name))
        if problem:
            raise InvalidRequest(f"{filename}: the adapter does not fit the base model: {problem}")


def _pair_problem(name: str, pair: dict[str, Any], target: list[int] | None) -> str | None:
    """llama.cpp's shape rules (GGUF dims, ne order): A is {n_in, r}, B is {r, n_out} for a
    weight {n_in, n_out}; the token embedding's pair is stored the other way round."""
    if "lora_a" not in pair or "lora_b" not in pair:
        return f"tensor {name} lacks its lora_a or lora_b"
    if target is None:
        return f"the base model has no tensor {name}"
    a, b = pair["lora_a"], pair["lora_b"]
    if len(a) < 2 or len(b) < 2 or len(target) < 2:
        return f"tensor {name} is not a matrix"
    if name == "token_embd.weight":
        fits = target[0] == b[1] and target[1] == a[1]
    else:
        fits = target[0] == a[0] and target[1] == b[1] and a[1] == b[0]
    return None if fits else f"tensor {name} is {target[:2]}, the adapter's pair is {a[:2]} x {b[:2]}"
