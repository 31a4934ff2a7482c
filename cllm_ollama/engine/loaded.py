"""The async face of a loaded model: ``generate()`` yields a request's events on the event loop.

A loaded model is a ``Model`` plus the ``Runner`` thread that batches over it. Leaving the
``generate`` iterator early (client gone, task cancelled) aborts the request, which frees
its slot at the next step.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import replace

import anyio.to_thread

from ..errors import EngineError, InvalidRequest, QueueFull
from .binding import (
    KV_QUANT_BLOCK,
    CacheTypeRefused,
    Lora,
    MediaPrompt,
    Model,
    Projector,
    Sampler,
    gpu_devices,
    gpu_free_memory,
    physical_cores,
    return_freed_heap,
)
from .embedder import Embedder
from .frontdoor import LoadSpec, Occupancy
from .media_budget import MediaLimits, PixelBudget
from .memory import available_memory, check_memory_fit, compute_bytes, resident_bytes
from .offload import CacheShape, Device, cache_shape, projector_device
from .probe import probe
from .request import Event, Request, SamplingParams
from .runner import Runner, Sink
from .tuning import as_set, choose
from .weights import SharedWeights

log = logging.getLogger("cllm.engine")


def resolve_kv_cache_type(cache_type: str, flash_attention: bool | None, head_dims: tuple[int, int]) -> str:
    """The cache type a model can have: a quantized one falls back to f16, with a warning, where
    llama.cpp would refuse the context (llama-context.cpp, llama_init_from_model): flash
    attention turned off (a quantized V cache needs it; Ollama's rule too), or a head size that
    is no multiple of the 32-value block. With flash attention unset llama.cpp turns it on
    for a quantized V cache, so that combination is kept, as Ollama's llama-server runner keeps it
    (its older runners dropped to f16 unless OLLAMA_FLASH_ATTENTION was on).
    """
    if cache_type == "f16":
        return cache_type
    if flash_attention is False:
        log.warning(
            "a %s KV cache needs flash attention, which OLLAMA_FLASH_ATTENTION turns off: using f16", cache_type
        )
        return "f16"
    if any(d % KV_QUANT_BLOCK for d in head_dims):
        log.warning(
            "a %s KV cache needs head sizes in multiples of %d (%d, %d): using f16",
            cache_type,
            KV_QUANT_BLOCK,
            *head_dims,
        )
        return "f16"
    return cache_type


MemoryProbe = Callable[[], int | None]


def resolved_spec(spec: LoadSpec, model: Model) -> LoadSpec:
    """What this load runs with: the spec, resolved against the model and the machine."""
    spec = spec.within_training(model.n_ctx_train)
    return replace(
        spec,
        # A client's num_thread must not be able to spawn thousands of threads.
        n_threads=min(spec.n_threads, 4 * (os.cpu_count() or 1)) if spec.n_threads > 0 else physical_cores(),
        # A client's num_batch beyond the whole context buys nothing (llama.cpp clamps its own
        # contexts to n_ctx), but the embedder sizes its context by it: 3M asked for 1.2 TB.
        n_batch=min(spec.n_batch, spec.n_ctx_slot * spec.n_slots),
        # The embedder's context is small and cleared after every batch: it stays f16.
        kv_cache_type="f16"
        if spec.embedding_only
        else resolve_kv_cache_type(spec.kv_cache_type, spec.flash_attention, model.head_dims()),
    )


def check_load_memory(
    spec: LoadSpec, model: Model, host_memory: MemoryProbe, gpu_memory: MemoryProbe, cache: CacheShape | None = None
) -> int:
    """Refuse a KV cache the machine cannot hold: allocating it would get the process killed
    (host RAM) or fail deep in llama.cpp (a GPU).

    The KV cache lives where its layer runs (llama.cpp's offload_kqv default): on the GPUs
    for offloaded layers, whose weights are loaded by now (so the free memory is net of
    them), in host RAM for the rest, beside their mmap'ed weights (page cache counts as
    available, so they are counted here), and beside the compute buffers. Its size is the
    GGUF's (``offload.cache_shape``, ``cache`` when given): the KV of the layers that have one,
    per token, and a recurrent model's state, per slot. The free memory is net of what the
    process holds already (its heap, weights it copied): that is counted too, in the refusal's
    numbers and in what it returns, the host RAM the process will hold once loaded
    (``LoadedModel.host_estimate``). Raises ``InsufficientMemory`` saying how many slots would
    fit, so the pool can retry with fewer.
    """
    gpu = gpu_memory() if model.n_gpu_layers > 0 else None
    n_layer = max(1, model.n_layer)
    host_weights, held = host_fixed_bytes(spec, model, offloaded=gpu is not None), resident_bytes()
    on_device = device_compute_bytes(spec, model) if gpu is not None else 0
    gpu_share = min(model.n_gpu_layers, n_layer) / n_layer if gpu is not None else 0.0
    cache = cache or cache_shape(spec.path)
    kv, state = cache.kv_bytes_per_token(spec.kv_cache_type), cache.state_bytes
    check_memory_fit(
        kv_bytes_per_token=kv,
        n_ctx_slot=spec.n_ctx_slot,
        n_slots=spec.n_slots,
        host_weights=host_weights,
        host_free=host_memory(),
        gpu_share=gpu_share,
        gpu_free=gpu,
        host_held=held,
        state_bytes=state,
        gpu_fixed=on_device,
    )
    return held + host_weights + int((kv * spec.n_ctx_slot + state) * (1 - gpu_share)) * spec.n_slots


def host_fixed_bytes(spec: LoadSpec, model: Model, *, offloaded: bool) -> int:
    """What a load adds in host RAM besides its KV cache: the weights' host copy (the mmap'ed
    file's pages of the layers not offloaded, which the kernel counts as free page cache until
    they are read), the projector's and adapters' files, and the generation context's compute
    buffers (``compute_bytes``) but for those on the GPUs (``device_compute_bytes``)."""
    files = sum(path.stat().st_size for path in (spec.projector, *spec.adapters) if path is not None)
    weights = model.size_bytes - (on_gpus(model, model.size_bytes) if offloaded else 0)
    on_device = device_compute_bytes(spec, model) if offloaded else 0
    return weights + files + context_compute_bytes(spec, model) - on_device


def context_compute_bytes(spec: LoadSpec, model: Model) -> int:
    """The generation context's compute buffers (``compute_bytes``; none for an embedding model)."""
    if spec.embedding_only:
        return 0
    # Without flash attention: each head's scores and the f32 mask over a slot's cells.
    scores = (model.n_head + 1) * spec.n_ctx_slot if spec.flash_attention is False else 0
    return compute_bytes(min(spec.n_batch, 512), _outputs(spec), model.n_vocab, model.n_embd, scores)


def device_compute_bytes(spec: LoadSpec, model: Model) -> int:
    """The part of ``context_compute_bytes`` on the GPUs once layers are offloaded: the graph's
    buffer, where the attention scores of a context without flash attention are (970 MiB at
    32k for Qwen2.5-0.5B); the logits' output buffer stays in host RAM."""
    if spec.embedding_only:
        return 0
    return context_compute_bytes(spec, model) - 4 * _outputs(spec) * model.n_vocab


def _outputs(spec: LoadSpec) -> int:
    """The logits rows a step of the generation context may return (two per slot)."""
    return 2 * spec.n_slots


def on_gpus(model: Model, nbytes: int) -> int:
    """The part of ``nbytes`` (the weights, or the whole footprint) on GPUs: pro rata of the
    offloaded layers (+1: the output), so a model wholly offloaded holds all of it there."""
    n = model.n_layer + 1
    return nbytes * min(model.n_gpu_layers, n) // n


class LoadedModel:
    """A model in memory with its engine thread; safe to call from the event loop."""

    def __init__(
        self,
        spec: LoadSpec,
        max_queue: int,
        *,
        host_memory: MemoryProbe | None = None,
        gpu_memory: MemoryProbe | None = None,
        weights: SharedWeights | None = None,
        devices: Callable[[], list[tuple[str, int, int]]] = gpu_devices,
        media: MediaLimits | None = None,
        pixel_budget: PixelBudget | None = None,
    ) -> None:
        """Blocking (reads weights, allocates the KV cache): call it from a worker thread.

        ``host_memory``, ``gpu_memory``: free bytes of each (by default looked up at each load);
        ``weights`` hands out the ``llama_model`` (the pool's, shared by the models over the same
        file); ``devices`` lists the GPUs (name, free, total) the layers are fitted to. Raises
        ``InsufficientMemory`` when the KV cache would not fit, ``AdapterRefused`` (a 400) for
        an adapter the weights do not take. ``media``, ``pixel_budget``: the server's limits on
        a request's images and audio, and its pixels being decoded (``media_budget``)."""
        self._media = (media, pixel_budget)
        self._weights = weights or SharedWeights()
        held = self._weights.layout(spec.path, spec.deterministic) if spec.n_gpu_layers < 0 else None
        if held is not None:  # the weights are placed already: only this model's cache is fitted
            spec = replace(spec, n_gpu_layers=held[0], tensor_split=held[1])
        spec, self.placement = choose(spec, [Device(name, free) for name, free, _ in devices()])
        self.spec = spec
        # Weights this process holds passed their probe: the child checks what is new (adapters, a
        # projector) on the CPU, where it needs no second copy's room on the GPUs.
        probe_layers = 0 if held is not None else spec.n_gpu_layers
        audio_refused = probe(
            spec.path,
            n_gpu_layers=probe_layers,
            embedding_only=spec.embedding_only,
            projector=None if spec.embedding_only else spec.projector,
            adapters=spec.adapters,
            stall_timeout=spec.load_timeout,
            on_gpu=self.placement is not None and probe_layers > 0,
        )
        # What llama.cpp's KV cache and recurrent state take, read once (the file may go while loaded).
        self.cache_shape = cache_shape(spec.path)
        self.model = self._weights.acquire(
            spec.path, spec.n_gpu_layers, spec.deterministic, spec.tensor_split, spec.load_timeout, spec.use_mmap
        )
        self.runner: Runner | None = None
        # Owned beside the model, closed after the runner (whose prompts it tokenized) and before it.
        self.projector: Projector | None = None
        # This model's adapters: loaded against the shared weights, set on its own contexts only.
        self.adapters: list[Lora] = []
        try:
            resolved = resolved_spec(spec, self.model)
            probes = (host_memory or available_memory, gpu_memory or gpu_free_memory)
            # The host RAM this load should leave the process holding: measured against in a test.
            self.host_estimate = check_load_memory(resolved, self.model, *probes, self.cache_shape)
            self._load_beside(resolved, audio_refused)
            if not spec.embedding_only:
                resolved = self._start_runner(resolved, probes)
            self.embedder = self._embedder(resolved)
        except Exception:  # what was made is released, the engine thread first
            if self.runner is not None:
                self.runner.close()
            self._free_model()
            raise
        self.resolved = resolved
        # What the generation context got (llama.cpp may still have refused a quantized one).
        self.kv_cache_type = resolved.kv_cache_type
        self._n_ctx_slot = self.runner.n_ctx_slot if self.runner else resolved.n_ctx_slot
        self.max_queue = max_queue
        self.in_flight = 0

    def _load_beside(self, resolved: LoadSpec, audio_refused: str | None) -> None:
        """The adapters and the projector, over the weights (``_free_model`` releases them)."""
        spec = self.spec
        for path in spec.adapters:
            self.adapters.append(Lora(self.model, path, spec.adapter_scale))
        if spec.projector is not None and not spec.embedding_only:
            limits, budget = self._media
            self.projector = Projector(
                self.model,
                spec.projector,
                n_threads=resolved.n_threads,
                use_gpu=spec.n_gpu_layers != 0,
                device=projector_device(spec.n_gpu_layers, spec.tensor_split) if self.placement else None,
                limits=limits,
                budget=budget,
            )
            self.projector.audio_refused = audio_refused

    def _embedder(self, resolved: LoadSpec) -> Embedder:
        """The embedding side (its context is made lazily, at the first embed)."""
        return Embedder(
            self.model,
            n_seq_max=resolved.n_slots,
            n_ctx_seq=resolved.n_ctx_slot,
            n_batch=resolved.n_batch,
            n_threads=resolved.n_threads,
            flash_attn=as_set(self.spec, "flash_attention"),
            adapters=self.adapters,
        )

    def _start_runner(self, resolved: LoadSpec, probes: tuple[MemoryProbe, MemoryProbe]) -> LoadSpec:
        """The engine thread over ``resolved``, or over an f16 cache when llama.cpp refuses the
        quantized one: the spec it runs with."""
        try:
            self.runner = Runner(self.model, resolved, adapters=self.adapters)
        except CacheTypeRefused as exc:
            # An f16 cache is 2-4x the quantized one: it must fit on its own account.
            log.warning("%s: using f16", exc)
            resolved = replace(resolved, kv_cache_type="f16")
            self.host_estimate = check_load_memory(resolved, self.model, *probes, self.cache_shape)
            self.runner = Runner(self.model, resolved, adapters=self.adapters)
        return resolved

    def occupancy(self) -> Occupancy:
        """Requests in slots, requests queued for one, and the KV cells in use, at this moment."""
        if self.runner is None:
            return Occupancy(running=0, waiting=0, cells_used=0, cells_total=0)
        return self.runner.occupancy()

    @property
    def n_ctx_slot(self) -> int:
        return self._n_ctx_slot

    @property
    def dead(self) -> str | None:
        """Why the engine thread stopped for good (None while it runs): the pool reloads then."""
        return self.runner.dead if self.runner is not None else None

    @property
    def n_ctx_train(self) -> int:
        return self.model.n_ctx_train or self.n_ctx_slot

    @property
    def n_slots(self) -> int:
        return self.spec.n_slots

    @property
    def size_bytes(self) -> int:
        """What the model holds in memory, as Ollama's /api/ps counts it (its runner's whole
        footprint): the weights, every slot's KV cache and recurrent state, the compute buffers."""
        spec, model = self.spec, self.model
        cache = self.cache_shape
        per_slot = cache.kv_bytes_per_token(spec.kv_cache_type) * spec.n_ctx_slot + cache.state_bytes
        return model.size_bytes + per_slot * spec.n_slots + context_compute_bytes(spec, model)

    @property
    def size_vram(self) -> int:
        """The part of ``size_bytes`` on GPUs (``100% GPU`` wholly offloaded, none on the CPU)."""
        return on_gpus(self.model, self.size_bytes)

    @property
    def bos_text(self) -> str:
        return self.model.token_text(self.model.bos) if self.model.bos >= 0 else ""

    @property
    def eos_text(self) -> str:
        return self.model.token_text(self.model.eos) if self.model.eos >= 0 else ""

    def tokenize(self, text: str, *, add_special: bool = True, parse_special: bool = True) -> list[int]:
        return self.model.tokenize(text, add_special=add_special, parse_special=parse_special)

    def detokenize(self, tokens: list[int]) -> str:
        if any(not 0 <= t < self.model.n_vocab for t in tokens):
            raise InvalidRequest(f"invalid token id: the vocabulary has {self.model.n_vocab} tokens")
        return self.model.detokenize(tokens) if tokens else ""

    def fim_tokens(self) -> tuple[int, int, int] | None:
        return self.model.fim_tokens()

    @property
    def media_marker(self) -> str | None:
        return self.projector.marker if self.projector is not None else None

    def tokenize_media(self, text: str, images: Sequence[bytes], *, add_special: bool = True) -> MediaPrompt:
        if self.projector is None:
            raise InvalidRequest("this model was loaded without a projector: it takes no images or audio")
        return self.projector.tokenize(text, images, add_special=add_special)

    def token_piece(self, token: int) -> bytes:
        return self.model.piece(token)

    def _sampler_for(self, params: SamplingParams) -> Sampler | None:
        """A native chain, or None when plain argmax in the runner gives the same token."""
        penalized = params.repeat_penalty != 1.0 or params.presence_penalty or params.frequency_penalty
        if params.greedy and not penalized:  # ``greedy`` is False with a grammar or DRY
            return None
        try:
            return Sampler(self.model, params)
        except EngineError as exc:
            raise InvalidRequest(str(exc)) from exc

    def _check(self, request: Request) -> Runner:
        """Refuse what the engine thread must never see: it would fail the whole batch."""
        if self.runner is None:
            raise InvalidRequest("this model only computes embeddings")
        if not request.prompt:
            raise InvalidRequest("prompt is empty")
        tokens = request.prompt
        if request.media is not None:
            if self.projector is None:
                raise InvalidRequest("this model was loaded without a projector: it takes no images or audio")
            if not isinstance(request.media.parts[-1], Sequence):
                # A media chunk decodes no logits: the first token is sampled after text.
                raise InvalidRequest("a prompt cannot end with an image or audio")
            tokens = tuple(t for t in tokens if t >= 0)  # an image's cells are no token ids
        if tokens and (min(tokens) < 0 or max(tokens) >= self.model.n_vocab):
            raise InvalidRequest("invalid token id in the prompt or context")
        if not self.has_room():
            raise QueueFull()
        return self.runner

    def has_room(self) -> bool:
        return self.in_flight < self.n_slots + self.max_queue

    async def generate(self, request: Request) -> AsyncGenerator[Event, None]:
        """Events of one request until its final one; raises QueueFull beyond the queue limit.

        The engine builds the request's sampler from ``request.sampling`` and owns it: it is
        freed when the request ends, however it ends.
        """
        runner = self._admitted(request)
        queue: asyncio.Queue[Event] = asyncio.Queue()
        sink = Sink(queue, asyncio.get_running_loop())
        self.in_flight += 1
        lock = threading.Lock()
        submitted = abandoned = finished = False
        # While its chain is built off the event loop, the request counts as queued: the runner
        # holds a reservation that ``submit`` turns into the request itself, atomically.
        reserved = slow = request.sampling.slow_to_build

        def submit() -> None:
            nonlocal submitted, reserved
            sampler = self._sampler_for(request.sampling)
            with lock:
                if abandoned:  # the caller is gone (cancelled while the chain was built)
                    if sampler is not None:
                        sampler.close()
                    return
                reserved = False  # submit takes the reservation over, even when it refuses
                runner.submit(request, sampler, sink, reserved=slow)
                submitted = True

        try:
            if not slow:
                submit()  # a chain without a grammar or DRY takes microseconds
            else:
                # llama.cpp parses the grammar (or DRY reads the vocabulary) while building the
                # chain: neither on the event loop nor on the engine thread, where it would stall
                # every other request's step.
                runner.reserve()
                await anyio.to_thread.run_sync(submit)
            while True:
                event = await queue.get()
                if sink.consume():
                    runner.wake()  # it may have paused this slot
                if event.finish is not None:
                    finished = True
                yield event
                if finished:
                    return
        finally:
            self.in_flight -= 1
            with lock:
                # A cancelled task does not wait for the thread: whichever of the two comes
                # second, it or this, sees the other and no request is left without a reader.
                abandoned = True
                if submitted and not finished:
                    runner.abort(request.id)
                if reserved:  # never submitted (the chain failed, or the caller left first)
                    reserved = False
                    runner.unreserve()
                if not submitted and request.media is not None:  # never the runner's
                    request.media.close()

    def _admitted(self, request: Request) -> Runner:
        """The runner that will take ``request`` (``_check``); a refused request's media is freed
        here, as nothing else will own it."""
        try:
            return self._check(request)
        except Exception:
            if request.media is not None:
                request.media.close()
            raise

    def close(self) -> None:
        """Blocking: stops the engine threads (cancelling what runs) and frees the model."""
        if self.runner is not None:
            self.runner.close()
        self.embedder.close()
        self._free_model()

    def free_engine(self) -> None:
        """Blocking: a dead engine's context (its KV cache and compute buffers: on the GPUs where
        layers are offloaded) freed now, so that the model's replacement loads into that memory
        while a request still holds this one for its vocabulary or embedder; ``close`` frees the rest."""
        if self.runner is not None and self.runner.dead is not None:
            self.runner.close()

    def _free_model(self) -> None:
        """What sits on the weights first (projector, adapters: no context uses them now), then
        this model's hold on the weights, which frees them when no other model shares them."""
        if self.projector is not None:
            self.projector.close()
        for adapter in self.adapters:
            adapter.close()
        self._weights.release(self.model)
        return_freed_heap()  # what llama.cpp freed, out of the resident set the next load is checked against
