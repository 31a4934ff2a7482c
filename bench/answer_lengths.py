"""The chat workload's turn-1 chats (the very prompts of `compare.py --workload chat`'s level) sent
one at a time, greedy, to cllm and to llama-server in turn: each answer's length and start, and
whether the two servers' texts agree. Alone they agree but for a near-tie that flips between the
two builds' kernels, and one flip into a loop that runs to the token limit outweighs the rest
(BENCHMARKS.md, "Why the chat's TTFT follows its request rate").

    python bench/answer_lengths.py [--users 12] [--model GGUF] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import compare
import llama_build
from cllm_ollama.cli.bench_client import Api, Target, request_body
from cllm_ollama.cli.bench_workloads import Kind, Workload, build_waves
from real_model import real_model_path
from targets import Running


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
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    model = a.model or real_model_path(quiet=False)
    # The chat workload's servers, as compare.py starts them (its defaults: 8 slots of 8192 tokens).
    plan, _ = compare.parse_args(["--workload", "chat", "--threads", str(a.threads)])
    pp = plan.prefix
    assert pp is not None
    slots, ctx = pp.slots, pp.ctx
    binary = llama_build.build_tools(plan.cache, llama_build.binding_version())["llama-server"]
    workload = Workload(kind=Kind.CHAT, system_tokens=pp.system_tokens, user_tokens=pp.user_tokens)
    sessions = build_waves(workload, a.users, "L0", 0)[0]  # the bench's first level
    max_tokens = pp.max_tokens
    chats = [
        [{"role": "system", "content": s.system or ""}, {"role": "user", "content": s.turns[0][1]}] for s in sessions
    ]
    found: dict[str, list[tuple[int, str]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        server, create = compare.cllm_server(plan, model, "m", Path(tmp), slots, ctx)
        with Running(server) as running:  # one server at a time: two would share the two cores
            running.wait_ready()
            create()
            found["cllm"] = answers(running, Target(server.base_url, Api.CHAT, "m", max_tokens=max_tokens), chats)
    server = compare.llama_server(plan, binary, model, "llama-server", slots, ctx)
    with Running(server) as running:
        running.wait_ready()
        target = Target(server.base_url, Api.OPENAI_CHAT, "m", max_tokens=max_tokens)
        found["llama-server"] = answers(running, target, chats)
    for i, (ours, theirs) in enumerate(zip(found["cllm"], found["llama-server"], strict=True)):
        same = "same text" if ours[1] == theirs[1] else "texts differ"
        print(f"chat {i}: cllm {ours[0]} tokens, llama-server {theirs[0]} tokens, {same}: {ours[1][:60]!r}")
    totals = {name: sum(n for n, _ in found[name]) for name in found}
    print(f"turn 1, all chats: cllm {totals['cllm']} tokens, llama-server {totals['llama-server']} tokens")


if __name__ == "__main__":
    main()
