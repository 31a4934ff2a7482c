"""Per-family output parsers, on outputs written as each family writes them, in every split."""

from __future__ import annotations

from typing import Any

import pytest
from test_parsers import CONFIGS, FORMAT_SAMPLES

from cllm_ollama.chatformat.family_parsers import parser_for, thinking_close
from cllm_ollama.chatformat.parsers import Delta, OutputParser, ToolFormat, tool_format_for_template

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}},
        },
    },
}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
TOOLS = [WEATHER, TIME]

# Marks each family's chat template carries (what ``parser_for`` looks for).
QWEN25 = "{{- '<tool_call>\\n' }}<|im_start|>"
QWEN3_CODER = "<tool_call>\n<function={{ name }}>\n<parameter={{ key }}>\n"
GLM45 = "<tool_call>{{ name }}\n<arg_key>{{ k }}</arg_key>\n<arg_value>{{ v }}</arg_value>"
DEEPSEEK = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
HARMONY = "<|start|>assistant<|channel|>final<|message|>"


def call(name: str, **arguments: object) -> dict[str, Any]:
    return {"function": {"name": name, "arguments": arguments}}


def parse(template: str, chunks: list[str], **kwargs: Any) -> Delta:
    parser = parser_for(template, **{"thinking": False, "tools": TOOLS, **kwargs})
    out = Delta()
    for chunk in chunks:
        out.add(parser.feed(chunk))
    return out.add(parser.finish())


def whole(template: str, text: str, **kwargs: Any) -> Delta:
    return parse(template, [text], **kwargs)


# Qwen2.5-Coder-0.5B-Instruct's real answer to "What is the weather in Paris?" with get_weather.
BARE = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
QWEN3_CODER_OUT = (
    "I'll check both.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n<parameter=metric>\ntrue\n</parameter>\n</function>\n</tool_call>\n"
    "<tool_call>\n<function=get_time>\n</function>\n</tool_call>"
)
GLM_OUT = (
    "<think>Need the weather.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
    "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>"
)
DEEPSEEK_R1_OUT = (
    "<think>\nWeather.\n</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
    '```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n'
    "```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
)
DEEPSEEK_V31_OUT = (
    'Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}'
    "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
)
HARMONY_CALL = (
    "<|channel|>analysis<|message|>User wants weather. Call tool.<|end|><|start|>assistant<|channel|>commentary "
    'to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>'
)
HARMONY_ANSWER = "<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>Hi there!"

CASES = [
    (QWEN25, BARE, {}, Delta(tool_calls=[call("get_weather", city="Paris")])),
    (
        QWEN25,
        BARE + "\n" + '{"name": "get_time", "arguments": {}}',
        {},
        Delta(tool_calls=[call("get_weather", city="Paris"), call("get_time")]),
    ),
    (QWEN25, '{"name": "Bob", "arguments": {}}', {}, Delta(content='{"name": "Bob", "arguments": {}}')),
    (QWEN25, '{"answer": 4}', {}, Delta(content='{"answer": 4}')),
    (
        QWEN3_CODER,
        QWEN3_CODER_OUT,
        {},
        Delta(
            content="I'll check both.\n",
            tool_calls=[call("get_weather", city="Paris", days=3, metric=True), call("get_time")],
        ),
    ),
    (QWEN3_CODER, "<tool_call>oops</tool_call> ok", {}, Delta(content="<tool_call>oops</tool_call> ok")),
    (
        GLM45,
        GLM_OUT,
        {"thinking": True},
        Delta(thinking="Need the weather.", tool_calls=[call("get_weather", city="Paris", days=2)]),
    ),
    (
        DEEPSEEK,
        DEEPSEEK_R1_OUT,
        {"thinking": True},
        Delta(thinking="Weather.\n", tool_calls=[call("get_weather", city="Paris"), call("get_time")]),
    ),
    (DEEPSEEK, DEEPSEEK_V31_OUT, {}, Delta(content="Sure.", tool_calls=[call("get_weather", city="Paris")])),
    (
        HARMONY,
        HARMONY_CALL,
        {"thinking": True},
        Delta(thinking="User wants weather. Call tool.", tool_calls=[call("get_weather", city="Paris")]),
    ),
    (HARMONY, HARMONY_ANSWER, {"thinking": True}, Delta(thinking="Simple.", content="Hi there!")),
    (HARMONY, HARMONY_ANSWER, {"thinking": False}, Delta(content="Hi there!")),
    (HARMONY, "Just text.", {}, Delta(content="Just text.")),
]


@pytest.mark.parametrize(("template", "text", "config", "expected"), CASES)
def test_family_output(template: str, text: str, config: dict[str, Any], expected: Delta) -> None:
    assert whole(template, text, **config) == expected


@pytest.mark.parametrize(("template", "text", "config", "expected"), CASES)
def test_every_split_gives_the_same_result(template: str, text: str, config: dict[str, Any], expected: Delta) -> None:
    assert parse(template, list(text), **config) == expected
    for i in range(len(text) + 1):
        assert parse(template, [text[:i], text[i:]], **config) == expected, i
    for i in range(0, len(text), 7):
        for j in range(i, len(text), 11):
            assert parse(template, [text[:i], text[i:j], text[j:]], **config) == expected, (i, j)


def test_bare_json_without_tools_is_content() -> None:
    assert whole(QWEN25, BARE, tools=None) == Delta(content=BARE)


def test_text_outside_calls_streams_at_once() -> None:
    parser = parser_for(QWEN3_CODER, thinking=False, tools=TOOLS)
    assert parser.feed("Hello <tool").content == "Hello "
    assert parser.feed("_c").content == ""
    assert parser.feed("ake").content == "<tool_cake"


# The JSON families (Hermes, Llama, Mistral), composed (reasoning splitter, then the tool parser),
# give what the one-pass parser gives, in every split.
NAMED = [{"type": "function", "function": {"name": n}} for n in ("f", "g", "get_weather", "write")]
JSON_FAMILIES = {
    ToolFormat.HERMES: "<tool_call>",
    ToolFormat.LLAMA: "<|python_tag|>",
    ToolFormat.MISTRAL: "[TOOL_CALLS]",
}


@pytest.mark.parametrize("config", [c for c in CONFIGS if c["tools"]], ids=str)
@pytest.mark.parametrize(("tool_format", "text"), FORMAT_SAMPLES)
def test_json_families_composed_equal_one_pass(tool_format: ToolFormat, text: str, config: dict[str, Any]) -> None:
    template = JSON_FAMILIES[tool_format]
    assert tool_format_for_template(template) is tool_format
    prompt = "<think>" if config["start_in_thinking"] else ""
    names = frozenset(t["function"]["name"] for t in NAMED)
    one_pass = OutputParser(**config, tool_format=tool_format, tool_names=names)
    expected = one_pass.feed(text).add(one_pass.finish())

    def composed(chunks: list[str]) -> Delta:
        parser = parser_for(template, thinking=config["thinking"], tools=NAMED, prompt=prompt)
        out = Delta()
        for chunk in chunks:
            out.add(parser.feed(chunk))
        return out.add(parser.finish())

    assert composed([text]) == expected
    for i in range(len(text) + 1):
        assert composed([text[:i], text[i:]]) == expected, i


@pytest.mark.parametrize("tools", [None, TOOLS], ids=["alone", "with-tools"])
def test_glm_ocr_s_leading_think_block_is_thinking_though_it_does_not_think(tools: Any) -> None:
    """Ollama's ``glm-ocr`` parser is GLM 4.6's with thinking off, which still takes a leading
    ``<think>`` block as thinking (a request that did not ask for it gets it in ``thinking``); a
    later one stays content. GLM 4.7's with thinking off starts as GLM 4.6's does; a template's
    family with no parser named drops only an empty block."""
    text = "<think>The page is a receipt.</think>\n\nTotal: 12 <think>x</think>"
    for chunks in ([text], list(text)):
        got = parse(GLM45, chunks, tools=tools, parser="glm-ocr")
        assert (got.thinking, got.content, got.tool_calls) == (
            "The page is a receipt.",
            "Total: 12 <think>x</think>",
            [],
        )
    assert parse(GLM45, [text], tools=tools, parser="glm-4.7").thinking == "The page is a receipt."
    assert parse(GLM45, [text], tools=tools).content == text


def test_the_passthrough_parser_leaves_the_output_as_written() -> None:
    """Ollama's ``passthrough`` parser, named by a Modelfile: whatever the template's family, the
    output is all content, an empty think block and a call's tags included."""
    text = '<think></think>\n<tool_call>{"name": "get_time", "arguments": {}}</tool_call>'
    for template in (QWEN25, GLM45):
        got = parse(template, list(text), parser="passthrough")
        assert (got.content, got.thinking, got.tool_calls) == (text, "", [])


@pytest.mark.parametrize(
    ("parser", "close"),
    [
        (None, "</think>"),  # the generic splitter: Qwen3, DeepSeek-R1...
        ("cohere", "<|END_THINKING|>"),
        ("gemma4", "<channel|>"),
        ("harmony", None),  # channels, not one tag
        ("glimmer", None),
        ("passthrough", None),
    ],
)
def test_the_thinking_closes_at_the_tag_its_parser_reads(parser: str | None, close: str | None) -> None:
    """What a format is held after (``thinking_close``): the tag ``parser_for``'s parser ends the
    thinking at, where it is one."""
    assert thinking_close("{{ messages }}", parser) == close
