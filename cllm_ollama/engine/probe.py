"""Load a model in a child process before the server does.

llama.cpp answers many broken files with ``GGML_ASSERT``, which aborts the process that
loaded it. Ollama keeps llama.cpp in a runner subprocess, so only the runner dies there;
cllm runs llama.cpp in its own process for speed (no IPC per token), so it checks each
model file once in a child first: load it, make a small context and decode two tokens.
If the child dies, the load is refused with what llama.cpp said, and the server lives.
A file that passed is remembered (by path, size and mtime) for the life of the server.

This covers asserts on loading and on the first decode. An assert that only a particular
input trips later (a context size, a batch shape) is not covered: ``gguf_check`` refuses the
metadata known to cause those, and the engine checks requests before they reach llama.cpp.
Audio is: a projector that hears encodes a second of silence last, after the child has said so;
if that kills it, the model loads but its audio is refused (``probe`` returns why).
"""

from __future__ import annotations

import logging
import math
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from importlib import metadata
from pathlib import Path
from typing import IO

from ..errors import EngineError, InsufficientMemory, InvalidRequest
from .load_stall import StallWatch

log = logging.getLogger("cllm.engine")

# A probe that runs longer than this is stuck, not slow: even a 70B model loads in minutes.
PROBE_TIMEOUT_S = 1800
# The child's exit status when llama.cpp refused an adapter cleanly (a wrong base): a 400, not a 500.
_ADAPTER_REFUSED = 3
# The child's exit status when an allocation failed (``InsufficientMemory``): memory short, not a
# broken file.
_OUT_OF_MEMORY = 4

# How ggml says why it aborts: GGML_ASSERT's condition, or GGML_ABORT's "file.cpp:123: message".
_ABORT = re.compile(r"GGML_ASSERT|\.(?:c|cc|cpp|h):\d+: \S")
# What the child prints before it encodes audio: dying after it, only the audio is at fault.
_AUDIO = "probe: encoding audio"
# What the child prints as the weights are read (the share read follows): what a stall is timed by.
_PROGRESS = "probe: progress "
# Where Python's faulthandler starts the dying child's stack: the server's log keeps it, a client's
# message keeps what llama.cpp said before it.
_FAULT = "Fatal Python error:"
# The child's last stderr lines logged when a signal killed it.
_TAIL_LINES = 40

_passed: dict[tuple[object, ...], str | None] = {}
_lock = threading.Lock()


def probe(
    path: Path,
    *,
    n_gpu_layers: int,
    embedding_only: bool,
    projector: Path | None = None,
    adapters: tuple[Path, ...] = (),
    stall_timeout: float = math.inf,
    on_gpu: bool = False,
) -> str | None:
    """Raise ``EngineError`` if loading ``path`` (and a first decode), or its ``projector`` beside it
    (clip.cpp asserts on what it cannot read too), or its LoRA ``adapters`` (the first decode runs
    with them), kills a child process; ``InvalidRequest`` if llama.cpp refused an adapter;
    ``InsufficientMemory`` if the child failed for want of memory (a GPU's, most often), which
    the pool meets by evicting idle models and trying again. Returns why the projector's audio
    must be refused where encoding it killed the child, else None. ``stall_timeout``: how long
    the child may go without progress (``load_stall``) before it is killed and the load refused.
    ``on_gpu``: the load puts layers on a GPU (see ``_fault_handler``)."""
    st = path.stat()
    pst = projector.stat() if projector is not None else None
    key: tuple[object, ...] = (str(path), st.st_size, st.st_mtime_ns, n_gpu_layers, embedding_only)
    key += (str(projector), pst and pst.st_size, *((str(a), a.stat().st_size, a.stat().st_mtime_ns) for a in adapters))
    with _lock:
        if key in _passed:
            return _passed[key]
    cmd = [sys.executable, *_fault_handler(on_gpu), "-m", __name__, str(path), str(n_gpu_layers)]
    cmd += ["1" if embedding_only else "0"]
    cmd += [str(projector) if projector is not None else "", *map(str, adapters)]
    proc = run_child(cmd, StallWatch(stall_timeout))
    if proc.returncode < 0:
        tail = "\n".join(_stderr(proc, path).splitlines()[-_TAIL_LINES:])
        how = f"the probe's child for {path.name} was killed by signal {-proc.returncode}"
        log.warning("%s; its stderr ends:\n%s", how, tail)
    if proc.returncode == _ADAPTER_REFUSED:
        said = _said(proc, path)
        raise InvalidRequest(f"llama.cpp cannot apply the model's adapter to it{': ' + said if said else ''}")
    audio_refused = None
    if proc.returncode != 0 and _AUDIO in proc.stdout:
        audio_refused = f"llama.cpp cannot encode this model's audio ({_reason(proc, path)})"
    elif _short_of_memory(proc):  # not remembered: once other models are gone, it may pass
        raise InsufficientMemory(f"not enough memory to load this model: {_reason(proc, path)}")
    elif proc.returncode != 0:
        raise EngineError(f"llama.cpp cannot load this model: {_reason(proc, path)}")
    with _lock:
        _passed[key] = audio_refused
    return audio_refused


def _fault_handler(on_gpu: bool) -> tuple[str, ...]:
    """The child's interpreter options: Python's faulthandler where the load stays on the CPU, so
    that a child killed by a signal says which call of ``_main`` it died in. Not where it offloads:
    on an H200 (2026-12-04) every load that ran with faulthandler died by SIGSEGV inside
    ``llama_model_load_from_file``, and every one without it passed (BENCHMARKS.md, issue 31);
    there the server's own ``PYTHONFAULTHANDLER``, if set, is what the child inherits."""
    return () if on_gpu else ("-X", "faulthandler")


def run_child(cmd: list[str], watch: StallWatch) -> subprocess.CompletedProcess[str]:
    """Run the child to its end, killing it once ``watch`` says its load stalled or PROBE_TIMEOUT_S
    passed: its stdout is read line by line as it comes (its progress), its stderr whole."""
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
    assert child.stdout is not None and child.stderr is not None
    lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
    stderr: list[str] = []

    def read_stdout(stream: IO[str]) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    def read_stderr(stream: IO[str]) -> None:
        stderr.append(stream.read())

    readers = [
        threading.Thread(target=read_stdout, args=(child.stdout,), daemon=True),
        threading.Thread(target=read_stderr, args=(child.stderr,), daemon=True),
    ]
    for reader in readers:
        reader.start()
    out: list[str] = []
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    try:
        while True:
            try:
                line = lines.get(timeout=max(0.0, min(watch.remaining(), deadline - time.monotonic())))
            except queue.Empty:  # no word for as long as either limit allows
                if time.monotonic() >= deadline:
                    raise EngineError(f"loading the model took more than {PROBE_TIMEOUT_S} s") from None
                raise watch.error() from None
            if line is None:
                break
            if not line.startswith(_PROGRESS):
                out.append(line)
            elif not watch.heard(float(line[len(_PROGRESS) :])):
                raise watch.error()
    except BaseException:
        child.kill()
        child.wait()
        raise
    finally:
        for reader in readers:
            reader.join()
        child.stdout.close()
        child.stderr.close()
    return subprocess.CompletedProcess(cmd, child.wait(), "".join(out), "".join(stderr))


def _short_of_memory(proc: subprocess.CompletedProcess[str]) -> bool:
    """Whether the child failed for want of memory: a load or context llama.cpp refused for an
    allocation that failed (the child's ``_OUT_OF_MEMORY`` exit), or an abort after one (CUDA's
    "out of memory" in a CUDA_CHECK, Vulkan's ErrorOutOfDeviceMemory thrown), or a SIGKILL that
    was not ours (``run_child`` raises before it reads a child it killed): the kernel's OOM killer,
    or a cgroup's memory limit. An abort for anything else (a GGML_ASSERT on a broken file) stays
    a broken file."""
    if proc.returncode == -signal.SIGKILL:
        return True
    if proc.returncode >= 0:
        return proc.returncode == _OUT_OF_MEMORY
    # Imported here, as ``_main``'s are: the parent needs the binding only to read a dead child.
    from .binding.core import out_of_memory

    return out_of_memory(proc.stderr)


def _stderr(proc: subprocess.CompletedProcess[str], path: Path) -> str:
    """The child's stderr without the server's path to the model (its file name stays)."""
    return proc.stderr.replace(str(path), path.name)


def _said(proc: subprocess.CompletedProcess[str], path: Path) -> str:
    """The last thing llama.cpp said, without server paths (nor the child's Python stack)."""
    said = _stderr(proc, path).split(_FAULT)[0]
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    said = next((line for line in reversed(lines) if _ABORT.search(line) or "error" in line.lower()), "")
    said = said or (lines[-1] if lines else "")
    return re.sub(r"\S*/(\S+:\d+:)", r"\1", said)  # llama.cpp's build paths: keep file and line


def _reason(proc: subprocess.CompletedProcess[str], path: Path) -> str:
    """What llama.cpp said last, and how the child ended."""
    said = _said(proc, path)
    if proc.returncode < 0:
        try:
            how = f"the loader was killed by {signal.Signals(-proc.returncode).name}"
        except ValueError:
            how = f"the loader was killed by signal {-proc.returncode}"
    else:
        how = f"the loader exited with {proc.returncode}"
    if proc.returncode == -signal.SIGILL:
        how += f" ({_rebuild_hint()})"
    return f"{how}: {said[-400:]}" if said else how


def _rebuild_hint() -> str:
    """What to do about a SIGILL: llama.cpp ran an instruction this CPU lacks, which a build made on
    another machine does (a copied virtual environment, a wheel cache shared between hosts)."""
    try:
        pinned = f"llama-cpp-python=={metadata.version('llama_cpp_python')}"
    except metadata.PackageNotFoundError:
        pinned = "llama-cpp-python"
    return (
        "llama.cpp was built for instructions this CPU lacks, as a build from another machine is: "
        f"rebuild it here with pip install --force-reinstall --no-cache-dir --no-deps {pinned}"
    )


def _report_progress(share: float) -> bool:
    print(f"{_PROGRESS}{share:.4f}", flush=True)
    return True


def _main(path: str, n_gpu_layers: int, embedding_only: bool, projector: str = "", *adapter_paths: str) -> None:
    # Imported here: the parent never loads llama.cpp for a probe.
    from .binding import AdapterRefused, Batch, Context, Lora, Model, Projector, with_adapters

    model = Model(Path(path), n_gpu_layers=n_gpu_layers, progress=_report_progress)
    proj = Projector(model, Path(projector), n_threads=1, use_gpu=n_gpu_layers != 0) if projector else None
    try:
        adapters = [Lora(model, Path(p)) for p in adapter_paths]
    except AdapterRefused:
        os._exit(_ADAPTER_REFUSED)  # llama.cpp has said why on stderr
    ctx = Context(model, n_seq_max=1, n_ctx_seq=64, n_batch=16, n_threads=1, embeddings=embedding_only)
    ctx = with_adapters(ctx, adapters)
    batch = Batch(ctx.n_batch)
    first = model.bos if model.bos >= 0 else 0
    tokens = [first, (first + 1) % model.n_vocab]
    batch.fill(tokens, range(len(tokens)), [0] * len(tokens), [len(tokens) - 1])
    ctx.decode(batch)
    if not embedding_only:
        ctx.logits(1)
    ctx.close()
    for adapter in adapters:
        adapter.close()
    if proj is not None:
        if proj.audio:  # last: where only this dies, the model is sound and only its audio is refused
            print(_AUDIO, flush=True)
            proj.encode_silence()
        proj.close()
    model.close()


if __name__ == "__main__":
    try:
        _main(sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", *sys.argv[4:])
    except Exception as exc:  # a clean failure (not an abort): say it on stderr, exit 1 (4: memory)
        print(f"error: {exc}", file=sys.stderr, flush=True)
        os._exit(_OUT_OF_MEMORY if isinstance(exc, InsufficientMemory) else 1)
