"""``cllm serve`` under valgrind's memcheck at the GPU defaults, on the CPU (issue 31).

The H200 run (2026-11-28) saw ``cllm serve`` die without a word at 32 slots and batches of 2048,
and lavapipe died of heap corruption at the same settings. A write past a buffer on the host (a
``llama_batch`` cllm fills through ctypes, a state buffer, llama.cpp's own CPU path) would
corrupt the heap there too, so this runs the server's whole path under memcheck with those
settings: the load, 32 concurrent sampled requests (about 1,300 prompt rows at once, gap fill
on), then a second burst of the same prompts, each in another slot (prefix copies and restores).
It needs llama.cpp built without AVX-512 (valgrind 3.19 decodes AVX2 at most): the build
``bench/avx2_suite.sh`` makes in ``.venv-avx2``.

    python bench/memcheck.py [KEY=VALUE ...]    # server settings, e.g. CLLM_NUM_BATCH=512; ROUNDS=N

Prints the errors memcheck found in frames of llama.cpp, ggml, ctypes or cllm's own binding
(CPython's own start-up reports from its small-integer cache are not counted: they are known
false reports of a CPython built without valgrind support). About 4 minutes a burst on two cores.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import vulkan_crash
from harness.child_server import cllm_serve
from serving import create_from_files

ROOT = Path("/tmp/cllm-memcheck")
REPO = Path(__file__).resolve().parent.parent
# Frames that make a report ours: llama.cpp and ggml, ctypes' calls into them, and numpy's
# buffers that cllm hands to them.
OURS = re.compile(r"libllama|libggml|libmtmd|_ctypes|libffi|multiarray")


def wrapper(site: Path) -> Path:
    """A ``python`` that runs under memcheck with the AVX2 build first on the path."""
    path = ROOT / "python"
    path.write_text(
        "#!/bin/sh\n"
        "export PYTHONMALLOC=malloc\n"  # every Python object a malloc block memcheck tracks
        f"export PYTHONPATH={site}\n"
        f"exec valgrind --tool=memcheck --log-file={ROOT}/vg.%p.log --num-callers=30 --error-limit=no "
        f'{sys.executable} "$@"\n'
    )
    path.chmod(0o755)
    return path


def reports(log: Path) -> list[str]:
    """memcheck's error reports in ``log`` that pass through our frames."""
    found, block = [], []
    for line in log.read_text(errors="replace").splitlines():
        text = line.split("== ", 1)[-1]
        if text.strip():
            block.append(text)
            continue
        if block and ("Invalid" in block[0] or "uninitialised" in block[0]) and any(OURS.search(b) for b in block):
            found.append("\n".join(block))
        block = []
    return found


async def burst(url: str, round_: int) -> list[int | str]:
    """32 sampled requests at once; each round moves the prompts one slot on, so a later round
    finds its prompts' starts in other slots (copies) or saved (restores)."""
    async with httpx.AsyncClient(timeout=1800) as client:

        async def one(i: int) -> int | str:
            body = {"model": "m", "prompt": f"request {(i + round_) % 32} about things " * 8, "stream": False,
                    "options": {"num_predict": 8}}  # fmt: skip
            try:
                return (await client.post(url + "/api/generate", json=body)).status_code
            except httpx.HTTPError as exc:
                return type(exc).__name__

        return list(await asyncio.gather(*(one(i) for i in range(32))))


def main() -> None:
    sites = sorted((REPO / ".venv-avx2" / "lib").glob("python3*/site-packages"))
    if not sites or shutil.which("valgrind") is None:
        sys.exit("needs valgrind and the AVX2 build: run bench/avx2_suite.sh once (it makes .venv-avx2)")
    shutil.rmtree(ROOT, ignore_errors=True)
    ROOT.mkdir()
    vulkan_crash.ROOT = ROOT
    args = dict(a.split("=", 1) for a in sys.argv[1:])
    rounds = int(args.pop("ROUNDS", "2"))
    settings = {"PYTHONFAULTHANDLER": "1", "CLLM_KEEP_ALIVE": "-1", "CLLM_NUM_THREAD": "2"}
    settings |= {"CLLM_NUM_PARALLEL": "32", "CLLM_CONTEXT_LENGTH": "512", "CLLM_NUM_BATCH": "2048"}
    settings |= {"CLLM_GAP_FILL": "4"} | args
    model = vulkan_crash.model()
    log = ROOT / "serve.log"
    started = time.monotonic()
    with cllm_serve(ROOT / "models", settings, log, python=str(wrapper(sites[0])), ready_s=900) as (proc, url):
        print(f"serving under memcheck after {time.monotonic() - started:.0f} s", flush=True)
        create_from_files(url, "m", (model,))
        for r in range(rounds):
            started = time.monotonic()
            codes = asyncio.run(burst(url, r))
            print(f"round {r}: {codes.count(200)}/32 answered in {time.monotonic() - started:.0f} s", flush=True)
            if proc.poll() is not None:
                print(f"the server died ({proc.returncode}): see {log}")
                break
    found = [r for vg in sorted(ROOT.glob("vg.*.log")) for r in reports(vg)]
    for report in found:
        print(report, end="\n\n")
    print(f"{len(found)} memcheck reports in llama.cpp, ggml or ctypes frames (logs: {ROOT}/vg.*.log)")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
