"""The binding's core: models, contexts, batches and samplers over llama.cpp's C API.

Everything it hands out is plain Python (ints, bytes, numpy views). A ``Context`` and the
samplers that read it must be driven by one thread; model loading and tokenizing are safe
from any thread (llama.h).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp as ll
import numpy as np

from ...errors import EngineError, InsufficientMemory
from ...model_families import renders_as_text  # the control tokens the output parsers read
from ..gbnf import literal
from ..kv_types import KV_VALUE_BYTES
from ..request import SamplingParams

# What a saved sequence state's layout depends on beyond the model and the context's settings.
STATE_FORMAT = f"llama-cpp-python {ll.__version__}"

log = logging.getLogger("cllm.llama")

_init_lock = threading.Lock()
_initialized = False
# llama_pooling_type: rank pooling gives a reranker's classifier scores per sequence.
POOLING_RANK = 4
# Kept referenced for the process lifetime: llama.cpp calls it from its own threads.
_log_callback = None

# What each KV cache type (``kv_types.KV_CACHE_TYPES``) is in ggml.
KV_TYPES: dict[str, int] = {"f16": ll.GGML_TYPE_F16, "q8_0": ll.GGML_TYPE_Q8_0, "q4_0": ll.GGML_TYPE_Q4_0}
# Values per block of the quantized types: a head size must be a multiple of it (llama.cpp
# refuses the context otherwise).
KV_QUANT_BLOCK = 32
# llama_state_seq_flags: save or restore only the partial memory (a sliding-window model's SWA
# layers, which keep the last window of cells) and leave the rest of the sequence's KV alone.
_PARTIAL_ONLY = 1
# llama_flash_attn_type: what ``flash_attn`` True / False / None (llama.cpp decides) becomes.
_FLASH_ATTN = {True: 1, False: 0, None: -1}

# ggml_log_level: 1 debug, 2 info, 3 warn, 4 error, 5 continues the previous line.
_LEVELS = {1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}

# How llama.cpp and ggml say an allocation failed: a buffer of the weights ("unable to allocate
# CUDA0 buffer", llama-model.cpp), of the KV cache, the recurrent state or a compute graph ("failed
# to allocate ...", llama-kv-cache.cpp, ggml-alloc.c), or a device's or the host's memory (CUDA's
# cudaMalloc, Vulkan's ErrorOutOfDeviceMemory, ggml_aligned_malloc's "insufficient memory", the
# C library's ENOMEM and C++'s bad_alloc, which llama.cpp passes on as what it caught).
_OUT_OF_MEMORY = re.compile(
    r"unable to allocate|failed to allocate|out of memory|cudaMalloc failed|hipMalloc failed"
    r"|ErrorOutOf(?:Device|Host)Memory|insufficient memory|cannot allocate memory|bad_alloc",
    re.IGNORECASE,
)


def out_of_memory(said: str) -> bool:
    """Whether llama.cpp's (or ggml's) words ``said`` report an allocation that failed: memory
    short, which evicting other models or asking for less can mend, not a broken file."""
    return _OUT_OF_MEMORY.search(said) is not None


class _Heard(threading.local):
    """llama.cpp's error lines logged on this thread while a call listens (``_errors_said``)."""

    lines: list[str] | None = None


_heard = _Heard()


@contextlib.contextmanager
def _errors_said() -> Iterator[list[str]]:
    """The error lines llama.cpp logs on this thread while the block runs: its log is synchronous,
    so a failed load or context has said why (allocation or otherwise) by the time the call returns."""
    _init()
    lines: list[str] = []
    _heard.lines = lines
    try:
        yield lines
    finally:
        _heard.lines = None


def _init() -> None:
    global _initialized, _log_callback
    with _init_lock:
        if _initialized:
            return
        ll.llama_backend_init()

        last = [logging.DEBUG]

        @ll.llama_log_callback
        def callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
            # llama.cpp is chatty at load time; only what our logger is enabled for goes on.
            py_level = last[0] if level == 5 else _LEVELS.get(level, logging.DEBUG)
            last[0] = py_level
            if py_level >= logging.ERROR and (heard := _heard.lines) is not None:
                heard.append(text.decode("utf-8", "replace").strip())
            if log.isEnabledFor(py_level):
                log.log(py_level, "%s", text.decode("utf-8", "replace").rstrip())

        _log_callback = callback
        ll.llama_log_set(callback, ctypes.c_void_p(0))
        _without_amx()
        _initialized = True


def log_callback() -> object:
    """llama.cpp's log callback, initialised: libmtmd's logs are sent through the same one."""
    _init()
    return _log_callback


def physical_cores() -> int:
    """llama.cpp is fastest with one thread per physical core; hyperthreads only add contention."""
    try:
        cores = set()
        with open("/proc/cpuinfo") as f:
            phys = core = None
            for line in f:
                if line.startswith("physical id"):
                    phys = line.split(":")[1].strip()
                elif line.startswith("core id"):
                    core = line.split(":")[1].strip()
                    cores.add((phys, core))
        if cores:
            return min(len(cores), len(os.sched_getaffinity(0)))
    except OSError:
        pass
    return max(1, (os.cpu_count() or 2) // 2)


_tiled_checked = False


def batch_invariant_kernels() -> None:
    """Turn off ggml's tiled K-quant matrix product for this process: it takes over from the
    vector kernels at 8 rows a batch, and rounds differently. ggml reads GGML_CPU_TILED_MM once,
    at the first K-quant product of the process: the server sets it at start when
    CLLM_DETERMINISTIC is on; a deterministic model loaded later into a process that already
    computed keeps what ggml chose then (said in the log)."""
    global _tiled_checked
    if os.environ.get("GGML_CPU_TILED_MM") == "0":
        return
    os.environ["GGML_CPU_TILED_MM"] = "0"
    if Context.decoded and not _tiled_checked:
        _tiled_checked = True
        log.warning(
            "a deterministic model was loaded after others ran: llama.cpp's tiled K-quant kernels may "
            "still be on in this process (set CLLM_DETERMINISTIC=1 when the server starts)"
        )


def _progress_callback(progress: Callable[[float], bool]) -> Any:
    """``progress`` as llama.cpp's load calls it; an exception in it ends the load, as a False does."""

    def heard(share: float, _user_data: object) -> bool:
        try:
            return bool(progress(share))
        except Exception:
            log.exception("a load's progress callback failed: the load ends")
            return False

    return ll.llama_progress_callback(heard)


def _failure(what: str, said: Sequence[str], fits: int | None = None) -> EngineError:
    """The error for a llama.cpp call that returned nothing: ``InsufficientMemory`` (which the
    pool meets by evicting idle models, then retrying with ``fits`` slots) where what llama.cpp
    said on the way is an allocation that failed, else a plain ``EngineError``; either with the
    reason it said (the failed allocation, else its last error)."""
    short = [line for line in said if out_of_memory(line)]
    reason = (short or [line for line in said if "error" in line] or [*said, ""])[-1]
    message = f"{what}: {reason}" if reason else what
    return InsufficientMemory(message, fits=fits) if short else EngineError(message)


class Model:
    """Weights and vocabulary of one GGUF file."""

    def __init__(
        self,
        path: Path,
        *,
        n_gpu_layers: int = -1,
        use_mmap: bool = True,
        batch_invariant: bool = False,
        tensor_split: Sequence[float] = (),
        progress: Callable[[float], bool] | None = None,
    ) -> None:
        """``batch_invariant`` keeps the weights as stored: llama.cpp's repacked CPU layouts compute
        a batch's rows in groups of four and the rest one by one, each rounding differently.
        ``tensor_split``: the share of the offloaded layers each GPU takes (empty: llama.cpp's
        own split, by free memory). ``progress`` hears the share of the weights read, after each
        tensor; its False ends the load (``EngineError``)."""
        _init()
        if batch_invariant:
            batch_invariant_kernels()
        params = ll.llama_model_default_params()
        params.use_extra_bufts = not batch_invariant
        if n_gpu_layers < 0 or not ll.llama_supports_gpu_offload():
            n_gpu_layers = 999 if ll.llama_supports_gpu_offload() else 0
        params.n_gpu_layers = n_gpu_layers
        # ``load_mode`` (this llama.cpp has no ``use_mmap`` field): llama.cpp's own choice, a map
        # where every device can read one, or the file read into memory.
        params.load_mode = ll.LLAMA_LOAD_MODE_AUTO if use_mmap else ll.LLAMA_LOAD_MODE_NONE
        if tensor_split:
            split = (ctypes.c_float * ll.llama_max_devices())(*tensor_split)
            params.tensor_split = split  # read during the load only
        if progress is not None:
            heard = _progress_callback(progress)
            params.progress_callback = heard  # called during the load only
        # Named, not left to llama.cpp: the devices ``gpu_devices`` gave the fit, in the order
        # ``tensor_split`` refers to.
        devices = _device_array(offload_devices())
        if devices is not None:
            params.devices = ctypes.addressof(devices)  # read during the load only
        with _errors_said() as said:
            ptr = ll.llama_model_load_from_file(str(path).encode(), params)
        if not ptr:
            raise _failure(f"llama.cpp could not load model {path}", said)
        self._ptr = ptr
        self._vocab = ll.llama_model_get_vocab(ptr)
        self.path = path
        self.n_gpu_layers = n_gpu_layers
        self.batch_invariant = batch_invariant
        self.n_vocab: int = ll.llama_vocab_n_tokens(self._vocab)
        self.n_ctx_train: int = ll.llama_model_n_ctx_train(ptr)
        self.n_embd: int = ll.llama_model_n_embd(ptr)
        self.n_layer: int = ll.llama_model_n_layer(ptr)
        self.n_head: int = max(1, ll.llama_model_n_head(ptr))
        self.size_bytes: int = ll.llama_model_size(ptr)
        # Recurrent state cannot drop part of a sequence: no prefix reuse or sharing for these.
        self.is_recurrent: bool = bool(ll.llama_model_is_recurrent(ptr) or ll.llama_model_is_hybrid(ptr))
        self.n_swa: int = int(ll.llama_model_n_swa(ptr))
        self._pieces: list[bytes | None] = [None] * self.n_vocab
        # The text of each token whose piece is empty (a control token), once asked for.
        self._control_texts: dict[int, str] = {}
        # The scheduler asks for every generated token: one ctypes call each, unless cached.
        self._eog: list[bool | None] = [None] * self.n_vocab
        # A reranker's classifier outputs (rank pooling gives these per sequence, not n_embd).
        self.n_cls_out: int = int(ll.llama_model_n_cls_out(ptr))
        # Whether the vocabulary adds BOS, EOS, SEP around a text (a rerank pair without a template follows it).
        flags = (ll.llama_vocab_get_add_bos, ll.llama_vocab_get_add_eos, ll.llama_vocab_get_add_sep)
        self.adds_bos, self.adds_eos, self.adds_sep = (bool(f(self._vocab)) for f in flags)
        self.sep: int = int(ll.llama_vocab_sep(self._vocab))

    def close(self) -> None:
        if self._ptr:
            ll.llama_model_free(self._ptr)
            self._ptr = None

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(256)
        n = ll.llama_model_meta_val_str(self._ptr, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", "replace") if n >= 0 else None

    def head_dims(self) -> tuple[int, int]:
        """Sizes of one K head and one V head (what a quantized cache's block must divide)."""
        arch = self.meta("general.architecture") or ""
        n_head = max(1, ll.llama_model_n_head(self._ptr))

        def dim(key: str) -> int:
            value = self.meta(f"{arch}.attention.{key}")
            return int(value) if value and value.isdigit() else self.n_embd // n_head

        return dim("key_length"), dim("value_length")

    def kv_bytes_per_token(self, cache_type: str = "f16") -> int:
        """Bytes of K and V cache of ``cache_type`` one token takes across all layers, as layer 0's
        KV heads in every layer: exact where every layer attends alike (what a saved state's size
        is guessed by, ``kv_store``), not for a hybrid, recurrent, latent-attention or
        shared-KV model. A load's memory is ``offload.cache_shape``'s, layer by layer."""
        n_head_kv = ll.llama_model_n_head_kv(self._ptr) or max(1, ll.llama_model_n_head(self._ptr))
        k, v = self.head_dims()
        return int(self.n_layer * n_head_kv * (k + v) * KV_VALUE_BYTES[cache_type])

    def tokenize(self, text: str, *, add_special: bool = True, parse_special: bool = True) -> list[int]:
        data = text.encode("utf-8")
        n_max = len(data) + 8
        buf = (ll.llama_token * n_max)()
        n = ll.llama_tokenize(self._vocab, data, len(data), buf, n_max, add_special, parse_special)
        if n < 0:
            n_max = -n
            buf = (ll.llama_token * n_max)()
            n = ll.llama_tokenize(self._vocab, data, len(data), buf, n_max, add_special, parse_special)
        if n < 0:
            raise EngineError("tokenization failed")
        return list(buf[:n])

    def piece(self, token: int) -> bytes:
        """The bytes a token stands for; cached per id.

        Control tokens render as nothing, except those the output parsers read
        (``model_families.renders_as_text``): asked each time, since a Go template's tool-call tag
        joins them when a request first reads that template.
        """
        cached = self._pieces[token]
        if cached is None:
            # A buffer per miss, not a shared one: the engine thread and the event loop both get
            # here, and the ctypes call releases the GIL.
            buf = ctypes.create_string_buffer(64)
            n = ll.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = ll.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
            cached = self._pieces[token] = buf.raw[:n]
        if cached:
            return cached
        text = self._control_texts.get(token)
        if text is None:
            text = self._control_texts[token] = self.token_text(token)
        return text.encode() if renders_as_text(text) else b""

    def detokenize(self, tokens: Sequence[int]) -> str:
        """The text of ``tokens`` as llama-server's /detokenize gives it: special tokens written
        out, no leading space removed. Ids must be in the vocabulary (the caller checks)."""
        ids, size = (ll.llama_token * len(tokens))(*tokens), max(64, 8 * len(tokens))
        for _ in range(2):
            buf = ctypes.create_string_buffer(size)
            if (n := ll.llama_detokenize(self._vocab, ids, len(tokens), buf, size, False, True)) >= 0:
                return buf.raw[:n].decode("utf-8", "replace")
            size = -n
        raise EngineError("detokenization failed")

    def chat_template(self, name: str) -> str | None:
        """A named template of the GGUF (``tokenizer.chat_template.NAME``), e.g. a reranker's ``rerank``."""
        raw = ll.llama_model_chat_template(self._ptr, name.encode())
        return raw.decode("utf-8", "replace") if raw else None

    def is_eog(self, token: int) -> bool:
        """Whether ``token`` ends generation; cached per id, as ``piece`` is (asked per token)."""
        cached = self._eog[token]
        if cached is None:
            cached = self._eog[token] = bool(ll.llama_vocab_is_eog(self._vocab, token))
        return cached

    def token_text(self, token: int) -> str:
        return ll.llama_vocab_get_text(self._vocab, token).decode("utf-8", "replace")

    def fim_tokens(self) -> tuple[int, int, int] | None:
        """Fill-in-the-middle prefix, suffix and middle tokens, when the vocabulary has them."""
        ids = (
            int(ll.llama_vocab_fim_pre(self._vocab)),
            int(ll.llama_vocab_fim_suf(self._vocab)),
            int(ll.llama_vocab_fim_mid(self._vocab)),
        )
        return ids if min(ids) >= 0 else None

    @property
    def bos(self) -> int:
        return int(ll.llama_vocab_bos(self._vocab))

    @property
    def eos(self) -> int:
        return int(ll.llama_vocab_eos(self._vocab))

    @property
    def vocab_ptr(self) -> int:
        return self._vocab  # type: ignore[no-any-return]

    @property
    def ptr(self) -> int:
        return self._ptr  # type: ignore[no-any-return]


def ggml_library(stem: str) -> ctypes.CDLL:
    """One of the ggml libraries llama_cpp has loaded beside libllama (``ggml``, ``ggml-base``):
    dlopen hands back the same library, with the state llama.cpp set up in it."""
    # LLAMA_CPP_LIB_PATH: a llama.cpp built apart (a GPU build), which llama_cpp loaded instead.
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    folder = Path(override) if override else Path(ll.__file__).parent / "lib"
    names = (f"lib{stem}.so", f"lib{stem}.dylib", f"{stem}.dll")
    return ctypes.CDLL(str(folder / next((n for n in names if (folder / n).exists()), names[0])))


@functools.cache
def _ggml() -> ctypes.CDLL:
    """libggml, with the backend registry llama.cpp offloads through; its device and buffer-type
    calls are declared here, once."""
    lib = ggml_library("ggml")
    lib.ggml_backend_dev_count.restype = ctypes.c_size_t
    lib.ggml_backend_dev_get.restype = ctypes.c_void_p
    lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    lib.ggml_backend_dev_by_type.restype = ctypes.c_void_p
    lib.ggml_backend_dev_by_type.argtypes = [ctypes.c_int]
    lib.ggml_backend_dev_backend_reg.restype = ctypes.c_void_p
    lib.ggml_backend_dev_backend_reg.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_reg_get_proc_address.restype = ctypes.c_void_p
    lib.ggml_backend_reg_get_proc_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.ggml_backend_buft_name.restype = ctypes.c_char_p
    lib.ggml_backend_buft_name.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_get_props.restype = None
    lib.ggml_backend_dev_get_props.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DevProps)]
    lib.ggml_backend_reg_name.restype = ctypes.c_char_p
    lib.ggml_backend_reg_name.argtypes = [ctypes.c_void_p]
    return lib


class _DevCaps(ctypes.Structure):
    _fields_ = [(name, ctypes.c_bool) for name in ("async", "host_buffer", "from_host_ptr", "events", "mmap")]


class _DevProps(ctypes.Structure):
    """``ggml_backend_dev_props`` (ggml-backend.h), with room after it for fields a later ggml
    adds: ``ggml_backend_dev_get_props`` writes the whole struct it knows."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("description", ctypes.c_char_p),
        ("memory_free", ctypes.c_size_t),
        ("memory_total", ctypes.c_size_t),
        ("type", ctypes.c_int),
        ("device_id", ctypes.c_char_p),
        ("caps", _DevCaps),
        ("_room", ctypes.c_char * 64),
    ]


# ggml_backend_dev_type: 0 CPU, 1 GPU, 2 integrated GPU; accelerators (3: BLAS, AMX) work beside the
# CPU and meta devices (4) wrap others: neither holds offloaded layers.
_CPU_DEVICE_TYPE = 0
GPU_DEVICE = 1
IGPU_DEVICE = 2
# The CPU backend's weight layout for Intel's AMX tiles (ggml's AMX buffer type's name).
_AMX = b"AMX"


def _cpu_weight_layouts() -> ctypes.Array[ctypes.c_void_p] | None:
    """The CPU backend's extra weight layouts (buffer types), NULL-terminated: the array llama.cpp
    picks a weight's layout from, as it asks for it (``ggml_backend_dev_get_extra_bufts``); built
    once per process, so what is taken out of it stays out. None where the build has no such list."""
    try:  # every process that loads llama.cpp passes here: a library without these calls keeps its layouts
        lib = _ggml()
    except (OSError, AttributeError):
        return None
    cpu = lib.ggml_backend_dev_by_type(_CPU_DEVICE_TYPE)
    if not cpu:
        return None
    reg = lib.ggml_backend_dev_backend_reg(cpu)
    address = lib.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_dev_get_extra_bufts")
    if not address:
        return None
    listed = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)(address)(cpu)
    if not listed:
        return None
    n = 0
    while listed[n]:
        n += 1
    return (ctypes.c_void_p * (n + 1)).from_address(ctypes.addressof(listed.contents))


def _buffer_type_name(buft: int) -> bytes:
    return _ggml().ggml_backend_buft_name(buft) or b""


def cpu_weight_layouts() -> list[str]:
    """The names of the CPU's extra weight layouts llama.cpp may choose from (``CPU_REPACK``, ...)."""
    _init()
    layouts = _cpu_weight_layouts()
    return [_buffer_type_name(b).decode() for b in layouts if b] if layouts is not None else []


def _without_amx() -> None:
    """Take ggml's AMX weight layout out of the CPU's choices, before any model is loaded.

    The pinned llama.cpp's AMX kernels die with SIGILL on every CPU that has AMX (Intel Xeon from
    Sapphire Rapids on) when GCC built them, as a native build does there: GCC drops the stores
    that fill the tile configuration on the stack, so the first tile instruction finds no tile
    configured (llama.cpp PR 26954). Without the layout, such weights take the repacked AVX-512
    layout, as on any CPU without AMX."""
    layouts = _cpu_weight_layouts()
    if layouts is None:
        return
    listed = [b for b in layouts if b]
    kept = [b for b in listed if _buffer_type_name(b) != _AMX]
    if len(kept) < len(listed):
        for i, buft in enumerate([*kept, None]):
            layouts[i] = buft
        names = ", ".join(_buffer_type_name(b).decode() for b in kept) or "the plain layout"
        log.info("llama.cpp's AMX kernels are left out (this llama.cpp's die with SIGILL); weights take %s", names)


@dataclass(frozen=True)
class BackendDevice:
    """A device of ggml's backend registry, as llama.cpp tells which to offload to: its handle
    (``ggml_backend_dev_t``), name, type (``GPU_DEVICE``, ``IGPU_DEVICE``...), its backend's name
    (CUDA, Vulkan, RPC...), its PCI bus id where the backend knows it, and its memory."""

    handle: int
    name: str
    kind: int
    backend: str
    device_id: str | None
    free: int
    total: int


def offload_order(listed: Sequence[BackendDevice]) -> list[BackendDevice]:
    """The devices llama.cpp offloads to, in its order, out of the registry's ``listed``
    (``llama_prepare_model_devices``' default, split by layers): RPC servers first, then the GPUs
    but one another backend already listed with the same PCI id (a card CUDA and Vulkan both
    see), and the integrated GPUs (of the first backend listing one) only where there is no other."""
    rpc: list[BackendDevice] = []
    gpus: list[BackendDevice] = []
    igpus: list[BackendDevice] = []
    for dev in listed:
        if dev.kind == GPU_DEVICE and dev.backend == "RPC":
            rpc.append(dev)
        elif dev.kind == GPU_DEVICE:
            if dev.device_id is None or all(gpu.device_id != dev.device_id for gpu in gpus):
                gpus.append(dev)
        elif dev.kind == IGPU_DEVICE and (not igpus or igpus[-1].backend == dev.backend):
            igpus.append(dev)
    return rpc + gpus + ([] if gpus else igpus)


def _described(lib: ctypes.CDLL, dev: int) -> BackendDevice:
    """``dev`` as its backend describes it (``ggml_backend_dev_get_props``, which llama.cpp reads
    too: every backend fills in its free and total memory there)."""
    props = _DevProps()
    lib.ggml_backend_dev_get_props(dev, ctypes.byref(props))
    backend = lib.ggml_backend_reg_name(lib.ggml_backend_dev_backend_reg(dev)) or b""
    return BackendDevice(
        handle=dev,
        name=(props.name or b"").decode(errors="replace"),
        kind=int(props.type),
        backend=backend.decode(errors="replace"),
        device_id=props.device_id.decode(errors="replace") if props.device_id else None,
        free=int(props.memory_free),
        total=int(props.memory_total),
    )


def registry_devices() -> list[BackendDevice]:
    """Every device of ggml's registry (the CPU's too), in its order; empty where libggml is not
    beside libllama or lacks these calls. The backends apply CUDA_VISIBLE_DEVICES,
    HIP_VISIBLE_DEVICES and GGML_VK_VISIBLE_DEVICES themselves when they enumerate."""
    _init()
    try:
        lib = _ggml()
    except (OSError, AttributeError):
        return []
    return [_described(lib, lib.ggml_backend_dev_get(i)) for i in range(lib.ggml_backend_dev_count())]


def offload_devices() -> list[BackendDevice]:
    """The devices a ``Model`` offloads its layers to, in the order ``tensor_split`` refers to."""
    return offload_order(registry_devices())


def _device_array(devices: Sequence[BackendDevice]) -> ctypes.Array[ctypes.c_void_p] | None:
    """``devices`` as ``llama_model_params.devices`` takes them, NULL-terminated; None for none
    (a CPU build: llama.cpp's own choice is the same)."""
    if not devices:
        return None
    return (ctypes.c_void_p * (len(devices) + 1))(*(d.handle for d in devices), None)


def gpu_devices() -> list[tuple[str, int, int]]:
    """The GPUs llama.cpp offloads to, in its order (``offload_devices``): (name, free bytes, total
    bytes). Empty for a CPU build."""
    return [(d.name, d.free, d.total) for d in offload_devices()]


def gpu_free_memory() -> int | None:
    """Free bytes over the GPUs llama.cpp offloads layers (and their KV cache) to; None without
    one (a CPU build, or no device found): the KV cache then lives in host RAM."""
    devices = gpu_devices()
    return sum(free for _, free, _ in devices) if devices else None


class Batch:
    """A ``llama_batch`` over numpy arrays, allocated once: a step writes arrays, not ctypes."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.token = np.zeros(capacity, dtype=np.int32)
        self.pos = np.zeros(capacity, dtype=np.int32)
        self.n_seq_id = np.ones(capacity, dtype=np.int32)
        self.seq_id = np.zeros(capacity, dtype=np.int32)
        self.logits = np.zeros(capacity, dtype=np.int8)
        int_p = ctypes.POINTER(ctypes.c_int32)
        base = self.seq_id.ctypes.data
        self._seq_ptrs = (int_p * (capacity + 1))(*[ctypes.cast(base + 4 * i, int_p) for i in range(capacity)])
        self.struct = ll.llama_batch(
            n_tokens=0,
            token=self.token.ctypes.data_as(int_p),
            embd=None,
            pos=self.pos.ctypes.data_as(int_p),
            n_seq_id=self.n_seq_id.ctypes.data_as(int_p),
            seq_id=self._seq_ptrs,
            logits=self.logits.ctypes.data_as(ctypes.POINTER(ctypes.c_int8)),
        )

    def fill(
        self,
        tokens: Sequence[int],
        positions: Sequence[int],
        seq_ids: Sequence[int],
        output_rows: Sequence[int],
    ) -> None:
        n = len(tokens)
        if n > self.capacity:
            raise EngineError(f"batch of {n} tokens exceeds capacity {self.capacity}")
        self.token[:n] = tokens
        self.pos[:n] = positions
        self.seq_id[:n] = seq_ids
        self.logits[:n] = 0
        self.logits[list(output_rows)] = 1
        self.struct.n_tokens = n


def _uint8s(data: ctypes.Array[ctypes.c_char] | bytearray) -> ctypes.Array[ctypes.c_uint8]:
    """``data``'s bytes as llama.cpp's ``uint8_t *``, not copied. Not ``ctypes.cast``: casting a
    ctypes object stores it in its own ``_objects``, a reference cycle that left every saved state
    (hundreds of MB) to the cyclic garbage collector, freed at some later collection on whatever
    thread ran it."""
    return (ctypes.c_uint8 * len(data)).from_buffer(data)


class CacheTypeRefused(EngineError):
    """llama.cpp would not make a context with a quantized KV cache (it returned none)."""


def _context_params(
    model: Model,
    n_seq_max: int,
    n_ctx_seq: int,
    n_batch: int,
    n_threads: int,
    embeddings: bool,
    pooling: int,
    cache_type: str,
    flash_attn: bool | None,
    outputs_per_seq: int,
) -> ll.llama_context_params:
    """The ``llama_context_params`` of a ``Context`` (its arguments say what each means)."""
    params = ll.llama_context_default_params()
    params.n_ctx = n_ctx_seq * n_seq_max
    params.n_batch = n_batch
    params.n_ubatch = min(n_batch, 512)
    params.n_seq_max = n_seq_max
    params.n_threads = n_threads
    params.n_threads_batch = n_threads
    # Separate KV streams per sequence: a token attends only to its own sequence's cells,
    # which decodes 30-45% faster at 8-32 sequences than one unified cache.
    params.kv_unified = False
    # Sliding-window models keep every cell (llama.cpp's default, said here because prefix
    # reuse depends on it): with a trimmed window the start of a sequence is gone and a
    # cached prefix could not be reused. The runner still checks seq_pos_min before reuse.
    params.swa_full = True
    params.no_perf = True
    # llama.cpp runs a CPU-resident layer's matrix products on a GPU for ubatches of 32 rows or
    # more (op offload), on the CPU below: a prompt chunk and the rows after a restored state would
    # round differently. The deterministic mode keeps every layer on its own device.
    params.op_offload = not model.batch_invariant
    if embeddings:
        # Sequences of different lengths pool wrongly with split KV streams (checked:
        # an input's vector changed with its batch-mates); one stream keeps them apart
        # by the attention mask alone, and the cache is cleared between batches anyway.
        params.kv_unified = True
        params.embeddings = True
        params.pooling_type = pooling
        # Non-causal encoders need a whole sequence in one ubatch.
        params.n_ubatch = n_batch
    else:
        # At most one logits row per sequence is read from a batch: size the output buffer for
        # that, not for n_batch rows of the whole vocabulary (a client's num_batch sets n_batch).
        # The deterministic mode's steps ask for up to one more row a sequence (``invariance``):
        # past n_outputs_max llama.cpp aborts the process.
        params.n_outputs_max = outputs_per_seq * n_seq_max
    params.flash_attn_type = _FLASH_ATTN[flash_attn]
    params.type_k = params.type_v = KV_TYPES[cache_type]
    return params


def _decode_error(rc: int) -> str:
    """What a non-zero ``llama_decode`` return says."""
    return {1: "no KV cache slot for the batch", 2: "aborted", -1: "invalid batch"}.get(rc, "compute error")


class DecodeError(EngineError):
    """``llama_decode`` returned ``rc`` (1: no room in the KV cache, which it left as it was)."""

    def __init__(self, rc: int) -> None:
        super().__init__(f"llama_decode failed ({rc}): {_decode_error(rc)}")
        self.rc = rc


class Context:
    """A llama.cpp context with ``n_seq_max`` independent sequences of ``n_ctx_seq`` cells each."""

    def __init__(
        self,
        model: Model,
        *,
        n_seq_max: int,
        n_ctx_seq: int,
        n_batch: int,
        n_threads: int,
        embeddings: bool = False,
        pooling: int = -1,
        cache_type: str = "f16",
        flash_attn: bool | None = None,
        outputs_per_seq: int = 1,
    ) -> None:
        """``cache_type`` is the K and V element type (a ``KV_TYPES`` key); ``flash_attn`` None
        lets llama.cpp choose (it turns it on itself for a quantized V cache). ``outputs_per_seq``:
        the logits rows a step may ask for, per sequence (the deterministic mode's steps: 2)."""
        params = _context_params(
            model,
            n_seq_max,
            n_ctx_seq,
            n_batch,
            n_threads,
            embeddings,
            pooling,
            cache_type,
            flash_attn,
            outputs_per_seq,
        )
        with _errors_said() as said:
            ptr = ll.llama_init_from_model(model.ptr, params)
        if not ptr and any(out_of_memory(line) for line in said):
            # The KV cache, the recurrent state or the compute buffers did not fit (on a GPU, whose
            # free memory moved since the fit): fewer slots take less of all three.
            fits = n_seq_max // 2 or None
            raise _failure(f"not enough memory for a context of {n_seq_max} x {n_ctx_seq} tokens", said, fits)
        if not ptr and cache_type != "f16":
            # llama.cpp refuses (a null context, not an abort) what it cannot do with a quantized
            # cache: flash attention off or unsupported on the device, a head size that is no
            # multiple of the block. The caller checks the known cases first; this is the rest,
            # and the caller decides whether an f16 cache (2-4x larger) still fits.
            raise CacheTypeRefused(f"llama.cpp refused a {cache_type} KV cache for {model.path.name}")
        if not ptr:
            raise _failure("llama.cpp could not create a context", said)
        self.cache_type = cache_type
        self._ptr = ptr
        self._mem = ll.llama_get_memory(ptr)
        self.model = model
        self.n_seq_max: int = ll.llama_n_seq_max(ptr)
        self.n_ctx_seq: int = ll.llama_n_ctx_seq(ptr)
        self.n_batch: int = ll.llama_n_batch(ptr)
        self.n_ubatch: int = ll.llama_n_ubatch(ptr)
        self.n_threads = n_threads
        self._n_vocab = model.n_vocab
        # The sequences a queued ``seq_copy`` reads (sources) and overwrites (destinations) at the
        # next decode: llama.cpp moves the cells' bookkeeping at once but the buffer's bytes then.
        # Till then a destination's bytes are stale to read, and a write to either would be lost
        # or copied on (``copy_queued``).
        self._copy_sources: set[int] = set()
        self._copy_destinations: set[int] = set()

    def close(self) -> None:
        if self._ptr:
            ll.llama_free(self._ptr)
            self._ptr = None

    # Whether any context of this process has decoded (``batch_invariant_kernels`` warns then).
    decoded = False

    def decode(self, batch: Batch) -> None:
        Context.decoded = True
        rc = ll.llama_decode(self._ptr, batch.struct)
        self._copies_done(rc)
        if rc != 0:
            raise DecodeError(rc)

    def _copies_done(self, rc: int) -> None:
        """After a ``llama_decode``: a call llama.cpp did not refuse outright (-1: the batch was
        invalid, nothing ran) did the queued copies first (``memory_update``), whatever came next."""
        if rc != -1:
            self._copy_sources.clear()
            self._copy_destinations.clear()

    def decode_embeddings(
        self, embd: np.ndarray, positions: np.ndarray, seq_id: int | Sequence[int], outputs: Sequence[int] = ()
    ) -> None:
        """Decode rows of input embeddings (``(rows, n_embd)`` float32) into ``seq_id`` (one for
        all rows, or one per row), logits for the rows in ``outputs``: a media chunk's rows, or
        some of them, with tokens' rows beside them (``token_rows``). ``positions`` is ``(sections,
        rows)``: one section, or four for M-RoPE models (llama.cpp reads an embedding batch's
        positions section-major). A batch holds token ids or embeddings, never both: text alone
        goes through ``decode``."""
        n = embd.shape[0]
        if n > self.n_batch:
            raise EngineError(f"{n} embedding rows exceed the batch ({self.n_batch})")
        rows = np.ascontiguousarray(embd, dtype=np.float32)
        pos = np.ascontiguousarray(positions, dtype=np.int32).reshape(-1)
        seq = np.ascontiguousarray(np.broadcast_to(np.asarray(seq_id, dtype=np.int32), (n,)))
        int_p = ctypes.POINTER(ctypes.c_int32)
        n_seq_id = np.ones(n, dtype=np.int32)
        logits = np.zeros(n, dtype=np.int8)
        logits[list(outputs)] = 1
        struct = ll.llama_batch(
            n_tokens=n,
            token=None,
            embd=rows.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
            pos=pos.ctypes.data_as(int_p),
            n_seq_id=n_seq_id.ctypes.data_as(int_p),
            seq_id=(int_p * (n + 1))(*[ctypes.cast(seq.ctypes.data + 4 * i, int_p) for i in range(n)]),
            logits=logits.ctypes.data_as(ctypes.POINTER(ctypes.c_int8)),
        )
        Context.decoded = True
        rc = ll.llama_decode(self._ptr, struct)
        self._copies_done(rc)
        if rc != 0:
            raise EngineError(f"llama_decode of embeddings failed ({rc}): {_decode_error(rc)}")

    def causal_attention(self, causal: bool) -> None:
        """Switch causal attention for the whole context (Gemma 3's images attend both ways)."""
        ll.llama_set_causal_attn(self._ptr, causal)

    def logits(self, n_outputs: int) -> np.ndarray:
        """Rows of logits for the batch's output tokens, in batch order (a view: read it now)."""
        ptr = ll.llama_get_logits(self._ptr)
        return np.ctypeslib.as_array(ptr, shape=(n_outputs, self._n_vocab))

    @property
    def pooling(self) -> int:
        """llama.cpp's pooling type: 0 none, 1 mean, 2 cls, 3 last."""
        return int(ll.llama_pooling_type(self._ptr))

    def token_embeddings(self, n_outputs: int) -> np.ndarray:
        """Per-token output states of the last decode (pooling none), in batch order (a view)."""
        ptr = ll.llama_get_embeddings(self._ptr)
        if not ptr:
            raise EngineError("no token embeddings in the last batch")
        return np.ctypeslib.as_array(ptr, shape=(n_outputs, ll.llama_model_n_embd(self.model.ptr)))

    def embedding(self, seq_id: int) -> np.ndarray:
        """A sequence's pooled vector; with rank pooling, its ``n_cls_out`` classifier scores."""
        ptr = ll.llama_get_embeddings_seq(self._ptr, seq_id)
        if not ptr:
            raise EngineError("no embedding for the sequence")
        n = self.model.n_cls_out if self.pooling == POOLING_RANK else ll.llama_model_n_embd(self.model.ptr)
        return np.ctypeslib.as_array(ptr, shape=(n,)).copy()

    def seq_rm(self, seq_id: int, p0: int, p1: int = -1) -> bool:
        """Drop positions [p0, p1) of a sequence; False where the memory cannot (recurrent
        state cannot drop part of a sequence), and the sequence is then left as it was."""
        return bool(ll.llama_memory_seq_rm(self._mem, seq_id, p0, p1))

    def seq_clear(self, seq_id: int) -> None:
        ll.llama_memory_seq_rm(self._mem, seq_id, -1, -1)

    def seq_copy(self, src: int, dst: int) -> None:
        """Give ``dst`` all of ``src``'s KV (dst's own is dropped).

        With split streams this copies the whole stream buffer, every cell used or not, at the
        next decode; a partial range would abort the process (llama-kv-cache.cpp seq_cp). Copies
        queued together are done in order, so a chain of them is sound (``copy_queued``).
        """
        ll.llama_memory_seq_cp(self._mem, src, dst, -1, -1)
        self._copy_sources.add(src)
        self._copy_destinations.add(dst)

    def copy_queued(self, seq_id: int) -> bool:
        """Whether a ``seq_copy`` waiting for the next decode reads or overwrites ``seq_id``'s
        bytes: its state cannot be read (``state_get``: stale) or written (``state_set``: lost,
        or copied on) until then, but another ``seq_copy`` from or to it is done in its turn."""
        return seq_id in self._copy_sources or seq_id in self._copy_destinations

    def seq_pos_max(self, seq_id: int) -> int:
        """Highest position held; -1 if empty. A batch's next row for the sequence must be at
        the position after it (llama.cpp refuses the batch otherwise)."""
        return int(ll.llama_memory_seq_pos_max(self._mem, seq_id))

    def seq_pos_min(self, seq_id: int) -> int:
        """Lowest position still held; -1 if empty. Above 0 where a sliding window dropped the
        start (a restored SWA state starts at its last window), and for recurrent memory the
        position of its state (the last token)."""
        return int(ll.llama_memory_seq_pos_min(self._mem, seq_id))

    def state_get(
        self,
        seq_id: int,
        alloc: Callable[[int], ctypes.Array[ctypes.c_char]] | None = None,
        *,
        window: bool = False,
    ) -> ctypes.Array[ctypes.c_char]:
        """A sequence's KV serialised (cost grows with the tokens it holds, not the context) into
        ``alloc(size)``: a buffer of exactly ``size`` bytes (``state_buffers``: ready pages, not
        fresh zeroed ones), by default a fresh zeroed one. llama.cpp copies straight into it.

        ``window``: only the sliding-window layers' cache, which holds the last window of cells
        (``LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY``): a checkpoint a fraction of the whole state's size."""
        if seq_id in self._copy_destinations:
            raise EngineError(f"sequence {seq_id} waits for a copy: its state is stale until the next decode")
        flags = _PARTIAL_ONLY if window else 0
        size = ll.llama_state_seq_get_size_ext(self._ptr, seq_id, flags)
        buf = ctypes.create_string_buffer(size) if alloc is None else alloc(size)
        n = ll.llama_state_seq_get_data_ext(self._ptr, _uint8s(buf), size, seq_id, flags)
        if n != size or size == 0:
            raise EngineError(f"could not save the state of sequence {seq_id}")
        return buf

    def state_set(self, seq_id: int, data: ctypes.Array[ctypes.c_char] | bytearray, *, window: bool = False) -> bool:
        """Replace a sequence's KV with a saved state (``state_get``'s, or its bytes read back
        from disk); False if llama.cpp refused it (no room, another layout). No copy is made
        here: llama.cpp copies the bytes into the KV cache. ``window``: a ``state_get(window=True)``
        checkpoint, which replaces only the sliding-window layers' cells (the others stay)."""
        if self.copy_queued(seq_id):  # overwritten by the copy, or copied on in place of what it held
            return False
        flags = _PARTIAL_ONLY if window else 0
        return ll.llama_state_seq_set_data_ext(self._ptr, _uint8s(data), len(data), seq_id, flags) == len(data)

    def clear(self) -> None:
        ll.llama_memory_clear(self._mem, True)

    def reset(self) -> None:
        """Every sequence emptied, after a step failed with the cache in an unknown state. A copy
        ``seq_copy`` queued is done at the next decode, and ``llama_memory_clear`` leaves it queued:
        it would land on whatever its sequence holds by then. So one throw-away token is decoded
        (which does the copies, into sequences now empty), and the cache cleared again."""
        self.clear()
        flush = Batch(1)
        flush.fill([0], [0], [0], [0])
        self.decode(flush)
        self.clear()

    @property
    def ptr(self) -> int:
        return self._ptr  # type: ignore[no-any-return]


# The root of a grammar held after a text (``_grammar_sampler``), numbered: that text, blanks, then its own root.
_AFTER_ROOT = "cllm-after-"


def _grammar_sampler(model: Model, grammar: str, after: str) -> Any:
    """llama.cpp's grammar sampler for ``grammar``, or with ``after`` (one token of the vocabulary),
    a lazy one that constrains nothing until the output is that token, then holds the rest to
    ``after`` (llama.cpp feeds the grammar the trigger token), a few blanks and ``grammar``. A token
    trigger, not a text pattern: a pattern's last token may carry text past it, which llama.cpp
    feeds the grammar unchecked and throws on where it does not match (an abort through ctypes).
    Where ``after`` is no one token, ``grammar`` holds from the first token."""
    trigger = model.tokenize(after, add_special=False, parse_special=True) if after else []
    if len(trigger) != 1:
        if after:
            log.warning("%r is no one token of %s: the grammar holds from the first token", after, model.path.name)
        return ll.llama_sampler_init_grammar(model.vocab_ptr, grammar.encode(), b"root")
    # A name no rule of ``grammar`` has (the converter names rules after a schema's properties, and
    # llama.cpp's parser lets a second definition replace the first).
    defined = set(re.findall(r"^([\w-]+) ::=", grammar, re.MULTILINE))
    root = next(name for n in itertools.count() if (name := f"{_AFTER_ROOT}{n}") not in defined)
    # A few blanks at most (Qwen3 writes "</think>\n\n"): unbounded, a model could spend its output on them.
    text = f"{grammar}\n{root} ::= {literal(after)} [ \\t\\n]{{0,8}} root\n"
    tokens = (ll.llama_token * 1)(trigger[0])
    return ll.llama_sampler_init_grammar_lazy_patterns(
        model.vocab_ptr, text.encode(), root.encode(), None, 0, tokens, 1
    )


class Sampler:
    """A native llama.cpp sampler chain for one request (holds its RNG, penalty window, grammar).

    The order is llama-server's: grammar, penalties, DRY, then top-k, typical, top-p, min-p, XTC,
    temperature and the draw (greedy: the argmax after the penalties and DRY).
    """

    def __init__(self, model: Model, params: SamplingParams) -> None:
        chain = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
        self._chain = chain
        add = ll.llama_sampler_chain_add
        if params.grammar is not None:
            grammar = _grammar_sampler(model, params.grammar, params.grammar_after)
            if not grammar:
                ll.llama_sampler_free(chain)
                raise EngineError("invalid grammar for format")
            add(chain, grammar)
        self.has_penalties = (
            params.repeat_penalty != 1.0 or params.presence_penalty != 0.0 or params.frequency_penalty != 0.0
        ) and params.repeat_last_n != 0
        if self.has_penalties:
            last_n = params.repeat_last_n if params.repeat_last_n > 0 else -1
            add(
                chain,
                ll.llama_sampler_init_penalties(
                    model.n_vocab, last_n, params.repeat_penalty, params.frequency_penalty, params.presence_penalty
                ),
            )
        self.has_dry = params.dry
        if self.has_dry:
            add(chain, _dry_sampler(model, params))
        if params.temperature <= 0:
            add(chain, ll.llama_sampler_init_greedy())
        else:
            self._add_sampling(params)
        self._grammar = params.grammar is not None

    def _add_sampling(self, params: SamplingParams) -> None:
        """The truncations, XTC, the temperature and the draw of a sampled (non-greedy) chain."""
        add, chain = ll.llama_sampler_chain_add, self._chain
        if params.top_k > 0:
            add(chain, ll.llama_sampler_init_top_k(params.top_k))
        if 0 < params.typical_p < 1:
            add(chain, ll.llama_sampler_init_typical(params.typical_p, 1))
        if 0 < params.top_p < 1:
            add(chain, ll.llama_sampler_init_top_p(params.top_p, 1))
        if params.min_p > 0:
            add(chain, ll.llama_sampler_init_min_p(params.min_p, 1))
        seed = (params.seed if params.seed >= 0 else ll.LLAMA_DEFAULT_SEED) & 0xFFFFFFFF
        if params.xtc_probability > 0 and params.xtc_threshold <= 0.5:
            add(chain, ll.llama_sampler_init_xtc(params.xtc_probability, params.xtc_threshold, 1, seed))
        add(chain, ll.llama_sampler_init_temp(params.temperature))
        add(chain, ll.llama_sampler_init_dist(seed))

    def prime(self, tokens: Sequence[int]) -> None:
        """Put prompt tokens into the penalty and DRY windows, as llama-server does."""
        if (self.has_penalties or self.has_dry) and not self._grammar:
            for t in tokens:
                ll.llama_sampler_accept(self._chain, t)

    def sample(self, ctx: Context, row: int) -> int:
        """Sample from batch row ``row`` (llama_sampler_sample also accepts the token)."""
        return int(ll.llama_sampler_sample(self._chain, ctx.ptr, row))

    def close(self) -> None:
        if self._chain:
            ll.llama_sampler_free(self._chain)
            self._chain = None


def _dry_sampler(model: Model, params: SamplingParams) -> Any:
    """llama.cpp's DRY sampler; it copies the sequence breakers, so the array may go after the call.

    It reads a window of -1 as 0 (off): the whole context is passed as its length (the API clamps
    -1 to the request's context; the model's trained one is the fallback)."""
    breakers = [b.encode() for b in params.dry_sequence_breakers]
    array = (ctypes.c_char_p * max(1, len(breakers)))(*breakers)
    last_n = params.dry_penalty_last_n if params.dry_penalty_last_n > 0 else model.n_ctx_train
    return ll.llama_sampler_init_dry(
        model.vocab_ptr,
        params.dry_multiplier,
        params.dry_base,
        params.dry_allowed_length,
        last_n,
        array,
        len(breakers),
    )


def grammar_parses(grammar: str) -> bool:
    """Whether llama.cpp parses GBNF ``grammar`` (no vocabulary: grammars here use no token syntax).

    Deeply nested grammars crash the parser: call this only where a crash is contained
    (``grammar.GrammarChecker`` runs it in a child process).
    """
    _init()
    sampler = ll.llama_sampler_init_grammar(None, grammar.encode(), b"root")
    if not sampler:
        return False
    ll.llama_sampler_free(sampler)
    return True


def quantize(src: Path, dst: Path, ftype: str = "Q4_K_M", n_threads: int = 0) -> None:
    """Quantize a GGUF file (what ``llama-quantize`` does) to llama.cpp's file type ``ftype``
    (``Q4_K_M``, ``Q8_0``, ``F16``, ``F32``...), or ``COPY`` its tensors as they are: given the first
    shard of a split model (``NAME-00001-of-0000N.gguf``, its shards beside it), llama.cpp's loader
    reads them all and the copy is one file (llama-quantize's ``COPY``, how Ollama merges shards)."""
    _init()
    params = ll.llama_model_quantize_default_params()
    name = ftype.upper()
    if name == "COPY":
        params.only_copy = True  # the input's own types; ftype is then ignored
    else:
        params.ftype = getattr(ll, f"LLAMA_FTYPE_MOSTLY_{name}", None) or getattr(ll, f"LLAMA_FTYPE_ALL_{name}")
    params.nthread = n_threads
    rc = ll.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    if rc != 0:
        raise EngineError(f"quantization to {ftype} failed ({rc})")
