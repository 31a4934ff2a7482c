"""What a load may take and whether it fits: free host memory (the kernel's view, capped by the
process's cgroup) and the slots whose KV cache fits beside the weights.

In a container (a Kubernetes pod with a memory limit) the node's ``MemAvailable`` says nothing
about the limit: a cache that fits the node but not the pod gets the pod OOM-killed instead of
being loaded with fewer slots. The cgroup's room is its limit less its working set (usage less
inactive page cache, as the kubelet counts it), so the mmap'ed weights, which are page cache,
are not counted twice.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InsufficientMemory

GIB = 2**30

# cgroup v1 writes "no limit" as a huge number (PAGE_COUNTER_MAX pages).
_NO_LIMIT = 1 << 60


def available_memory(proc: Path = Path("/proc"), cgroups: Path = Path("/sys/fs/cgroup")) -> int | None:
    """Bytes that can be allocated without swapping or hitting the cgroup's limit; None where unknown."""
    sources = (_mem_available(proc / "meminfo"), cgroup_room(proc / "self" / "cgroup", cgroups))
    known = [b for b in sources if b is not None]
    return min(known) if known else None


def _mem_available(meminfo: Path) -> int | None:
    try:
        with meminfo.open() as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def cgroup_room(self_cgroup: Path, cgroups: Path) -> int | None:
    """The process's cgroup memory limit less its working set (v2, else v1); None without a limit."""
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return None
    for line in lines:  # "id:controllers:path"; cgroup v2's line is "0::path"
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        controllers, path = parts[1], parts[2]
        try:
            if controllers == "" and (room := _room(cgroups, path, _V2)) is not None:
                return room
            if "memory" in controllers.split(",") and (room := _room(cgroups, path, _V1)) is not None:
                return room
        except ValueError:  # a file that does not say what the kernel writes there
            continue
    return None


# (directory, limit file, usage file, the memory.stat key of inactive page cache) per version.
_V2 = ("", "memory.max", "memory.current", "inactive_file")
_V1 = ("memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")


def _room(cgroups: Path, path: str, version: tuple[str, str, str, str]) -> int | None:
    mount, limit_file, usage_file, inactive = version
    root = cgroups / mount if mount else cgroups
    # Inside a cgroup namespace the process's own cgroup is mounted at the root.
    for directory in (root / path.lstrip("/"), root):
        limit = _read(directory / limit_file)
        if limit is None:
            continue
        if limit == "max" or int(limit) >= _NO_LIMIT:
            return None
        usage = _read(directory / usage_file)
        if usage is None:
            return None
        working = int(usage) - _stat(directory / "memory.stat").get(inactive, 0)
        return max(0, int(limit) - working)
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _stat(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in (_read(path) or "").splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def resident_bytes(status: Path = Path("/proc/self/status")) -> int:
    """What this process holds in RAM now (``VmRSS``: its heap, any anonymous copy of weights,
    the file pages it maps); 0 where unknown."""
    try:
        for line in status.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def compute_bytes(n_ubatch: int, n_outputs: int, n_vocab: int, n_embd: int, scores: int = 0) -> int:
    """What a generation context's compute buffers may hold once it decodes a full micro-batch:
    ``n_outputs`` rows of logits (``n_vocab`` floats; the graph's and the output buffer's) and the
    layers' activations (a few dozen rows of ``n_embd`` floats per token of ``n_ubatch``), and
    without flash attention the attention scores and mask, ``scores`` floats per token (the
    heads and the mask times the cells a slot holds: llama.cpp's reserve grew 28 KiB per cell of
    context for the 14 heads of Qwen2.5-0.5B, 970 MiB at 32k; flash attention keeps them out)."""
    return 4 * (2 * n_outputs * n_vocab + 32 * n_ubatch * n_embd + n_ubatch * scores)


def fit_slots(
    kv_bytes_per_token: float,
    n_ctx_slot: int,
    n_slots: int,
    fixed_bytes: int,
    available: int | None,
    state_bytes: float = 0,
) -> int | None:
    """The most slots, ``n_slots`` halved as often as needed (down to 1), whose KV cache (and
    ``state_bytes`` of recurrent state each: a fixed cost per slot, llama_memory_recurrent's r and
    s rows) fits in ``available`` bytes beside ``fixed_bytes`` (weights in the same memory); None
    when not even one does. Unknown ``available`` (None) fits everything.
    """
    if available is None:
        return n_slots
    per_slot = kv_bytes_per_token * n_ctx_slot + state_bytes
    slots = n_slots
    while slots >= 1:
        if fixed_bytes + per_slot * slots <= available:
            return slots
        slots = 0 if slots == 1 else slots // 2
    return None


def check_memory_fit(
    *,
    kv_bytes_per_token: int,
    n_ctx_slot: int,
    n_slots: int,
    host_weights: int,
    host_free: int | None,
    gpu_share: float = 0.0,
    gpu_free: int | None = None,
    host_held: int = 0,
    state_bytes: int = 0,
    gpu_fixed: int = 0,
) -> None:
    """Raise ``InsufficientMemory`` (with the slots that would fit) unless ``n_slots`` slots of
    ``n_ctx_slot`` tokens fit: ``gpu_share`` of the KV cache and of each slot's ``state_bytes`` of
    recurrent state (the offloaded layers') in ``gpu_free`` beside ``gpu_fixed`` (the compute
    buffers there), the rest in ``host_free`` beside ``host_weights`` (and whatever else the load
    adds in host RAM: compute buffers). None: unknown, no check.

    ``host_held`` is what the process holds already (its RSS): ``host_free`` is net of it (the
    kernel's count), so it is in both sides of the refusal's numbers, which then say what the
    process would hold and what it could.
    """
    host = 1 - gpu_share
    pools = [("system", kv_bytes_per_token * host, state_bytes * host, host_weights, host_free, host_held)]
    if gpu_share > 0:
        pools.append(("GPU", kv_bytes_per_token * gpu_share, state_bytes * gpu_share, gpu_fixed, gpu_free, 0))
    fits: int | None = n_slots
    refusal = ""
    for name, kv, state, fixed, available, held in pools:
        got = fit_slots(kv, n_ctx_slot, n_slots, fixed, available, state)
        if available is not None and (got is None or got < n_slots):
            needed = held + fixed + (kv * n_ctx_slot + state) * n_slots
            refusal = refusal or (
                f"model requires more {name} memory ({needed / GIB:.1f} GiB) "
                f"than is available ({(held + available) / GIB:.1f} GiB)"
            )
        fits = None if got is None or fits is None else min(fits, got)
    if refusal:
        raise InsufficientMemory(refusal, fits=fits)
