"""/v1/messages/count_tokens in Anthropic's shape, Anthropic's server tools, which cllm cannot run,
refused rather than handed to the model, and its client tools, which the client runs, handed to it:
through the official ``anthropic`` client against a live server whose engine plays a script."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from scripted import scripted_server

anthropic = pytest.importorskip("anthropic")

MODEL = "tiny"
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
ASK = [{"role": "user", "content": "Weather in Paris?"}]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, list[str | BaseException]]]:
    with scripted_server(tmp_path_factory.mktemp("anthropic"), MODEL, n_ctx=4096) as (url, script):
        yield anthropic.Anthropic(base_url=url, api_key="ollama", max_retries=0, timeout=60), script


def test_count_tokens_is_the_prompt_a_generation_evaluates(served: tuple[Any, list[str | BaseException]]) -> None:
    client, script = served
    script[:] = ["Sunny."]
    kwargs: dict[str, Any] = {"model": MODEL, "messages": ASK, "system": "Be brief.", "tools": [WEATHER]}
    counted = client.messages.count_tokens(**kwargs, thinking={"type": "disabled"})
    used = client.messages.create(**kwargs, max_tokens=8, thinking={"type": "disabled"}).usage
    assert counted.input_tokens == used.input_tokens > 0
    without_tools = client.messages.count_tokens(model=MODEL, messages=ASK, system="Be brief.")
    assert 0 < without_tools.input_tokens < counted.input_tokens


def test_count_tokens_errors_in_anthropic_s_shape(served: tuple[Any, list[str | BaseException]]) -> None:
    client, _ = served
    with pytest.raises(anthropic.NotFoundError) as missing:
        client.messages.count_tokens(model="nothing", messages=ASK)
    assert missing.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    with pytest.raises(anthropic.BadRequestError):
        client.messages.count_tokens(model=MODEL, messages=[])


@pytest.mark.parametrize(
    "kind", ["web_search_20250305", "code_execution_20250825", "web_fetch_20250910", "tool_search_tool_regex_20251119"]
)
def test_a_server_tool_is_refused_not_handed_to_the_model(
    served: tuple[Any, list[str | BaseException]], kind: str
) -> None:
    client, script = served
    script[:] = ["Never said."]
    tools: list[Any] = [WEATHER, {"type": kind, "name": kind.rsplit("_", 1)[0]}]
    with pytest.raises(anthropic.BadRequestError) as created:
        client.messages.create(model=MODEL, max_tokens=8, messages=ASK, tools=tools)
    with pytest.raises(anthropic.BadRequestError) as counted:
        client.messages.count_tokens(model=MODEL, messages=ASK, tools=tools)
    for refused in (created, counted):
        error = refused.value.body["error"]  # type: ignore[index]
        assert error["type"] == "invalid_request_error" and f"tools.1: tool type '{kind}'" in error["message"]


def test_anthropic_s_client_tools_are_handed_to_the_model(served: tuple[Any, list[str | BaseException]]) -> None:
    """As Ollama hands them (every tool but web search), in a generation and in its count."""
    client, script = served
    script[:] = ['<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>']
    tools: list[Any] = [
        {"type": "bash_20250124", "name": "bash"},
        {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
        {"type": "memory_20250818", "name": "memory"},
        {"type": "computer_20250124", "name": "computer", "display_width_px": 1024, "display_height_px": 768},
    ]
    kwargs: dict[str, Any] = {"model": MODEL, "messages": ASK, "thinking": {"type": "disabled"}}
    message = client.messages.create(**kwargs, max_tokens=64, tools=tools)
    (use,) = [b for b in message.content if b.type == "tool_use"]
    assert (use.name, use.input, message.stop_reason) == ("bash", {"command": "ls"}, "tool_use")
    with_tools = client.messages.count_tokens(**kwargs, tools=tools).input_tokens
    assert with_tools == message.usage.input_tokens > client.messages.count_tokens(**kwargs).input_tokens


def test_custom_tools_are_declared_as_before(served: tuple[Any, list[str | BaseException]]) -> None:
    client, script = served
    script[:] = ['<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>']
    message = client.messages.create(
        model=MODEL, max_tokens=64, messages=ASK, tools=[WEATHER | {"type": "custom"}], thinking={"type": "disabled"}
    )
    (use,) = [b for b in message.content if b.type == "tool_use"]
    assert (use.name, use.input) == ("get_weather", {"city": "Paris"}) and use.id.startswith("toolu_")


def test_path_is_anthropic_s(tmp_path: Path) -> None:
    """The route exists only for POST, as Anthropic's."""
    with scripted_server(tmp_path, MODEL) as (url, _):
        assert httpx.get(f"{url}/v1/messages/count_tokens", timeout=30).status_code == 405
