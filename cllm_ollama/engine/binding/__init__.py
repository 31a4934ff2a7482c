"""The only package that touches llama.cpp: pointers, ctypes structs and return codes live here.

Everything it hands out is plain Python (ints, bytes, numpy views). ``core`` holds models,
contexts, batches and samplers; ``media`` libmtmd (projectors and prompts with images or audio);
``lora`` adapters; ``heap`` the C library's kept memory. The engine imports from here, never from
the parts.
"""

from ..media_budget import MAX_IMAGE_PIXELS
from .core import (
    KV_QUANT_BLOCK,
    POOLING_RANK,
    STATE_FORMAT,
    Batch,
    CacheTypeRefused,
    Context,
    DecodeError,
    Model,
    Sampler,
    batch_invariant_kernels,
    cpu_weight_layouts,
    gpu_devices,
    gpu_free_memory,
    grammar_parses,
    physical_cores,
    quantize,
)
from .heap import return_freed_heap
from .lora import AdapterRefused, Lora, with_adapters
from .media import (
    MAX_AUDIO_SECONDS,
    MediaItem,
    MediaPrompt,
    Projector,
    TextRun,
    media_marker,
)
from .pixels import is_image
from .state_buffers import StateBuffers
from .token_rows import TokenRows, token_rows

__all__ = [
    "KV_QUANT_BLOCK",
    "MAX_AUDIO_SECONDS",
    "MAX_IMAGE_PIXELS",
    "POOLING_RANK",
    "STATE_FORMAT",
    "AdapterRefused",
    "Batch",
    "CacheTypeRefused",
    "Context",
    "DecodeError",
    "Lora",
    "MediaItem",
    "MediaPrompt",
    "Model",
    "Projector",
    "Sampler",
    "StateBuffers",
    "TextRun",
    "TokenRows",
    "batch_invariant_kernels",
    "cpu_weight_layouts",
    "gpu_devices",
    "gpu_free_memory",
    "grammar_parses",
    "is_image",
    "media_marker",
    "physical_cores",
    "quantize",
    "return_freed_heap",
    "token_rows",
    "with_adapters",
]
