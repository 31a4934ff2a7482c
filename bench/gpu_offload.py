"""A partly offloaded load on the device: ``cllm serve`` with ``OLLAMA_GPU_OVERHEAD`` set so that
only about ``share`` of the model's layers fit in the GPU's free memory, then a request, ``/api/ps``
and ``cllm ps`` (size_vram and PROCESSOR), a short concurrent bench, and ``num_gpu`` asked
explicitly (exactly that many layers). Writes ``offload.json`` and prints a summary.

The overhead comes from the GPU's free memory as a process holding llama.cpp's CUDA context sees
it (read in a child, before cllm starts: a context in this process would hold memory the server
then cannot use) less what cllm's own fitting (engine/offload.py) counts for the first ``share``
of the layers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from targets import Running, Server, free_port

from cllm_ollama.engine.offload import DEVICE_RESERVE, kv_bytes_per_token, model_sizes

SLOTS, CTX = 4, 2048
NAME = "offload-qwen3"


def gpu_free_bytes() -> int | None:
    """The first GPU's free memory as a process that holds llama.cpp's CUDA context sees it (the
    server will hold one too: on the H200 it took ~0.5 GiB, more than half this model's layers, and
    an overhead sized from nvidia-smi's figure left room for none); nvidia-smi's where that fails.
    None where there is no GPU."""
    probe = "from cllm_ollama.engine.binding import gpu_devices; d = gpu_devices(); print(d[0][1] if d else '')"
    seen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    last = seen.stdout.strip().splitlines()[-1:] if seen.returncode == 0 else []
    if last and last[0].isdigit():
        return int(last[0])
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    out = subprocess.run([smi, "--query-gpu=memory.free", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    first = out.stdout.strip().splitlines()[:1]
    return int(first[0]) << 20 if out.returncode == 0 and first else None


def overhead_for(model: Path, free: int, share: float) -> tuple[int, int]:
    """OLLAMA_GPU_OVERHEAD that leaves room for ``share`` of the layers, and that layer count."""
    sizes = model_sizes(model, SLOTS * CTX, kv_bytes_per_token(model), 512)
    fitted = max(1, int(sizes.n_layers * share))
    need = DEVICE_RESERVE + sizes.graph + sum(layer + sizes.kv_per_layer for layer in sizes.layers[:fitted])
    return max(0, free - need), fitted


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=60) as response:
        return json.loads(response.read())


def _post(url: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as response:
        return json.loads(response.read())


def _generate(base: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    started = time.monotonic()
    body = {"model": NAME, "prompt": "Tell me about GPUs.", "stream": False,
            "options": {"num_predict": 32, "temperature": 0, **(options or {})}}  # fmt: skip
    reply = _post(base + "/api/generate", body)
    took = reply.get("eval_duration") or 0
    return {"seconds": round(time.monotonic() - started, 2), "eval_count": reply.get("eval_count"),
            "load_duration_ms": (reply.get("load_duration") or 0) // 1_000_000,
            "tokens_per_s": reply["eval_count"] / took * 1e9 if took else None}  # fmt: skip


def _ps(env: dict[str, str], base: str) -> dict[str, Any]:
    cli = subprocess.run([_cllm(), "ps"], env=env, capture_output=True, text=True, timeout=60, check=False)
    return {"api_ps": _get(base + "/api/ps"), "cllm_ps": cli.stdout + cli.stderr}


def _cllm() -> str:
    return shutil.which("cllm", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}") or "cllm"


def _bench(base: str, out: Path) -> dict[str, Any]:
    path = out / "offload-bench.json"
    subprocess.run([sys.executable, "-m", "cllm_ollama.cli.bench", "--url", base, "--model", NAME,
                    "--concurrency", "1,4", "--requests", "8", "--max-tokens", "32", "--json", str(path)],
                   check=True, timeout=240)  # fmt: skip
    return json.loads(path.read_text())


def _placement_lines(log: Path) -> list[str]:
    text = log.read_text(errors="replace") if log.exists() else ""
    return [line for line in text.splitlines() if "layers to the GPUs" in line or "GPU " in line][-6:]


def run(cache: Path, out: Path, model: Path, threads: int, share: float) -> None:
    free = gpu_free_bytes()
    overhead, fitted = overhead_for(model, free, share) if free is not None else (0, 0)
    found: dict[str, Any] = {"model": str(model), "model_bytes": model.stat().st_size, "gpu_free_before": free,
                             "OLLAMA_GPU_OVERHEAD": overhead, "layers_meant_to_fit": fitted}  # fmt: skip
    port = free_port()
    settings = {"CLLM_NUM_PARALLEL": str(SLOTS), "CLLM_CONTEXT_LENGTH": str(CTX), "CLLM_NUM_THREAD": str(threads),
                "CLLM_KEEP_ALIVE": "-1", "OLLAMA_GPU_OVERHEAD": str(overhead),
                "OLLAMA_MODELS": str(cache / "offload-store"), "OLLAMA_HOST": f"127.0.0.1:{port}"}  # fmt: skip
    env = os.environ | settings
    log = cache / "logs" / "cllm-offload.log"
    server = Server("cllm-offload", [_cllm(), "serve"], f"http://127.0.0.1:{port}", "/api/version", log, env)
    modelfile = cache / "Modelfile.offload"
    modelfile.write_text(f"FROM {model}\n")
    try:
        with Running(server) as running:
            running.wait_ready(120)
            subprocess.run([_cllm(), "create", NAME, "-f", str(modelfile)], env=env, check=True, timeout=120)
            found["fitted"] = {"generate": _generate(server.base_url), **_ps(env, server.base_url)}
            print(found["fitted"]["cllm_ps"], flush=True)
            found["fitted"]["bench"] = _bench(server.base_url, out)
            # num_gpu asked for: exactly that many layers (a reload, the model being idle).
            found["num_gpu_4"] = {"generate": _generate(server.base_url, {"num_gpu": 4}), **_ps(env, server.base_url)}
            print(found["num_gpu_4"]["cllm_ps"], flush=True)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        found["error"] = str(exc)
        print(f"!! offload step failed: {exc}", flush=True)
    found["placement_log"] = _placement_lines(log)
    (out / "offload.json").write_text(json.dumps(found, indent=1, default=str) + "\n")
    for line in found["placement_log"]:
        print(line)
