"""`cllm run`: chat with a model through the running server, one prompt or an interactive session."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import click
import httpx

from ..errors import CllmError


class NoServer(CllmError):
    def __init__(self, url: str) -> None:
        super().__init__(f"could not connect to cllm at {url}: start it with `cllm serve`")


def stream_chat(url: str, model: str, messages: list[dict[str, Any]], think: bool | None) -> Iterator[dict[str, Any]]:
    """The server's NDJSON chunks; errors (before or during the stream) become ``CllmError``."""
    body: dict[str, Any] = {"model": model, "messages": messages, "stream": True}
    if think is not None:
        body["think"] = think
    try:
        with httpx.stream("POST", f"{url}/api/chat", json=body, timeout=None) as r:
            if r.status_code != 200:
                r.read()
                raise CllmError(_error_of(r.text), r.status_code)
            for line in r.iter_lines():
                if line:
                    chunk = json.loads(line)
                    if "error" in chunk:
                        raise CllmError(chunk["error"])
                    yield chunk
    except httpx.ConnectError:
        raise NoServer(url) from None


def _error_of(text: str) -> str:
    try:
        return str(json.loads(text).get("error", text))
    except (json.JSONDecodeError, AttributeError):
        return text


def reply(url: str, model: str, messages: list[dict[str, Any]], think: bool | None) -> str:
    """Print one streamed answer (thinking dimmed) and return its content."""
    content: list[str] = []
    thinking = False
    for chunk in stream_chat(url, model, messages, think):
        message = chunk.get("message") or {}
        if message.get("thinking"):
            if not thinking:
                click.secho("Thinking...", dim=True)
                thinking = True
            click.secho(message["thinking"], dim=True, nl=False)
        if message.get("content"):
            if thinking:
                click.secho("\n...done thinking.\n", dim=True)
                thinking = False
            click.echo(message["content"], nl=False)
            content.append(message["content"])
    click.echo()
    return "".join(content)


def interactive(url: str, model: str, think: bool | None) -> None:
    """A session as `ollama run` offers: history is kept; /bye (or end of input) leaves."""
    messages: list[dict[str, Any]] = []
    while True:
        try:
            line = click.prompt(">>>", prompt_suffix=" ", default="", show_default=False)
        except (EOFError, click.Abort):
            click.echo()
            return
        if line.strip() in ("/bye", "/exit"):
            return
        if not line.strip():
            continue
        messages.append({"role": "user", "content": line})
        messages.append({"role": "assistant", "content": reply(url, model, messages, think)})
        click.echo()
