"""A prompt longer than the loaded context, where nobody set num_ctx (the agents on /v1 cannot),
grows the context by a reload (``Settings.context_grow``) instead of losing its middle; a
client's num_ctx, the cap, and a memory that cannot hold the larger context still cut it, and a
cut prompt says so. Live over the tiny qwen3, and over a scripted engine for the loads."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from scripted import ScriptedModel, scripted_pool
from starlette.testclient import TestClient

from cllm_ollama.api.services import services
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.errors import InsufficientMemory

LONG = "the sea and the sky and the land " * 80  # ~640 tokens
FIELD = "truncated_prompt_tokens"


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    grows = replace(settings, context_length=256, num_parallel=2, context_grow=1024)
    with TestClient(create_app(grows), base_url="http://localhost") as c:
        yield c


def loaded_context(client: TestClient) -> int:
    (model,) = client.get("/api/ps").json()["models"]
    return int(model["context_length"])


def chat(client: TestClient, content: str) -> dict[str, Any]:
    body = {"model": "tiny", "messages": [{"role": "user", "content": content}], "max_tokens": 2, "temperature": 0}
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    return r.json()["usage"]  # type: ignore[no-any-return]


@pytest.mark.model
def test_a_prompt_longer_than_the_context_grows_it_instead_of_being_cut(client: TestClient) -> None:
    chat(client, "Hi")
    assert loaded_context(client) == 256
    usage = chat(client, LONG)
    assert FIELD not in usage and usage["prompt_tokens"] > 256
    assert loaded_context(client) == 1024  # a power of two with room for the reply, within the cap
    # A client's own num_ctx is the limit it asked for: cut, and told so (no reload either).
    body = {"model": "tiny", "prompt": LONG, "stream": False, "options": {"num_ctx": 256, "num_predict": 2}}
    cut = client.post("/api/generate", json=body).json()
    assert cut[FIELD] > 0 and loaded_context(client) == 1024


@pytest.mark.model
def test_past_the_cap_the_prompt_is_cut_and_says_so(client: TestClient) -> None:
    usage = chat(client, LONG * 4)  # ~2,560 tokens: more than the 1,024 the context may grow to
    assert loaded_context(client) == 1024
    assert usage[FIELD] > 0 and usage["prompt_tokens"] < 1024


@pytest.mark.parametrize(("memory", "contexts", "cut"), [(1 << 20, [256, 2048], False), (256, [256, 2048, 256], True)])
def test_the_grown_context_is_loaded_or_where_it_does_not_fit_the_prompt_is_cut(
    settings: Settings, memory: int, contexts: list[int], cut: bool
) -> None:
    """The scripted engine tokenizes a character a token: ~700 tokens grow 256 to 2,048 (a quarter
    more, at least 1,024, as a power of two). A context memory cannot hold even one slot of is
    refused by the load; the request is then served by the context it had, cut."""
    loads: list[int] = []

    def make(spec: LoadSpec, script: list[str | BaseException]) -> ScriptedModel:
        loads.append(spec.n_ctx_slot)
        if spec.n_ctx_slot > memory:
            raise InsufficientMemory("model requires more system memory (9.0 GiB) than is available (1.0 GiB)")
        return ScriptedModel(spec, script, n_ctx_slot=spec.n_ctx_slot, n_ctx_train=4096)

    app = create_app(replace(settings, context_grow=4096))
    with TestClient(app, base_url="http://localhost") as client:
        services(app).pool = scripted_pool(["ok"], make=make)
        usage = chat(client, "Hi")
        assert FIELD not in usage
        usage = chat(client, "x" * 700)
    assert loads == contexts
    assert (FIELD in usage) is cut
