"""The official clients, unchanged, against a cllm started with CLLM_API_KEY: each one's own way of
sending a key works, and each one raises its typed 401 error without the key or with a wrong one.
"""

from __future__ import annotations

import anthropic
import httpx
import ollama
import openai
import pytest
from anthropic_ids import without_request_id

pytestmark = pytest.mark.model
MODEL = "tiny"
KEY = "k-compat"  # the server's second key (conftest.py: keyed_url)
HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture(autouse=True)
def no_key_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # ollama-python sends $OLLAMA_API_KEY by itself when no Authorization header is given.
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)


def test_ollama_client_with_headers(keyed_url: str) -> None:
    client = ollama.Client(host=keyed_url, headers={"Authorization": f"Bearer {KEY}"})
    assert MODEL + ":latest" in [m.model for m in client.list().models]
    answer = client.chat(model=MODEL, messages=HI, think=False, options={"num_predict": 2, "temperature": 0})
    assert answer.done and answer.message.role == "assistant"


def test_ollama_client_takes_ollama_api_key_from_the_environment(
    keyed_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLAMA_API_KEY", KEY)
    assert ollama.Client(host=keyed_url).list().models


@pytest.mark.parametrize("headers", [None, {"Authorization": "Bearer wrong"}])
def test_ollama_client_without_the_key(keyed_url: str, headers: dict[str, str] | None) -> None:
    client = ollama.Client(host=keyed_url, headers=headers)
    with pytest.raises(ollama.ResponseError) as raised:
        client.list()
    assert (raised.value.status_code, raised.value.error) == (401, "unauthorized")
    with pytest.raises(ollama.ResponseError) as raised:
        client.chat(model=MODEL, messages=HI)
    assert raised.value.status_code == 401


def test_openai_sdk_with_its_api_key(keyed_url: str) -> None:
    with openai.OpenAI(base_url=f"{keyed_url}/v1", api_key=KEY, max_retries=0, timeout=60) as client:
        assert MODEL + ":latest" in [m.id for m in client.models.list()]
        answer = client.chat.completions.create(model=MODEL, messages=HI, max_tokens=2, temperature=0)  # type: ignore[arg-type]
        assert answer.usage is not None and answer.usage.completion_tokens <= 2


def test_openai_sdk_with_a_wrong_key(keyed_url: str) -> None:
    with openai.OpenAI(base_url=f"{keyed_url}/v1", api_key="wrong", max_retries=0, timeout=60) as client:
        with pytest.raises(openai.AuthenticationError) as raised:
            client.chat.completions.create(model=MODEL, messages=HI, max_tokens=2)  # type: ignore[arg-type]
        assert raised.value.status_code == 401 and raised.value.code == "invalid_api_key"
        with pytest.raises(openai.AuthenticationError):
            client.models.list()


@pytest.mark.parametrize("how", ["api_key", "auth_token"])
def test_anthropic_sdk_with_either_credential(keyed_url: str, how: str) -> None:
    # api_key goes as x-api-key (the SDK's default); auth_token as a Bearer token (Claude Code's ANTHROPIC_AUTH_TOKEN).
    credential = {"api_key": KEY} if how == "api_key" else {"api_key": None, "auth_token": KEY}
    with anthropic.Anthropic(base_url=keyed_url, max_retries=0, timeout=60, **credential) as client:  # type: ignore[arg-type]
        message = client.messages.create(model=MODEL, max_tokens=2, messages=HI, thinking={"type": "disabled"})  # type: ignore[arg-type]
        assert message.role == "assistant" and message.usage.output_tokens <= 2


def test_anthropic_sdk_with_a_wrong_key(keyed_url: str) -> None:
    client = anthropic.Anthropic(base_url=keyed_url, api_key="wrong", max_retries=0, timeout=60)
    with client, pytest.raises(anthropic.AuthenticationError) as raised:
        client.messages.create(model=MODEL, max_tokens=2, messages=HI)  # type: ignore[arg-type]
    assert raised.value.status_code == 401
    assert without_request_id(raised.value.body) == {  # type: ignore[arg-type]
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }


def test_the_health_check_stays_open(keyed_url: str) -> None:
    assert httpx.get(keyed_url + "/").text == "Ollama is running"
    assert httpx.get(keyed_url + "/api/version").status_code == 401
