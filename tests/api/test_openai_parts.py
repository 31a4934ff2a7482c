"""/v1/chat/completions as Ollama's translation makes it (openai.go): each image's tag stands where
the image did among a message's content parts, joined as a Go template's collate joins them; and a
streamed event that spans the end of the thinking becomes two chunks, the reasoning first
(``ToStreamChunks``). Over engines that play a script."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from scripted import ScriptedModel, scripted_pool
from starlette.testclient import TestClient
from test_media_fit import IMAGES, MARKER, serve

from cllm_ollama.api.lifecycle import Chunk
from cllm_ollama.api.openai.endpoints import ChatCompletion
from cllm_ollama.api.services import services
from cllm_ollama.app import create_app
from cllm_ollama.chatformat.parsers import Delta
from cllm_ollama.config import Settings

CHAT = "/v1/chat/completions"
# An Ollama-style Go template (as qwen2.5vl's): one turn per message after collate.
GO_TEMPLATE = (
    "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n"
)


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def image(i: int) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(IMAGES[i]).decode()}}


def prompt(client: TestClient, model: str, content: list[dict[str, Any]]) -> tuple[str, list[bytes]]:
    """The prompt the engine was given for one user message of ``content``, and its images in order."""
    models, _ = serve(client)
    r = client.post(CHAT, json={"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 2})
    assert r.status_code == 200, r.text
    (tokenized,) = models[-1].prompts
    return tokenized.text, list(tokenized.images)


def test_images_keep_their_place_among_the_texts(seeing: TestClient) -> None:
    r = seeing.post("/api/create", json={"model": "eyes-go", "from": "eyes", "template": GO_TEMPLATE, "stream": False})
    assert r.status_code == 200, r.text
    content = [text("Image A:"), image(0), text("Image B:"), image(1), text("Which one shows a cat?")]
    # A Go template: Ollama's collate joins the run of user messages with "\n\n".
    assert prompt(seeing, "eyes-go", content) == (
        f"<|im_start|>user\nImage A:\n\n{MARKER}\n\nImage B:\n\n{MARKER}\n\nWhich one shows a cat?<|im_end|>\n"
        "<|im_start|>assistant\n",
        IMAGES[:2],
    )
    # The GGUF's Jinja template: one turn all the same (a template that wants roles to alternate takes it).
    assert prompt(seeing, "eyes", content) == (
        f"<|im_start|>user\nImage A:\n\n{MARKER}\n\nImage B:\n\n{MARKER}\n\nWhich one shows a cat?<|im_end|>\n"
        "<|im_start|>assistant\n",
        IMAGES[:2],
    )
    # Images given in the other order are shown in it.
    text_b, images_b = prompt(seeing, "eyes-go", [text("B:"), image(1), text("A:"), image(0)])
    assert text_b.startswith(f"<|im_start|>user\nB:\n\n{MARKER}\n\nA:\n\n{MARKER}<|im_end|>")
    assert images_b == [IMAGES[1], IMAGES[0]]
    # A text's own "[img]" stays text, as in Ollama's message of its own: the part's place takes the tag.
    said, _ = prompt(seeing, "eyes-go", [text("Tags look like [img]."), image(0)])
    assert said.startswith(f"<|im_start|>user\nTags look like [img].\n\n{MARKER}<|im_end|>")


@pytest.fixture
def scripted(settings: Settings) -> Iterator[tuple[TestClient, list[str | BaseException]]]:
    script: list[str | BaseException] = []
    app = create_app(settings)
    with TestClient(app, base_url="http://localhost") as client:
        services(app).pool = scripted_pool(script, [], make=ScriptedModel)
        yield client, script


def deltas(client: TestClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    r = client.post(CHAT, json={"model": "tiny", "stream": True, **body})
    chunks = [json.loads(e[6:]) for e in r.text.split("\n\n") if e and e != "data: [DONE]"]
    return [c["choices"][0]["delta"] for c in chunks]


def test_reasoning_that_ends_in_an_event_streams_apart_from_what_follows(
    scripted: tuple[TestClient, list[str | BaseException]],
) -> None:
    client, script = scripted
    ask = {"messages": [{"role": "user", "content": "Hi"}]}
    script[:] = ["<think>Plan.</think>Answer", " done."]
    assert deltas(client, ask) == [
        {"role": "assistant", "reasoning": "Plan."},
        {"content": "Answer"},
        {"content": " done."},
        {},
    ]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    script[:] = ["<think>Need", ' f.</think><tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>']
    got = deltas(client, ask | {"tools": tools})
    assert got[:3] == [
        {"role": "assistant", "reasoning": "Need"},
        {"reasoning": " f."},
        {"tool_calls": got[2]["tool_calls"]},
    ]
    assert [c["function"]["name"] for c in got[2]["tool_calls"]] == ["f"] and got[3:] == [{}]


def test_the_reasoning_chunk_carries_the_logprobs_and_the_other_the_finish_reason() -> None:
    """As ToStreamChunks: the logprobs stay with the reasoning's chunk (they may cover the rest's
    tokens too); the finish reason is the last chunk's."""
    logprobs = [{"token": "x", "logprob": -0.5}]
    mixed = Chunk(Delta(content="Yes.", thinking="Sure."), done=True, done_reason="stop", logprobs=logprobs)

    async def chunks() -> AsyncIterator[Chunk]:
        yield mixed

    async def choices() -> list[dict[str, Any]]:
        return [c["choices"][0] async for c in ChatCompletion("m", include_usage=False).stream(chunks())]

    out = asyncio.run(choices())
    assert out == [
        {
            "index": 0,
            "delta": {"role": "assistant", "reasoning": "Sure."},
            "finish_reason": None,
            "logprobs": {"content": logprobs},
        },
        {"index": 0, "delta": {"content": "Yes."}, "finish_reason": "stop"},
    ]
