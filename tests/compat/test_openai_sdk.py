"""The official ``openai`` Python SDK, unchanged, against a live cllm at ``/v1``.

Proves that the SDK's own request building and response parsing (pydantic models, SSE
streaming, base64 embedding decoding, typed errors) accept what cllm sends, and that the
values agree with cllm's native API: greedy streamed text equals non-streamed text, token
counts equal ``max_tokens``, ``/v1`` embeddings equal ``/api/embed`` embeddings.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Iterator
from typing import Literal

import numpy as np
import ollama
import pytest
from pydantic import BaseModel
from scripted import scripted_server

openai = pytest.importorskip("openai")

pytestmark = pytest.mark.model
MODEL = "tiny"
FULL = "tiny:latest"
N = 12
MESSAGES = [{"role": "user", "content": "Hi"}]


class Answer(BaseModel):
    """Every value is bounded by the schema grammar, so even a random model must finish it."""

    color: Literal["red", "blue"]
    n: int
    ok: bool


@pytest.fixture(scope="module")
def client(compat_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{compat_url}/v1", api_key="ollama", max_retries=0, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def native(compat_url: str) -> Iterator[ollama.Client]:
    with ollama.Client(host=compat_url) as c:
        yield c


def test_chat_completion_and_its_stream_agree(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=N, temperature=0)
    assert whole.object == "chat.completion" and whole.id.startswith("chatcmpl-") and whole.model == MODEL
    (choice,) = whole.choices
    assert choice.finish_reason == "length" and choice.message.role == "assistant"
    assert choice.message.content
    assert whole.usage is not None and whole.usage.completion_tokens == N
    assert whole.usage.prompt_tokens > 0 and whole.usage.total_tokens == whole.usage.prompt_tokens + N

    stream = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=N, temperature=0, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1 and len({c.created for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == choice.message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (whole.usage.prompt_tokens, N)
    # The same prompt again: all but its last token were cached.
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == usage.prompt_tokens - 1
    assert all(c.usage is None for c in chunks[:-1])


def test_chat_completion_equals_native_chat(client: openai.OpenAI, native: ollama.Client) -> None:
    """The /v1 translation runs the same generation as /api/chat."""
    sdk = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=N, temperature=0)
    own = native.chat(model=MODEL, messages=MESSAGES, options={"temperature": 0, "num_predict": N})
    assert sdk.choices[0].message.content == own.message.content
    assert sdk.usage is not None and sdk.usage.prompt_tokens == own.prompt_eval_count


def test_async_client_stream(compat_url: str, client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=N, temperature=0)

    async def streamed() -> str:
        async with openai.AsyncOpenAI(base_url=f"{compat_url}/v1", api_key="ollama", max_retries=0) as aclient:
            stream = await aclient.chat.completions.create(
                model=MODEL, messages=MESSAGES, max_tokens=N, temperature=0, stream=True
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    assert asyncio.run(streamed()) == whole.choices[0].message.content


def test_structured_output_parse_and_stream(client: openai.OpenAI) -> None:
    """The SDK's ``parse``/``stream`` helpers send a strict json_schema and validate the reply into the model.
    Without thinking (a thinking model thinks before the format holds, and this random-weight one
    would never end its thinking)."""
    parsed = client.chat.completions.parse(
        model=MODEL, messages=MESSAGES, temperature=0, response_format=Answer, reasoning_effort="none"
    )
    message = parsed.choices[0].message
    assert parsed.choices[0].finish_reason == "stop"
    assert isinstance(message.parsed, Answer)
    assert message.parsed == Answer.model_validate_json(message.content or "")
    with client.chat.completions.stream(
        model=MODEL, messages=MESSAGES, temperature=0, response_format=Answer, reasoning_effort="none"
    ) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.parsed == message.parsed
    assert final.choices[0].message.content == message.content


def test_json_object_mode(client: openai.OpenAI, native: ollama.Client) -> None:
    out = client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        temperature=0,
        max_tokens=N,
        response_format={"type": "json_object"},
        reasoning_effort="none",  # the format from the first token, as the native request's think false
    )
    content = out.choices[0].message.content or ""
    # The JSON grammar forces an object from the first character; a random model may fill it with
    # a long string, so compare with the native API's format "json" rather than parse a prefix.
    assert content.lstrip().startswith("{")
    same = native.chat(
        model=MODEL,
        messages=MESSAGES,
        format="json",
        think=False,
        options={"temperature": 0, "top_p": 1, "num_predict": N},
    )
    assert content == same.message.content
    if out.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(content), dict)


def test_chat_stop_sequence(client: openai.OpenAI) -> None:
    full = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=N, temperature=0)
    content = full.choices[0].message.content or ""
    words = [m.group() for m in re.finditer(r"[A-Za-z]{3,}", content) if m.start() > 0]
    assert words, f"no stop string can be cut from {content!r}"
    stop = words[0]
    cut = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=N, temperature=0, stop=[stop])
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].message.content == content[: content.index(stop)]


def test_presence_and_frequency_penalties(client: openai.OpenAI) -> None:
    out = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=N, temperature=0, presence_penalty=0.5, frequency_penalty=0.5
    )
    assert out.choices[0].finish_reason == "length"
    assert out.usage is not None and out.usage.completion_tokens == N


def test_responses_api(client: openai.OpenAI) -> None:
    chat = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=N, temperature=0)
    out = client.responses.create(model=MODEL, input="Hi", max_output_tokens=N, temperature=0)
    assert out.output_text == chat.choices[0].message.content
    assert out.usage is not None and out.usage.output_tokens == N


def test_completions_and_stream(client: openai.OpenAI, native: ollama.Client) -> None:
    whole = client.completions.create(model=MODEL, prompt="Once upon", max_tokens=N, temperature=0)
    assert whole.object == "text_completion"
    (choice,) = whole.choices
    assert choice.finish_reason == "length" and choice.text
    assert whole.usage is not None and whole.usage.completion_tokens == N
    # /v1/completions renders the prompt as /api/generate does (with the template, as Ollama's middleware).
    same = native.generate(model=MODEL, prompt="Once upon", options={"temperature": 0, "num_predict": N})
    assert choice.text == same.response

    chunks = list(
        client.completions.create(
            model=MODEL,
            prompt="Once upon",
            max_tokens=N,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert "".join(c.choices[0].text for c in chunks if c.choices) == choice.text
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (whole.usage.prompt_tokens, N)
    # The same prompt again: all but its last token were cached.
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == usage.prompt_tokens - 1


def test_embeddings_float_default_and_base64(client: openai.OpenAI, native: ollama.Client) -> None:
    texts = ["Hello world", "The quick brown fox"]
    floats = client.embeddings.create(model=MODEL, input=texts, encoding_format="float")
    assert floats.object == "list" and floats.model == MODEL and [d.index for d in floats.data] == [0, 1]
    assert floats.usage.prompt_tokens > 0 and floats.usage.total_tokens == floats.usage.prompt_tokens
    vectors = np.array([d.embedding for d in floats.data])
    assert vectors.shape[0] == 2 and vectors.shape[1] > 0
    assert not np.allclose(vectors[0], vectors[1])
    # The same vectors as the native endpoint.
    assert np.allclose(vectors, np.array(native.embed(model=MODEL, input=texts).embeddings), atol=1e-6)

    # Without encoding_format the SDK asks for base64 on the wire and decodes it itself.
    default = client.embeddings.create(model=MODEL, input=texts)
    assert np.allclose(np.array([d.embedding for d in default.data]), vectors, atol=1e-6)

    # Asked explicitly, base64 is handed back as the string: little-endian float32.
    b64 = client.embeddings.create(model=MODEL, input=texts[0], encoding_format="base64")
    (item,) = b64.data
    assert isinstance(item.embedding, str)
    assert np.allclose(np.frombuffer(base64.b64decode(item.embedding), dtype="<f4"), vectors[0], atol=1e-6)


def test_models_list_and_retrieve(client: openai.OpenAI) -> None:
    models = list(client.models.list())
    assert [m.id for m in models] == [FULL]
    assert models[0].object == "model" and models[0].owned_by == "library" and models[0].created > 0
    # A retrieve names the model as it was asked for, as Ollama's does.
    assert client.models.retrieve(MODEL) == models[0].model_copy(update={"id": MODEL})
    assert client.models.retrieve(FULL) == models[0]


def test_unknown_model_is_not_found(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="no-such-model", messages=MESSAGES)
    assert err.value.status_code == 404
    assert err.value.body == {
        "message": "model 'no-such-model' not found",
        "type": "not_found_error",
        "param": None,
        "code": None,
    }
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="no-such-model", input="x")


def test_bad_request_is_a_bad_request_error(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model=MODEL, messages=[])
    assert err.value.status_code == 400 and err.value.body["message"] == "[] is too short - 'messages'"


def test_responses_stream_and_input_items(client: openai.OpenAI) -> None:
    whole = client.responses.create(model=MODEL, input="Hi", max_output_tokens=N, temperature=0)
    assert whole.status == "incomplete" and whole.incomplete_details is not None
    deltas, completed = [], None
    with client.responses.create(model=MODEL, input="Hi", max_output_tokens=N, temperature=0, stream=True) as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
            elif event.type == "response.completed":
                completed = event.response
    assert "".join(deltas) == whole.output_text
    assert completed is not None and completed.output_text == whole.output_text
    history = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    ]
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]
    followup = client.responses.create(model=MODEL, input=history, tools=tools, max_output_tokens=N, temperature=0)
    assert followup.usage is not None and followup.usage.input_tokens > whole.usage.input_tokens  # type: ignore[union-attr]


CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[openai.OpenAI, list[str]]]:
    """A live server whose engine says what the script holds: tool calls and thinking on cue."""
    with (
        scripted_server(tmp_path_factory.mktemp("scripted")) as (url, script),
        openai.OpenAI(base_url=f"{url}/v1", api_key="ollama", max_retries=0, timeout=60) as c,
    ):
        yield c, script  # type: ignore[misc]


def test_responses_stream_reasoning_and_function_calls_as_items(scripted: tuple[openai.OpenAI, list[str]]) -> None:
    """Each output item streams on its own (added, deltas, done), as Codex-style clients collect them."""
    client, script = scripted
    script[:] = ["<think>", "Need", " weather.", "</think>", "Checking.", CALL]
    kwargs = {"model": MODEL, "input": "Paris?", "tools": [WEATHER], "reasoning": {"effort": "high"}}
    whole = client.responses.create(**kwargs)  # type: ignore[call-overload]
    assert [item.type for item in whole.output] == ["reasoning", "message", "function_call"]
    with client.responses.stream(**kwargs) as stream:  # type: ignore[arg-type]
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [(e.output_index, e.item.type) for e in added] == [(0, "reasoning"), (1, "message"), (2, "function_call")]
    (args_done,) = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert json.loads(args_done.arguments) == {"city": "Paris"} and args_done.output_index == 2
    summary = [e for e in events if e.type == "response.reasoning_summary_text.done"]
    assert summary[0].text == "Need weather."
    # The completed response holds the streamed items themselves (the SDK checks their ids).
    assert [item.id for item in final.output] == [e.item.id for e in added]
    reasoning, _, call = final.output
    assert reasoning.summary[0].text == "Need weather." and final.output_text == "Checking."  # type: ignore[union-attr]
    assert call.type == "function_call" and call.name == "get_weather" and call.status == "completed"
    assert json.loads(call.arguments) == {"city": "Paris"} and call.call_id.startswith("call_")


def test_responses_function_call_round_trip_streamed(scripted: tuple[openai.OpenAI, list[str]]) -> None:
    client, script = scripted
    script[:] = [CALL]
    with client.responses.stream(model=MODEL, input="Paris?", tools=[WEATHER], reasoning={"effort": "none"}) as s:
        first = s.get_final_response()
    (call,) = first.output
    assert call.type == "function_call"
    script[:] = ["Sunny."]
    history: list = [{"role": "user", "content": "Paris?"}, call.model_dump(exclude_none=True)]
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "sunny"})
    with client.responses.stream(
        model=MODEL, input=history, tools=[WEATHER], reasoning={"effort": "none"}, previous_response_id=first.id
    ) as s:
        text = "".join(e.delta for e in s if e.type == "response.output_text.delta")
        second = s.get_final_response()
    assert text == "Sunny." == second.output_text and second.status == "completed"
