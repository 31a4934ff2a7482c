"""/api/generate, /api/chat and /api/embed refuse what Ollama's handlers refuse, in their order,
over an engine that plays a script: a decode error (a bad ``think``, ``keep_alive``, ``options`` or
embed ``input``) before the model is looked up; an unload (empty prompt, ``keep_alive`` 0) before
anything else is read; a load only once ``think``, raw mode and the capabilities passed
(GenerateHandler, ChatHandler, EmbedHandler; ``ollama run`` sends ``think`` with its preload to
fail there). A suffix is rendered with the Go template that names ``.Suffix``."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gguf
import pytest
from scripted import ScriptedModel, scripted_pool
from starlette.testclient import TestClient

from cllm_ollama.api.services import services
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.store.create import import_gguf
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_qwen3
from cllm_ollama.testing.images import png

MODEL = "tiny"  # installed by conftest.settings: completion, tools, thinking
PLAIN = "plain"  # completion only: no thinking, no tools, no insert
VECTORS = "vectors"  # an embedding model
CODESTRAL = "[SUFFIX]{{ .Suffix }}[PREFIX] {{ .Prompt }}"  # codestral's template: insert, no FIM tokens
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
IMAGE = base64.b64encode(png(8, 8)).decode()


@pytest.fixture
def api(settings: Settings, tmp_path: Path) -> Iterator[tuple[TestClient, list[ScriptedModel]]]:
    store = ModelStore(settings.models_dir)
    q8 = gguf.GGMLQuantizationType.Q8_0
    plain = write_qwen3(tmp_path / "plain.gguf", qtype=q8, chat_template="{{ messages[0].content }}")
    import_gguf(store, PLAIN, plain)
    import_gguf(store, VECTORS, write_qwen3(tmp_path / "vectors.gguf", qtype=q8, metadata={"qwen3.pooling_type": 1}))
    models: list[ScriptedModel] = []
    app = create_app(settings)
    with TestClient(app, base_url="http://localhost") as client:
        services(app).pool = scripted_pool(["ok"], models)
        r = client.post("/api/create", json={"model": "coder", "from": PLAIN, "template": CODESTRAL, "stream": False})
        assert r.status_code == 200, r.text
        yield client, models


def _loaded(client: TestClient) -> list[str]:
    return [entry.name for entry in services(client.app).pool.running()]


@pytest.mark.parametrize(
    ("path", "body", "status", "error"),
    [
        # The CLI's preload: a model that cannot think is refused before it loads.
        ("/api/generate", {"model": PLAIN, "think": True}, 400, f'"{PLAIN}" does not support thinking'),
        ("/api/chat", {"model": PLAIN, "think": "high"}, 400, f'"{PLAIN}" does not support thinking'),
        ("/api/generate", {"model": VECTORS}, 400, f'"{VECTORS}" does not support generate'),
        ("/api/chat", {"model": VECTORS}, 400, f'"{VECTORS}" does not support chat'),
        (
            "/api/chat",
            {"model": PLAIN, "tools": TOOLS},
            400,
            f"registry.ollama.ai/library/{PLAIN}:latest does not support tools",
        ),
        (
            "/api/generate",
            {"model": PLAIN, "suffix": "x"},
            400,
            f"registry.ollama.ai/library/{PLAIN}:latest does not support insert",
        ),
        (
            "/api/generate",
            {"model": MODEL, "raw": True, "system": "s"},
            400,
            "raw mode does not support template, system, or context",
        ),
        # A bad option is scheduleRunner's 500, before the load too.
        (
            "/api/generate",
            {"model": MODEL, "options": {"num_ctx": "x"}},
            500,
            'option "num_ctx" must be of type integer',
        ),
    ],
)
def test_a_load_call_is_checked_before_the_model_loads(
    api: tuple[TestClient, list[ScriptedModel]], path: str, body: dict[str, Any], status: int, error: str
) -> None:
    client, models = api
    r = client.post(path, json=body)
    assert (r.status_code, r.json()) == (status, {"error": error})
    assert not models  # nothing was loaded


@pytest.mark.parametrize("path", ["/api/generate", "/api/chat"])
def test_an_unload_comes_before_anything_else_is_read(api: tuple[TestClient, list[ScriptedModel]], path: str) -> None:
    client, _ = api
    assert client.post(path, json={"model": MODEL}).json()["done_reason"] == "load"
    assert _loaded(client) == [f"{MODEL}:latest"]
    # Options Ollama would refuse, raw mode's conflicts, a think the model cannot: none is read.
    body = {"model": MODEL, "keep_alive": 0, "options": {"num_ctx": "x"}, "raw": True, "system": "s"}
    r = client.post(path, json=body)
    assert (r.status_code, r.json()["done_reason"]) == (200, "unload")
    assert _loaded(client) == []
    r = client.post(path, json={"model": PLAIN, "keep_alive": 0, "think": True, "tools": TOOLS})
    assert (r.status_code, r.json()["done_reason"]) == (200, "unload")


def test_images_or_a_suffix_without_a_prompt_just_load(api: tuple[TestClient, list[ScriptedModel]]) -> None:
    """Ollama tests the prompt alone: images (which this model cannot see) only load it."""
    client, models = api
    r = client.post("/api/generate", json={"model": MODEL, "images": [IMAGE], "stream": False})
    assert (r.status_code, r.json()["done_reason"], r.json()["response"]) == (200, "load", "")
    assert client.post("/api/generate", json={"model": "coder", "suffix": "x"}).json()["done_reason"] == "load"
    assert all(not m.running for m in models)
    r = client.post("/api/generate", json={"model": MODEL, "images": [IMAGE], "keep_alive": 0})
    assert r.json()["done_reason"] == "unload"


@pytest.mark.parametrize(
    ("path", "body", "error"),
    [
        (
            "/api/generate",
            {"model": "nope", "think": "bogus"},
            'invalid think value: "bogus" (must be "high", "medium", "low", "max", true, or false)',
        ),
        (
            "/api/chat",
            {"model": "nope", "think": 1},
            'think must be a boolean or string ("high", "medium", "low", "max", true, or false)',
        ),
        (
            "/api/generate",
            {"model": "nope", "options": 5},
            "json: cannot unmarshal number into Go struct field GenerateRequest.options"
            " of type map[string]interface {}",
        ),
        (
            "/api/chat",
            {"model": "nope", "options": []},
            "json: cannot unmarshal array into Go struct field ChatRequest.options of type map[string]interface {}",
        ),
        # Go's own decoders stop the decode: the first in the body, before any field of a wrong type.
        (
            "/api/generate",
            {"model": "nope", "stream": 1, "keep_alive": "10", "think": "x"},
            'time: missing unit in duration "10"',
        ),
        (
            "/api/chat",
            {"model": "nope", "options": 5, "think": "x", "keep_alive": "10"},
            'invalid think value: "x" (must be "high", "medium", "low", "max", true, or false)',
        ),
        ("/api/embed", {"model": "nope", "input": 5}, "invalid input type"),
        ("/api/embed", {"model": "nope", "input": ["a", 1]}, "invalid input type"),
        ("/api/embed", {"model": "nope", "keep_alive": "10"}, 'time: missing unit in duration "10"'),
        (
            "/api/embed",
            {"model": "nope", "options": []},
            "json: cannot unmarshal array into Go struct field EmbedRequest.options of type map[string]interface {}",
        ),
        ("/api/embeddings", {"model": "nope", "keep_alive": "10"}, 'time: missing unit in duration "10"'),
        (
            "/api/embeddings",
            {"model": "nope", "options": "x"},
            "json: cannot unmarshal string into Go struct field EmbeddingRequest.options"
            " of type map[string]interface {}",
        ),
    ],
)
def test_decode_errors_come_before_the_model_is_looked_up(
    api: tuple[TestClient, list[ScriptedModel]], path: str, body: dict[str, Any], error: str
) -> None:
    client, _ = api
    r = client.post(path, json=body)
    assert (r.status_code, r.json()) == (400, {"error": error})


def test_embed_names_come_before_the_input(api: tuple[TestClient, list[ScriptedModel]]) -> None:
    """EmbedHandler parses the name (empty: 404, bad syntax: 400) before it reads the input."""
    client, _ = api
    r = client.post("/api/embed", json={"input": 5})
    assert (r.status_code, r.json()) == (404, {"error": "model '' not found"})
    r = client.post("/api/embed", json={"model": "a b", "input": 5})
    assert (r.status_code, r.json()) == (400, {"error": "invalid model name"})


def test_a_suffix_is_rendered_with_the_template_that_names_it(api: tuple[TestClient, list[ScriptedModel]]) -> None:
    client, _ = api
    assert "insert" in client.post("/api/show", json={"model": "coder"}).json()["capabilities"]
    body = {"model": "coder", "prompt": "def add(a, b):", "suffix": "return c", "_debug_render_only": True}
    r = client.post("/api/generate", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["_debug_info"]["rendered_template"] == "[SUFFIX]return c[PREFIX] def add(a, b):"
    # The request's template wins, executed with {Prompt, Suffix} as Ollama's Template.Execute does.
    template = "<PRE>{{ .Prompt }}<SUF>{{ .Suffix }}<MID>{{ if .Think }}think{{ end }}"
    r = client.post("/api/generate", json=body | {"template": template})
    assert r.json()["_debug_info"]["rendered_template"] == "<PRE>def add(a, b):<SUF>return c<MID>"
    r = client.post("/api/generate", json=body | {"stream": False, "_debug_render_only": False})
    assert (r.status_code, r.json()["response"]) == (200, "ok")
    # Raw: the prompt is what the model reads, its suffix unread, as in Ollama's GenerateHandler.
    r = client.post("/api/generate", json=body | {"raw": True})
    assert r.json()["_debug_info"]["rendered_template"] == "def add(a, b):"


@pytest.mark.model
def test_a_templated_suffix_is_tokenized_as_a_raw_prompt_of_its_render(client: TestClient) -> None:
    """On the tiny model's real tokenizer: the render's tokens are what a raw prompt of the same
    text gets (the tokenizer's special tokens added once, as for every Go template's render)."""
    r = client.post("/api/create", json={"model": "coder", "from": MODEL, "template": CODESTRAL, "stream": False})
    assert r.status_code == 200, r.text
    greedy = {"temperature": 0, "num_predict": 1}
    body = {"model": "coder", "prompt": "def add(a, b):", "suffix": "return c", "stream": False, "options": greedy}
    out = client.post("/api/generate", json=body)
    assert out.status_code == 200, out.text
    text = "[SUFFIX]return c[PREFIX] def add(a, b):"
    raw = client.post(
        "/api/generate", json={"model": MODEL, "prompt": text, "raw": True, "stream": False, "options": greedy}
    )
    assert out.json()["prompt_eval_count"] == raw.json()["prompt_eval_count"]
    prompt = out.json()["context"][: out.json()["prompt_eval_count"]]
    text_tokens = client.post("/api/tokenize", json={"model": MODEL, "content": text}).json()["tokens"]
    assert prompt[len(prompt) - len(text_tokens) :] == text_tokens  # the render, after any BOS


def test_a_model_template_this_parser_cannot_read_leaves_a_suffix_to_the_fim_tokens() -> None:
    """Its chats fall back to another template; a suffix falls back to the vocabulary's FIM tokens
    (a 500 for the model's own template would refuse every insert the model could serve)."""
    from cllm_ollama.api.ollama.generate import _infill_template

    broken = "{{ if .Suffix }}[SUFFIX]{{ .Suffix }}{{ end }}{{ .Prompt | nosuchfunction }}"
    assert _infill_template("", broken) is None
    assert _infill_template("", CODESTRAL) == CODESTRAL
    assert _infill_template("{{ .Prompt }}", broken) == "{{ .Prompt }}"  # the request's own: as sent
