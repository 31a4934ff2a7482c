"""The chat workload's turn-1 chats (the very prompts of `compare.py --workload chat`'s level) sent
one at a time, greedy, to cllm and to llama-server in turn: each answer's length and start, and
whether the two servers' texts agree. Alone they agree but for a near-tie that flips between the
two builds' kernels, and one flip into a loop that runs to the token limit outweighs the rest
(BENCHMARKS.md, "Why the chat's TTFT follows its request rate").

    python bench/answer_lengths.py [--users 12] [--model GGUF] [--llama-server BIN]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from cllm_ollama.cli.bench_client import Api, Target, request_body
from cllm_ollama.cli.bench_workloads import Kind, Workload, build_waves
from real_model import real_model_path
from targets import Running, Server, free_port

DEFAULT_BINARY = Path.home() / ".cache/cllm-bench/build/llama.cpp-0.3.36/bin/llama-server"


def answers(running: Running, target: Target, chats: list[list[dict[str, str]]]) -> list[tuple[int, str]]:
    """Each chat's generated token count and text, one request at a time."""
    out = []
    for messages in chats:
        body: dict[str, Any] = request_body(target, messages) | {"stream": False}
        body.pop("stream_options", None)
        body.pop("ignore_eos", None)
        path = "/api/chat" if target.api is Api.CHAT else "/v1/chat/completions"
        request = urllib.request.Request(
            running.server.base_url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=600) as response:
            reply = json.load(response)
        if target.api is Api.CHAT:
            out.append((reply["eval_count"], reply["message"]["content"]))
        else:
            out.append((reply["usage"]["completion_tokens"], reply["choices"][0]["message"]["content"]))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--users", type=int, default=12)
    p.add_argument("--model", type=Path, help="a GGUF [the real Qwen2.5-Coder-0.5B of the chat workload]")
    p.add_argument("--llama-server", type=Path, default=DEFAULT_BINARY)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    model = a.model or real_model_path(quiet=False)
    workload = Workload(kind=Kind.CHAT, system_tokens=450, user_tokens=32)
    sessions = build_waves(workload, a.users, "L0", 0)[0]  # the bench's first level
    chats = [
        [{"role": "system", "content": s.system or ""}, {"role": "user", "content": s.turns[0][1]}] for s in sessions
    ]
    with tempfile.TemporaryDirectory() as tmp:
        work, port = Path(tmp), free_port()
        env = os.environ | {
            "OLLAMA_HOST": f"127.0.0.1:{port}",
            "OLLAMA_MODELS": str(work / "models"),
            "CLLM_NUM_PARALLEL": "8",
            "CLLM_CONTEXT_LENGTH": "8192",
            "CLLM_NUM_THREAD": str(a.threads),
        }
        cllm = str(Path(sys.executable).parent / "cllm")
        (work / "Modelfile").write_text(f"FROM {model}\n")
        found: dict[str, list[tuple[int, str]]] = {}
        server = Server("cllm", [cllm, "serve"], f"http://127.0.0.1:{port}", "/api/version", work / "cllm.log", env)
        with Running(server) as running:  # one server at a time: two would share the two cores
            running.wait_ready()
            subprocess.run([cllm, "create", "m", "-f", str(work / "Modelfile")], env=env, check=True)
            found["cllm"] = answers(running, Target(server.base_url, Api.CHAT, "m", max_tokens=128), chats)
        port = free_port()
        argv = [str(a.llama_server), "-m", str(model), "-np", "8", "-c", "65536", "-t", str(a.threads)]
        argv += ["--cont-batching", "--host", "127.0.0.1", "--port", str(port)]
        server = Server("llama-server", argv, f"http://127.0.0.1:{port}", "/health", work / "llama-server.log")
        with Running(server) as running:
            running.wait_ready()
            target = Target(server.base_url, Api.OPENAI_CHAT, "m", max_tokens=128)
            found["llama-server"] = answers(running, target, chats)
    for i, (ours, theirs) in enumerate(zip(found["cllm"], found["llama-server"], strict=True)):
        same = "same text" if ours[1] == theirs[1] else "texts differ"
        print(f"chat {i}: cllm {ours[0]} tokens, llama-server {theirs[0]} tokens, {same}: {ours[1][:60]!r}")
    totals = {name: sum(n for n, _ in found[name]) for name in found}
    print(f"turn 1, all chats: cllm {totals['cllm']} tokens, llama-server {totals['llama-server']} tokens")


if __name__ == "__main__":
    main()
