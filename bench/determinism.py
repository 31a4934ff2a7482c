"""The same-answer oracle (issue 29): each prompt's greedy tokens and logprobs, cold and alone,
against the same request re-sent, inside a burst of 8 different prompts, with another prefill
chunk size (a server whose batch is 32 tokens) and after a restart that reads the prompt states
from the disk tier; by default and in the deterministic mode (CLLM_DETERMINISTIC=1).

Usage: ``python bench/determinism.py [--prompts 50] [--tokens 64] [--modes default,deterministic]``.
Runs ``cllm serve`` as a child process on the real Qwen2.5-Coder-0.5B (tests/harness/real_model.py);
prints, per mode and case, how many prompts answered bitwise as cold (tokens and logprobs) and how
many only in their tokens; ``--json`` writes the counts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import real_model  # tests/harness/real_model.py, through bench/real_model.py (which puts tests/ on the path)
from harness.child_server import cllm_serve

MODEL = "coder"
SYSTEM = (
    "You are a senior software engineer who reviews code and answers questions about programming. "
    "Answer precisely, prefer short code samples, name the trade-offs, and say when a question is "
    "ambiguous. Use Python unless the question names another language. Keep answers under two "
    "hundred words, never invent library functions, and mention the standard library first. "
) * 4
TOPICS = [
    "binary search", "a hash map", "a linked list", "quicksort", "merge sort", "a heap", "a trie",
    "dynamic programming", "memoization", "a closure", "a decorator", "a generator", "async and await",
    "a mutex", "a deadlock", "a race condition", "garbage collection", "reference counting",
    "a REST API", "a database index", "SQL joins", "a transaction", "a B-tree", "a bloom filter",
    "consistent hashing", "a load balancer", "a message queue", "a cache eviction policy",
    "unit testing", "mocking", "type hints", "a virtual environment", "a Makefile", "git rebase",
    "a regular expression", "Unicode normalisation", "floating point rounding", "integer overflow",
    "recursion limits", "tail calls", "a state machine", "the visitor pattern", "dependency injection",
    "a context manager", "slicing", "list comprehensions", "string formatting", "file locking",
    "memory-mapped files", "signal handling", "a thread pool", "a process pool",
]  # fmt: skip
ASKS = ["Explain {} in three sentences.", "Write a short Python example of {}.", "When should I avoid {}?"]


def prompts(n: int) -> list[str]:
    return [ASKS[i % len(ASKS)].format(TOPICS[i % len(TOPICS)]) for i in range(n)]


@contextmanager
def serve(models: Path, extra: dict[str, str], log: Path) -> Iterator[str]:
    """``cllm serve`` on ``models`` with ``extra`` settings; stopped (SIGTERM: states go to disk) after."""
    settings = {
        "OLLAMA_NUM_PARALLEL": "4",
        "OLLAMA_CONTEXT_LENGTH": "2048",
        "OLLAMA_KEEP_ALIVE": "-1",
        "CLLM_NUM_THREAD": "2",
        **extra,
    }
    with cllm_serve(models, settings, log, ready_s=120) as (_, url):
        yield url


Answer = list[tuple[str, float]]


async def ask(client: httpx.AsyncClient, url: str, prompt: str, tokens: int) -> Answer:
    body = {
        "model": MODEL,
        # The prompt's own words open the system message: no two prompts share more than the
        # template's first tokens, so the first run of each is cold (nothing reused).
        "messages": [{"role": "system", "content": f"{prompt}\n\n{SYSTEM}"}, {"role": "user", "content": prompt}],
        "stream": False,
        "logprobs": True,
        "options": {"temperature": 0, "seed": 1, "num_predict": tokens},
    }
    reply = (await client.post(url + "/api/chat", json=body, timeout=600)).json()
    return [(t["token"], t["logprob"]) for t in reply["logprobs"]]


async def one_by_one(url: str, texts: list[str], tokens: int) -> list[Answer]:
    async with httpx.AsyncClient() as client:
        return [await ask(client, url, text, tokens) for text in texts]


async def in_bursts(url: str, texts: list[str], tokens: int, size: int = 8) -> list[Answer]:
    out: list[Answer] = []
    async with httpx.AsyncClient() as client:
        for i in range(0, len(texts), size):
            out += await asyncio.gather(*(ask(client, url, text, tokens) for text in texts[i : i + size]))
    return out


def compare(cold: list[Answer], other: list[Answer]) -> dict[str, int]:
    same = sum(a == b for a, b in zip(cold, other, strict=True))
    tokens = sum([t for t, _ in a] == [t for t, _ in b] for a, b in zip(cold, other, strict=True))
    return {"bitwise": same, "same_tokens": tokens, "of": len(cold)}


def run_mode(mode: str, models: Path, work: Path, texts: list[str], tokens: int) -> dict[str, dict[str, int]]:
    extra = {"CLLM_DETERMINISTIC": "1"} if mode == "deterministic" else {}
    cache = work / f"cache-{mode}"
    log = work / f"serve-{mode}.log"
    disk = {"CLLM_CACHE_DIR": str(cache)}
    with serve(models, extra | disk, log) as url:
        cold = asyncio.run(one_by_one(url, texts, tokens))
        again = asyncio.run(one_by_one(url, texts, tokens))
        burst = asyncio.run(in_bursts(url, texts, tokens))
    # A restart on the same disk tier (the first server saved its states as it went and at exit).
    with serve(models, extra | disk, log) as url:
        restarted = asyncio.run(one_by_one(url, texts, tokens))
    # Its own empty disk tier: nothing reused, only the chunking differs.
    chunking = {"OLLAMA_NUM_BATCH": "32", "CLLM_CACHE_DIR": str(work / f"cache-chunked-{mode}")}
    with serve(models, extra | chunking, log) as url:
        chunked = asyncio.run(one_by_one(url, texts, tokens))
    results = {
        "re-sent": compare(cold, again),
        "in a burst of 8": compare(cold, burst),
        "after a restart (disk tier)": compare(cold, restarted),
        "prefill in chunks of 32": compare(cold, chunked),
    }
    for case, counts in results.items():
        print(
            f"{mode:13s} {case:30s} bitwise {counts['bitwise']:3d} / {counts['of']}, tokens {counts['same_tokens']:3d}"
        )
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", type=int, default=50)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--modes", default="default,deterministic")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    gguf = real_model.real_model_path()
    texts = prompts(a.prompts)
    out: dict[str, Any] = {"prompts": a.prompts, "tokens": a.tokens}
    with tempfile.TemporaryDirectory(prefix="cllm-determinism-") as tmp:
        work = Path(tmp)
        models = work / "models"
        real_model.install(models, gguf, MODEL)
        for mode in a.modes.split(","):
            out[mode] = run_mode(mode, models, work, texts, a.tokens)
    if a.json:
        a.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
