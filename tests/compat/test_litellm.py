"""LiteLLM's two Ollama providers, unchanged, against a live cllm: ``ollama/`` (/api/generate) and
``ollama_chat/`` (/api/chat), whole and streamed, and ``ollama/`` embeddings (/api/embed); the
values equal what the native API gives for the same greedy request."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

import numpy as np
import ollama
import pytest

pytestmark = [
    pytest.mark.model,
    # LiteLLM's own types, as pydantic reads them on its first call: nothing of cllm's.
    pytest.mark.filterwarnings("ignore:Items? .* using the `ReadOnly` qualifier:UserWarning"),
]
MODEL = "tiny"
N = 12
GREEDY = {"temperature": 0, "num_predict": N}
HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def litellm() -> ModuleType:
    """LiteLLM, imported when its tests run: the import takes 4-5 s on two cores, which every
    collection of the suite would pay, the fast one (``-m "not model"``) too."""
    # Its model price list from the package, not from GitHub (three tries and a warning without internet).
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return importlib.import_module("litellm")


def test_ollama_chat_provider(litellm: Any, compat_url: str) -> None:
    native = ollama.Client(host=compat_url).chat(model=MODEL, messages=HI, options=GREEDY, think=False)
    out = litellm.completion(
        model=f"ollama_chat/{MODEL}", messages=HI, api_base=compat_url, temperature=0, max_tokens=N, think=False
    )
    assert out.choices[0].message.content == native.message.content and native.message.content
    assert out.usage.completion_tokens == N and out.usage.prompt_tokens == native.prompt_eval_count
    assert out.choices[0].finish_reason == "length"
    parts = litellm.completion(
        model=f"ollama_chat/{MODEL}",
        messages=HI,
        api_base=compat_url,
        temperature=0,
        max_tokens=N,
        think=False,
        stream=True,
    )
    text = "".join(p.choices[0].delta.content or "" for p in parts)
    assert text == native.message.content


def test_ollama_generate_provider(litellm: Any, compat_url: str) -> None:
    prompt = ollama.Client(host=compat_url).generate(model=MODEL, prompt="Hi", options=GREEDY, think=False)
    out = litellm.completion(
        model=f"ollama/{MODEL}", messages=HI, api_base=compat_url, temperature=0, max_tokens=N, think=False
    )
    # LiteLLM renders the messages as a prompt of its own for /api/generate: the text is the model's
    # answer to that prompt, counted as Ollama counts it.
    assert out.choices[0].message.content and out.usage.completion_tokens == N
    assert out.usage.prompt_tokens > 0 and prompt.eval_count == N
    parts = litellm.completion(
        model=f"ollama/{MODEL}", messages=HI, api_base=compat_url, temperature=0, max_tokens=N, think=False, stream=True
    )
    assert "".join(p.choices[0].delta.content or "" for p in parts) == out.choices[0].message.content


def test_ollama_embeddings(litellm: Any, compat_url: str) -> None:
    native = ollama.Client(host=compat_url).embed(model=MODEL, input=["first text", "second"])
    out = litellm.embedding(model=f"ollama/{MODEL}", input=["first text", "second"], api_base=compat_url)
    vectors = [item["embedding"] for item in out.data]
    assert np.allclose(vectors, native.embeddings, atol=1e-5) and len(vectors) == 2
