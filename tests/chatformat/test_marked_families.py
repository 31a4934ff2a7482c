"""The 2026 families' output formats (``model_families``' "marked" ones), parsed as Ollama's parsers
parse them (cases from ``model/parsers/*_test.go`` in ollama/ollama), streamed in any chunking."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cllm_ollama.chatformat.family_parsers import parser_for
from cllm_ollama.chatformat.parsers import Delta, OutputParser, ToolFormat
from cllm_ollama.chatformat.renderer_templates import RENDERER_TEMPLATES
from cllm_ollama.model_families import OLLAMA_PARSERS, parser_capabilities, parser_family

TEMPLATES = Path(__file__).parents[1] / "data" / "families"
TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
    for n in ("get_weather", "search", "exec", "open_file", "process")
]


def parse(
    family: str, text: str, *, chunk: int, thinking: bool = True, prompt: str = "", tools: Any = TOOLS
) -> tuple[str, str, list[Any]]:
    parser = parser_for(None, thinking=thinking, tools=tools, prompt=prompt, parser=family)
    out = Delta()
    for i in range(0, len(text), chunk):
        out.add(parser.feed(text[i : i + chunk]))
    out.add(parser.finish())
    return out.thinking, out.content, [(c["function"]["name"], c["function"]["arguments"]) for c in out.tool_calls]


def same_in_any_chunking(family: str, text: str, **kwargs: Any) -> tuple[str, str, list[Any]]:
    whole = parse(family, text, chunk=len(text) or 1, **kwargs)
    for chunk in (1, 2, 5):
        assert parse(family, text, chunk=chunk, **kwargs) == whole, chunk
    return whole


WEATHER_PARIS = ("get_weather", {"location": "Paris"})

CASES = [
    # Gemma 4 (gemma4_test.go)
    ("gemma4", "This is a simple response.", "", ("", "This is a simple response.", [])),
    (
        "gemma4",
        "<|channel>thought\nLet me think about this...<channel|>The answer is 42.",
        "",
        ("Let me think about this...", "The answer is 42.", []),
    ),
    (
        "gemma4",
        "<|channel>first thought<channel|><|channel>second thought<channel|>Final answer.",
        "",
        ("first thoughtsecond thought", "Final answer.", []),
    ),
    ("gemma4", '<|tool_call>call:get_weather{location:<|"|>Paris<|"|>}<tool_call|>', "", ("", "", [WEATHER_PARIS])),
    (
        "gemma4",
        '<|tool_call>call:process{value:null,nested:{value:null},n:42,on:true,items:[<|"|>a<|"|>,<|"|>b "q"<|"|>]}'
        "<tool_call|>",
        "",
        (
            "",
            "",
            [("process", {"value": None, "nested": {"value": None}, "n": 42, "on": True, "items": ["a", 'b "q"']})],
        ),
    ),
    (
        "gemma4",
        '<|tool_call>call:search{query:"raw \\"quoted\\"",note:<|"|>gemma "quoted"<|"|>}<tool_call|>',
        "",
        ("", "", [("search", {"query": 'raw "quoted"', "note": 'gemma "quoted"'})]),
    ),
    (
        "gemma4",
        '<|tool_call>call:open_file{path:<|"|>C:\\users\\bob\\file.txt<|"|>}<tool_call|>',
        "",
        ("", "", [("open_file", {"path": "C:\\users\\bob\\file.txt"})]),
    ),
    (
        "gemma4",
        'Let me check that for you. <|tool_call>call:get_weather{location:<|"|>Paris<|"|>}<tool_call|>'
        '<tool_call|><|tool_call>call:get_weather{location:<|"|>London<|"|>}<tool_call|><|tool_response>',
        "",
        ("", "Let me check that for you.", [WEATHER_PARIS, ("get_weather", {"location": "London"})]),
    ),
    # Ministral 3 / Devstral (ministral_test.go)
    (
        "ministral",
        '[THINK]Let me think.[/THINK]  Sure. [TOOL_CALLS]get_weather[ARGS]{"location": "Paris"}'
        '[TOOL_CALLS]search[ARGS]{"q": {"deep": "}"}}',
        "",
        ("Let me think.", "Sure.", [WEATHER_PARIS, ("search", {"q": {"deep": "}"}})]),
    ),
    # LFM2 (lfm2_test.go)
    (
        "lfm2-thinking",
        '<think>\nhm\n</think>\n\nOk<|tool_call_start|>[get_weather(location="Paris"), '
        "search(q='x', n=-2, on=true, off=False, none=None, list=[1, {'a': 'b'}])]<|tool_call_end|>done",
        "",
        (
            "hm",
            "Okdone",
            [
                WEATHER_PARIS,
                ("search", {"q": "x", "n": -2, "on": True, "off": False, "none": None, "list": [1, {"a": "b"}]}),
            ],
        ),
    ),
    # Command (cohere_test.go): the prompt opens the thinking
    (
        "cohere",
        'plan it <|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", '
        '"parameters": {"location": "Paris"}}]<|END_ACTION|>',
        "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>",
        ("plan it", "", [WEATHER_PARIS]),
    ),
    (
        "cohere",
        "<|START_RESPONSE|>Hello there.<|END_RESPONSE|>",
        "<|CHATBOT_TOKEN|><|START_THINKING|><|END_THINKING|>",
        ("", "Hello there.", []),
    ),
    # OLMo 3 (olmo3_test.go)
    (
        "olmo3",
        'Let me.<function_calls>get_weather(location="Paris")\nsearch(q="a, b")</function_calls>',
        "",
        ("", "Let me.", [WEATHER_PARIS, ("search", {"q": "a, b"})]),
    ),
    # FunctionGemma (functiongemma_test.go)
    (
        "functiongemma",
        "<start_function_call>call:get_weather{location:<escape>Paris<escape>,n:3,on:true}<end_function_call>",
        "",
        ("", "", [("get_weather", {"location": "Paris", "n": 3, "on": True})]),
    ),
]


@pytest.mark.parametrize(("family", "text", "prompt", "expected"), CASES)
def test_each_family_splits_thinking_content_and_calls(family: str, text: str, prompt: str, expected: Any) -> None:
    assert same_in_any_chunking(family, text, prompt=prompt) == expected


def test_thinking_not_asked_for_is_dropped_not_content() -> None:
    """Gemma 4's parser: with thinking off, a channel the model opens anyway is no content."""
    text = "<|channel>this is not thinking<channel|>actual content"
    assert same_in_any_chunking("gemma4", text, thinking=False) == ("", "actual content", [])


def test_a_block_that_does_not_parse_stays_content() -> None:
    text = "A <|tool_call>nonsense<tool_call|> B"
    assert same_in_any_chunking("gemma4", text) == ("", "A<|tool_call>nonsense<tool_call|> B", [])


def test_without_tools_a_call_block_is_text() -> None:
    text = "[TOOL_CALLS]get_weather[ARGS]{}"
    assert same_in_any_chunking("ministral", text, tools=None) == ("", text, [])


def test_a_call_is_emitted_as_soon_as_its_block_closes() -> None:
    parser = parser_for(None, thinking=False, tools=TOOLS, parser="gemma4")
    assert parser.feed("Sure.").content == "Sure."
    assert parser.feed('<|tool_call>call:get_weather{location:<|"|>Paris<|"|>}').tool_calls == []
    assert parser.feed("<tool_call|>").tool_calls == [
        {"function": {"name": "get_weather", "arguments": {"location": "Paris"}}}
    ]


def test_command_s_own_call_id_is_dropped() -> None:
    """Ollama's ``ChatHandler`` gives every call its own id; the model's ("0", "1", ... each turn) would repeat."""
    parser = parser_for(None, thinking=False, tools=TOOLS, parser="cohere")
    delta = parser.feed(
        '<|START_ACTION|>[{"tool_call_id": "7", "tool_name": "search", "parameters": {}}]<|END_ACTION|>'
    )
    assert delta.tool_calls == [{"function": {"name": "search", "arguments": {}}}]


@pytest.mark.parametrize("family", ["gemma4", "ministral", "lfm2", "cohere", "olmo3", "functiongemma", "glimmer"])
def test_each_family_s_template_picks_its_parser(family: str) -> None:
    """The families' templates (a ported renderer's, else the test data's) hold their marks."""
    template = RENDERER_TEMPLATES.get(family) or (TEMPLATES / f"{family}.jinja").read_text()
    found = parser_family(template)
    assert found is not None and found.name == family


def test_ollama_s_parser_names() -> None:
    """A config's ``parser`` decides over the template; a name cllm does not know falls back to it."""
    assert parser_family("{{ .Prompt }}", "gemma4").name == "gemma4"  # type: ignore[union-attr]
    assert parser_family("<|tool_call_start|>", "no-such-parser").name == "lfm2"  # type: ignore[union-attr]
    assert parser_family("<|tool_call_start|>", "qwen3") is None  # Qwen 3: the JSON tool parser
    assert parser_capabilities("gemma4") == ("tools", "thinking")
    assert parser_capabilities("gemma4-no-thinking") == ("tools",)
    assert parser_capabilities("no-such-parser") == ()
    assert {"gemma4", "ministral", "lfm2", "cohere", "olmo3", "functiongemma", "harmony"} <= set(OLLAMA_PARSERS)


# --- untagged JSON: released as soon as it cannot be a call


def held_tokens(tokens: list[str], tools: frozenset[str]) -> int:
    """How many tokens went in before the first content came out."""
    parser = OutputParser(thinking=False, tools=True, tool_format=ToolFormat.HERMES, tool_names=tools)
    for i, token in enumerate(tokens):
        if parser.feed(token).content:
            return i
    return len(tokens)


ANSWER = [
    '{"',
    "command",
    '":',
    ' "',
    "ls",
    " -la",
    '",',
    ' "',
    "why",
    '":',
    ' "',
    "list",
    '"}',
    " That",
    " is",
    " it.",
]


def test_json_that_cannot_be_a_call_is_released_at_its_first_key() -> None:
    """Codex's second turn: an answer opening with JSON that names no tool streamed nothing until
    its JSON closed. Now only the tokens up to its first key wait."""
    assert held_tokens(ANSWER, frozenset({"shell"})) == 1  # '{"' waits; "command" is no call's key


def test_json_naming_no_requested_tool_is_released_at_the_name() -> None:
    tokens = ['{"', "name", '":', ' "', "Bo", "b", '",', ' "', "age", '":', " 3", "}"]
    assert held_tokens(tokens, frozenset({"get_weather"})) == 4  # released at "Bo": no tool's name begins so


def test_a_real_untagged_call_still_parses() -> None:
    tokens = ['{"', "name", '":', ' "', "get", "_weather", '",', ' "', "arguments", '":', ' {"city": "Paris"}', "}"]
    parser = OutputParser(
        thinking=False, tools=True, tool_format=ToolFormat.HERMES, tool_names=frozenset({"get_weather"})
    )
    out = Delta()
    for token in tokens:
        out.add(parser.feed(token))
    out.add(parser.finish())
    assert out.content == "" and out.tool_calls == [
        {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    ]


def test_ministral_reads_the_older_json_list_and_lets_a_stray_tag_go() -> None:
    """Mistral Small's ``[TOOL_CALLS][{...}]`` still parses; a ``[TOOL_CALLS]`` that no ``[ARGS]``
    follows on its line is text again at the line's end, not held to the end of the answer."""
    text = '[TOOL_CALLS][{"name": "get_weather", "arguments": {"location": "Paris"}}]'
    assert same_in_any_chunking("ministral", text) == ("", "", [WEATHER_PARIS])
    parser = parser_for(None, thinking=False, tools=TOOLS, parser="ministral")
    assert parser.feed("See [TOOL_CALLS]docs").content == "See"
    assert parser.feed(" for more\nThen").content == "[TOOL_CALLS]docs for more\nThen"


@pytest.mark.parametrize(
    "block",
    [
        '<|tool_call>call:get_weather{location:<|"|>Paris}<tool_call|>',  # the string's closing mark missing
        '<|tool_call>call:get_weather{location:<|"|>Paris<|"|>',  # cut by a stop: no brace, no closing mark
    ],
)
def test_gemma4_calls_cut_short_are_repaired(block: str) -> None:
    assert same_in_any_chunking("gemma4", block) == ("", "", [WEATHER_PARIS])


# --- Laguna and poolside-v1 (laguna_test.go): GLM's calls, or a JSON call object in the block

LAGUNA_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
            },
        },
    }
]


@pytest.mark.parametrize("name", ["laguna", "poolside-v1"])
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # TestLagunaParserToolCall
            "<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Paris</arg_value>\n"
            "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
            [("get_weather", {"location": "Paris", "days": 3})],
        ),
        (  # TestLagunaParserJSONToolCall
            '<tool_call>\n{"name":"get_weather","arguments":{"location":"Paris","days":3}}\n</tool_call>',
            [("get_weather", {"location": "Paris", "days": 3})],
        ),
    ],
)
def test_laguna_and_poolside_calls(name: str, text: str, expected: Any) -> None:
    assert same_in_any_chunking(name, text, tools=LAGUNA_TOOLS) == ("", "", expected)


def test_poolside_v1_is_laguna_v8() -> None:
    """Ollama's ``poolside-v1`` is the Laguna v8 parser: it thinks and calls
    (TestLagunaV8ParserAssistantHistoryStillPrimesThinking: a prompt that opens ``<think>``)."""
    assert parser_capabilities("poolside-v1") == ("tools", "thinking")
    assert parser_family(None, "poolside-v1") is parser_family(None, "laguna")
    primed = "<|assistant|>\n<think>"
    assert same_in_any_chunking("poolside-v1", "Reasoning.</think>Answer.", prompt=primed, tools=None) == (
        "Reasoning.",
        "Answer.",
        [],
    )
