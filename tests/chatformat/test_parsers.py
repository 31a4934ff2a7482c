from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from cllm_ollama.chatformat.parsers import (
    Delta,
    OutputParser,
    ToolFormat,
    hold_back,
    prompt_opens_thinking,
    tool_format_for_template,
)


def _merge(deltas: list[Delta]) -> Delta:
    return Delta(
        content="".join(d.content for d in deltas),
        thinking="".join(d.thinking for d in deltas),
        tool_calls=[call for d in deltas for call in d.tool_calls],
    )


def parse(chunks: list[str], **kwargs: Any) -> Delta:
    parser = OutputParser(**kwargs)
    return _merge([parser.feed(chunk) for chunk in chunks] + [parser.finish()])


def whole(text: str, **kwargs: Any) -> Delta:
    return parse([text], **kwargs)


def call(name: str, **arguments: object) -> dict[str, Any]:
    return {"function": {"name": name, "arguments": arguments}}


THINKING = "<think>\nThe user wants 2+2.\n</think>\n\nThe answer is 4."
TOOL_CALLS = (
    "<think>\nNeed weather.\n</think>\n\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Rome\\"}"}\n</tool_call>'
)


def test_thinking_then_content() -> None:
    assert whole(THINKING, thinking=True, tools=False) == Delta(
        content="The answer is 4.", thinking="The user wants 2+2.\n"
    )


def test_leading_whitespace_before_the_opening_tag() -> None:
    assert whole(" \n<think>x</think>y", thinking=True, tools=False) == Delta(content="y", thinking="x")


def test_thinking_on_but_no_think_block() -> None:
    assert whole("\nHello <think>x</think>", thinking=True, tools=False) == Delta(content="\nHello <think>x</think>")


def test_unclosed_thinking_is_all_thinking() -> None:
    assert whole("<think>hmm </thin", thinking=True, tools=False) == Delta(thinking="hmm </thin")


def test_start_in_thinking() -> None:
    text = "The user wants 2+2.\n</think>\n\nThe answer is 4."
    expected = Delta(content="The answer is 4.", thinking="The user wants 2+2.\n")
    assert whole(text, thinking=True, tools=False, start_in_thinking=True) == expected
    # A model that repeats the opening tag anyway.
    assert whole("\n<think>\n" + text, thinking=True, tools=False, start_in_thinking=True) == expected
    assert whole("<thi", thinking=True, tools=False, start_in_thinking=True) == Delta(thinking="<thi")


def test_thinking_off_drops_only_a_leading_empty_block() -> None:
    assert whole("<think>\n\n</think>\n\nHi", thinking=False, tools=False) == Delta(content="Hi")
    assert whole("<think>\n\n</think>\n\n", thinking=False, tools=False) == Delta()
    assert whole(THINKING, thinking=False, tools=False) == Delta(content=THINKING)
    assert whole("\n\nHi <think></think>", thinking=False, tools=False) == Delta(content="\n\nHi <think></think>")
    assert whole("<think>\n\n</thi", thinking=False, tools=False) == Delta(content="<think>\n\n</thi")


def test_custom_tags() -> None:
    text = "<|thought|>a<|/thought|>b"
    got = whole(text, thinking=True, tools=False, think_open="<|thought|>", think_close="<|/thought|>")
    assert got == Delta(content="b", thinking="a")


def test_tool_calls() -> None:
    assert whole(TOOL_CALLS, thinking=True, tools=True) == Delta(
        thinking="Need weather.\n",
        tool_calls=[call("get_weather", city="Paris"), call("get_weather", city="Rome")],
    )


def test_an_integer_past_64_bits_in_a_call_is_go_s_float64() -> None:
    # orjson refuses to encode such an int (a 500 in every dialect); Ollama's calls hold float64s.
    body = '{"name": "lookup", "arguments": {"id": 123456789012345678901, "ok": 18446744073709551615, "x": [-%s]}}'
    huge = "9" * 400
    calls = whole(f"<tool_call>\n{body % huge}\n</tool_call>", thinking=False, tools=True).tool_calls
    arguments = calls[0]["function"]["arguments"]
    assert arguments == {"id": 1.2345678901234568e20, "ok": 18446744073709551615, "x": [float("-inf")]}
    assert orjson.dumps(arguments) == b'{"id":1.2345678901234568e+20,"ok":18446744073709551615,"x":[null]}'


def test_text_around_tool_calls() -> None:
    text = 'Let me check.\n<tool_call>{"name": "f", "arguments": {}}</tool_call>\n\nDone.'
    assert whole(text, thinking=False, tools=True) == Delta(content="Let me check.\n\n\nDone.", tool_calls=[call("f")])
    nested = '<tool_call>{"name": "f", "arguments": {"q": {"deep": [1, "x"]}}}</tool_call>  '
    assert whole(nested, thinking=False, tools=True) == Delta(tool_calls=[call("f", q={"deep": [1, "x"]})])


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "f", "arguments": {broken}',
        '{"arguments": {}}',
        '["f"]',
        '{"name": "f", "arguments": "not json"}',
        '{"name": "f", "arguments": [1]}',
    ],
)
def test_unparsable_tool_call_is_content(body: str) -> None:
    text = f"A <tool_call>{body}</tool_call> B"
    assert whole(text, thinking=False, tools=True) == Delta(content=text)


def test_a_list_of_calls_in_the_tags() -> None:
    text = '<tool_call>[{"name": "f", "arguments": {}}, {"name": "g", "arguments": {"a": 1}}]</tool_call>'
    assert whole(text, thinking=False, tools=True) == Delta(tool_calls=[call("f"), call("g", a=1)])
    for body in ("[]", '[{"name": "f", "arguments": {}}, 1]'):
        text = f"<tool_call>{body}</tool_call>"
        assert whole(text, thinking=False, tools=True) == Delta(content=text)


LLAMA = {"thinking": False, "tools": True, "tool_format": ToolFormat.LLAMA}
MISTRAL = {"thinking": False, "tools": True, "tool_format": ToolFormat.MISTRAL}


def test_llama_tool_calls() -> None:
    text = '\n{"name": "f", "parameters": {"q": "x"}}; {"name": "g", "parameters": "{\\"a\\": 1}"}\n'
    assert whole(text, **LLAMA) == Delta(tool_calls=[call("f", q="x"), call("g", a=1)])
    text = '<|python_tag|>{"name": "f", "parameters": {}}\n\nI called f.'
    assert whole(text, **LLAMA) == Delta(content="\n\nI called f.", tool_calls=[call("f")])


@pytest.mark.parametrize(
    "text",
    [
        'Let me call {"name": "f", "parameters": {}}',
        '{"name": "f", "parameters": {broken}}',
        '  {"answer": 42}',
        '<|python_tag|>brave_search.call(query="x")',
        '{"name": "f", "parameters": {}',
        "<|python_tag|>",
    ],
)
def test_llama_text_that_is_no_call_is_content(text: str) -> None:
    """Calls only open the content; what does not parse, or never closes, is the model's answer."""
    assert whole(text, **LLAMA) == Delta(content=text)


def test_mistral_tool_calls() -> None:
    text = 'Sure.[TOOL_CALLS] [{"name": "f", "arguments": {"a": "]"}}, {"name": "g", "arguments": {}}]'
    assert whole(text, **MISTRAL) == Delta(content="Sure.", tool_calls=[call("f", a="]"), call("g")])
    # The tokenizer may drop the control-token tag: a bare list opening the content is a call too.
    assert whole(' [{"name": "f", "arguments": {}}]', **MISTRAL) == Delta(tool_calls=[call("f")])
    for text in ("[1] A footnote.", "x [TOOL_CALLS][{bad}]", 'x [{"name": "f", "arguments": {}}]'):
        assert whole(text, **MISTRAL) == Delta(content=text)


def test_untagged_calls_hold_back_only_what_may_be_a_call() -> None:
    parser = OutputParser(**LLAMA)
    assert parser.feed(" ") == Delta()
    assert parser.feed("{") == Delta()
    assert parser.feed("}") == Delta(content=" {}")
    assert parser.feed(" {") == Delta(content=" {")
    parser = OutputParser(**LLAMA)
    assert parser.feed('{"na') == Delta()
    assert parser.feed('me": "f"}') == Delta(tool_calls=[call("f")])
    assert parser.feed(";\n") == Delta()
    assert parser.feed("<|py") == Delta()
    assert parser.feed("x") == Delta(content=";\n<|pyx")
    parser = OutputParser(**MISTRAL)
    assert parser.feed("[") == Delta()
    assert parser.feed("TOOL") == Delta()
    assert parser.feed("S") == Delta(content="[TOOLS")
    assert parser.finish() == Delta()


def test_tool_format_for_template() -> None:
    qwen = "{%- if tools %}<tools></tools> ... <tool_call>\n{{ tool_call | tojson }}\n</tool_call>"
    llama = '{{- "Environment: ipython\\n" }} ... "parameters": dictionary of argument name'
    hermes_llama = '<|start_header_id|>... "parameters": dictionary ... <tool_call>'
    mistral = '{{- "[AVAILABLE_TOOLS]" }} ... {{- "[TOOL_CALLS][" }}'
    cohere = '{"name": "{{ tool.name }}", "parameters": {{ tool.parameters | tojson }}}'
    assert tool_format_for_template(qwen) is ToolFormat.HERMES
    assert tool_format_for_template(llama) is ToolFormat.LLAMA
    assert tool_format_for_template("<|python_tag|>") is ToolFormat.LLAMA
    assert tool_format_for_template(hermes_llama) is ToolFormat.HERMES
    assert tool_format_for_template(mistral) is ToolFormat.MISTRAL
    for template in (None, "", cohere, "{{ '<|im_start|>' + message['role'] }}"):
        assert tool_format_for_template(template) is ToolFormat.HERMES


def test_unclosed_tool_call_is_content() -> None:
    text = 'ok <tool_call>{"name": "f"'
    assert whole(text, thinking=False, tools=True) == Delta(content=text)


def test_tools_off_leaves_tool_calls_in_content() -> None:
    assert whole(TOOL_CALLS, thinking=False, tools=False) == Delta(content=TOOL_CALLS)


def test_text_streams_without_delay() -> None:
    parser = OutputParser(thinking=True, tools=True)
    assert parser.feed("<think>") == Delta()
    assert parser.feed("Hmm") == Delta(thinking="Hmm")
    assert parser.feed(" ok</") == Delta(thinking=" ok")
    assert parser.feed("think>") == Delta()
    assert parser.feed("\n\n") == Delta()
    assert parser.feed("Hello") == Delta(content="Hello")
    assert parser.feed(" <") == Delta(content=" ")
    assert parser.feed("b>") == Delta(content="<b>")
    assert parser.feed("<tool_") == Delta()
    assert parser.feed('call>{"name": "f"}') == Delta()
    assert parser.feed("</tool_call>") == Delta(tool_calls=[call("f")])
    assert parser.feed("\n") == Delta()
    assert parser.finish() == Delta()
    assert not Delta()


SAMPLES = [
    THINKING,
    TOOL_CALLS,
    "<think>\n\n</think>\n\nPlain answer with <b>html</b> and a < sign.",
    " \n<think>a</thi</think>x</think>\n<tool_call>{bad}</tool_call>\n<tool_call>",
    'Sure.\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>\n \nAfter <tool_call',
    "The user asked.\n</think>\n\n<think>Answer",
]
LLAMA_SAMPLES = [
    ' \n{"name": "f", "parameters": {"q": "}{"}}; {"name": "g", "parameters": "{}"}\n',
    '<|python_tag|>{"name": "f", "parameters": {}}<|python_tag|>{"name": "g"} Done.',
    '{"name": "f", "parameters": {broken}} {"name": "g"}',
    "<think>x</think>\n\n{} and <|python_tag|>code()",
    '  Plain, then {"name": "f", "parameters": {}}',
]
SMOL_SAMPLES = ['<tool_call>[{"name": "f", "arguments": {}}, {"name": "g", "arguments": {"a": [1]}}]</tool_call>']
MISTRAL_SAMPLES = [
    'Calling.[TOOL_CALLS] [{"name": "f", "arguments": {"a": "]"}}, {"name": "g", "arguments": {}}] ok',
    ' [{"name": "f", "arguments": {}}]\n[TOOL_CALLS][{"name": "g", "arguments": {}}] \n',
    "[1] see [TOOL_CALLS] none [TOOL_CALLS][{bad}] [TOOL_CALLS",
]
FORMAT_SAMPLES = [
    *((ToolFormat.HERMES, text) for text in SAMPLES + SMOL_SAMPLES),
    *((ToolFormat.LLAMA, text) for text in LLAMA_SAMPLES + SAMPLES[:2]),
    *((ToolFormat.MISTRAL, text) for text in MISTRAL_SAMPLES + SAMPLES[1:2]),
]
CONFIGS = [
    {"thinking": t, "tools": u, "start_in_thinking": s}
    for t in (True, False)
    for u in (True, False)
    for s in ((False, True) if t else (False,))
]


@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize(("tool_format", "text"), FORMAT_SAMPLES)
def test_every_split_gives_the_same_result(tool_format: ToolFormat, text: str, config: dict[str, Any]) -> None:
    config = {**config, "tool_format": tool_format}
    expected = whole(text, **config)
    assert parse(list(text), **config) == expected
    for i in range(len(text) + 1):
        assert parse([text[:i], text[i:]], **config) == expected, i
    for i in range(0, len(text), 3):
        for j in range(i, len(text), 5):
            assert parse([text[:i], text[i:j], text[j:]], **config) == expected, (i, j)


# Quotes, escapes and brackets inside the string: a feed may end on any of them.
LONG = ('say "hi" ]} {[ \\ ' * 1200)[:20_000]
LONG_CALL = json.dumps({"name": "write", "arguments": {"text": LONG}})
SPACES = "\n" * 20_000


@pytest.mark.parametrize(
    ("tool_format", "text", "expected"),
    [
        (ToolFormat.LLAMA, LONG_CALL + "\n\nDone.", Delta(content="\n\nDone.", tool_calls=[call("write", text=LONG)])),
        (
            ToolFormat.HERMES,
            f"Writing.\n<tool_call>\n{LONG_CALL}\n</tool_call>",
            Delta(content="Writing.\n", tool_calls=[call("write", text=LONG)]),
        ),
        (ToolFormat.MISTRAL, f"[TOOL_CALLS][{LONG_CALL}]", Delta(tool_calls=[call("write", text=LONG)])),
        (ToolFormat.LLAMA, SPACES + "Hi", Delta(content=SPACES + "Hi")),
        (ToolFormat.HERMES, f"<think>{SPACES}</think>{SPACES}Hi", Delta(content="Hi")),
    ],
    ids=["llama", "hermes", "mistral", "spaces-before-a-call", "spaces-in-an-empty-think-block"],
)
def test_long_output_fed_a_character_at_a_time(tool_format: ToolFormat, text: str, expected: Delta) -> None:
    """``feed`` runs once per token on the event loop, so it must not go over what it holds back again.

    Linearity without a clock: a feed examines only ``_buf``, the new text after what the last feed kept
    back there; held text that was examined waits elsewhere. So ``_buf`` staying shorter than the longest
    tag bounds the work per character (before, it held the whole call and each feed rescanned it).
    """
    parser = OutputParser(thinking=False, tools=True, tool_format=tool_format)
    deltas = []
    for char in text:
        deltas.append(parser.feed(char))
        assert len(parser._buf) < len("<|python_tag|>")
    assert _merge([*deltas, parser.finish()]) == expected


def test_prompt_opens_thinking() -> None:
    assert prompt_opens_thinking("<|im_start|>assistant\n<think>\n")
    assert not prompt_opens_thinking("<|im_start|>assistant\n")
    assert not prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n")


@pytest.mark.parametrize(
    ("text", "marks", "expected"),
    [
        ("hello <thi", ("<think>",), ("hello ", "<thi")),
        ("hello <", ("<think>",), ("hello ", "<")),
        ("hello", ("<think>",), ("hello", "")),
        ("a <think>", ("<think>",), ("a <think>", "")),  # a whole mark is the parser's to find, not held
        ("x <|st", ("<|end|>", "<|start|>"), ("x ", "<|st")),  # the longest end any mark may begin
        ("x <|", ("<|end|>", "<|start|>"), ("x ", "<|")),
        ("", ("<think>",), ("", "")),
    ],
)
def test_hold_back_keeps_only_an_end_that_may_begin_a_mark(
    text: str, marks: tuple[str, ...], expected: tuple[str, str]
) -> None:
    assert hold_back(text, *marks, final=False) == expected
    assert hold_back(text, *marks, final=True) == (text, "")
