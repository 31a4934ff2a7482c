"""A model's Go template layer is rendered by default, as Ollama renders library models; one that
cannot be rendered falls back to the GGUF's chat template with a warning, never a 500."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.testclient import TestClient

from cllm_ollama.chatformat.prompt import ChatPrompt
from cllm_ollama.testing.ggufs import qwen3_chat_template

TINY = "tiny"  # the model tests/api/conftest.py stores

GO_TEMPLATE = "{{- range .Messages }}[{{ .Role }}] {{ .Content }}\n{{ end }}[assistant]"
UNRENDERABLE = "{{ call .Nothing }}"  # parses, fails to run
# Wordier than the GGUF's template, so its prompt has another length.
WORDY = "{{- range .Messages }}Turn of the {{ .Role }}, who says: {{ .Content }} (end of the turn)\n{{ end }}Answer:"
LOADED: Any = SimpleNamespace(bos_text="", eos_text="", tokenize=lambda text, add_special: text.split())
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


def model(template: str | None) -> Any:
    return SimpleNamespace(
        info=SimpleNamespace(chat_template=qwen3_chat_template()),
        record=SimpleNamespace(renderer_in_use="", template=template),
        has=lambda cap: False,
        full_name="m:latest",
    )


def test_the_template_layer_is_rendered() -> None:
    rendered = ChatPrompt(model(GO_TEMPLATE), MESSAGES, thinking=False)(LOADED, None)
    assert rendered.text == "[system] Be brief.\n[user] Hi\n[assistant]"


def test_without_one_the_ggufs_chat_template_is_rendered() -> None:
    rendered = ChatPrompt(model(None), MESSAGES, thinking=False)(LOADED, None)
    assert rendered.text.startswith("<|im_start|>system\nBe brief.<|im_end|>")


def test_an_unrenderable_template_falls_back_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="cllm.api"):
        rendered = ChatPrompt(model(UNRENDERABLE), MESSAGES, thinking=False)(LOADED, None)
        ChatPrompt(model(UNRENDERABLE), MESSAGES, thinking=False)(LOADED, None)
    assert rendered.text == ChatPrompt(model(None), MESSAGES, thinking=False)(LOADED, None).text
    warnings = [r.getMessage() for r in caplog.records if "Go template cannot be rendered" in r.getMessage()]
    assert len(warnings) == 1  # once per template, not per request
    assert warnings[0].startswith("m:latest: its Go template cannot be rendered (template: ")
    assert warnings[0].endswith("using the GGUF's chat template instead")


def test_without_a_gguf_template_the_warning_names_the_family_s_builtin(caplog: pytest.LogCaptureFixture) -> None:
    # A Gemma GGUF with no chat template falls back to Gemma's built-in format, not ChatML: the log says so.
    template = UNRENDERABLE + "{{/* gemma */}}"  # warned once per template: not the other test's
    gemma: Any = SimpleNamespace(
        info=SimpleNamespace(chat_template=None, chat_markers=("<start_of_turn>",), architecture="gemma3"),
        record=SimpleNamespace(renderer_in_use="", template=template),
        has=lambda cap: False,
        full_name="g:latest",
    )
    with caplog.at_level(logging.WARNING, logger="cllm.api"):
        rendered = ChatPrompt(gemma, MESSAGES, thinking=False)(LOADED, None)
    assert rendered.text.startswith("<start_of_turn>user\nBe brief.")
    warnings = [r.getMessage() for r in caplog.records if "Go template cannot be rendered" in r.getMessage()]
    assert warnings and warnings[0].endswith("using the built-in gemma template instead")


def test_a_request_template_that_cannot_be_rendered_is_still_an_error() -> None:
    from cllm_ollama.chatformat.gotemplate import TemplateError

    with pytest.raises(TemplateError):
        ChatPrompt(model(None), MESSAGES, thinking=False, go_template=UNRENDERABLE)(LOADED, None)


@pytest.mark.model
def test_over_http(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    for name, template in (("go", WORDY), ("broken", "{{ call .Other }}")):  # not warned about yet
        r = client.post("/api/create", json={"model": name, "from": TINY, "template": template, "stream": False})
        assert r.status_code == 200, r.text
    body = {"prompt": "Hello there", "stream": False, "options": {"num_predict": 1, "temperature": 0}}
    plain = client.post("/api/generate", json=body | {"model": TINY}).json()
    go = client.post("/api/generate", json=body | {"model": "go"}).json()
    as_request = client.post("/api/generate", json=body | {"model": TINY, "template": WORDY}).json()
    assert go["prompt_eval_count"] == as_request["prompt_eval_count"] != plain["prompt_eval_count"]
    with caplog.at_level(logging.WARNING, logger="cllm.api"):
        broken = client.post("/api/generate", json=body | {"model": "broken"})
        chat = client.post(
            "/api/chat", json={**body, "model": "broken", "messages": [{"role": "user", "content": "Hello there"}]}
        )
    assert broken.status_code == 200 and chat.status_code == 200
    assert broken.json()["prompt_eval_count"] == plain["prompt_eval_count"]
    assert any("broken:latest: its Go template cannot be rendered" in r.getMessage() for r in caplog.records)


@pytest.mark.model
def test_the_modelfile_system_yields_to_the_clients_own(client: TestClient) -> None:
    """Ollama puts the Modelfile's SYSTEM first unless the client's first message is a system one,
    and its MESSAGEs before the client's: a client's system prompt does not get a second one."""
    few = {"system": "S", "messages": [{"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"}]}
    for name, extra in (("few", few), ("plain", {})):
        body = {"model": name, "from": TINY, "template": GO_TEMPLATE, "stream": False, **extra}
        assert client.post("/api/create", json=body).status_code == 200

    def count(name: str, *turns: tuple[str, str]) -> int:
        messages = [{"role": role, "content": content} for role, content in turns]
        body = {"model": name, "messages": messages, "stream": False, "options": {"num_predict": 1}}
        r = client.post("/api/chat", json=body)
        assert r.status_code == 200, r.text
        return r.json()["prompt_eval_count"]  # type: ignore[no-any-return]

    u1, a1 = ("user", "u1"), ("assistant", "a1")
    assert count("few", ("system", "C"), ("user", "q")) == count("plain", u1, a1, ("system", "C"), ("user", "q"))
    assert count("few", ("user", "q")) == count("plain", ("system", "S"), u1, a1, ("user", "q"))
