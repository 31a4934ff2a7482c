"""Host memory for the load check: MemAvailable, capped by a container's cgroup limit."""

from __future__ import annotations

from pathlib import Path

from cllm_ollama.engine.memory import available_memory

GIB = 1 << 30


def machine(tmp_path: Path, cgroup_line: str, files: dict[str, str], mem_available_kib: int = 64 << 20) -> Path:
    """A fake /proc and /sys/fs/cgroup under ``tmp_path``."""
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "meminfo").write_text(f"MemTotal: 99 kB\nMemAvailable: {mem_available_kib} kB\n")
    (tmp_path / "proc" / "self" / "cgroup").write_text(cgroup_line + "\n")
    for name, text in files.items():
        path = tmp_path / "cgroup" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def probe(root: Path) -> int | None:
    return available_memory(root / "proc", root / "cgroup")


def test_a_cgroup_v2_limit_caps_the_node_memory(tmp_path: Path) -> None:
    root = machine(
        tmp_path,
        "0::/kubepods/pod1/c1",
        {
            "kubepods/pod1/c1/memory.max": str(8 * GIB),
            "kubepods/pod1/c1/memory.current": str(3 * GIB),
            # 1 GiB of it is inactive page cache (the mmap'ed weights): reclaimable, not counted.
            "kubepods/pod1/c1/memory.stat": f"anon 123\ninactive_file {GIB}\nactive_file 5\n",
        },
    )
    assert probe(root) == 8 * GIB - 2 * GIB


def test_inside_a_cgroup_namespace_the_own_cgroup_is_the_root(tmp_path: Path) -> None:
    root = machine(tmp_path, "0::/", {"memory.max": str(4 * GIB), "memory.current": str(GIB), "memory.stat": ""})
    assert probe(root) == 3 * GIB


def test_no_limit_leaves_the_node_memory(tmp_path: Path) -> None:
    root = machine(tmp_path, "0::/", {"memory.max": "max", "memory.current": "5"}, mem_available_kib=1 << 20)
    assert probe(root) == GIB


def test_the_node_memory_wins_when_it_is_smaller(tmp_path: Path) -> None:
    root = machine(tmp_path, "0::/", {"memory.max": str(64 * GIB), "memory.current": "0"}, mem_available_kib=1 << 20)
    assert probe(root) == GIB


def test_cgroup_v1(tmp_path: Path) -> None:
    files = {
        "memory/docker/abc/memory.limit_in_bytes": str(2 * GIB),
        "memory/docker/abc/memory.usage_in_bytes": str(GIB),
        "memory/docker/abc/memory.stat": f"cache 7\ntotal_inactive_file {GIB // 2}\n",
    }
    root = machine(tmp_path, "12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc", files)
    assert probe(root) == 2 * GIB - GIB // 2
    unlimited = machine(tmp_path / "u", "4:memory:/", {"memory/memory.limit_in_bytes": str(1 << 62)}, 1 << 20)
    assert probe(unlimited) == GIB


def test_unreadable_or_garbled_files_are_ignored(tmp_path: Path) -> None:
    root = machine(tmp_path, "0::/", {"memory.max": "lots", "memory.current": "1"}, mem_available_kib=1 << 20)
    assert probe(root) == GIB
    assert available_memory(tmp_path / "none", tmp_path / "none") is None
