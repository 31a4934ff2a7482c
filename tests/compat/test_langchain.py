"""``langchain-ollama`` (ChatOllama, OllamaLLM, OllamaEmbeddings), unchanged, against a live cllm.

Proves that LangChain's model validation (``/api/tags``), its always-streamed chat, its usage
metadata (built only from a final chunk carrying both token counts) and its embeddings work,
and that the values equal what the native API returns for the same greedy request.
"""

from __future__ import annotations

import asyncio
from typing import Literal

import numpy as np
import ollama
import pytest
from pydantic import BaseModel

langchain_ollama = pytest.importorskip("langchain_ollama")

pytestmark = pytest.mark.model
MODEL = "tiny"
N = 12
GREEDY = {"temperature": 0, "num_predict": N}


class Answer(BaseModel):
    """Every value is bounded by the schema grammar, so even a random model must finish it."""

    color: Literal["red", "blue"]
    n: int
    ok: bool


def chat_model(url: str) -> langchain_ollama.ChatOllama:
    return langchain_ollama.ChatOllama(
        model=MODEL, base_url=url, temperature=0, num_predict=N, reasoning=False, validate_model_on_init=True
    )


def test_chat_invoke_and_stream(compat_url: str) -> None:
    llm = chat_model(compat_url)
    reply = llm.invoke("Hi")
    native = ollama.Client(host=compat_url).chat(
        model=MODEL, messages=[{"role": "user", "content": "Hi"}], options=GREEDY, think=False
    )
    assert reply.content == native.message.content and reply.content
    assert reply.response_metadata["done_reason"] == "length"
    assert reply.response_metadata["model"] == MODEL
    assert reply.usage_metadata is not None
    assert reply.usage_metadata["output_tokens"] == N
    assert reply.usage_metadata["input_tokens"] == native.prompt_eval_count
    assert reply.usage_metadata["total_tokens"] == native.prompt_eval_count + N

    chunks = list(llm.stream("Hi"))
    assert len(chunks) > 1
    assert "".join(str(c.content) for c in chunks) == reply.content
    merged = chunks[0]
    for c in chunks[1:]:
        merged = merged + c
    assert merged.usage_metadata is not None and merged.usage_metadata["output_tokens"] == N


def test_chat_async(compat_url: str) -> None:
    llm = chat_model(compat_url)

    async def both() -> tuple[str, str]:
        try:
            reply = await llm.ainvoke("Hi")
            streamed = "".join([str(c.content) async for c in llm.astream("Hi")])
        finally:
            # ChatOllama never closes the async client it made: on this loop, which its pooled
            # connection belongs to, or the garbage collector finds the socket open.
            await llm._async_client.close()
        return str(reply.content), streamed

    reply, streamed = asyncio.run(both())
    assert reply == streamed == str(llm.invoke("Hi").content)


def test_structured_output(compat_url: str) -> None:
    """with_structured_output sends the pydantic schema as ``format``; the reply must validate against it."""
    llm = langchain_ollama.ChatOllama(model=MODEL, base_url=compat_url, temperature=0, reasoning=False)
    structured = llm.with_structured_output(Answer, method="json_schema", include_raw=True)
    out = structured.invoke("Hi")
    assert out["parsing_error"] is None and isinstance(out["parsed"], Answer)
    assert out["parsed"] == Answer.model_validate_json(str(out["raw"].content))


def test_repeat_penalty(compat_url: str) -> None:
    llm = langchain_ollama.ChatOllama(
        model=MODEL, base_url=compat_url, temperature=0, num_predict=N, reasoning=False, repeat_penalty=1.1
    )
    reply = llm.invoke("Hi")
    assert reply.usage_metadata is not None and reply.usage_metadata["output_tokens"] == N


def test_unknown_model_fails_validation(compat_url: str) -> None:
    with pytest.raises(ValueError, match="not found"):
        langchain_ollama.ChatOllama(model="no-such-model", base_url=compat_url, validate_model_on_init=True)


def test_llm_invoke_equals_native_generate(compat_url: str) -> None:
    llm = langchain_ollama.OllamaLLM(model=MODEL, base_url=compat_url, temperature=0, num_predict=N, reasoning=False)
    text = llm.invoke("Once upon")
    native = ollama.Client(host=compat_url).generate(model=MODEL, prompt="Once upon", options=GREEDY, think=False)
    assert text == native.response and text
    assert "".join(llm.stream("Once upon")) == text


def test_embeddings(compat_url: str) -> None:
    texts = ["Hello world", "The quick brown fox"]
    emb = langchain_ollama.OllamaEmbeddings(model=MODEL, base_url=compat_url, validate_model_on_init=True)
    docs = np.array(emb.embed_documents(texts))
    native = np.array(ollama.Client(host=compat_url).embed(model=MODEL, input=texts).embeddings)
    assert docs.shape == native.shape and docs.shape[0] == 2 and docs.shape[1] > 0
    assert np.allclose(docs, native, atol=1e-6)
    assert not np.allclose(docs[0], docs[1])
    assert np.allclose(emb.embed_query(texts[0]), docs[0], atol=1e-6)
