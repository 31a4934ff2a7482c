"""`cllm run`: chat with a model through the running server, one prompt or an interactive session."""

from __future__ import annotations

from typing import Any

import click

from .backend import HttpBackend


def reply(backend: HttpBackend, model: str, messages: list[dict[str, Any]], think: bool | None) -> str:
    """Print one streamed answer (thinking dimmed) and return its content."""
    body: dict[str, Any] = {"model": model, "messages": messages, "stream": True}
    if think is not None:
        body["think"] = think
    content: list[str] = []
    thinking = False

    def show(chunk: dict[str, Any]) -> None:
        nonlocal thinking
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

    backend.stream("/api/chat", body, show)
    click.echo()
    return "".join(content)


def interactive(backend: HttpBackend, model: str, think: bool | None) -> None:
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
        messages.append({"role": "assistant", "content": reply(backend, model, messages, think)})
        click.echo()
