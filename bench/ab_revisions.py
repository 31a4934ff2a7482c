"""Single-stream A/B of two source trees of cllm on the benchmark model, alternating runs.

    git worktree add /tmp/cllm-old <rev>
    python bench/ab_revisions.py /tmp/cllm-old .   [--rounds 2]

Each round starts one server per tree (in-process uvicorn, 2 threads, 32 slots x 512 tokens, as
bench/compare.py's distinct load), sends 8 greedy 64-token generations one after another, and
prints the mean seconds per request and the median gap between streamed tokens. The trees
alternate, so drift on a noisy machine falls on both; compare the two, never absolute times.
The model is bench/compare.py's (``--prepare-only`` makes it).
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

MODEL = Path.home() / ".cache" / "cllm-bench" / "models" / "qwen3-0.6b-random-qwen-vocab-q4_k_m.gguf"
SERVE = """
import sys
src, port, models = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, src)  # this tree's cllm_ollama, before the installed one
import uvicorn
from pathlib import Path
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
settings = Settings(models_dir=Path(models), num_parallel=32, context_length=512, num_thread=2, keep_alive=float("inf"))
uvicorn.run(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
"""


def one_round(src: Path, port: int, models: Path, prompts: list[str]) -> tuple[float, float]:
    server = subprocess.Popen([sys.executable, "-c", SERVE, str(src), str(port), str(models)])
    try:
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300)
        for _ in range(600):
            try:
                client.get("/")
                break
            except httpx.TransportError:
                time.sleep(0.1)
        client.post("/api/generate", json={"model": "m", "prompt": "warm", "raw": True, "stream": False})
        walls, gaps = [], []
        for prompt in prompts:
            t0 = last = time.perf_counter()
            body = {"model": "m", "prompt": prompt, "raw": True, "options": {"num_predict": 64, "temperature": 0}}
            with client.stream("POST", "/api/generate", json=body) as r:
                for i, _ in enumerate(r.iter_lines()):
                    now = time.perf_counter()
                    if i:
                        gaps.append(now - last)
                    last = now
            walls.append(time.perf_counter() - t0)
        return statistics.mean(walls), statistics.median(gaps) * 1000
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from cllm_ollama.store.create import import_gguf
    from cllm_ollama.store.store import ModelStore

    models = Path(tempfile.mkdtemp()) / "models"
    import_gguf(ModelStore(models), "m", MODEL)
    rng = random.Random(0)
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "zeta",
        "eta",
        "theta",
        "iota",
        "kappa",
        "lambda",
        "mu",
        "nu",
        "xi",
        "omicron",
        "pi",
        "rho",
    ]
    prompts = [" ".join(rng.choice(words) for _ in range(60)) for _ in range(8)]
    for r in range(args.rounds):
        for i, src in enumerate((args.a, args.b)):
            wall, itl = one_round(src.resolve(), 19100 + 2 * r + i, models, prompts)
            print(f"{src}: {wall:.2f} s per request, inter-token p50 {itl:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
