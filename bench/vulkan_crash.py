"""Reproduce the crash of ``cllm serve`` on a GPU build (issue 31): on the Vulkan build
(``bench/vulkan_build.sh``, lavapipe), a Q4_K_M model wholly on the device, its GPU defaults (32
slots, batches of 2048 tokens) and 32 concurrent sampled requests; the server died of heap
corruption inside ``llama_decode`` (glibc: "corrupted double-linked list", a SIGABRT, or a
SIGSEGV) in the first or second burst in each of 3 runs, 2026-11-28: in ``Context.decode``, once in
the step's first call (prompt rows without logits, ``runner._decode``) and once in its second; gdb
caught glibc's "corrupted double-linked list" at a malloc inside lavapipe under
``ggml_vk_rope`` -> ``ggml_backend_vk_graph_compute`` -> ``llama_decode`` (the heap was corrupted
earlier). The same on the CPU build (also with ``CLLM_NUM_BATCH=2048``), and with
``CLLM_NUM_BATCH=512`` on Vulkan (64 requests), did not crash; greedy requests (``TEMP=0``) ran
7 and 6.7 minutes without a crash but did not finish a burst either, so that is open.
2026-11-29: the evidence points to Debian 12's lavapipe (Mesa 22.3), not llama.cpp's calls: with Khronos'
validation layer (``VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation``, Debian's
``vulkan-validationlayers``) 2 bursts ran with no error reported, and with Mesa 25.0.7 from
bookworm-backports (``apt-get install -t bookworm-backports mesa-vulkan-drivers``) 3 and then 8
bursts ran without a crash, where Mesa 22.3 had died in 5 of 8 runs within its first two.

    .venv/bin/python bench/vulkan_crash.py [KEY=VALUE ...]    # server settings, e.g. CLLM_NUM_BATCH=512
    CPU=1: the CPU build instead; TEMP=0: greedy requests; ROUNDS=N bursts (default 3)

The server runs with PYTHONFAULTHANDLER=1; its log (and where it died) is in /tmp/vulkan-crash/serve.log.
For the native stack, run the server under gdb (``gdb -batch -ex run -ex "thread apply all bt"``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import gguf
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from harness.child_server import cllm_serve
from serving import create_from_files

from cllm_ollama.engine.binding import quantize
from cllm_ollama.testing.gguf_base import Shape
from cllm_ollama.testing.ggufs import write_qwen3

ROOT = Path("/tmp/vulkan-crash")
SHAPE = Shape(n_layer=8, n_embd=256, n_head=4, n_head_kv=2, head_dim=64, n_ff=512)  # K-quants: 256-wide rows


def model() -> Path:
    q4 = ROOT / "q4.gguf"
    if not q4.exists():
        f16 = write_qwen3(ROOT / "f16.gguf", shape=SHAPE, qtype=gguf.GGMLQuantizationType.F16)
        quantize(f16, q4, "Q4_K_M")
    return q4


async def burst(url: str, n: int, options: dict[str, Any]) -> list[Any]:
    async with httpx.AsyncClient(timeout=900) as client:

        async def one(i: int) -> Any:
            body = {"model": "m", "prompt": f"{time.time()} request {i} about things " * 8, "stream": False}
            body["options"] = {"num_predict": 8, **options}
            try:
                return (await client.post(url + "/api/generate", json=body)).status_code
            except httpx.HTTPError as exc:
                return type(exc).__name__

        return list(await asyncio.gather(*(one(i) for i in range(n))))


def main() -> None:
    ROOT.mkdir(exist_ok=True)
    args = dict(a.split("=", 1) for a in sys.argv[1:])
    lib = Path(os.environ.get("VULKAN_BUILD_DIR") or Path.home() / ".cache" / "cllm-vulkan") / "build" / "bin"
    settings = {"PYTHONFAULTHANDLER": "1", "CLLM_KEEP_ALIVE": "-1", "CLLM_NUM_THREAD": "8"}
    settings |= {"CLLM_NUM_PARALLEL": "32", "CLLM_CONTEXT_LENGTH": "512"}
    if not args.pop("CPU", ""):
        settings |= {"LLAMA_CPP_LIB_PATH": str(lib), "MTMD_CPP_LIB": str(lib), "GGML_VK_VISIBLE_DEVICES": "0"}
    options = {"temperature": float(args.pop("TEMP"))} if "TEMP" in args else {}
    rounds = int(args.pop("ROUNDS", "3"))
    settings |= args
    path = model()
    log = ROOT / "serve.log"
    log.unlink(missing_ok=True)
    shutil.rmtree(ROOT / "models", ignore_errors=True)  # a fresh store: the blob upload expects a 201
    with cllm_serve(ROOT / "models", settings, log, ready_s=120) as (proc, url):
        create_from_files(url, "m", (path,))
        for r in range(rounds):
            started = time.monotonic()
            codes = asyncio.run(burst(url, 32, options))
            print(f"round {r}: {codes.count(200)}/32 answered in {time.monotonic() - started:.0f} s", flush=True)
            if proc.poll() is not None:
                print(f"the server died ({proc.returncode}): see {log}")
                sys.exit(1)
    print("no crash")


if __name__ == "__main__":
    main()
