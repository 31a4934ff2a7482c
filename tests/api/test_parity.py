"""Small parity gaps with Ollama (issue 20's audit of v0.33), over an engine that plays a script:
/v1 ranks ``length`` above ``tool_calls`` (Ollama #17485), streamed or not; and, on the tiny
model, /api/generate passes a ``think`` level to the template as /api/chat does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from scripted import ScriptedModel, scripted_pool
from starlette.testclient import TestClient

from cllm_ollama.api.services import services
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.engine.request import FinishReason

MODEL = "tiny"  # installed by conftest.settings
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
BODY = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "tools": TOOLS, "reasoning_effort": "none"}


@pytest.fixture
def scripted(settings: Settings) -> Iterator[tuple[TestClient, list[str | BaseException], list[ScriptedModel]]]:
    script: list[str | BaseException] = [CALL]
    models: list[ScriptedModel] = []
    app = create_app(settings)
    with TestClient(app, base_url="http://localhost") as client:
        services(app).pool = scripted_pool(script, models)
        assert client.post("/api/generate", json={"model": MODEL}).json()["done_reason"] == "load"
        yield client, script, models


def _finish_reasons(body: dict[str, Any], client: TestClient) -> tuple[str, list[str]]:
    whole = client.post("/v1/chat/completions", json=body).json()
    r = client.post("/v1/chat/completions", json=body | {"stream": True})
    chunks = [json.loads(e[6:]) for e in r.text.split("\n\n") if e and e != "data: [DONE]"]
    assert any(c["choices"][0]["delta"].get("tool_calls") for c in chunks)
    streamed = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"][0].get("finish_reason")]
    return whole["choices"][0]["finish_reason"], streamed


def test_length_ranks_above_tool_calls(
    scripted: tuple[TestClient, list[str | BaseException], list[ScriptedModel]],
) -> None:
    client, _, models = scripted
    assert _finish_reasons(BODY, client) == ("tool_calls", ["tool_calls"])
    models[0].finish = FinishReason.LENGTH  # the call came, then the limit: maybe a second call was cut
    assert _finish_reasons(BODY, client) == ("length", ["length"])


@pytest.mark.model
def test_generate_passes_think_levels_to_the_template(client: TestClient) -> None:
    """Ollama's routes.go sets the template's ``.ThinkLevel`` for /api/generate too."""

    def prompt(template: str, think: object) -> list[int]:
        body = {"model": MODEL, "prompt": "Hi", "template": template, "think": think, "stream": False}
        out = client.post("/api/generate", json=body | {"options": {"num_predict": 1}})
        assert out.status_code == 200, out.text
        return out.json()["context"][: out.json()["prompt_eval_count"]]  # type: ignore[no-any-return]

    level = "{{ .ThinkLevel }}:{{ .Prompt }}"
    assert prompt(level, "medium") == prompt("medium:{{ .Prompt }}", True)
    assert prompt(level, "low") == prompt("low:{{ .Prompt }}", True) != prompt(level, "medium")
    # A thinking model's unset think is true (so set), and true is the level "medium"; false has none.
    flags = "{{ .IsThinkSet }}/{{ .Think }}/{{ .ThinkLevel }}:{{ .Prompt }}"
    assert prompt(flags, None) == prompt(flags, True) == prompt("true/true/medium:{{ .Prompt }}", None)
    assert prompt(flags, False) == prompt("true/false/:{{ .Prompt }}", None)
    assert prompt(flags, "high") == prompt("true/true/high:{{ .Prompt }}", None)


def test_gpt_oss_reads_max_as_high() -> None:
    """Its harmony format takes low, medium and high: Ollama maps "max" to "high" for it alone."""
    from types import SimpleNamespace

    from cllm_ollama.api.request_fields import think_level

    def level(arch: str, think: object) -> str | None:
        model = SimpleNamespace(info=SimpleNamespace(architecture=arch))
        return think_level(model, SimpleNamespace(think=think))  # type: ignore[arg-type]

    assert (level("gpt-oss", "max"), level("gptoss", "max"), level("qwen3", "max")) == ("high", "high", "max")
    assert (level("gpt-oss", "low"), level("gpt-oss", True)) == ("low", None)


@pytest.mark.model
def test_debug_render_only_answers_the_prompt_and_generates_nothing(client: TestClient) -> None:
    """Ollama's ``_debug_render_only``: the rendered template, for /api/chat and /api/generate."""
    chat = client.post(
        "/api/chat",
        json={"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "_debug_render_only": True},
    )
    assert chat.status_code == 200 and chat.headers["content-type"].startswith("application/json")
    out = chat.json()
    assert out["done"] is False and "eval_count" not in out and out["message"]["content"] == ""
    assert out["_debug_info"]["rendered_template"].startswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant")
    body = {"model": MODEL, "prompt": "Hi", "template": "[{{ .Prompt }}]", "_debug_render_only": True}
    generate = client.post("/api/generate", json=body).json()
    assert generate["_debug_info"] == {"rendered_template": "[Hi]"} and generate["response"] == ""
