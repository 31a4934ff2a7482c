"""Streams left with gaps between them: an A/B of two source trees of cllm, alternating runs.

    git worktree add /tmp/cllm-old <rev>
    python bench/gap_streams.py /tmp/cllm-old .   [--rounds 3] [--model GGUF]

Each run starts ``cllm serve`` on a tree (8 slots of 2048 tokens, 2 threads, the real
Qwen2.5-Coder-0.5B unless ``--model``) and sends 8 raw greedy generations at once, counting on
from different numbers: every other one asks for 16 tokens, the rest for 120. The short ones end
first and leave their slots idle between the long ones, whose inter-token gaps after that are
what is measured (median over the long streams, ms). Admission puts the 8 in slots by arrival,
so the short ones sit in alternate slots in most runs. Compare the two trees, never absolute times.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from real_model import real_model_path
from targets import free_port

SHORT, LONG = 16, 120


def answer(port: int, i: int, r: int, n: int, times: dict[int, list[float]]) -> None:
    """Request ``i`` of round ``r``: ``n`` tokens counting on from its own number; the arrival time
    of each streamed line into ``times[i]``."""
    prompt = "Numbers: " + ", ".join(str(k) for k in range(i * 100 + r, i * 100 + r + 12)) + ","
    options = {"num_predict": n, "temperature": 0}
    body = json.dumps({"model": "m", "prompt": prompt, "raw": True, "stream": True, "options": options})
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/generate", body.encode())
    seen: list[float] = []
    with urllib.request.urlopen(request, timeout=600) as response:
        for _line in response:
            seen.append(time.perf_counter())
    times[i] = seen


def one_run(tree: Path, model: Path, rounds: int) -> list[float]:
    """The long streams' median gap (ms) after the short ones ended, per round, on ``tree``."""
    port, store = free_port(), Path(tempfile.mkdtemp())
    settings = {"CLLM_NUM_PARALLEL": "8", "CLLM_CONTEXT_LENGTH": "2048", "CLLM_NUM_THREAD": "2"}
    env = os.environ | settings | {"PYTHONPATH": str(tree), "OLLAMA_MODELS": str(store / "models")}
    env |= {"OLLAMA_HOST": f"127.0.0.1:{port}", "CLLM_KEEP_ALIVE": "-1", "CLLM_CACHE_DISK": "0"}
    cllm = str(Path(sys.executable).parent / "cllm")
    server = subprocess.Popen([cllm, "serve"], env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/version", timeout=5)
                break
            except OSError:
                time.sleep(0.25)
        (store / "Modelfile").write_text(f"FROM {model}\n")
        subprocess.run([cllm, "create", "m", "-f", str(store / "Modelfile")], env=env, check=True, capture_output=True)
        out = []
        for r in range(rounds):
            times: dict[int, list[float]] = {}
            lengths = [SHORT if i % 2 == 0 else LONG for i in range(8)]
            threads = [threading.Thread(target=answer, args=(port, i, r, n, times)) for i, n in enumerate(lengths)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            shorts_done = max(times[i][-1] for i in range(0, 8, 2))
            gaps = [b - a for i in range(1, 8, 2) for a, b in itertools.pairwise(times[i]) if a > shorts_done + 0.3]
            out.append(1000 * statistics.median(gaps))
        return out
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(store, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per server start")
    parser.add_argument("--runs", type=int, default=1, help="server starts per tree, alternating")
    parser.add_argument("--model", type=Path, default=None, help="[default: the real-weight model]")
    args = parser.parse_args()
    model = args.model or real_model_path()
    results: dict[str, list[float]] = {"old": [], "new": []}
    for _ in range(args.runs):
        for name in ("new", "old"):
            results[name] += one_run(getattr(args, name).resolve(), model, args.rounds)
            print(f"{name}: {', '.join(f'{ms:.1f}' for ms in results[name])} ms", flush=True)
    print({name: round(statistics.median(ms), 1) for name, ms in results.items()})


if __name__ == "__main__":
    main()
