"""Server processes for the comparison: start one, wait until it answers, read its peak memory, stop it."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """A command line that serves HTTP on ``base_url`` and answers 200 on ``health_path`` once loaded."""

    name: str
    argv: list[str]
    base_url: str
    health_path: str
    log: Path
    env: dict[str, str] | None = None
    shown_env: dict[str, str] = field(default_factory=dict)  # the settings worth printing in the report

    @property
    def command_line(self) -> str:
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.shown_env.items())
        return (prefix + " " if prefix else "") + shlex.join(self.argv)


class Running:
    """``with Running(server) as running:`` the server runs inside the block and is stopped after it."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Running:
        self.server.log.parent.mkdir(parents=True, exist_ok=True)
        # A Python server that dies of a signal (a crash in native code) still says where it was,
        # unless the environment says otherwise (bench/gpu_check.sh: empty, off on a GPU).
        env = {"PYTHONFAULTHANDLER": "1", **(self.server.env if self.server.env is not None else os.environ)}
        with self.server.log.open("wb") as log:
            self.proc = subprocess.Popen(self.server.argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is not None:  # it died on its own: how, at the end of its log
            with self.server.log.open("a") as log:
                log.write(f"\n!! {self.server.name} exited by itself: {_how(self.proc.returncode)}\n")
            return
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)

    def wait_ready(self, timeout_s: float = 600.0) -> None:
        """Poll the health endpoint until it answers 200; fail if the process dies or time runs out."""
        assert self.proc is not None
        url = self.server.base_url + self.server.health_path
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.server.name} exited ({self.proc.returncode}); see {self.server.log}")
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass  # not listening yet, or 503 while the model loads
            time.sleep(0.5)
        raise RuntimeError(f"{self.server.name} not ready after {timeout_s:.0f} s; see {self.server.log}")

    def peak_rss_kib(self) -> int:
        """Peak resident memory (VmHWM) of the server and every process below it, summed."""
        assert self.proc is not None
        return sum(_vm_hwm_kib(pid) for pid in _tree(self.proc.pid))


def _how(code: int) -> str:
    """An exit status in words: a negative one is the signal that ended the process."""
    if code < 0:
        return f"signal {-code} ({signal.Signals(-code).name})"
    return f"exit code {code}"


def _tree(root: int) -> list[int]:
    """``root`` and its descendants, from the parent ids in /proc/*/stat."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # the process ended while we looked
        ppid = int(text.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _vm_hwm_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0
