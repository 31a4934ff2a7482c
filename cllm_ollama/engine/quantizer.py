"""Quantize a GGUF model file in a child process: what ``ollama create --quantize`` does by running
llama.cpp's ``llama-quantize``, here ``llama_model_quantize`` of the binding cllm already loads.

A child, as for ``probe``: llama.cpp answers some files with ``GGML_ASSERT``, which aborts the
process that called it, and the server must live. It also tells how far it got: llama.cpp logs
each tensor it writes as ``[  i/  n]`` (as Ollama reads llama-quantize's output), which the child
passes on as a line the parent turns into progress.
"""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from pathlib import Path

from ..errors import EngineError

# The child's line for one tensor written: "progress I N".
_PROGRESS = "progress "
# llama.cpp's log line for a tensor it starts on.
_TENSOR = re.compile(r"^\[\s*(\d+)/\s*(\d+)\]")
# How many of the child's last other lines say why it failed.
_TAIL = 12


def quantize_file(src: Path, dst: Path, ftype: str, progress: Callable[[int, int], None]) -> None:
    """Write ``src`` quantized to ``ftype`` (llama.cpp's name: ``Q4_K_M``, ``Q8_0``, ``F16``, ``F32``)
    to ``dst``, calling ``progress(tensors done, tensors)`` as it goes; ``EngineError`` with what
    llama.cpp said when it fails or dies. The child is killed if ``progress`` raises (the client
    left)."""
    cmd = [sys.executable, "-m", __name__, str(src), str(dst), ftype]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    assert child.stdout is not None
    said: deque[str] = deque(maxlen=_TAIL)
    try:
        for line in child.stdout:
            if line.startswith(_PROGRESS):
                done, total = map(int, line.split()[1:3])
                progress(done, total)
            elif line.strip():
                said.append(line.strip())
        rc = child.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
    if rc != 0:
        reason = "; ".join(said) or f"exit status {rc}"
        raise EngineError(f"quantizing the model to {ftype} failed: {reason}")


class _Progress(logging.Handler):
    """In the child: llama.cpp's per-tensor log lines as progress lines, its warnings and errors
    as they are (the parent keeps the last ones as the reason of a failure)."""

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if match := _TENSOR.match(text):
            print(f"{_PROGRESS}{int(match[1]) - 1} {match[2]}", flush=True)
        elif record.levelno >= logging.WARNING:
            print(text, flush=True)


def _main(src: str, dst: str, ftype: str) -> None:
    from .binding import quantize  # the child's alone: the parent need not load llama.cpp for it

    log = logging.getLogger("cllm.llama")  # the binding's: llama.cpp's log comes through it
    log.setLevel(logging.INFO)
    log.addHandler(_Progress())
    log.propagate = False
    quantize(Path(src), Path(dst), ftype)


if __name__ == "__main__":
    try:
        _main(*sys.argv[1:4])
    except EngineError as exc:
        print(exc, flush=True)
        sys.exit(2)
