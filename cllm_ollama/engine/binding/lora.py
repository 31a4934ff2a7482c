"""LoRA adapters: an Ollama ``ADAPTER``, applied to every context made for the adapted model.

llama.cpp applies adapters per context, not per sequence: an adapted model gets contexts of its own
over the base's shared ``llama_model``.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path

import llama_cpp as ll

from ...errors import EngineError, InvalidRequest
from .core import Context, Model


class AdapterRefused(InvalidRequest):
    """llama.cpp would not load an adapter for this model: another architecture or other tensor shapes."""


class Lora:
    """A LoRA adapter loaded against a ``Model``, applied at ``scale`` to a context once ``with_adapters``
    sets it there. Its owner frees it after every context using it and before the model."""

    def __init__(self, model: Model, path: Path, scale: float = 1.0) -> None:
        ptr = ll.llama_adapter_lora_init(model.ptr, str(path).encode())
        if not ptr:
            raise AdapterRefused(
                f"the adapter does not fit model {model.path.name}: llama.cpp refused it "
                "(another architecture, tensor shapes or a file that is no LoRA GGUF)"
            )
        self._ptr = ptr
        self.path = path
        self.scale = scale

    def close(self) -> None:
        if self._ptr:
            ll.llama_adapter_lora_free(self._ptr)
            self._ptr = None


def with_adapters(ctx: Context, adapters: Sequence[Lora]) -> Context:
    """``ctx`` with ``adapters`` set on it, each at its scale; closed if llama.cpp refuses them.
    llama.cpp applies a context's adapters to every token it decodes, which is why an adapted
    model has its own contexts. No adapters: ``ctx`` as it is."""
    if not adapters:
        return ctx
    n = len(adapters)
    ptrs = (ll.llama_adapter_lora_p_ctypes * n)(*(a._ptr for a in adapters))
    scales = (ctypes.c_float * n)(*(a.scale for a in adapters))
    if ll.llama_set_adapters_lora(ctypes.c_void_p(ctx.ptr), ptrs, n, scales) != 0:
        ctx.close()
        raise EngineError("llama.cpp could not set the adapters on the context")
    return ctx
