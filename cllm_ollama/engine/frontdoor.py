"""The engine's front door: everything the API layer may touch of a loaded model, typed once.

As vLLM's ``EngineClient`` and Ollama's ``llm.LlamaServer``: the HTTP edge and the model pool
see a loaded model only through ``EngineClient`` (tokenize, generate, embed, occupancy, close,
and the facts of its context), and ask for one with a ``LoadSpec``. ``loaded.LoadedModel`` is
the real one; every test fake implements the same protocol, so a type checker
(``mypy cllm_ollama/engine tests/fakeengine.py``) catches a fake that drifts from it.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .blocks import BLOCK
from .prompt_cache import MIN_TOKENS
from .request import Event, MediaInput, Request

if TYPE_CHECKING:
    from ..config import Settings

# Tokens per block of prefix matching: the KV cache's "block size" as vLLM's metrics report it.
PREFIX_BLOCK = BLOCK


@dataclass(frozen=True)
class LoadSpec:
    """Everything that fixes how a model is loaded; a change in any field means a reload.

    Named once, from the settings (``config.Settings``) through the pool to the runner and the
    binding's context: what the load resolves (a context the weights can hold, a thread count,
    the cache type llama.cpp accepts) comes back as a ``LoadSpec`` too (``loaded.LoadedModel``).
    """

    path: Path
    n_slots: int
    n_ctx_slot: int
    n_batch: int = 512
    n_gpu_layers: int = -1
    n_threads: int = 0
    # Encoder models (BERT-like) embed only: no generation slots, no KV cache for them.
    embedding_only: bool = False
    # The projector (an ``mmproj`` GGUF) of a model that sees: loaded beside it by libmtmd.
    projector: Path | None = None
    # LoRA adapters (Ollama's ``ADAPTER``), applied at ``adapter_scale`` (Ollama's runner: 1.0) to this
    # model's own contexts over weights shared with its base: the pool keys models by (path, adapters).
    adapters: tuple[Path, ...] = ()
    adapter_scale: float = 1.0
    # Host RAM for saved prompt states, and prompt tokens per step beside generation (0: no cap).
    cache_bytes: int = 0
    max_prefill: int = 0
    # The step time (ns) to keep to while streams generate (0: from measured costs, ``step_budget``).
    target_itl_ns: int = 0
    # The longest gap of idle slots between a decode step's that throw-away rows close (``gap_fill``).
    gap_fill: int = 0
    # K/V cache element type (kv_types.KV_CACHE_TYPES) and flash attention (None: llama.cpp's auto;
    # unset by the operator, ``tuning`` turns it off for a model wholly on the CPU).
    kv_cache_type: str = "f16"
    flash_attention: bool | None = None
    # The shortest prompt state worth saving in the host cache (tests save short ones).
    cache_min_tokens: int = MIN_TOKENS
    # Saved prompt states on disk, under host RAM: where, and how many bytes in all (0: off).
    cache_dir: Path | None = None
    cache_disk_bytes: int = 0
    # Batch-invariant decoding (``invariance``): no weight repacking, steps shaped so that every
    # token takes the same llama.cpp kernels whatever else is in the batch.
    deterministic: bool = False
    # Bytes kept free on each GPU, and whether a model spreads over every GPU (engine/offload.py).
    gpu_overhead: int = 0
    sched_spread: bool = False
    # Each GPU's share of the offloaded layers (empty: one GPU, or llama.cpp's own split).
    tensor_split: tuple[float, ...] = ()
    # The one GPU (an index into those found) that takes every offloaded layer (-1: the fit chooses).
    main_gpu: int = -1
    # Weights read through a memory map (llama.cpp's default) or copied into memory.
    use_mmap: bool = True
    # How long a load may go without progress before it is given up (``load_stall``; inf: never).
    load_timeout: float = math.inf
    # The fields the operator left unset, each with its CPU default: the device a model lands on
    # chooses them (engine/tuning.py); a request or a retry that sets one takes it out.
    tunable: tuple[tuple[str, int | None], ...] = ()

    def within_training(self, n_ctx_train: int) -> LoadSpec:
        """This spec with slots no longer than the context the weights were trained on (0: unknown),
        as llama.cpp's and Ollama's loads cap it: decided before the load too, since fitting layers
        to memory and the CPU's flash-attention default both turn on a slot's length."""
        return replace(self, n_ctx_slot=max(16, min(self.n_ctx_slot, n_ctx_train or self.n_ctx_slot)))

    @classmethod
    def from_settings(cls, settings: Settings) -> LoadSpec:
        """The server's defaults (no model yet): the one place Ollama's setting names become these."""
        return cls(
            path=Path(),
            n_slots=settings.num_parallel,
            n_ctx_slot=settings.context_length,
            n_batch=settings.num_batch,
            n_threads=settings.num_thread,
            cache_bytes=settings.cache_ram_mib << 20,
            cache_dir=settings.cache_dir,
            cache_disk_bytes=settings.cache_disk_mib << 20,
            max_prefill=settings.prefill_chunk,
            target_itl_ns=settings.target_itl_ms * 1_000_000,
            gap_fill=settings.gap_fill,
            kv_cache_type=settings.kv_cache_type,
            flash_attention=settings.flash_attention,
            deterministic=settings.deterministic,
            gpu_overhead=settings.gpu_overhead,
            sched_spread=settings.sched_spread,
            load_timeout=settings.load_timeout,
            tunable=(
                (("n_slots", settings.num_parallel),) * ("num_parallel" in settings.unset)
                + (("n_batch", settings.num_batch),) * ("num_batch" in settings.unset)
                + (("gap_fill", settings.gap_fill),) * ("gap_fill" in settings.unset)
                + (("flash_attention", settings.flash_attention),) * ("flash_attention" in settings.unset)
            ),
        )


@dataclass(frozen=True)
class Occupancy:
    """What a model's engine holds at one moment (the metrics' gauges)."""

    running: int  # requests in a slot (prefilling, waiting for a prefix, generating, or paused)
    waiting: int  # requests queued for a slot
    cells_used: int  # KV cells the running requests hold
    cells_total: int


class Embedding(Protocol):
    """A loaded model's embedding side."""

    @property
    def n_ctx(self) -> int:
        """The longest input, in tokens."""
        ...

    async def embed(self, inputs: Sequence[Sequence[int]], *, normalize: bool = True) -> list[np.ndarray]: ...

    async def rank(self, query: str, documents: Sequence[str]) -> tuple[list[float], int]:
        """A reranker's (rank pooling) score of each document for ``query``, and the tokens evaluated."""
        ...


class EngineClient(Protocol):
    """A model in memory with its engine; safe to call from the event loop (``close`` blocks)."""

    @property
    def spec(self) -> LoadSpec:
        """What it was loaded with (the slots it runs may be fewer: ``n_slots``)."""
        ...

    # -- the facts of its context ------------------------------------------------------------
    @property
    def n_slots(self) -> int: ...

    @property
    def n_ctx_slot(self) -> int:
        """Tokens of context per slot, as loaded."""
        ...

    @property
    def n_ctx_train(self) -> int: ...

    @property
    def size_bytes(self) -> int: ...

    @property
    def size_vram(self) -> int: ...

    @property
    def bos_text(self) -> str: ...

    @property
    def eos_text(self) -> str: ...

    @property
    def dead(self) -> str | None:
        """Why the engine stopped for good (None while it runs): the pool loads it again."""
        ...

    # -- tokens ------------------------------------------------------------------------------
    def tokenize(self, text: str, *, add_special: bool = True, parse_special: bool = True) -> list[int]: ...

    def detokenize(self, tokens: list[int]) -> str:
        """The text of token ids, special tokens written out; InvalidRequest for an id outside the vocabulary."""
        ...

    @property
    def media_marker(self) -> str | None:
        """The text that stands for one image in a prompt (None: loaded without a projector)."""
        ...

    def tokenize_media(self, text: str, images: Sequence[bytes], *, add_special: bool = True) -> MediaInput:
        """``text``, with one ``media_marker`` per image in order, tokenized with the images (blocking:
        it decodes them). The caller owns the result until it goes into a ``Request``."""
        ...

    def token_piece(self, token: int) -> bytes: ...

    def fim_tokens(self) -> tuple[int, int, int] | None:
        """(prefix, suffix, middle) fill-in-the-middle tokens, or None without them."""
        ...

    # -- work --------------------------------------------------------------------------------
    def has_room(self) -> bool:
        """Whether ``generate`` would queue a request now (else it raises QueueFull): asked just
        before a stream sends its headers, so that a full queue is still a 503."""
        ...

    def generate(self, request: Request) -> AsyncGenerator[Event, None]:
        """Events of one request until its final one; leaving early aborts it."""
        ...

    @property
    def embedder(self) -> Embedding: ...

    def occupancy(self) -> Occupancy: ...

    def free_engine(self) -> None:
        """Blocking: once ``dead``, what the engine held (its KV cache) freed before ``close``,
        while requests still hold the model."""
        ...

    def close(self) -> None:
        """Blocking: stops the engine (cancelling what runs) and frees the model."""
        ...
