"""Real coding agents as cllm's clients: Claude Code and Codex, headless, and what they sent.

A check to run by hand, not in CI (issue 18). It:

1. installs ``@anthropic-ai/claude-code`` and ``@openai/codex`` (pinned below) from npm into a
   cache folder (``~/.cache/cllm-agents``) unless they are there already;
2. serves a model with cllm in this process on a loopback port: the tiny random-weight qwen3
   (``cllm_ollama.testing.ggufs``, the default: it says nonsense, the protocol is what is checked),
   ``--real`` for Qwen2.5-Coder-0.5B (tests/harness/real_model.py) or ``--gguf PATH``; or,
   with ``--url``, puts a recording proxy in front of a cllm that already runs;
3. runs each agent on a small task in a scratch folder: Claude Code as ``claude -p`` with
   ``ANTHROPIC_BASE_URL`` set to the server, Codex as ``codex exec`` with a Responses provider at
   ``/v1`` (tests/harness/codex.py, as tests/compat/test_codex.py runs it);
4. prints every request the server saw, agent by agent and run by run (twice each by default: the
   second run's first request shows what the prompt cache kept of the first's preamble): endpoint,
   status, prompt tokens, cached tokens (what the server reports as reused), time to the first
   generated text, and the agent's exit status; ``--json`` writes the same as data.

Exits 1 if an agent failed or a request was not answered 200.

Usage: ``.venv/bin/python compat/agents/check.py [--real | --gguf PATH] [--ctx 32768] [--agents claude,codex]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from starlette.types import Message, Receive, Scope, Send

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # the harness, out of the wheel

from harness.claude import run_claude
from harness.codex import Exchange, RequestLog, run_codex

PINS = {"@anthropic-ai/claude-code": "2.1.332", "@openai/codex": "0.169.0"}
BINARIES = {"claude": "claude", "codex": "codex"}  # agent -> its node_modules/.bin name
MODEL = "agent"
TASK = "Read the file answer.txt in this folder and tell me the number in it."
CLAUDE_FLAGS = ["--max-turns", "3", "--allowedTools", "Read"]


def install(cache: Path) -> dict[str, Path]:
    """The agents' executables, installed into ``cache`` from npm first if missing."""
    bins = {agent: cache / "node_modules" / ".bin" / name for agent, name in BINARIES.items()}
    if not all(path.exists() for path in bins.values()):
        cache.mkdir(parents=True, exist_ok=True)
        packages = [f"{name}@{version}" for name, version in PINS.items()]
        print(f"npm install {' '.join(packages)} into {cache}", flush=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(cache), *packages], check=True)
    return bins


class Proxy:
    """An ASGI app that forwards every request to a running server and streams its answer back,
    so that a :class:`RequestLog` in front of it sees what the agents send to that server."""

    _HOP = frozenset({"host", "content-length", "transfer-encoding", "content-encoding", "connection"})

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        query = scope.get("query_string", b"").decode()
        url = self.url + scope["path"] + (f"?{query}" if query else "")
        headers = [(k, v) for k, v in scope["headers"] if k.decode().lower() not in self._HOP]
        async with (
            httpx.AsyncClient(timeout=None, trust_env=False) as client,
            client.stream(scope["method"], url, headers=headers, content=body) as response,
        ):
            kept = [(k.encode(), v.encode()) for k, v in response.headers.items() if k.lower() not in self._HOP]
            await send({"type": "http.response.start", "status": response.status_code, "headers": kept})
            async for part in response.aiter_bytes():
                await send(_body(part, more=True))
            await send(_body(b"", more=False))


def _body(part: bytes, *, more: bool) -> Message:
    return {"type": "http.response.body", "body": part, "more_body": more}


@dataclass
class Seen:
    """One request as the report shows it."""

    method: str
    path: str
    status: int | None
    prompt_tokens: int | None
    cached_tokens: int | None
    ttft_ms: float | None
    total_ms: float | None


def _json(text: bytes) -> Any:
    with contextlib.suppress(ValueError):
        return json.loads(text)
    return None


def usage(exchange: Exchange) -> tuple[int | None, int | None]:
    """Prompt and cached tokens as the server reported them, in whichever dialect it answered
    (a stream's last report wins)."""
    objects = exchange.events() if b"data: " in exchange.response else [_json(exchange.response)]
    prompt = cached = None
    for obj in (o for o in objects if isinstance(o, dict)):
        found = obj.get("usage") or (obj.get("response") or {}).get("usage") or (obj.get("message") or {}).get("usage")
        if not isinstance(found, dict):
            if isinstance(obj.get("input_tokens"), int):  # /v1/messages/count_tokens
                prompt = obj["input_tokens"]
        elif "prompt_tokens" in found:  # chat completions
            prompt, cached = found["prompt_tokens"], (found.get("prompt_tokens_details") or {}).get("cached_tokens")
        elif "input_tokens_details" in found:  # the Responses API
            prompt, cached = found.get("input_tokens"), (found["input_tokens_details"] or {}).get("cached_tokens")
        elif "input_tokens" in found:  # Anthropic: uncached input, cache writes and cache reads add up
            cached = found.get("cache_read_input_tokens") or 0
            prompt = (found.get("input_tokens") or 0) + (found.get("cache_creation_input_tokens") or 0) + cached
    return prompt, cached


def seen(exchange: Exchange) -> Seen:
    prompt, cached = usage(exchange)

    def ms(t: float | None) -> float | None:
        return None if t is None else round((t - exchange.started) * 1000, 1)

    return Seen(exchange.method, exchange.path, exchange.status, prompt, cached, ms(exchange.first_token),
                ms(exchange.ended))  # fmt: skip


@contextlib.contextmanager
def server(args: argparse.Namespace, root: Path) -> Iterator[tuple[str, RequestLog]]:
    """A recorded server: cllm in this process on the chosen model, or a proxy to ``--url``."""
    from harness.serving import serve_in_thread

    if args.url:
        log = RequestLog(Proxy(args.url))
        with serve_in_thread(log) as url:
            yield url, log
        return
    from harness.real_model import real_model_path

    from cllm_ollama.app import create_app
    from cllm_ollama.config import Settings
    from cllm_ollama.store.create import import_gguf
    from cllm_ollama.store.store import ModelStore
    from cllm_ollama.testing.ggufs import write_qwen3

    gguf = args.gguf or (real_model_path(quiet=False) if args.real else write_qwen3(root / "tiny-qwen3.gguf"))
    import_gguf(ModelStore(root / "models"), MODEL, gguf)
    settings = Settings(models_dir=root / "models", num_parallel=1, context_length=args.ctx, num_thread=args.threads)
    log = RequestLog(create_app(settings))
    with serve_in_thread(log) as url:
        yield url, log


def table(rows: Sequence[Seen]) -> list[str]:
    def cell(value: object) -> str:
        return "–" if value is None else str(value)

    lines = [
        "| # | request | status | prompt tokens | cached tokens | TTFT ms | total ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(rows, 1):
        lines.append(
            f"| {i} | {r.method} {r.path} | {cell(r.status)} | {cell(r.prompt_tokens)} | {cell(r.cached_tokens)} "
            f"| {cell(r.ttft_ms)} | {cell(r.total_ms)} |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", default="claude,codex", help="comma-separated, of claude,codex")
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "cllm-agents", help="where npm installs")
    model = p.add_mutually_exclusive_group()
    model.add_argument("--real", action="store_true", help="Qwen2.5-Coder-0.5B instead of the tiny model")
    model.add_argument("--gguf", type=Path, help="serve this GGUF instead of the tiny model")
    model.add_argument("--url", help="a running cllm to check (a recording proxy goes in front of it)")
    p.add_argument("--model", default=None, help=f"the model name the agents ask for [{MODEL}; with --url: required]")
    p.add_argument("--ctx", type=int, default=32768, help="context length (Claude Code's first prompt is ~19k tokens)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per agent run")
    p.add_argument("--runs", type=int, default=2, help="runs per agent: the second shows what the prompt cache kept")
    p.add_argument("--json", type=Path, help="write every request seen, by agent, here")
    args = p.parse_args(argv)
    if args.url and not args.model:
        p.error("--url needs --model: the name of a model the running server has")
    agents = [a for a in args.agents.split(",") if a]
    if unknown := set(agents) - set(BINARIES):
        p.error(f"unknown agents: {', '.join(sorted(unknown))}")
    bins = install(args.cache)
    name = args.model or MODEL
    report: dict[str, Any] = {}
    ok = True
    with tempfile.TemporaryDirectory(prefix="cllm-agents-") as tmp, server(args, Path(tmp)) as (url, log):
        for agent, n in ((agent, n) for agent in agents for n in range(1, args.runs + 1)):
            # The same project folder each run, as one user's agent returns to it.
            work = Path(tmp) / f"work-{agent}"
            work.mkdir(exist_ok=True)
            (work / "answer.txt").write_text("42\n")
            first = len(log.exchanges)
            t0 = time.monotonic()
            if agent == "claude":
                home = Path(tmp) / "home-claude"
                run = run_claude(bins[agent], url, name, TASK, home, work, args.timeout, CLAUDE_FLAGS)
            else:
                run = run_codex(bins[agent], url, name, TASK, Path(tmp) / "home-codex", work, args.timeout)
            took = time.monotonic() - t0
            rows = [seen(e) for e in log.exchanges[first:]]
            answered = bool(rows) and all(r.status == 200 for r in rows)
            ok = ok and run.returncode == 0 and answered
            print(f"\n## {agent}, run {n}: exit {run.returncode} after {took:.0f} s, {len(rows)} request(s)\n")
            print("\n".join(table(rows)))
            if run.returncode != 0 or not answered:
                print(f"\n{agent} stderr (end):\n{run.stderr[-2000:]}\nstdout (end):\n{run.stdout[-1000:]}")
            runs = report.setdefault(agent, [])
            runs.append({"exit": run.returncode, "seconds": round(took, 1), "requests": [asdict(r) for r in rows]})
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
