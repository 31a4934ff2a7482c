"""The real Codex CLI (``@openai/codex``, pinned in compat/js) run headless against a cllm.

Codex is configured as a new user would configure it for a local server: a provider whose
``base_url`` is cllm's ``/v1`` and whose ``wire_api`` is ``responses``, no retries (a refused
request fails the run at once instead of being retried away). :class:`RequestLog` sits in
front of the server and keeps every request Codex sent and the status it got, so that a check
can fail on any non-200, and read what Codex needs (its tool calls, their outputs, call ids).

``PYTHONPATH=tests python -m harness.codex`` runs one session against the real-weight 0.5B model
(:mod:`harness.real_model`) with a task that needs a shell command, and reports
every request and whether a tool call went round trip (the model's call, Codex's output for
that ``call_id`` in the next request). A 0.5B model may do the task badly; the protocol must hold.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .npm_agents import agent_binary

PROVIDER = "cllm"


def codex_binary() -> Path | None:
    """compat/js's pinned codex (``npm ci`` there), else a ``codex`` on PATH; None if neither."""
    return agent_binary("codex")


def config_toml(base_url: str, model: str) -> str:
    """A ``config.toml`` for a Responses provider at ``base_url`` (the server's root URL)."""
    return f"""model = {json.dumps(model)}
model_provider = "{PROVIDER}"
check_for_update_on_startup = false

[model_providers.{PROVIDER}]
name = "cllm"
base_url = {json.dumps(base_url.rstrip("/") + "/v1")}
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
"""


def run_codex(
    binary: Path,
    base_url: str,
    model: str,
    prompt: str,
    home: Path,
    workdir: Path,
    timeout: float,
    extra: Sequence[str] = (),
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``codex exec --json [EXTRA] PROMPT`` in ``workdir``, configured in ``home`` (its CODEX_HOME)."""
    home.mkdir(parents=True, exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config_toml(base_url, model))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
    env |= {"CODEX_HOME": str(home)} | (extra_env or {})
    command = [str(binary), "exec", "--skip-git-repo-check", "--ephemeral", "--json", "-C", str(workdir)]
    return run_headless([*command, *extra, prompt], env, timeout)


def run_headless(
    command: Sequence[str], env: dict[str, str], timeout: float, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """An agent's command line run to its end with no terminal, its output kept."""
    return subprocess.run(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass
class Exchange:
    """One HTTP request as the server saw it: what was asked, what status it got, what came back."""

    method: str
    path: str
    body: bytes
    status: int | None = None
    response: bytes = b""
    # time.monotonic() seconds: the request's arrival, the first body part that carries generated
    # text (a stream's first delta; a whole answer's body), and the response's end.
    started: float = 0.0
    first_token: float | None = None
    ended: float | None = None

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[dict[str, Any]]:
        """A Responses stream's events (the ``data:`` of each)."""
        text = self.response.decode(errors="replace")
        return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]

    def __str__(self) -> str:
        return f"{self.method} {self.path} -> {self.status}"


# What a streamed part carries once text is generated: Anthropic's content_block_delta, the
# Responses API's response.*.delta, a chat completion's delta, an Ollama stream's first object.
_TEXT_MARKS = (b'_delta"', b'.delta"', b'"delta"', b'"done":false')


class RequestLog:
    """An ASGI app in front of another that keeps every HTTP exchange, in arrival order."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.exchanges: list[Exchange] = []

    def responses(self) -> list[Exchange]:
        return [e for e in self.exchanges if e.path.endswith("/responses")]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange = Exchange(scope["method"], scope["path"], b"", started=time.monotonic())
        self.exchanges.append(exchange)

        async def receive_logged() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                exchange.body += message.get("body", b"")
            return message

        async def send_logged(message: Message) -> None:
            if message["type"] == "http.response.start":
                exchange.status = message["status"]
            elif message["type"] == "http.response.body":
                part = message.get("body", b"")
                exchange.response += part
                last = not message.get("more_body", False)
                if exchange.first_token is None and (any(m in part for m in _TEXT_MARKS) or last):
                    exchange.first_token = time.monotonic()
                if last:
                    exchange.ended = time.monotonic()
            await send(message)

        await self.app(scope, receive_logged, send_logged)


def function_calls(body: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Each ``function_call`` input item of a Responses request, with the output for its call_id."""
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    outputs = {i.get("call_id"): i for i in items if i.get("type") == "function_call_output"}
    for item in items:
        if item.get("type") == "function_call":
            yield item, outputs.get(item.get("call_id"))


def _summary(exchange: Exchange) -> str:
    """A Responses exchange in a line: its prompt, how much of it the prompt cache held, what came out."""
    done = [e["response"] for e in exchange.events() if e.get("type") == "response.completed"]
    if not done:
        return "(no response.completed)"
    usage = done[0].get("usage") or {}
    cached = (usage.get("input_tokens_details") or {}).get("cached_tokens")
    items = [item.get("name") or item["type"] for item in done[0]["output"]]
    return f"input {usage.get('input_tokens')} tokens, {cached} cached; output {items}"


# The real-model session: a task that a coding agent answers with a shell command.
TASK = "Run the shell command `cat answer.txt` with the exec_command tool, then tell me the number it prints."
# --lean: Codex's own switches for a small model: its one shell tool and short instructions
# instead of ~10k tokens of instructions, sub-agent and goal tools (the protocol is the same).
LEAN_INSTRUCTIONS = 'You are a coding agent. Run shell commands with the exec_command tool: {"cmd": "<command>"}.\n'
LEAN = ["--disable", "multi_agent", "--disable", "goals", "--disable", "view_image", "--disable", "image_generation"]
LEAN += ["-c", 'web_search="disabled"']


def _real_session(args: argparse.Namespace) -> int:
    """Serve the real 0.5B model, run Codex on TASK, print what went over the wire."""
    from cllm_ollama.app import create_app
    from cllm_ollama.config import Settings
    from cllm_ollama.store.create import import_gguf
    from cllm_ollama.store.store import ModelStore

    from .real_model import real_model_path
    from .serving import serve_in_thread

    binary = codex_binary()
    if binary is None:
        print("codex is not installed: run `npm ci` in compat/js", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="cllm-codex-") as tmp:
        root = Path(tmp)
        import_gguf(ModelStore(root / "models"), "coder", real_model_path())
        settings = Settings(
            models_dir=root / "models", num_parallel=1, context_length=args.ctx, num_thread=args.threads
        )
        log = RequestLog(create_app(settings))
        workdir = root / "work"
        workdir.mkdir()
        (workdir / "answer.txt").write_text("42\n")
        extra: list[str] = []
        if args.lean:
            (root / "instructions.md").write_text(LEAN_INSTRUCTIONS)
            extra = [*LEAN, "-c", f"model_instructions_file={json.dumps(str(root / 'instructions.md'))}"]
        with serve_in_thread(log) as url:
            t0 = time.monotonic()
            run = run_codex(binary, url, "coder", args.prompt, root / "home", workdir, args.timeout, extra)
            took = time.monotonic() - t0
    for exchange in log.exchanges:
        print(exchange, _summary(exchange) if exchange.path.endswith("/responses") else "")
    round_trips = [
        (call, output) for e in log.responses() for call, output in function_calls(e.json()) if output is not None
    ]
    for call, output in round_trips[-4:]:
        print(f"tool call {call.get('name')}({call.get('arguments')}) call_id={call.get('call_id')}")
        print(f"  output: {str(output.get('output'))[:200]!r}")
    for line in run.stdout.splitlines():
        event = json.loads(line) if line.startswith("{") else {}
        if event.get("type") == "item.completed" and event["item"].get("type") != "error":
            print("codex:", json.dumps(event["item"])[:400])
    print(f"codex exit {run.returncode} after {took:.0f}s; {len(round_trips)} tool call round trip(s)")
    if run.returncode != 0:
        print(run.stderr[-3000:], file=sys.stderr)
    ok = run.returncode == 0 and all(e.status == 200 for e in log.exchanges) and bool(round_trips)
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompt", default=TASK)
    parser.add_argument("--ctx", type=int, default=16384, help="context length (Codex's prompt is ~10k tokens)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds for the whole Codex run")
    parser.add_argument("--lean", action="store_true", help="Codex with only its shell tools and short instructions")
    return _real_session(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
