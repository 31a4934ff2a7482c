"""Where a model's layers go: with ``num_gpu`` unset, as many as the GPUs' free memory holds, the
rest on the CPU (with it set, exactly that many: within each device's memory first, any beyond
spread by free memory), as Ollama fits them
(``llm/memory.go``: ``EstimateGPULayers``, and ``server/sched.go``: one GPU where the model fits
on one, unless ``OLLAMA_SCHED_SPREAD``).

Pure: devices and sizes in, a placement out. A layer's cost is its weights plus its share of the
KV cache (every slot's context at the cache type, and a recurrent model's state per slot:
``cache_shape``, which the load's memory check and /api/ps count too); the output layer (output
norm and output matrix, or the tied embeddings) counts as one more layer, as in llama.cpp's
``n_gpu_layers``, and is the first offloaded (llama.cpp offloads from the top). Each device used
holds a compute graph, the first also a projector. Layers go to the devices that can hold the graph and two layers, in
turn (Ollama's round robin), each while it has room, the room judged on the contiguous runs
llama.cpp gives each device; ``tensor_split`` is then the layer count per device.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..gguf_header import GGUFError, Header, file_header
from .frontdoor import LoadSpec
from .kv_types import KV_VALUE_BYTES

log = logging.getLogger("cllm.engine")

# What llama.cpp's CUDA and ROCm backends keep for themselves beyond the buffers (Ollama's
# MinimumMemory for CUDA: 457 MiB); a device reports it as used only once the context exists.
DEVICE_RESERVE = 457 << 20


@dataclass(frozen=True)
class Device:
    """One GPU as llama.cpp enumerates it: its name and free bytes now."""

    name: str
    free: int


@dataclass(frozen=True)
class ModelSizes:
    """What a load puts in memory, per part (bytes)."""

    layers: tuple[int, ...]  # each repeating block's weights
    output: int  # output norm and output matrix (or the tied token embeddings)
    kv_per_layer: int  # the KV cache of one layer for every slot's context
    graph: int  # llama.cpp's compute buffer on a device
    projector: int = 0  # a vision/audio projector, on the first device

    @property
    def n_layers(self) -> int:
        return len(self.layers)


@dataclass(frozen=True)
class Placement:
    """``n_gpu_layers`` for llama.cpp (the output layer counts as one), how many on each device
    (``tensor_split``), and the bytes each device and the CPU hold."""

    n_gpu_layers: int
    per_device: tuple[int, ...]
    device_bytes: tuple[int, ...]
    cpu_bytes: int

    @property
    def tensor_split(self) -> tuple[float, ...]:
        """The layer counts themselves, which llama.cpp normalises (as Ollama's
        ``createGPULayers`` passes them): fractions summed in float32 put a layer on the next
        device at a run's end, (17, 16, 16) loading as (17, 17, 15)."""
        return tuple(float(n) for n in self.per_device) if sum(self.per_device) else ()

    def processor(self) -> str:
        """Ollama's PROCESSOR column: ``100% GPU``, ``100% CPU`` or ``48%/52% CPU/GPU``. The bytes
        a device keeps for itself (``DEVICE_RESERVE``) are room left, not the model's: counted, a
        small model with 3 of 9 layers on the GPU read ``0%/100% CPU/GPU``."""
        on_gpu = sum(max(0, b - DEVICE_RESERVE) for b in self.device_bytes)
        total = on_gpu + self.cpu_bytes
        if total == 0 or on_gpu == 0:
            return "100% CPU"
        if self.cpu_bytes == 0:
            return "100% GPU"
        gpu = round(100 * on_gpu / total)
        return f"{100 - gpu}%/{gpu}% CPU/GPU"


def _layer(sizes: ModelSizes, i: int) -> int:
    return sizes.layers[i] + sizes.kv_per_layer


def _top_down(sizes: ModelSizes) -> list[int]:
    """The parts in the order llama.cpp offloads them: ``n_gpu_layers`` k puts the output layer and
    the last k - 1 blocks on the GPUs (``llama_model::load_tensors``: ``i_gpu_start = n_layer + 1 -
    n_gpu_layers``), so the output is budgeted first, then the blocks from the last."""
    return [sizes.output] + [_layer(sizes, i) for i in reversed(range(sizes.n_layers))]


def _device_bytes(sizes: ModelSizes, counts: Sequence[int]) -> list[int]:
    """What each device holds with ``counts`` parts: llama.cpp gives each device one contiguous run
    of the offloaded parts, in device order from the lowest block (its cumulative ``tensor_split``
    and ``upper_bound``), so the last device used holds the top blocks and the output layer. Each
    device used keeps its reserve and a compute graph; the first also holds the projector."""
    parts = _top_down(sizes)
    held = [0] * len(counts)
    start = 0
    for d in reversed(range(len(counts))):
        held[d] = sum(parts[start : start + counts[d]])
        start += counts[d]
    first = _first_used(counts)
    for d, n in enumerate(counts):
        if n:
            held[d] += DEVICE_RESERVE + sizes.graph + (sizes.projector if d == first else 0)
    return held


def _first_used(counts: Sequence[float]) -> int | None:
    """The first device given any parts: where the projector goes."""
    return next((d for d, n in enumerate(counts) if n), None)


def projector_device(n_gpu_layers: int, tensor_split: Sequence[float]) -> int | None:
    """The GPU a load's projector runs on, which clip.cpp must be given (left to choose, it takes
    the registry's first GPU whatever the fit used): the first given layers by the split loaded
    (``Placement.tensor_split``; none with one GPU: that one), as the fit budgets it; None with no
    layer offloaded."""
    if n_gpu_layers == 0:
        return None
    return _first_used(tensor_split) if tensor_split else 0


def _with_space(free: Sequence[int], sizes: ModelSizes) -> list[int]:
    """The devices that can hold the graph and two layers (Ollama's ``gpusWithSpace``; the first
    also the projector)."""
    first_layer = _layer(sizes, 0) if sizes.n_layers else sizes.output
    with_space: list[int] = []
    for i, room in enumerate(free):
        reserve = sizes.projector if not with_space else 0
        if room >= reserve + sizes.graph + DEVICE_RESERVE + 2 * first_layer:
            with_space.append(i)
    return with_space


def _fill(free: Sequence[int], sizes: ModelSizes, goal: int) -> list[int]:
    """Up to ``goal`` parts on the devices, top down, each to the next device with room in turn
    (Ollama's round robin), the room judged on llama.cpp's layout (``_device_bytes``). Stops at the
    first part that fits nowhere: llama.cpp's GPU parts are always the top ones."""
    counts = [0] * len(free)
    with_space = _with_space(free, sizes)
    for index in range(goal):
        while with_space:
            k = with_space[index % len(with_space)]
            counts[k] += 1
            if all(b <= f for b, f in zip(_device_bytes(sizes, counts), free, strict=True)):
                break
            counts[k] -= 1
            with_space.remove(k)
        else:
            break
    return counts


def _forced(counts: Sequence[int], free: Sequence[int], wanted: int) -> list[int]:
    """``counts`` raised to ``wanted`` parts where memory held fewer: a ``num_gpu`` is passed to
    llama.cpp as asked, so the parts beyond what fits go to the devices in proportion to their free
    memory (llama.cpp's own split, and Ollama's estimate split, weigh devices so), largest
    remainders first."""
    extra = wanted - sum(counts)
    if extra <= 0:
        return list(counts)
    weights = [max(1, f) for f in free]
    shares = [extra * w / sum(weights) for w in weights]
    more = [int(s) for s in shares]
    by_remainder = sorted(range(len(free)), key=lambda d: more[d] - shares[d])
    for d in by_remainder[: extra - sum(more)]:
        more[d] += 1
    return [n + m for n, m in zip(counts, more, strict=True)]


def _placement(sizes: ModelSizes, counts: Sequence[int]) -> Placement:
    held = _device_bytes(sizes, counts)
    cpu = sum(_top_down(sizes)[sum(counts) :])
    return Placement(sum(counts), tuple(counts), tuple(held), cpu)


def fit(
    devices: Sequence[Device],
    sizes: ModelSizes,
    *,
    num_gpu: int | None = None,
    overhead: int = 0,
    spread: bool = False,
    main_gpu: int | None = None,
) -> Placement:
    """The placement of a load. ``num_gpu`` (a request's or Modelfile's) gives exactly that many
    layers, as Ollama's option does: placed where memory allows first, the rest beyond it in
    proportion to the devices' free memory (``_forced``). Unset, layers are fitted to the devices'
    free memory less ``overhead`` (OLLAMA_GPU_OVERHEAD). With several devices the model goes on the
    one with the most free memory that holds all it asks for, and is spread over all of them only
    when no single one does or ``spread`` (OLLAMA_SCHED_SPREAD). ``main_gpu`` (an index into
    ``devices``) puts every offloaded layer on that one device, fitted to its memory alone, as
    Ollama's option does (its runner's ``--split-mode none --main-gpu``)."""
    if main_gpu is not None and 0 <= main_gpu < len(devices):
        alone = fit([devices[main_gpu]], sizes, num_gpu=num_gpu, overhead=overhead).n_gpu_layers
        return _placement(sizes, [alone if d == main_gpu else 0 for d in range(len(devices))])
    total_parts = sizes.n_layers + 1
    wanted = min(num_gpu, total_parts) if num_gpu is not None and num_gpu >= 0 else None
    goal = total_parts if wanted is None else wanted
    free = [max(0, d.free - overhead) for d in devices]
    if len(devices) > 1 and not spread:
        for k in sorted(range(len(devices)), key=lambda d: -free[d]):
            alone = _fill([free[k]], sizes, goal)[0]
            if alone == goal:
                return _placement(sizes, [alone if d == k else 0 for d in range(len(devices))])
    counts = _fill(free, sizes, goal)
    if wanted is not None and devices:
        counts = _forced(counts, free, wanted)
    return _placement(sizes, counts)


# Bytes of a recurrent state's value: llama.cpp keeps them in f32 whatever the KV cache type
# (``llama_model::create_memory``'s ``GGML_TYPE_F32``).
STATE_VALUE_BYTES = 4

# Per-layer arrays (head counts of hybrid or sliding-window models) are kept: a few hundred
# entries at most, where a vocabulary's 150k are skipped.
_KEEP = 4096

# The architectures whose memory is recurrent state alone (llama-arch.cpp ``llm_arch_is_recurrent``)
# and those with both a KV cache and recurrent state (``llm_arch_is_hybrid``).
_RECURRENT = frozenset({"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})
_HYBRID = frozenset(
    {
        "jamba",
        "falcon-h1",
        "plamo2",
        "granitehybrid",
        "lfm2",
        "lfm2moe",
        "nemotron_h",
        "nemotron_h_moe",
        "qwen3next",
        "kimi-linear",
        "bailingmoe3",
        "kimi-k3",
        "glm5-next",
        "qwen35",
        "qwen35moe",
        "qwen4exp",
        "deepseek4",
        "minimax-01",
    }
)
# Hybrids whose recurrent layers are all but every ``full_attention_interval``-th (default 4)
# unless ``attention.recurrent_layers`` lists them (their ``load_arch_hparams``).
_INTERVAL = frozenset({"qwen3next", "qwen35", "qwen35moe", "qwen4exp", "minimax-01"})
# Gemma 3n keeps KV for its first 20 layers whatever its header says (llama.cpp's gemma3n.cpp).
_GEMMA3N_KV_LAYERS = 20


def _ints(header: Header, name: str) -> list[int]:
    """``{arch}.{name}``: an integer or a per-layer array of them; empty when absent."""
    value = header.kv.get(f"{header.architecture()}.{name}")
    values = value if isinstance(value, list) else [value]
    return [int(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]


def _first(header: Header, name: str, default: int = 0) -> int:
    return (_ints(header, name) or [default])[0]


def _per_layer(header: Header, name: str, n_layer: int, default: list[int]) -> list[int]:
    """``{arch}.{name}`` for each layer: a scalar for all of them, or an array of one per layer
    (llama.cpp's ``get_key_or_arr``); ``default`` when absent or of another length."""
    values = _ints(header, name)
    if len(values) == 1 and not isinstance(header.kv.get(f"{header.architecture()}.{name}"), list):
        return values * n_layer
    return values if len(values) == n_layer else default


def _flags(header: Header, name: str, n_layer: int) -> list[bool] | None:
    """``{arch}.{name}`` as a per-layer array of flags (bools or integers); None when absent."""
    value = header.kv.get(f"{header.architecture()}.{name}")
    if isinstance(value, list) and len(value) == n_layer:
        return [bool(v) for v in value]
    return None


def trained_context(path: Path) -> int:
    """The context the GGUF's weights were trained on (``{arch}.context_length``); 0 where unsaid,
    or where the header is past reading here (the load then says what llama.cpp makes of it)."""
    try:
        return (_ints(file_header(path, _KEEP), "context_length") or [0])[0]
    except (GGUFError, OSError):
        return 0


@dataclass(frozen=True)
class CacheShape:
    """What llama.cpp's memory holds for a model: ``kv_values`` K and V values per token over the
    layers with a KV cache, and ``state_values`` values of recurrent state per sequence (a fixed
    cost per slot, whatever its context)."""

    kv_values: int
    state_values: int = 0

    def kv_bytes_per_token(self, cache_type: str = "f16") -> int:
        return int(self.kv_values * KV_VALUE_BYTES.get(cache_type, 2.0))

    @property
    def state_bytes(self) -> int:
        """Bytes of recurrent state one slot holds (its r and s rows, llama_memory_recurrent)."""
        return self.state_values * STATE_VALUE_BYTES


def cache_shape(path: Path) -> CacheShape:
    """The KV cache and recurrent state llama.cpp makes for the GGUF at ``path``, from its header
    (before llama.cpp loads it), layer by layer as ``llama_model::create_memory`` builds them: a
    layer with a KV cache stores ``head_count_kv`` K rows and, unless the model uses multi-head
    latent attention (K only), as many V rows; a recurrent layer one r and one s row of f32 per
    sequence (``llama_memory_recurrent``; Ollama's ``GraphSize`` counts them so too). Layers past
    the trunk (``nextn_predict_layers``: multi-token prediction) have neither."""
    header = file_header(path, _KEEP)
    arch = header.architecture()
    if arch is None:
        return CacheShape(0)
    n_all = _first(header, "block_count")
    n_layer = max(0, n_all - _first(header, "nextn_predict_layers"))
    heads = _per_layer(header, "attention.head_count", n_all, [0] * n_all)
    heads_kv = _per_layer(header, "attention.head_count_kv", n_all, heads)
    recurrent = _recurrent_layers(header, arch, n_all, heads_kv)
    attends = _kv_layers(header, arch, n_all, recurrent)
    kv = sum(heads_kv[il] * sum(_head_sizes(header, il, heads, n_all)) for il in range(n_layer) if attends[il])
    state = sum(recurrent[:n_layer]) * sum(_state_rows(header, arch, heads))
    return CacheShape(kv, state)


def _recurrent_layers(header: Header, arch: str, n_all: int, heads_kv: list[int]) -> list[bool]:
    """Which layers hold recurrent state (llama.cpp's ``is_recr`` and each hybrid's filter)."""
    if arch in _RECURRENT or arch == "falcon-h1":  # Falcon-H1: attention and state in every layer
        return [True] * n_all
    if arch not in _HYBRID:
        return [False] * n_all
    if arch in _INTERVAL:
        listed = _flags(header, "attention.recurrent_layers", n_all)
        interval = max(1, _first(header, "full_attention_interval", 4))
        return listed or [(il + 1) % interval != 0 for il in range(n_all)]
    if arch.startswith("nemotron_h"):  # its MLP blocks have neither heads nor state
        n_ff = _per_layer(header, "feed_forward_length", n_all, [0] * n_all)
        return [heads_kv[il] == 0 and n_ff[il] == 0 for il in range(n_all)]
    return [n == 0 for n in heads_kv]  # the rest tell a recurrent layer by its 0 KV heads


def _kv_layers(header: Header, arch: str, n_all: int, recurrent: list[bool]) -> list[bool]:
    """Which layers have a KV cache of their own: not a recurrent one (but every Falcon-H1 layer),
    nor one reusing an earlier layer's KV (Gemma 3n and 4: ``n_layer_kv_from_start``)."""
    if arch in _RECURRENT:
        return [False] * n_all
    shared = _first(header, "attention.shared_kv_layers")
    kv_from = _GEMMA3N_KV_LAYERS if arch == "gemma3n" else n_all - shared
    return [il < kv_from and (arch == "falcon-h1" or not recurrent[il]) for il in range(n_all)]


def _head_sizes(header: Header, il: int, heads: list[int], n_all: int) -> tuple[int, int]:
    """The K and V values a KV head of layer ``il`` stores: ``key_length`` and ``value_length``
    (n_embd / layer 0's heads by default), a sliding layer's ``*_swa`` ones (Gemma 4), and no V
    with multi-head latent attention (``key_length_mla`` set: ``llama_kv_cache`` makes K alone)."""
    if not heads or heads[0] == 0:  # no attention heads: llama.cpp's head sizes are 0
        return 0, 0
    default = _first(header, "embedding_length") // heads[0]
    key, value = _first(header, "attention.key_length", default), _first(header, "attention.value_length", default)
    sliding = _flags(header, "attention.sliding_window_pattern", n_all)
    if sliding is not None and sliding[il]:
        key = _first(header, "attention.key_length_swa", key)
        value = _first(header, "attention.value_length_swa", value)
    mla = _first(header, "attention.key_length_mla") and _first(header, "attention.value_length_mla")
    return key, 0 if mla else value


def _state_rows(header: Header, arch: str, heads: list[int]) -> tuple[int, int]:
    """The r (convolution) and s (scan) values one recurrent layer keeps per sequence:
    ``llama_hparams::n_embd_r`` and ``n_embd_s`` (RWKV's token shifts and WKV state, LFM2's short
    convolution, Kimi's KDA, MiniMax's linear attention, else Mamba's conv and SSM states)."""
    n_embd, n_head = _first(header, "embedding_length"), heads[0] if heads else 0
    wkv, kda = _first(header, "wkv.head_size"), _first(header, "kda.head_dim")
    l_cache, d_conv = _first(header, "shortconv.l_cache"), _first(header, "ssm.conv_kernel")
    d_inner, d_state = _first(header, "ssm.inner_size"), _first(header, "ssm.state_size")
    n_group = _first(header, "ssm.group_count")
    if wkv:
        r = _first(header, "token_shift_count", 2) * n_embd
    elif l_cache:
        r = n_embd * (l_cache - 1)
    elif kda:
        r = 3 * (d_conv - 1 if d_conv > 0 else 3) * n_head * kda
    else:
        r = max(0, d_conv - 1) * (d_inner + 2 * n_group * d_state)
    if wkv:
        s = n_embd * wkv
    elif kda:
        s = kda * kda * n_head
    elif arch == "minimax-01":  # its linear attention's head is the key length
        head = _first(header, "attention.key_length", n_embd // max(1, n_head))
        s = head * head * n_head
    else:
        s = d_state * d_inner
    return r, s


def kv_bytes_per_token(path: Path, cache_type: str = "f16") -> int:
    """Bytes of K and V one token takes over the layers with a KV cache (``cache_shape``)."""
    return cache_shape(path).kv_bytes_per_token(cache_type)


def model_sizes(
    path: Path,
    n_ctx_total: int,
    kv_bytes_per_token: int,
    n_ubatch: int,
    projector: Path | None = None,
    state_bytes: int = 0,
) -> ModelSizes:
    """Per-part sizes of the GGUF at ``path`` from its tensor table (no weights read), the KV cache
    of ``n_ctx_total`` cells at ``kv_bytes_per_token`` (every layer's K and V) beside
    ``state_bytes`` of recurrent state (every slot's), and a compute buffer estimate: the logits
    of a ubatch plus a sixth of the KV, Ollama's fallback."""
    blocks: dict[int, int] = {}
    output = embd = norm = 0
    n_vocab = 0
    for tensor in file_header(path, _KEEP).tensors:
        size = tensor.n_bytes
        name = tensor.name
        if name.startswith("blk."):
            index = int(name.split(".")[1])
            blocks[index] = blocks.get(index, 0) + size
        elif name == "output.weight":
            output = size
        elif name == "token_embd.weight":
            embd = size
            n_vocab = int(tensor.shape[-1]) if len(tensor.shape) > 1 else 0
        elif name.startswith("output_norm"):
            norm += size
    layers = tuple(blocks[i] for i in sorted(blocks))
    kv_total = n_ctx_total * kv_bytes_per_token
    kv_per_layer = (kv_total + state_bytes) // max(1, len(layers))
    graph = n_ubatch * n_vocab * 4 + kv_total // 6
    proj = projector.stat().st_size if projector is not None else 0
    return ModelSizes(layers, norm + (output or embd), kv_per_layer, graph, proj)


def place(spec: LoadSpec, devices: Sequence[Device]) -> tuple[LoadSpec, Placement]:
    """``spec`` with the GPU layers (and, over several GPUs, the split) its placement on ``devices``
    gives. Slots come first: the KV cache of every slot's context (and its recurrent state) is part
    of each layer's cost, so more slots put fewer layers on a GPU rather than fewer slots in the
    load (Ollama sizes its KV from num_ctx x num_parallel the same way before it fits layers).
    A ``tensor_split`` of layer counts adding up to ``n_gpu_layers`` is kept as it is."""
    n_slots = 0 if spec.embedding_only else spec.n_slots
    cache = cache_shape(spec.path)
    sizes = model_sizes(
        spec.path,
        spec.n_ctx_slot * n_slots,
        cache.kv_bytes_per_token(spec.kv_cache_type),
        min(spec.n_batch, 512),
        spec.projector,
        cache.state_bytes * n_slots,
    )
    num_gpu = spec.n_gpu_layers if spec.n_gpu_layers >= 0 else None
    held = [round(n) for n in spec.tensor_split]
    if num_gpu is not None and len(held) == len(devices) and sum(held) == num_gpu:
        # Weights placed already (a variant over them: ``SharedWeights.layout``) stay where they
        # are; a fit to the memory they left would report them elsewhere.
        placement = _placement(sizes, held)
    else:
        if spec.main_gpu >= len(devices):
            log.warning(
                "main_gpu %d: only %d GPUs were found; the layers are fitted to all", spec.main_gpu, len(devices)
            )
        main = spec.main_gpu if spec.main_gpu >= 0 else None
        placement = fit(
            devices, sizes, num_gpu=num_gpu, overhead=spec.gpu_overhead, spread=spec.sched_spread, main_gpu=main
        )
    split = placement.tensor_split if len(devices) > 1 else ()
    return replace(spec, n_gpu_layers=placement.n_gpu_layers, tensor_split=split), placement


def placed(spec: LoadSpec, devices: Sequence[Device]) -> tuple[LoadSpec, Placement | None]:
    """``place`` on the GPUs found, saying so in the log; ``spec`` as it is (and None) without any."""
    if not devices:
        return spec, None
    spec, placement = place(spec, devices)
    used = ", ".join(f"{d.name}: {n}" for d, n in zip(devices, placement.per_device, strict=True))
    log.info("%s: %d layers to the GPUs (%s), %s", spec.path.name, spec.n_gpu_layers, used, placement.processor())
    return spec, placement
