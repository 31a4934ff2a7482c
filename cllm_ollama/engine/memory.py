"""How much host memory a load may still take: the kernel's view, capped by the process's cgroup.

In a container (a Kubernetes pod with a memory limit) the node's ``MemAvailable`` says nothing
about the limit: a cache that fits the node but not the pod gets the pod OOM-killed instead of
being loaded with fewer slots. The cgroup's room is its limit less its working set (usage less
inactive page cache, as the kubelet counts it), so the mmap'ed weights, which are page cache,
are not counted twice.
"""

from __future__ import annotations

from pathlib import Path

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
