"""A real ``cllm serve`` as a child process, for the tests (and benchmarks) that need the real
command: its environment, its log, its URL once it answers, and its end."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def cllm_serve(
    models: Path, settings: dict[str, str], log: Path, *, python: str = sys.executable, ready_s: float = 60
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``cllm serve`` on the store at ``models`` with ``settings`` (the environment's own OLLAMA_,
    CLLM_ and GGML_ variables left out), its output appended to ``log``; yields the process and
    its URL once ``GET /`` answers, and ends it (SIGTERM, then SIGKILL) afterwards."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OLLAMA_", "CLLM_", "GGML_"))}
    env |= {"OLLAMA_HOST": f"127.0.0.1:{port}", "OLLAMA_MODELS": str(models), **settings}
    argv = [python, "-c", "from cllm_ollama.cli.main import main; main()", "serve"]
    url = f"http://127.0.0.1:{port}"
    with child_process(argv, env=env, log=log, ready_url=url, ready_s=ready_s, name="cllm serve") as proc:
        yield proc, url


@contextmanager
def child_process(
    argv: list[str],
    *,
    env: dict[str, str],
    log: Path,
    ready_url: str,
    ready_s: float,
    name: str,
    cwd: Path | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """``argv`` as a child process, its output appended to ``log``; yields it once ``ready_url``
    answers 200 (failing, with the log's tail, if it exits or ``ready_s`` pass first), and ends it
    (SIGTERM, then SIGKILL) afterwards: one owner for each server a test starts."""
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + ready_s
        while True:
            try:
                if httpx.get(ready_url, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start:\n{log.read_text(errors='replace')[-4000:]}")
            time.sleep(0.2)
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
