"""Ollama's cloud paths as an Ollama with its cloud off answers them: GET /api/status (the switch
``ollama launch`` reads before offering cloud models), the web tools and the model recommendations."""

from __future__ import annotations

from dataclasses import replace

import pytest
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings


@pytest.mark.parametrize(("no_cloud", "source"), [(False, "none"), (True, "env")])
def test_the_cloud_is_always_off(store_settings: Settings, no_cloud: bool, source: str) -> None:
    """cllm has no cloud to offer, so a client never lists models it cannot serve; the source is
    Ollama's reading of OLLAMA_NO_CLOUD."""
    with TestClient(create_app(replace(store_settings, no_cloud=no_cloud)), base_url="http://localhost") as client:
        r = client.get("/api/status")
    assert r.status_code == 200
    assert r.json() == {"cloud": {"disabled": True, "source": source}}


def test_no_cloud_is_read_as_ollama_reads_it() -> None:
    assert Settings.from_env({"OLLAMA_NO_CLOUD": "1"}).no_cloud
    assert Settings.from_env({"CLLM_NO_CLOUD": "true"}).no_cloud
    assert not Settings.from_env({"OLLAMA_NO_CLOUD": "0"}).no_cloud
    assert not Settings.from_env({}).no_cloud


@pytest.mark.parametrize(("path", "operation"), [("web_search", "web search"), ("web_fetch", "web fetch")])
def test_the_web_tools_are_refused_in_ollamas_words(store_settings: Settings, path: str, operation: str) -> None:
    """Ollama proxies them to ollama.com; with its cloud off it answers 403 and says so, after a 400
    for no body at all."""
    with TestClient(create_app(store_settings), base_url="http://localhost") as client:
        r = client.post(f"/api/experimental/{path}", json={"query": "cllm", "url": "https://ollama.com"})
        assert (r.status_code, r.json()) == (403, {"error": f"ollama cloud is disabled: {operation} is unavailable"})
        r = client.post(f"/api/experimental/{path}", content=b" ")
        assert (r.status_code, r.json()) == (400, {"error": "missing request body"})
        assert client.get(f"/api/experimental/{path}").status_code == 405


def test_the_model_recommendations_are_ollamas_defaults(store_settings: Settings) -> None:
    """What Ollama serves when it cannot refresh them from ollama.com: cloud models with their
    limits, local ones with the memory they want (``ollama launch`` drops the cloud ones, the status
    saying the cloud is off)."""
    with TestClient(create_app(store_settings), base_url="http://localhost") as client:
        r = client.get("/api/experimental/model-recommendations")
        assert client.head("/api/experimental/model-recommendations").status_code == 200
    assert r.status_code == 200
    recommendations = r.json()["recommendations"]
    assert [m["model"] for m in recommendations] == [
        "kimi-k2.6:cloud",
        "glm-5.1:cloud",
        "qwen3.5:cloud",
        "minimax-m2.7:cloud",
        "gemma4",
        "qwen3.5",
    ]
    assert recommendations[1] == {
        "model": "glm-5.1:cloud",
        "description": "Reasoning and code generation",
        "context_length": 202752,
        "max_output_tokens": 131072,
    }
    assert recommendations[-1]["vram_bytes"] == 14_000_000_000 and "context_length" not in recommendations[-1]
