"""Each 2026 family's thinking and tool calls through every dialect, as the official clients read
them: a tiny model carrying the family's chat template (``tests/data/families``), served by a
live server whose engine answers in the family's output format (``scripted``), read by the
``ollama``, ``openai`` (Chat Completions and Responses) and ``anthropic`` clients, streamed and not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import ollama
import pytest
from scripted import scripted_server

from cllm_ollama.chatformat.renderer_templates import RENDERER_TEMPLATES
from cllm_ollama.engine.request import Request
from cllm_ollama.model_families import FAMILIES as FORMATS

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

TEMPLATES = Path(__file__).parents[1] / "data" / "families"
MODEL = "fam"
THOUGHT = "Need the weather."
TEXT = "Checking."
ARGS = {"city": "Paris"}
FUNCTION = {
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TOOL = {"type": "function", "function": FUNCTION}
ASK = [{"role": "user", "content": "Weather in Paris?"}]


@dataclass(frozen=True)
class Family:
    name: str
    output: str  # what the model says, in the family's format
    thinks: bool  # whether the template teaches thinking (the model then has the capability)
    forced_mark: str = ""  # what a forced call opens with, where not the family's call mark


FAMILIES = [
    Family(
        "gemma4",
        f'<|channel>thought\n{THOUGHT}<channel|>{TEXT}<|tool_call>call:get_weather{{city:<|"|>Paris<|"|>}}<tool_call|>',
        True,
    ),
    Family("ministral", f'[THINK]{THOUGHT}[/THINK]{TEXT}[TOOL_CALLS]get_weather[ARGS]{{"city": "Paris"}}', True),
    Family(  # LFM2 and LFM2.5, whose templates write past thinking back (Ollama's lfm2-thinking)
        "lfm2", f'<think>{THOUGHT}</think>{TEXT}<|tool_call_start|>[get_weather(city="Paris")]<|tool_call_end|>', True
    ),
    Family(
        "cohere",
        f"{THOUGHT}<|END_THINKING|><|START_RESPONSE|>{TEXT}<|END_RESPONSE|><|START_ACTION|>"
        '[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}}]<|END_ACTION|>',
        True,
    ),
    Family("olmo3", f'{TEXT}<function_calls>get_weather(city="Paris")</function_calls>', False),
    Family(
        "functiongemma",
        f"{TEXT}<start_function_call>call:get_weather{{city:<escape>Paris<escape>}}<end_function_call>",
        False,
    ),
    Family(
        "glimmer",
        f" to=self<|message|>{THOUGHT}<|eom|><|start|>assistant to=user<|message|>{TEXT}<|eom|>"
        '<|start|>assistant to=get_weather<|message|><atem:function_calls>\n<atem:invoke name="get_weather">\n'
        '<atem:parameter name="city">Paris</atem:parameter>\n</atem:invoke>\n</atem:function_calls><|eot|>',
        True,
        forced_mark=" to=get_weather<|message|>",
    ),
]


# Each family's engine requests, and its script (``served``).
SEEN: dict[str, list[Request]] = {}
SCRIPTS: dict[str, list[str | BaseException]] = {}


def tokens(text: str) -> list[str]:
    """The output in small pieces, as an engine streams it (marks split across pieces too)."""
    return [text[i : i + 3] for i in range(0, len(text), 3)]


@pytest.fixture(scope="module", params=FAMILIES, ids=lambda f: f.name)
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Family]]:
    family: Family = request.param
    # The ported renderers are the families' templates (test_family_templates holds them to Ollama's).
    template = RENDERER_TEMPLATES.get(family.name) or (TEMPLATES / f"{family.name}.jinja").read_text()
    root = tmp_path_factory.mktemp(family.name)
    seen = SEEN.setdefault(family.name, [])
    with scripted_server(root, MODEL, chat_template=template, n_ctx=4096, seen=seen) as (url, script):
        script[:] = tokens(family.output)
        SCRIPTS[family.name] = script
        yield url, family


def expected_thinking(family: Family) -> str:
    return THOUGHT if family.thinks else ""


def test_the_template_grants_tools_and_thinking(served: tuple[str, Family]) -> None:
    url, family = served
    caps = ollama.Client(host=url).show(MODEL).capabilities or []
    assert "tools" in caps and ("thinking" in caps) == family.thinks


@pytest.mark.parametrize("stream", [False, True])
def test_native_chat(served: tuple[str, Family], stream: bool) -> None:
    url, family = served
    client = ollama.Client(host=url)
    kwargs: dict[str, Any] = {"model": MODEL, "messages": ASK, "tools": [TOOL], "think": family.thinks or None}
    if stream:
        parts = list(client.chat(**kwargs, stream=True))
        thinking = "".join(p.message.thinking or "" for p in parts)
        content = "".join(p.message.content or "" for p in parts)
        calls = [c for p in parts for c in p.message.tool_calls or []]
    else:
        message = client.chat(**kwargs).message
        thinking, content, calls = message.thinking or "", message.content or "", message.tool_calls or []
    assert (thinking, content.strip()) == (expected_thinking(family), TEXT)
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [("get_weather", ARGS)]


def test_native_call_ids(served: tuple[str, Family]) -> None:
    """Ollama's ids (``toolCallId``): ``call_`` and 8 letters or digits, for every call, Command's
    actions too (their own "0" is dropped, as Ollama's ``ChatHandler`` overwrites it)."""
    url, _ = served
    body = {"model": MODEL, "messages": ASK, "tools": [TOOL], "stream": False}
    (call,) = httpx.post(f"{url}/api/chat", json=body, timeout=60).json()["message"]["tool_calls"]
    assert call["id"].startswith("call_") and len(call["id"]) == 13


@pytest.mark.parametrize("stream", [False, True])
def test_openai_chat_completions(served: tuple[str, Family], stream: bool) -> None:
    url, family = served
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="ollama", max_retries=0, timeout=60)
    effort = "high" if family.thinks else "none"
    kwargs: dict[str, Any] = {"model": MODEL, "messages": ASK, "tools": [TOOL], "reasoning_effort": effort}
    if stream:
        chunks = list(client.chat.completions.create(**kwargs, stream=True))
        deltas = [c.choices[0].delta for c in chunks if c.choices]
        thinking = "".join(getattr(d, "reasoning", None) or "" for d in deltas)
        content = "".join(d.content or "" for d in deltas)
        calls = [(t.function.name, json.loads(t.function.arguments)) for d in deltas for t in d.tool_calls or []]
    else:
        message = client.chat.completions.create(**kwargs).choices[0].message
        thinking, content = getattr(message, "reasoning", None) or "", message.content or ""
        calls = [(t.function.name, json.loads(t.function.arguments)) for t in message.tool_calls or []]
    assert (thinking, content.strip()) == (expected_thinking(family), TEXT)
    assert calls == [("get_weather", ARGS)]


@pytest.mark.parametrize("stream", [False, True])
def test_openai_responses(served: tuple[str, Family], stream: bool) -> None:
    url, family = served
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="ollama", max_retries=0, timeout=60)
    effort = "high" if family.thinks else "none"
    kwargs: dict[str, Any] = {"model": MODEL, "input": "Weather in Paris?", "tools": [{"type": "function", **FUNCTION}]}
    kwargs["reasoning"] = {"effort": effort}
    if stream:
        with client.responses.stream(**kwargs) as s:
            response = s.get_final_response()
    else:
        response = client.responses.create(**kwargs)
    kinds = [item.type for item in response.output]
    assert kinds == (["reasoning"] if family.thinks else []) + ["message", "function_call"]
    call = response.output[-1]
    assert (call.name, json.loads(call.arguments)) == ("get_weather", ARGS)  # type: ignore[union-attr]
    assert response.output_text.strip() == TEXT


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_messages(served: tuple[str, Family], stream: bool) -> None:
    url, family = served
    client = anthropic.Anthropic(base_url=url, api_key="ollama", max_retries=0, timeout=60)
    thinking = {"type": "enabled", "budget_tokens": 1024} if family.thinks else {"type": "disabled"}
    tool = {"name": FUNCTION["name"], "description": FUNCTION["description"], "input_schema": FUNCTION["parameters"]}
    kwargs: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "messages": ASK, "tools": [tool], "thinking": thinking}
    if stream:
        with client.messages.stream(**kwargs) as s:
            message = s.get_final_message()
    else:
        message = client.messages.create(**kwargs)
    blocks = {b.type: b for b in message.content}
    assert [b.type for b in message.content] == (["thinking"] if family.thinks else []) + ["text", "tool_use"]
    if family.thinks:
        assert blocks["thinking"].thinking == THOUGHT  # type: ignore[union-attr]
    assert blocks["text"].text.strip() == TEXT  # type: ignore[union-attr]
    assert (blocks["tool_use"].name, blocks["tool_use"].input) == ("get_weather", ARGS)  # type: ignore[union-attr]
    assert message.stop_reason == "tool_use"


@pytest.mark.parametrize("stream", [False, True])
def test_a_forced_call_is_asked_for_in_the_family_syntax(served: tuple[str, Family], stream: bool) -> None:
    """``tool_choice`` naming the function: the engine gets a grammar whose every text opens with
    the family's own call mark (the grammar's texts parse back by ``test_call_grammar``), and the
    call the model writes under it comes back as a call, with no text."""
    url, family = served
    mark = family.forced_mark or FORMATS[family.name].tool_block[0]
    script = SCRIPTS[family.name]
    played = list(script)
    script[:] = tokens(family.output[family.output.index(mark) :])
    try:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="ollama", max_retries=0, timeout=60)
        kwargs: dict[str, Any] = {"model": MODEL, "messages": ASK, "tools": [TOOL], "reasoning_effort": "none"}
        kwargs["tool_choice"] = {"type": "function", "function": {"name": "get_weather"}}
        if stream:
            deltas = [c.choices[0].delta for c in client.chat.completions.create(**kwargs, stream=True) if c.choices]
            content = "".join(d.content or "" for d in deltas)
            calls = [(t.function.name, json.loads(t.function.arguments)) for d in deltas for t in d.tool_calls or []]
        else:
            message = client.chat.completions.create(**kwargs).choices[0].message
            content = message.content or ""
            calls = [(t.function.name, json.loads(t.function.arguments)) for t in message.tool_calls or []]
    finally:
        script[:] = played
    assert (content.strip(), calls) == ("", [("get_weather", ARGS)])
    grammar = SEEN[family.name][-1].sampling.grammar or ""
    root = grammar.splitlines()[0]
    assert root.startswith("root ::= ") and json.dumps(mark)[:-1] in root, root
    first = root.split('"', 1)[1]  # every call opens with the mark: the first literal begins with it
    assert first.startswith(json.dumps(mark)[1:-1]), root


def test_a_format_holds_the_answer_after_the_thinking(served: tuple[str, Family]) -> None:
    """A chat with a format to a model that thinks: it thinks first, the grammar holding the output
    only after the thinking's closing tag, as Ollama's ChatHandler applies a format once the thinking
    ends; with think false, or a model whose thinking ends at no one tag (glimmer's) or at a tag its
    vocabulary does not hold as one token (the test vocabulary, Qwen's, holds only </think>), the
    format holds it from its first token and the model answers directly."""
    url, family = served
    client = ollama.Client(host=url)
    message = client.chat(model=MODEL, messages=ASK, format="json").message
    tag = FORMATS[family.name].think_tags[1] if family.thinks and family.name != "glimmer" else ""
    close = tag if tag == "</think>" else ""
    assert SEEN[family.name][-1].sampling.grammar_after == close
    assert (message.thinking or "") == (THOUGHT if close else "")
    client.chat(model=MODEL, messages=ASK, format="json", think=False)
    assert SEEN[family.name][-1].sampling.grammar_after == ""


NO_TOOLS_TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
GO_TEMPLATE = "{{ if .Tools }}Tools: {{ .Tools }}\n{{ end }}{{ range .Messages }}{{ .Role }}: {{ .Content }}\n{{ end }}"


def test_a_go_template_with_tools_and_a_named_parser(tmp_path: Path) -> None:
    """A model created with a ``TEMPLATE`` that uses ``.Tools`` can use tools (Ollama grants them from
    the template's variables), and ``parser`` picks the output parser whatever the template says;
    ``/api/show`` reports the parser and renderer as Ollama's ShowResponse does."""
    family = FAMILIES[0]  # Gemma 4's output, read by the parser the config names
    with scripted_server(tmp_path, MODEL, chat_template=NO_TOOLS_TEMPLATE, n_ctx=4096) as (url, script):
        client = ollama.Client(host=url)
        assert client.show(MODEL).capabilities == ["completion"]
        with pytest.raises(ollama.ResponseError, match="does not support tools"):
            client.chat(model=MODEL, messages=ASK, tools=[TOOL])
        client.create(model="plain", from_=MODEL, template=GO_TEMPLATE)
        assert client.show("plain").capabilities == ["completion", "tools"]
        body = {"model": "named", "from": MODEL, "template": GO_TEMPLATE, "parser": "gemma4", "renderer": "gemma4"}
        assert httpx.post(f"{url}/api/create", json=body | {"stream": False}, timeout=60).json() == {
            "status": "success"
        }
        shown = httpx.post(f"{url}/api/show", json={"model": "named"}, timeout=60).json()
        assert (shown["parser"], shown["renderer"]) == ("gemma4", "gemma4")
        assert "RENDERER gemma4\nPARSER gemma4\n" in shown["modelfile"]
        assert shown["capabilities"] == ["completion", "tools", "thinking"]
        script[:] = tokens(family.output)
        message = client.chat(model="named", messages=ASK, tools=[TOOL], think=True).message
        assert (message.thinking, message.content) == (THOUGHT, TEXT)
        assert [(c.function.name, dict(c.function.arguments)) for c in message.tool_calls or []] == [
            ("get_weather", ARGS)
        ]
        message = client.chat(model="plain", messages=ASK, tools=[TOOL]).message  # no parser named: Hermes
        assert message.content == family.output and not message.tool_calls


def test_json_that_is_no_call_streams_as_it_comes(tmp_path: Path) -> None:
    """An answer that opens like an untagged call (Codex's second turn) streams from its first key
    on: each token after it is its own chunk, not one burst when the JSON closes."""
    answer = ['{"', "command", '":', ' "', "ls", " -la", '",', ' "', "why", '":', ' "', "list", '"}', " Done", "."]
    with scripted_server(tmp_path, MODEL) as (url, script):
        script[:] = answer
        body = {"model": MODEL, "messages": ASK, "tools": [TOOL], "think": False}
        parts = list(ollama.Client(host=url).chat(**body, stream=True))
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="ollama", max_retries=0, timeout=60)
        tools: Any = [{"type": "function", **FUNCTION}]
        with client.responses.stream(model=MODEL, input="ls?", tools=tools, reasoning={"effort": "none"}) as s:
            deltas = [e.delta for e in s if e.type == "response.output_text.delta"]
    contents = [p.message.content for p in parts if p.message.content]
    assert "".join(contents) == "".join(deltas) == "".join(answer)
    assert len(contents) == len(deltas) == len(answer) - 1  # only '{"' waited, for the key after it


def test_a_glm_ocr_parser_s_leading_thinking_and_a_passthrough_parser_s_raw_output(tmp_path: Path) -> None:
    """Ollama's ``glm-ocr`` parser takes a leading ``<think>`` block as thinking though the model
    does not think, and ``passthrough`` leaves the output as written; a raw ``/api/generate`` is
    read by no model parser, as Ollama reads it."""
    output = "<think>A receipt.</think>Total: 12"
    with scripted_server(tmp_path, MODEL, chat_template=NO_TOOLS_TEMPLATE, n_ctx=4096) as (url, script):
        client = ollama.Client(host=url)
        for name, parser, granted in (("ocr", "glm-ocr", ["tools"]), ("plain", "passthrough", [])):
            body = {"model": name, "from": MODEL, "parser": parser, "stream": False}
            assert httpx.post(f"{url}/api/create", json=body, timeout=60).json() == {"status": "success"}
            assert client.show(name).capabilities == ["completion", *granted]  # thinking from neither
        for stream in (False, True):
            script[:] = tokens(output)
            parts = client.chat(model="ocr", messages=ASK, stream=stream)
            parts = list(parts) if stream else [parts]
            thought = "".join(p.message.thinking or "" for p in parts)
            assert (thought, "".join(p.message.content for p in parts)) == ("A receipt.", "Total: 12")
            script[:] = tokens(output)
            assert client.chat(model="plain", messages=ASK).message.content == output
            script[:] = tokens(output)
            answer = client.generate(model="ocr", prompt="Read it.", raw=True)
            assert (answer.response, answer.thinking) == (output, None)
