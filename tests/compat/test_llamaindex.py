"""LlamaIndex's Ollama integrations (``llama-index-llms-ollama``, ``llama-index-embeddings-ollama``),
unchanged, against a live cllm: completion, chat, their streams and embeddings give the values
the native API gives for the same greedy request."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np
import ollama
import pytest

pytestmark = pytest.mark.model
MODEL = "tiny"
N = 12
GREEDY = {"temperature": 0, "num_predict": N}


@pytest.fixture(scope="module")
def llms() -> ModuleType:
    """The LLM integration, imported when its tests run (skipped where it is not installed): the
    import takes seconds, which every collection of the suite would pay, the fast one too."""
    return pytest.importorskip("llama_index.llms.ollama")


@pytest.fixture(scope="module")
def chat_message() -> Any:
    """LlamaIndex's ChatMessage, imported as the integration is."""
    return pytest.importorskip("llama_index.core.llms").ChatMessage


@pytest.fixture
def client(compat_url: str) -> Iterator[ollama.Client]:
    """ollama-python's own client, for the native answers; closed after the test (its pooled
    connection would otherwise be left to the garbage collector)."""
    native = ollama.Client(host=compat_url)
    yield native
    native.close()


@pytest.fixture
def model(llms: ModuleType, compat_url: str) -> Iterator[Any]:
    """LlamaIndex's Ollama LLM on the live server, its synchronous client closed afterwards
    (an asynchronous one is closed by the test that uses it, on its own event loop)."""
    made = llms.Ollama(
        model=MODEL,
        base_url=compat_url,
        temperature=0,
        request_timeout=60,
        thinking=False,
        additional_kwargs={"num_predict": N},
    )
    yield made
    made.client.close()


def test_complete_and_stream_complete(client: ollama.Client, model: Any) -> None:
    native = client.generate(model=MODEL, prompt="Hi", options=GREEDY, think=False)
    out = model.complete("Hi")
    assert out.text == native.response and out.text
    parts = list(model.stream_complete("Hi"))
    assert len(parts) > 1 and parts[-1].text == out.text
    assert "".join(p.delta or "" for p in parts) == out.text


def test_chat_and_stream_chat(client: ollama.Client, model: Any, chat_message: Any) -> None:
    messages = [chat_message(role="system", content="Be brief."), chat_message(role="user", content="Hi")]
    native = client.chat(
        model=MODEL,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        options=GREEDY,
        think=False,
    )
    reply = model.chat(messages)
    assert reply.message.content == native.message.content and reply.message.content
    assert reply.raw is not None and reply.raw["eval_count"] == N
    streamed = list(model.stream_chat(messages))
    assert streamed[-1].message.content == reply.message.content


def test_async_chat(model: Any, chat_message: Any) -> None:
    whole = model.chat([chat_message(role="user", content="Hi")]).message.content

    async def ask() -> str | None:
        try:
            return (await model.achat([chat_message(role="user", content="Hi")])).message.content
        finally:
            await model.async_client.close()  # on the loop its connection belongs to

    assert asyncio.run(ask()) == whole


def test_embeddings_equal_native_embed(compat_url: str, client: ollama.Client) -> None:
    embeddings = pytest.importorskip("llama_index.embeddings.ollama")
    native = client.embed(model=MODEL, input=["first text", "second"])
    embed = embeddings.OllamaEmbedding(model_name=MODEL, base_url=compat_url)
    try:
        one = embed.get_text_embedding("first text")
        batch = embed.get_text_embedding_batch(["first text", "second"])
        query = embed.get_query_embedding("second")
    finally:
        embed._client.close()  # made by the integration, which never closes it
    assert np.allclose(one, native.embeddings[0], atol=1e-5)
    assert np.allclose(batch, native.embeddings, atol=1e-5) and len(batch) == 2
    assert np.allclose(query, native.embeddings[1], atol=1e-5)
