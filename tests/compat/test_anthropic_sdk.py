"""The official ``anthropic`` Python SDK, unchanged, against a live cllm at ``/v1/messages``.

Against the tiny model: messages.create and messages.stream agree with each other and with the
native /api/chat (greedy), thinking comes back as thinking blocks, errors are the SDK's typed
errors. Tool use and a tool_result round trip need a model that calls tools on cue: those run
against a live server whose engine plays a script (everything above the engine is real).
``anthropic`` 2.x dropped ``temperature``/``top_p``/``top_k`` from its signature: they are sent
as ``extra_body`` fields, which Ollama (and cllm) read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import ollama
import pytest
from anthropic_ids import without_request_id
from scripted import scripted_server

anthropic = pytest.importorskip("anthropic")

pytestmark = pytest.mark.model
MODEL = "tiny"  # what the compat server serves
N = 12
HI = [{"role": "user", "content": "Hi"}]
NO_THINKING = {"type": "disabled"}
# The SDK (2.x) no longer has sampling parameters; Ollama reads them, so they go as extra body fields.
GREEDY = {"temperature": 0}
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def _client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="ollama", max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def client(compat_url: str) -> Iterator[anthropic.Anthropic]:
    with _client(compat_url) as c:
        yield c


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[anthropic.Anthropic, list[str]]]:
    """A live server over the tiny model's record whose engine says what ``script`` holds."""
    with scripted_server(tmp_path_factory.mktemp("scripted")) as (url, script), _client(url) as c:
        yield c, script  # type: ignore[misc]


def prompt_tokens(usage: anthropic.types.Usage) -> int:
    return usage.input_tokens + (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)


def test_create_and_stream_agree_with_native_chat(client: anthropic.Anthropic, compat_url: str) -> None:
    whole = client.messages.create(model=MODEL, max_tokens=N, messages=HI, extra_body=GREEDY, thinking=NO_THINKING)
    assert whole.type == "message" and whole.role == "assistant" and whole.id.startswith("msg_")
    assert whole.model == MODEL and whole.stop_reason == "max_tokens"
    (block,) = whole.content
    assert block.type == "text" and block.text
    assert whole.usage.output_tokens == N and whole.usage.input_tokens > 0

    with client.messages.stream(
        model=MODEL, max_tokens=N, messages=HI, extra_body=GREEDY, thinking=NO_THINKING
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == block.text and final.content[0].text == block.text  # type: ignore[union-attr]
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == N
    # Anthropic's input_tokens leaves out what the prompt cache held (the stream reuses the first
    # request's prompt): the prompt's whole count is the three counters together.
    assert prompt_tokens(final.usage) == prompt_tokens(whole.usage)
    assert final.usage.cache_read_input_tokens

    native = ollama.Client(host=compat_url).chat(
        model=MODEL, messages=HI, think=False, options={"temperature": 0, "num_predict": N}
    )
    assert native.message.content == block.text


def test_stream_events_in_anthropics_order(client: anthropic.Anthropic) -> None:
    with client.messages.stream(model=MODEL, max_tokens=N, messages=HI, extra_body=GREEDY, thinking=NO_THINKING) as s:
        kinds = [event.type for event in s]
    assert kinds[0] == "message_start" and kinds[1] == "content_block_start"
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(kinds[2:-3]) <= {"content_block_delta", "text"}


def test_system_stop_sequences_and_sampling_fields(client: anthropic.Anthropic) -> None:
    out = client.messages.create(
        model=MODEL,
        max_tokens=N,
        system=[{"type": "text", "text": "You are terse."}],
        messages=HI,
        extra_body={"temperature": 0, "top_p": 0.9, "top_k": 20},
        metadata={"user_id": "u1"},
        thinking=NO_THINKING,
        extra_headers={"anthropic-version": "2023-06-01", "x-api-key": "anything"},
    )
    full = out.content[0].text  # type: ignore[union-attr]
    stop = full[len(full) // 2 :][:3]
    cut = client.messages.create(
        model=MODEL,
        max_tokens=N,
        system="You are terse.",
        messages=HI,
        extra_body={"temperature": 0, "top_p": 0.9, "top_k": 20},
        stop_sequences=[stop],
        thinking=NO_THINKING,
    )
    assert cut.stop_reason == "end_turn"  # Ollama reports a stop sequence as a plain stop
    assert stop not in cut.content[0].text and full.startswith(cut.content[0].text)  # type: ignore[union-attr]


def test_thinking_on_a_thinking_model(client: anthropic.Anthropic, compat_url: str) -> None:
    """Thinking enabled is native ``think: true``: the same thinking and text as /api/chat gives.

    (The tiny model rarely opens a think block itself; the scripted test below shows the blocks.)
    """
    thinking = {"type": "enabled", "budget_tokens": 1024}
    out = client.messages.create(model=MODEL, max_tokens=N, messages=HI, extra_body=GREEDY, thinking=thinking)
    native = ollama.Client(host=compat_url).chat(
        model=MODEL, messages=HI, think=True, options={"temperature": 0, "num_predict": N}
    )
    expected = [("thinking", native.message.thinking), ("text", native.message.content)]
    got = [(b.type, b.thinking if b.type == "thinking" else b.text) for b in out.content]  # type: ignore[union-attr]
    assert got == [(kind, text) for kind, text in expected if text] and out.stop_reason == "max_tokens"
    with client.messages.stream(model=MODEL, max_tokens=N, messages=HI, extra_body=GREEDY, thinking=thinking) as stream:
        final = stream.get_final_message()
    assert [b.model_dump() for b in final.content] == [b.model_dump() for b in out.content]


def test_errors_are_the_sdks_typed_errors(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as missing:
        client.messages.create(model="nope", max_tokens=N, messages=HI)
    assert without_request_id(missing.value.body) == {  # type: ignore[arg-type]
        "type": "error",
        "error": {"type": "not_found_error", "message": "model 'nope' not found"},
    }
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model=MODEL, max_tokens=0, messages=HI)
    assert bad.value.body["error"]["message"] == "max_tokens is required and must be positive"  # type: ignore[index]


def test_thinking_and_tool_use_stream_as_blocks(scripted: tuple[anthropic.Anthropic, list[str]]) -> None:
    client, script = scripted
    script[:] = ["<think>", "Weather", " needed.", "</think>", "Let me look.", CALL]
    kwargs = {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "Paris?"}], "tools": [WEATHER]}
    whole = client.messages.create(**kwargs, thinking={"type": "enabled", "budget_tokens": 100})
    assert [b.type for b in whole.content] == ["thinking", "text", "tool_use"]
    assert whole.content[0].thinking == "Weather needed."  # type: ignore[union-attr]
    assert whole.content[1].text == "Let me look."  # type: ignore[union-attr]
    use = whole.content[2]
    assert use.name == "get_weather" and use.input == {"city": "Paris"}  # type: ignore[union-attr]
    assert use.id.startswith("toolu_") and whole.stop_reason == "tool_use"  # type: ignore[union-attr]

    with client.messages.stream(**kwargs, thinking={"type": "enabled", "budget_tokens": 100}) as stream:
        events = list(stream)
        final = stream.get_final_message()
    deltas = [e.delta.type for e in events if e.type == "content_block_delta"]
    assert deltas == ["thinking_delta", "thinking_delta", "text_delta", "input_json_delta"]
    starts = [(e.index, e.content_block.type) for e in events if e.type == "content_block_start"]
    assert starts == [(0, "thinking"), (1, "text"), (2, "tool_use")]
    assert [b.type for b in final.content] == ["thinking", "text", "tool_use"]
    assert final.content[2].input == {"city": "Paris"} and final.stop_reason == "tool_use"  # type: ignore[union-attr]


def test_tool_result_round_trip(scripted: tuple[anthropic.Anthropic, list[str]]) -> None:
    client, script = scripted
    script[:] = [CALL]
    question = {"role": "user", "content": "Weather in Paris?"}
    first = client.messages.create(
        model=MODEL, max_tokens=64, messages=[question], tools=[WEATHER], tool_choice={"type": "auto"}
    )
    (use,) = first.content
    assert use.type == "tool_use"
    script[:] = ["It is sunny."]
    result = {"type": "tool_result", "tool_use_id": use.id, "content": [{"type": "text", "text": "sunny, 21C"}]}
    history = [question, {"role": "assistant", "content": first.content}, {"role": "user", "content": [result]}]
    second = client.messages.create(model=MODEL, max_tokens=64, messages=history, tools=[WEATHER])
    assert second.content[0].text == "It is sunny." and second.stop_reason == "end_turn"  # type: ignore[union-attr]


def test_tool_result_reaches_the_prompt(tmp_path: Path) -> None:
    """The round trip's history renders as Qwen3's template renders a native tool turn (the result
    named for its call's function, as chat completions' results are)."""
    from cllm_ollama.api.anthropic.messages import _decode

    use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}
    body = {
        "model": MODEL,
        "max_tokens": 8,
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": [{"type": "text", "text": "Looking."}, use]},
            {"role": "user", "content": [result, {"type": "text", "text": "Thanks"}]},
        ],
    }
    native = _decode(body).native
    assert native.messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [{"id": "toolu_1", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "content": "sunny", "tool_call_id": "toolu_1", "tool_name": "get_weather"},
        {"role": "user", "content": "Thanks"},
    ]
    assert json.dumps(native.req.options) == '{"num_predict": 8}'
