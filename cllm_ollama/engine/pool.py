"""Which models are in memory: load on first use, keep_alive expiry, LRU eviction, reloads.

This is Ollama's "scheduler" (sched.go); token batching is ``scheduler.py``'s. It runs on
the event loop only; loading and unloading happen in worker threads.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import anyio.to_thread

from ..errors import InsufficientMemory
from .binding import batch_invariant_kernels, gpu_devices
from .frontdoor import EngineClient, LoadSpec
from .grammar import GrammarChecker
from .loaded import LoadedModel
from .media_budget import MediaLimits, PixelBudget
from .offload import Device
from .tuning import choose, pinned, raised
from .weights import SharedWeights

log = logging.getLogger("cllm.engine")


# Models loaded at once per GPU found (a CPU counts as one) where the operator set no number:
# Ollama's defaultModelsPerGPU.
MODELS_PER_GPU = 3


def _log_devices() -> int:
    """Say which GPUs llama.cpp found (layers are fitted to them: ``offload``), or that none was;
    return how many."""
    devices = gpu_devices()
    if not devices:
        log.info("no GPU found (llama.cpp built for the CPU, or no device visible): layers run on the CPU")
    for name, free, total in devices:
        log.info("GPU %s: %.1f GiB free of %.1f GiB", name, free / 2**30, total / 2**30)
    return len(devices)


@dataclass(frozen=True)
class LoadRequest:
    """What a request asks of the pool. ``None`` fields mean "whatever is loaded is fine"."""

    path: Path
    name: str
    digest: str
    num_ctx: int | None = None
    num_batch: int | None = None
    num_gpu: int | None = None
    num_thread: int | None = None
    main_gpu: int | None = None
    use_mmap: bool | None = None
    # Slots (parallel sequences) for this model: a Modelfile's num_parallel; None: the server's.
    num_parallel: int | None = None
    # Batch-invariant decoding for this model; None: the server's (CLLM_DETERMINISTIC).
    deterministic: bool | None = None
    embedding_only: bool = False
    # A model that sees: its projector, loaded beside it.
    projector: Path | None = None
    # LoRA adapters: a model of its own (its own context and slots) over the base's weights.
    adapters: tuple[Path, ...] = ()

    @property
    def key(self) -> Key:
        return (self.path, self.projector, self.adapters)


# What the pool keys a loaded model by: its weights, its projector and its adapters (a base and
# its adapted models are loaded side by side, sharing one ``llama_model``; two models made from
# one text GGUF with different projectors, or one with and one without, are two runners: Ollama's
# converter layouts map to text files byte-identical to llama.cpp's, so they share a blob).
Key = tuple[Path, Path | None, tuple[Path, ...]]


def _key(spec: LoadSpec) -> Key:
    return (spec.path, spec.projector, spec.adapters)


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """The pool's time: wall-clock seconds (``expires_at``, shown by /api/ps), a monotonic
    clock (LRU order) and timers (keep_alive). Tests pass a fake one that they move by hand."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer: ...


class SystemClock:
    """Real time, and timers on the running event loop."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_later(delay, callback)


@dataclass(eq=False)
class Entry:
    name: str
    digest: str
    model: EngineClient
    last_used: float  # monotonic seconds
    refs: int = 0
    keep_alive: float = 300.0
    expires_at: float = math.inf  # wall-clock seconds
    timer: Timer | None = None
    draining: bool = False  # a reload waits for it to go idle
    # The slots asked for; the model may run fewer when memory was short (model.n_slots).
    slots_asked: int = 0
    # The GPU layers asked for (-1: fitted to memory); the model holds what the fit gave (its spec's).
    gpu_asked: int = -1


def _stop_timer(entry: Entry) -> None:
    """Cancel ``entry``'s keep_alive expiry, if one is pending."""
    if entry.timer is not None:
        entry.timer.cancel()
        entry.timer = None


Loader = Callable[[LoadSpec, int], EngineClient]
# Whether a load of this spec would leave layers on the CPU, its layers fitted to the GPUs now.
SplitCheck = Callable[[LoadSpec], bool]


def split_onto_cpu(spec: LoadSpec) -> bool:
    """Whether ``spec``, its layers fitted to the GPUs' free memory now (``tuning.choose``, as the
    load will fit them), would leave some on the CPU. False where ``num_gpu`` was asked (that split
    is the operator's), without a GPU, or where the file cannot be read here (the load says why)."""
    if spec.n_gpu_layers >= 0:
        return False
    devices = gpu_devices()
    if not devices:
        return False
    try:
        _, placement = choose(spec, [Device(name, free) for name, free, _ in devices])
    except Exception:  # a guess only: the load reads the file again and says what is wrong
        log.debug("could not place %s ahead of its load", spec.path.name, exc_info=True)
        return False
    return placement is not None and placement.cpu_bytes > 0


class ModelPool:
    """Loaded models keyed by GGUF path and adapters: a model is never loaded twice, and weights
    are in memory once however many adapted models use them (``weights``)."""

    def __init__(
        self,
        *,
        defaults: LoadSpec,
        max_loaded: int,
        max_queue: int,
        default_keep_alive: float,
        loader: Loader | None = None,
        grammars: GrammarChecker | None = None,
        clock: Clock | None = None,
        media: MediaLimits | None = None,
        split: SplitCheck = split_onto_cpu,
    ) -> None:
        """``defaults``: how models load unless a request asks otherwise (``LoadSpec.from_settings``);
        ``media``: the limits on what a request's images and audio may cost (``media_budget``);
        ``split``: whether a load would leave layers on the CPU (``split_onto_cpu``)."""
        self._split = split
        self._defaults = defaults
        if defaults.deterministic:  # before any model computes: ggml reads it once
            batch_invariant_kernels()
        n_gpus = _log_devices()
        # 0: as Ollama, ``MODELS_PER_GPU`` for each GPU (a CPU counts as one).
        self._max_loaded = max_loaded if max_loaded > 0 else MODELS_PER_GPU * max(1, n_gpus)
        self._max_queue = max_queue
        self.default_keep_alive = default_keep_alive
        # The weights every loaded model holds, shared by a base and its adapted models.
        self.weights = SharedWeights()
        # Pixels being decoded at once, server-wide: every model's projector draws on this one.
        self.media = media or MediaLimits()
        self.pixel_budget = PixelBudget(self.media.server_pixels)
        self._loader: Loader = loader or functools.partial(
            LoadedModel, weights=self.weights, media=self.media, pixel_budget=self.pixel_budget
        )
        self._clock = clock or SystemClock()
        # Output grammars are parsed in a child process first; the pool owns that process.
        self.grammars = grammars or GrammarChecker()
        self._entries: dict[Key, Entry] = {}
        # Dead models out of service, freed as their last request lets go (``_retire``).
        self._retired: list[Entry] = []
        self._load_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Condition()
        # For the metrics: loads and unloads so far, and requests waiting for a load, by model name.
        self.loads: Counter[str] = Counter()
        self.unloads: Counter[str] = Counter()
        self.waiting_for_load: Counter[str] = Counter()

    def _spec_for(self, req: LoadRequest, current: LoadSpec | None) -> LoadSpec:
        """The spec to load: defaults (or what is loaded now) with the request's settings on top."""
        spec = current or replace(
            self._defaults,
            path=req.path,
            embedding_only=req.embedding_only,
            projector=req.projector,
            adapters=req.adapters,
        )
        if req.num_ctx is not None:
            # Never below what is loaded or the default: one client's small num_ctx must not
            # shrink everyone's context (smaller requests get a per-request limit instead).
            floor = current.n_ctx_slot if current else self._defaults.n_ctx_slot
            spec = replace(spec, n_ctx_slot=max(req.num_ctx, floor))
        if req.num_batch is not None:
            # Never below the server's: a client's tiny batch would slow everyone's prefill.
            spec = raised(spec, "n_batch", max(req.num_batch, self._defaults.n_batch))
        if req.num_gpu is not None and req.num_gpu >= 0:
            spec = replace(spec, n_gpu_layers=req.num_gpu)
        if req.num_thread:
            spec = replace(spec, n_threads=req.num_thread)
        if req.main_gpu is not None:
            spec = replace(spec, main_gpu=req.main_gpu)
        if req.use_mmap is not None:
            spec = replace(spec, use_mmap=req.use_mmap)
        if req.num_parallel:
            spec = pinned(spec, n_slots=req.num_parallel)
        if req.deterministic is not None:
            spec = replace(spec, deterministic=req.deterministic)
        return spec

    @staticmethod
    def _needs_reload(entry: Entry, req: LoadRequest) -> bool:
        """Only a larger context than loaded, or another GPU placement while idle, reloads.

        A smaller or equal ``num_ctx`` is served by the loaded context with a per-request
        limit: clients that disagree on num_ctx must not make the model thrash. ``num_batch``
        and ``num_thread`` apply when a request loads the model and never reload it: one
        client's setting would otherwise slow every other user's requests from then on.
        A different ``num_gpu``, ``main_gpu``, ``use_mmap``, ``num_parallel`` (two models made
        from one GGUF with their own Modelfile settings) or ``deterministic``, reloads only a model
        nobody is using, as Ollama's needsReload compares them.
        """
        loaded = entry.model
        if loaded.dead is not None:
            return True
        if req.num_ctx is not None and min(req.num_ctx, loaded.n_ctx_train) > loaded.n_ctx_slot:
            return True
        # Against what was asked, as Ollama's needsReload compares options: the loaded count is
        # clamped to the layers (999, "all", would never match) or fitted to memory.
        gpu = req.num_gpu is not None and req.num_gpu >= 0 and req.num_gpu != entry.gpu_asked
        slots = req.num_parallel is not None and req.num_parallel != entry.slots_asked
        mode = req.deterministic is not None and req.deterministic != loaded.spec.deterministic
        main = req.main_gpu is not None and req.main_gpu != loaded.spec.main_gpu
        mmap = req.use_mmap is not None and req.use_mmap != loaded.spec.use_mmap
        return (gpu or slots or mode or main or mmap) and entry.refs == 0

    def _asked(self, entry: Entry) -> LoadSpec:
        """What ``entry`` was loaded from, for its reload: the slots, GPU layers and split asked
        for, not those memory allowed, so the reload fits them again (a fitted layer count taken
        as a ``num_gpu`` would skip the fit: a model grown from 4k to 64k of context would keep
        every layer on a GPU that no longer holds them)."""
        return replace(
            entry.model.spec,
            n_slots=entry.slots_asked,
            n_gpu_layers=entry.gpu_asked,
            tensor_split=self._defaults.tensor_split,
        )

    async def acquire(self, req: LoadRequest, keep_alive: float | None) -> Entry:
        """The loaded model for ``req`` (loading or reloading it first), with a reference held.

        A model that is loaded and fits the request is taken at once, without the load lock:
        a reload or eviction waiting on one model must not stall requests to another.
        """
        entry = self._entries.get(req.key)
        if entry is not None and not entry.draining and not self._needs_reload(entry, req):
            return self._hold(entry, req, keep_alive)
        self.waiting_for_load[req.name] += 1
        try:
            return await self._acquire_locked(req, keep_alive)
        finally:
            self.waiting_for_load[req.name] -= 1
            if not self.waiting_for_load[req.name]:
                del self.waiting_for_load[req.name]

    async def _acquire_locked(self, req: LoadRequest, keep_alive: float | None) -> Entry:
        async with self._load_lock:
            entry = self._entries.get(req.key)
            current: LoadSpec | None = None
            if entry is not None and entry.model.dead is not None:
                # Its engine thread stopped (and failed what it ran): load it afresh.
                log.warning("reloading %s: %s", entry.name, entry.model.dead)
                current = self._asked(entry)
                await self._retire(entry)
                entry = None
            if entry is not None and self._needs_reload(entry, req):
                current = self._asked(entry)
                entry.draining = True  # new requests queue behind the reload instead of starving it
                await self._wait_idle(entry)
                await self._unload(entry)
                entry = None
            if entry is None:
                await self._make_room()
                spec = self._spec_for(req, current)
                await self._make_gpu_room(spec)
                t0 = time.perf_counter()
                model = await self._load(req.name, spec)
                log.info(
                    "loaded %s in %.1fs: %d slots x %d tokens of context",
                    req.name,
                    time.perf_counter() - t0,
                    model.spec.n_slots,
                    model.n_ctx_slot,
                )
                entry = Entry(
                    name=req.name,
                    digest=req.digest,
                    model=model,
                    last_used=self._clock.monotonic(),
                    slots_asked=spec.n_slots,
                    gpu_asked=spec.n_gpu_layers,
                    keep_alive=self.default_keep_alive,
                )
                self._entries[req.key] = entry
                self.loads[req.name] += 1
            return self._hold(entry, req, keep_alive)

    async def _load(self, name: str, spec: LoadSpec) -> EngineClient:
        """Load ``spec``; when memory is short, unload idle models (least recently used first)
        and try again, then try with fewer slots (halved, down to 1), and only then refuse.

        Idle models go first: they cost a reload later, fewer slots cost throughput for as
        long as this model stays. Models in use are never waited for: that could take forever.
        """
        while True:
            try:
                return await anyio.to_thread.run_sync(self._loader, spec, self._max_queue)
            except InsufficientMemory as exc:
                idle = [e for e in self._entries.values() if e.refs == 0]
                if idle:
                    victim = min(idle, key=lambda e: e.last_used)
                    log.warning("%s does not fit (%s): unloading idle %s first", name, exc.message, victim.name)
                    await self._unload(victim)
                    continue
                if exc.fits is not None and exc.fits < spec.n_slots:
                    log.warning(
                        "%s does not fit with %d slots (%s): loading it with %d",
                        name,
                        spec.n_slots,
                        exc.message,
                        exc.fits,
                    )
                    spec = pinned(spec, n_slots=exc.fits)
                    continue
                raise

    def _hold(self, entry: Entry, req: LoadRequest, keep_alive: float | None) -> Entry:
        entry.refs += 1
        entry.name = req.name
        if keep_alive is not None:  # without one, the model keeps what it was last given (Ollama's runner)
            entry.keep_alive = keep_alive
        entry.expires_at = self._clock.time() + entry.keep_alive
        _stop_timer(entry)
        return entry

    def release(self, entry: Entry) -> None:
        entry.refs -= 1
        entry.last_used = self._clock.monotonic()
        if entry.refs == 0 and entry in self._retired:
            self._retired.remove(entry)
            self._spawn(self._close(entry))
        elif entry.refs == 0:
            entry.expires_at = self._clock.time() + entry.keep_alive
            if entry.keep_alive <= 0:
                self._spawn(self._expire(entry))
            elif math.isfinite(entry.keep_alive):
                entry.timer = self._clock.call_later(entry.keep_alive, lambda: self._spawn(self._expire(entry)))
        self._spawn(self._notify())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` as a task the pool holds until it ends (the loop keeps only weak references)."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @asynccontextmanager
    async def use(self, req: LoadRequest, keep_alive: float | None) -> AsyncIterator[Entry]:
        entry = await self.acquire(req, keep_alive)
        try:
            yield entry
        finally:
            self.release(entry)

    async def unload(self, path: Path, key: Key | None = None) -> None:
        """Unload now if idle, else as soon as the last request finishes (keep_alive 0): the model
        loaded for ``key``, or with ``None`` every model over the weights of ``path``."""
        for loaded, entry in list(self._entries.items()):
            if loaded[0] == path and key in (None, loaded):
                await self._unload_soon(entry)

    async def _unload_soon(self, entry: Entry) -> None:
        entry.keep_alive = 0
        entry.expires_at = self._clock.time()
        if entry.refs == 0:
            await self._expire(entry)

    async def unload_name(self, name: str) -> None:
        """A model deleted from the store: what serves it under ``name`` unloads once its requests end.

        A request for another name sharing the weights takes the entry over (and keeps it loaded).
        """
        for entry in [e for e in self._entries.values() if e.name == name]:
            await self._unload_soon(entry)

    def running(self) -> list[Entry]:
        """Loaded models, longest remaining time first (as /api/ps sorts)."""
        return sorted(self._entries.values(), key=lambda e: -e.expires_at)

    async def close(self) -> None:
        retired, self._retired = self._retired, []  # closed here: a release meanwhile closes none again
        for entry in list(self._entries.values()):
            await self._unload(entry)
        for entry in retired:
            await self._close(entry)
        while self._tasks:  # what releases spawned (a retired model's close after its last request) ends first
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await anyio.to_thread.run_sync(self.grammars.close)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _wait_idle(self, entry: Entry) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: entry.refs == 0)

    async def _make_room(self) -> None:
        while len(self._entries) >= self._max_loaded:
            idle = [e for e in self._entries.values() if e.refs == 0]
            if idle:
                await self._unload(min(idle, key=lambda e: e.last_used))
                continue
            async with self._changed:
                await self._changed.wait_for(lambda: any(e.refs == 0 for e in self._entries.values()))

    async def _make_gpu_room(self, spec: LoadSpec) -> None:
        """Ollama's ``requireFull``: a model that would be split onto the CPU while idle models
        hold GPU memory loads after they go, least recently used first, for as long as that leaves
        it split (a model in use is never waited for). Split, it would run several times slower
        for as long as the idle ones stay. A model over weights in memory already takes them as
        they are placed (``SharedWeights.layout``): unloading others would not move them."""
        if spec.n_gpu_layers < 0 and self.weights.layout(spec.path, spec.deterministic) is not None:
            return
        while True:
            idle = [e for e in self._entries.values() if e.refs == 0 and e.model.spec.n_gpu_layers != 0]
            if not idle or not await anyio.to_thread.run_sync(self._split, spec):
                return
            victim = min(idle, key=lambda e: e.last_used)
            log.info(
                "%s would be split onto the CPU: unloading idle %s from the GPUs first", spec.path.name, victim.name
            )
            await self._unload(victim)

    async def _expire(self, entry: Entry) -> None:
        if entry.refs == 0 and self._entries.get(_key(entry.model.spec)) is entry:
            await self._unload(entry)

    async def _retire(self, entry: Entry) -> None:
        """Take ``entry`` (a model whose engine died) out of service at once, so that the next
        request loads it afresh, and free it once no request holds it: one may still be tokenizing
        with its vocabulary or building a sampler over it (freed under it: a use-after-free). Its
        engine's KV cache goes at once: the replacement is fitted to the memory left free."""
        if entry.refs == 0:
            await self._unload(entry)
            return
        _stop_timer(entry)
        del self._entries[_key(entry.model.spec)]
        self._retired.append(entry)
        try:
            await anyio.to_thread.run_sync(entry.model.free_engine)
        except Exception:  # retired all the same: the request that found it dead loads its replacement
            log.exception("freeing the dead engine of %s failed", entry.name)

    async def _unload(self, entry: Entry) -> None:
        _stop_timer(entry)
        if self._entries.get(_key(entry.model.spec)) is entry:
            del self._entries[_key(entry.model.spec)]
            await self._close(entry)

    async def _close(self, entry: Entry) -> None:
        await anyio.to_thread.run_sync(entry.model.close)
        self.unloads[entry.name] += 1
        log.info("unloaded %s", entry.name)
