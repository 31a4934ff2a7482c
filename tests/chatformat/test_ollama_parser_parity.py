"""Where the parsers once parted from Ollama's (``model/parsers``, ``tools/tools.go``,
``server/routes.go``): each case is the output Ollama's parser reads, fed whole and a character at
a time, and what Ollama makes of it."""

from __future__ import annotations

from typing import Any

import pytest

from cllm_ollama.api.tool_calls import tool_calls_json
from cllm_ollama.chatformat.call_syntaxes import typed_tool_value
from cllm_ollama.chatformat.family_parsers import parser_for
from cllm_ollama.chatformat.jinja import render_chat
from cllm_ollama.chatformat.parsers import Delta
from cllm_ollama.chatformat.renderer_templates import GEMMA4, GEMMA4_LARGE


def tool(name: str, properties: dict[str, Any], required: list[str] | None = None, about: str = "") -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "required": required or []}
    return {"type": "function", "function": {"name": name, "description": about, "parameters": parameters}}


WEATHER = tool("get_weather", {"city": {"type": "string"}}, ["city"])
PARIS = [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]


def parsed(
    text: str, *, tools: list[dict[str, Any]] | None = None, template: str | None = None, **config: Any
) -> Delta:
    """What ``parser_for`` makes of ``text``, asserted the same fed whole and a character at a time."""
    results = []
    for chunks in ([text], list(text)):
        parser = parser_for(template, tools=[WEATHER] if tools is None else tools, **{"thinking": False, **config})
        out = Delta()
        for chunk in chunks:
            out.add(parser.feed(chunk))
        results.append(out.add(parser.finish()))
    assert results[0] == results[1]
    return results[0]


# --- A call opened inside the thinking ends it (Qwen35Parser.eat, Qwen3Parser.eat, Qwen3VLParser.eat,
# Nemotron3NanoParser.Add, LagunaParser.consumeThinking)

QWEN_XML = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
HERMES = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
GLM_XML = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"


@pytest.mark.parametrize(
    ("parser", "call"),
    [
        ("qwen3.5", QWEN_XML),
        ("ornith", QWEN_XML),
        ("nemotron-3-nano", QWEN_XML),
        ("nemotron-3.5-nano", QWEN_XML),
        ("qwen3-thinking", HERMES),
        ("qwen3-vl-thinking", HERMES),
        ("laguna", GLM_XML),
    ],
)
def test_a_call_written_in_the_thinking_ends_it(parser: str, call: str) -> None:
    got = parsed("Let me check.\n" + call, thinking=True, prompt="<|im_start|>assistant\n<think>\n", parser=parser)
    assert got == Delta(thinking="Let me check.\n", tool_calls=PARIS)


def test_a_tag_that_may_open_a_call_waits_while_thinking() -> None:
    parser = parser_for(None, thinking=True, tools=[WEATHER], prompt="<think>\n", parser="qwen3.5")
    assert parser.feed("Let me check. <tool_c") == Delta(thinking="Let me check. ")
    assert parser.feed("ake is a lie.") == Delta(thinking="<tool_cake is a lie.")
    assert parser.feed("</think>Done.").add(parser.finish()) == Delta(content="Done.")


def test_glm_s_thinking_ends_at_its_closing_tag_only() -> None:
    """GLM46Parser (GLM 4.7's) looks for ``</think>`` alone: a call inside the thinking is thinking."""
    text = "Let me check.\n" + GLM_XML
    assert parsed(text, thinking=True, prompt="<think>", parser="glm-4.7") == Delta(thinking=text)


# --- Gemma 4 after a tool result (Gemma4Parser.Init, Gemma4Renderer.Render)

Q = '<|"|>'
BASH = tool("bash", {"command": {"type": "string", "description": "Cmd"}}, ["command"], about="Run")
BASH_DECLARATION = (
    f"<|tool>declaration:bash{{description:{Q}Run{Q},parameters:{{properties:{{command:{{description:{Q}Cmd{Q},"
    f"type:{Q}STRING{Q}}}}},required:[{Q}command{Q}],type:{Q}OBJECT{Q}}}}}<tool|>"
)
LISTED = [
    {"role": "user", "content": "List files"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "bash", "arguments": {"command": "ls"}}}],
    },
    {"role": "tool", "tool_name": "bash", "content": "file1.txt"},
]
RESULT = (
    f"<|turn>user\nList files<turn|>\n<|turn>model\n<|tool_call>call:bash{{command:{Q}ls{Q}}}<tool_call|>"
    f"<|tool_response>response:bash{{value:{Q}file1.txt{Q}}}<tool_response|>"
)


@pytest.mark.parametrize("template", [GEMMA4, GEMMA4_LARGE])
@pytest.mark.parametrize(
    ("thinking", "expected"),
    [  # gemma4_reference_test.go: terminal_tool_response_adds_thinking_cue_when_thinking_enabled, tool_call_response
        (True, "<bos><|turn>system\n<|think|>\n" + BASH_DECLARATION + "<turn|>\n" + RESULT + "<|channel>thought\n"),
        (False, "<bos><|turn>system\n" + BASH_DECLARATION + "<turn|>\n" + RESULT),
    ],
)
def test_after_a_tool_result_gemma4_goes_on_in_the_model_s_turn(template: str, thinking: bool, expected: str) -> None:
    assert render_chat(template, LISTED, tools=[BASH], enable_thinking=thinking, bos_token="<bos>") == expected


def test_after_a_tool_result_gemma4_s_output_starts_in_the_thinking() -> None:
    prompt = render_chat(GEMMA4, LISTED, tools=[BASH], enable_thinking=True, bos_token="<bos>")
    got = parsed("The tool says sunny.<channel|>It is sunny", thinking=True, prompt=prompt, parser="gemma4")
    assert got == Delta(thinking="The tool says sunny.", content="It is sunny")
    prompt = render_chat(GEMMA4, LISTED, tools=[BASH], enable_thinking=False, bos_token="<bos>")
    assert parsed("It is sunny", prompt=prompt, parser="gemma4") == Delta(content="It is sunny")


# --- Hermes calls as tools.Parser.Add reads them

TIME = tool("get_time", {})


def test_each_call_object_in_one_block_is_a_call() -> None:
    text = (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
        '{"name": "get_time", "arguments": {}}\n</tool_call>'
    )
    time = {"function": {"name": "get_time", "arguments": {}}}
    assert parsed(text, tools=[WEATHER, TIME]) == Delta(tool_calls=[*PARIS, time])


@pytest.mark.parametrize("end", ["", "\n", "\n</tool_", "</tool_call"])
def test_a_call_needs_no_closing_tag_at_the_end(end: str) -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}' + end
    assert parsed(text) == Delta(tool_calls=PARIS)


def test_a_call_cut_short_stays_text() -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa'
    assert parsed(text) == Delta(content=text)


# --- Arguments typed as parseValue / parseTypedToolValue type them (qwen3coder.go)

TYPED_CASES = [
    ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "12345", "12345"),
    ({"description": "no type"}, "12", "12"),
    ({"type": "boolean"}, "True", True),
    ({"type": "boolean"}, "yes", False),
    ({"type": ["boolean", "string"]}, "yes", "yes"),
    ({"type": "string"}, "null", None),
    ({"type": "integer"}, "3.0", "3.0"),
    ({"type": ["integer", "number"]}, "3.5", 3.5),
    ({"type": "number"}, "3.0", 3),
    ({"type": "number"}, "1e400", "1e400"),
    ({"type": "integer"}, "99999999999999999999", "99999999999999999999"),
    ({"type": "array"}, "[1, 2]", [1, 2]),
    ({"type": "object"}, "[1, 2]", "[1, 2]"),
    ({"anyOf": [{"type": "object"}, {"type": "string"}]}, '{"a": 1}', {"a": 1}),
]


@pytest.mark.parametrize(("schema", "raw", "expected"), TYPED_CASES)
def test_qwen3_coder_s_arguments_are_typed_as_ollama_types_them(schema: Any, raw: str, expected: Any) -> None:
    text = f"<tool_call>\n<function=f>\n<parameter=a>\n{raw}\n</parameter>\n</function>\n</tool_call>"
    (call,) = parsed(text, tools=[tool("f", {"a": schema})], parser="qwen3-coder").tool_calls
    assert call["function"]["arguments"] == {"a": expected}


@pytest.mark.parametrize(("schema", "raw", "expected"), TYPED_CASES)
def test_glm_s_arguments_are_typed_as_ollama_types_them(schema: Any, raw: str, expected: Any) -> None:
    text = f"<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>{raw}</arg_value>\n</tool_call>"
    (call,) = parsed(text, tools=[tool("f", {"a": schema})], parser="glm-4.7").tool_calls
    assert call["function"]["arguments"] == {"a": expected}


def test_one_newline_is_trimmed_from_each_end_of_a_value() -> None:
    text = "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>\n\nline\n\n</arg_value>\n</tool_call>"
    (call,) = parsed(text, tools=[tool("f", {"a": {"type": "string"}})], parser="glm-4.7").tool_calls
    assert call["function"]["arguments"] == {"a": "\nline\n"}


def test_an_undeclared_tool_s_arguments_stay_text() -> None:
    text = "<tool_call>\n<function=other>\n<parameter=n>\n12\n</parameter>\n</function>\n</tool_call>"
    assert parsed(text, parser="qwen3.5").tool_calls == [{"function": {"name": "other", "arguments": {"n": "12"}}}]


# --- GLM's tags repaired in a closed call (repairGLM46XML), never in one the output ended inside
# (finalizeToolCall)

ZIP = tool("f", {"zip": {"type": "string"}}, ["zip"])


@pytest.mark.parametrize(
    "block",
    [
        "f\n<arg_key>zip</arg_key>\n<arg_value>Paris",
        "f\n<arg_key>zip\n<arg_value>Paris</arg_value>",
        "f\nzip</arg_key>\n<arg_value>Paris</arg_value>",
        "f <arg_key>zip</arg_key>Paris</arg_value>",
    ],
)
def test_a_glm_call_missing_a_tag_is_repaired(block: str) -> None:
    got = parsed(f"<tool_call>{block}</tool_call>", tools=[ZIP], parser="glm-4.7")
    assert got == Delta(tool_calls=[{"function": {"name": "f", "arguments": {"zip": "Paris"}}}])


def test_glm_keys_and_values_pair_in_order() -> None:
    text = (
        "<tool_call>f<arg_key>a</arg_key><arg_key>b</arg_key>"
        "<arg_value>1</arg_value><arg_value>2</arg_value></tool_call>"
    )
    got = parsed(text, tools=[tool("f", {})], parser="glm-4.7")
    assert got.tool_calls == [{"function": {"name": "f", "arguments": {"a": "1", "b": "2"}}}]


@pytest.mark.parametrize("end", ["", "\n", "\n</tool_"])
def test_a_glm_call_the_output_ends_inside_is_read_whole(end: str) -> None:
    text = f"<tool_call>f\n<arg_key>zip</arg_key>\n<arg_value>Paris</arg_value>{end}"
    got = parsed(text, tools=[ZIP], parser="glm-4.7")
    assert got == Delta(tool_calls=[{"function": {"name": "f", "arguments": {"zip": "Paris"}}}])


@pytest.mark.parametrize(
    ("text", "tools"),
    [
        ("<tool_call>f\n<arg_key>zip</arg_key>\n<arg_value>Par", [ZIP]),  # an argument cut short
        ("<tool_call>f\n", [ZIP]),  # a required argument missing
        ("<tool_call>g\n<arg_key>zip</arg_key>\n<arg_value>Paris</arg_value>", [ZIP]),  # no such tool
    ],
)
def test_a_glm_call_the_output_ends_inside_that_is_not_whole_stays_text(text: str, tools: Any) -> None:
    assert parsed(text, tools=tools, parser="glm-4.7") == Delta(content=text)


# --- Every call gets Ollama's own id (ChatHandler's toolCallId), Command's too


def test_command_s_calls_get_ollama_s_ids_not_the_model_s() -> None:
    action = (
        '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}}]'
        "<|END_ACTION|>"
    )
    turns = [parsed(action, parser="cohere").tool_calls for _ in range(2)]
    assert turns == [PARIS, PARIS]
    ids = [call["id"] for calls in turns for call in tool_calls_json(calls)]
    assert all(i.startswith("call_") and len(i) == 13 for i in ids) and ids[0] != ids[1]


def test_a_number_argument_that_is_no_json_number_stays_text() -> None:
    """NaN and the infinities parse in Go but no JSON writes them (Ollama's reply would fail;
    orjson writes null): left as the text, or the next declared type."""
    assert typed_tool_value("nan", ["number"]) == "nan"
    assert typed_tool_value("-Infinity", ["number", "string"]) == "-Infinity"
    assert typed_tool_value("1e3", ["number"]) == 1000


def test_without_tools_a_call_written_in_the_thinking_stays_thinking() -> None:
    """No call is read without tools: the text stays where it was written, not raw content."""
    parser = parser_for(None, thinking=True, tools=None, parser="qwen3-thinking", prompt="<think>\n")
    out = parser.feed('hmm <tool_call>{"name":"x"}</tool_call>')
    out.add(parser.finish())
    assert (out.thinking, out.content) == ('hmm <tool_call>{"name":"x"}</tool_call>', "")
