"""Forced tool calls (issue 34): ``tool_choice`` read per dialect, and the grammar that forces a call
built in each family's call syntax, checked by llama.cpp's own parser."""

from __future__ import annotations

from typing import Any

import pytest

from cllm_ollama.api.call_grammar import call_grammar
from cllm_ollama.api.request_fields import JSON_GRAMMAR, output_grammar
from cllm_ollama.api.tool_choice import ToolChoice, anthropic_tool_choice, openai_tool_choice
from cllm_ollama.errors import InvalidRequest

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
NOW = {"type": "function", "function": {"name": "now"}}  # no parameters: any object
TOOLS = [WEATHER, NOW]

# A Go template that names no family, whose calls follow a tag of its own (Granite 3's: Ollama's parseTag).
GRANITE = "{{ range .Messages }}{{ if .ToolCalls }}<|tool_call|>{{ json .ToolCalls }}{{ end }}{{ end }}"

# A template holding each family's marks (``model_families``), and how a call of get_weather begins there.
FAMILIES = {
    "hermes": ("{{ '<tool_call>' }}", '"<tool_call>\\n" tc0 "\\n</tool_call>"'),
    "no marks": (None, '"<tool_call>\\n" tc0 "\\n</tool_call>"'),
    "llama3": ("<|python_tag|> Environment: ipython", "tc0"),
    "mistral": ("[TOOL_CALLS]", '"[TOOL_CALLS]["'),
    "qwen3-coder": ("<tool_call><function=x><parameter=y>", '"<tool_call>\\n<function=get_weather>\\n"'),
    "glm": ("<tool_call><arg_key>", '"<tool_call>get_weather\\n"'),
    "deepseek v3": (
        "<｜tool▁calls▁begin｜> ```json",
        '"<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\\n```json\\n"',
    ),
    "deepseek v3.1": ("<｜tool▁calls▁begin｜>", '"<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>" tc0'),
    "harmony": (
        "<|channel|><|message|>",
        '"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"',
    ),
    "gemma4": ("<|tool_call> <|channel>", '"<|tool_call>call:get_weather{" "city:" "<|\\"|>"'),
    "functiongemma": ("<start_function_call>", '"<start_function_call>call:get_weather{" "city:" "<escape>"'),
    "ministral": ("[TOOL_CALLS] [ARGS]", '"[TOOL_CALLS]get_weather[ARGS]" tc0'),
    "lfm2": ("<|tool_call_start|>", '"<|tool_call_start|>[" ((("get_weather(" "city=" string'),
    "olmo3": ("<function_calls>", '"<function_calls>" ((("get_weather(" "city=" string'),
    "glimmer": (
        "<|message|> <|eot|> <atem:function_calls>",
        '" to=get_weather<|message|><atem:function_calls>\\n<atem:invoke name=\\"get_weather\\">\\n"',
    ),
    "cohere": ("<|START_ACTION|>", '"<|START_ACTION|>[\\n\\n    " (((tc0) | (tc1))'),
    "granite": (GRANITE, '"<|tool_call|>[" (((tc0) | (tc1))'),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_gets_its_call_syntax_and_llama_cpp_parses_it(family: str) -> None:
    pytest.importorskip("llama_cpp")
    from cllm_ollama.engine.binding import grammar_parses

    template, opening = FAMILIES[family]
    for many in (True, False):
        grammar = call_grammar(template, TOOLS, many=many)
        root = grammar.splitlines()[0]
        assert root.startswith("root ::= ") and opening in root
        assert "now" in root or "tc1" in root  # both tools may be called
        assert grammar_parses(grammar), grammar


def test_json_calls_hold_the_arguments_to_the_schema() -> None:
    pytest.importorskip("llama_cpp")
    lines = call_grammar(None, [WEATHER], many=False).splitlines()
    assert lines[0] == 'root ::= ("<tool_call>\\n" tc0 "\\n</tool_call>")'
    # name first, as a constant; then arguments by the schema: city required, days optional, nothing else.
    assert 'tc0 ::= "{" space tc0-name-kv "," space tc0-arguments-kv "}" space' in lines
    assert 'tc0-name ::= "\\"get_weather\\""' in lines
    assert (
        'tc0-arguments ::= "{" space tc0-arguments-city-kv ( "," space ( tc0-arguments-days-kv ) )? "}" space' in lines
    )
    assert 'tc0-arguments-days-kv ::= "\\"days\\"" space ":" space integer' in lines


def test_several_calls_unless_parallel_calls_are_off() -> None:
    pytest.importorskip("llama_cpp")
    many = call_grammar(None, [WEATHER], many=True).splitlines()[0]
    assert many.endswith('("\\n" "<tool_call>\\n" tc0 "\\n</tool_call>")*)')
    one = call_grammar(None, [WEATHER], many=False).splitlines()[0]
    assert ")*" not in one
    # gpt-oss writes one call per message: always one.
    assert ")*" not in call_grammar("<|channel|><|message|>", TOOLS, many=True).splitlines()[0]


def test_text_parameters_of_qwen3_coder() -> None:
    pytest.importorskip("llama_cpp")
    root = call_grammar("<function=x><parameter=y>", [WEATHER], many=False).splitlines()[0]
    # city is text (no "</" inside), required; days is JSON by its schema, optional.
    assert '"<parameter=city>\\n" (([^<] | "<"+ [^/<])*) "\\n</parameter>\\n"' in root
    assert '("<parameter=days>\\n" integer "\\n</parameter>\\n")?' in root


def test_a_bad_tool_schema_is_a_400() -> None:
    pytest.importorskip("llama_cpp")
    bad = {"type": "function", "function": {"name": "f", "parameters": {"type": "nonsense"}}}
    with pytest.raises(InvalidRequest, match="invalid JSON schema in tool parameters"):
        call_grammar(None, [bad], many=False)
    with pytest.raises(InvalidRequest, match="invalid parameters"):
        call_grammar(None, [{"type": "function", "function": {"name": "f", "parameters": [1]}}], many=False)
    # A short reason, not the schema: the converter's reasons may quote it whole.
    long = {"type": "object", "properties": {"a": {"type": "nonsense", "description": "x" * 1000}}}
    with pytest.raises(InvalidRequest, match="Unrecognized schema") as info:
        call_grammar(None, [{"type": "function", "function": {"name": "f", "parameters": long}}], many=False)
    assert len(info.value.message) < 300
    dangling = {"$defs": {"B": {"description": "x" * 1000}}, "properties": {"a": {"$ref": "#/$defs/A"}}}
    with pytest.raises(InvalidRequest) as info:
        call_grammar(None, [{"type": "function", "function": {"name": "f", "parameters": dangling}}], many=False)
    assert info.value.message == 'invalid JSON schema in tool parameters: $ref "#/$defs/A" points to nothing'


@pytest.mark.parametrize(
    ("value", "parallel", "expected"),
    [
        (None, None, ToolChoice()),
        ("auto", None, ToolChoice()),
        ("none", None, ToolChoice("none")),
        ("required", None, ToolChoice("required")),  # one call unless asked for more, as llama-server
        ("required", True, ToolChoice("required", parallel=True)),
        ({"type": "function", "function": {"name": "now"}}, False, ToolChoice("function", "now")),
        ({"type": "required"}, None, ToolChoice("required")),
        (
            {
                "type": "allowed_tools",
                "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "function": {"name": "now"}}]},
            },
            None,
            ToolChoice(only=("now",)),
        ),
    ],
)
def test_openai_tool_choice(value: object, parallel: object, expected: ToolChoice) -> None:
    assert openai_tool_choice(value, parallel) == expected


def test_responses_tool_choice_is_flat() -> None:
    assert openai_tool_choice({"type": "function", "name": "now"}, None, flat=True) == ToolChoice("function", "now")
    with pytest.raises(InvalidRequest):
        openai_tool_choice({"type": "function", "function": {"name": "now"}}, None, flat=True)


def test_allowed_tools_show_only_their_subset() -> None:
    tools = [{"type": "function", "function": {"name": n}} for n in ("a", "b", "c")]
    choice = openai_tool_choice(
        {
            "type": "allowed_tools",
            "mode": "required",
            "tools": [{"type": "function", "name": "c"}, {"type": "function", "name": "a"}],
        },
        None,
        flat=True,
    )
    assert choice == ToolChoice("required", only=("c", "a"))
    shown = choice.shown(tools)
    assert shown == [tools[0], tools[2]] and choice.allowed(shown) == shown
    assert ToolChoice().shown(tools) is tools and ToolChoice("none").shown(tools) is None
    with pytest.raises(InvalidRequest, match="not in tools: 'z'"):
        ToolChoice(only=("a", "z")).shown(tools)


@pytest.mark.parametrize(
    "value",
    [
        "always",
        3,
        {"type": "function"},
        {"type": "function", "function": {}},
        {
            "type": "allowed_tools",
            "allowed_tools": {"mode": "none", "tools": [{"type": "function", "function": {"name": "a"}}]},
        },
        {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}},
        {
            "type": "allowed_tools",
            "allowed_tools": {"mode": "auto", "tools": [{"type": "custom", "custom": {"name": "a"}}]},
        },
        {"type": "custom", "custom": {"name": "a"}},
    ],
)
def test_bad_openai_tool_choice(value: object) -> None:
    with pytest.raises(InvalidRequest, match="tool_choice"):
        openai_tool_choice(value, None)


def test_anthropic_tool_choice() -> None:
    assert anthropic_tool_choice(None, None, None) == ToolChoice()
    assert anthropic_tool_choice("any", None, True) == ToolChoice("required")
    assert anthropic_tool_choice("any", None, False) == ToolChoice("required", parallel=True)
    assert anthropic_tool_choice("tool", "now", None) == ToolChoice("function", "now")
    assert anthropic_tool_choice("none", None, None).mode == "none"
    with pytest.raises(InvalidRequest, match="invalid tool_choice type: sometimes"):
        anthropic_tool_choice("sometimes", None, None)
    with pytest.raises(InvalidRequest, match="name"):
        anthropic_tool_choice("tool", None, None)


def test_the_tools_a_forced_call_may_be_of() -> None:
    assert ToolChoice("required").allowed(TOOLS) == TOOLS
    assert ToolChoice("function", "now").allowed(TOOLS) == [NOW]
    with pytest.raises(InvalidRequest, match="not in tools: 'later'"):
        ToolChoice("function", "later").allowed(TOOLS)
    with pytest.raises(InvalidRequest, match="requires tools"):
        ToolChoice("required").allowed(None)


def test_which_grammar_holds_the_output() -> None:
    gbnf = 'root ::= "a"'
    assert output_grammar(None, None, None) is None
    assert output_grammar("json", None, None) is JSON_GRAMMAR
    assert output_grammar(None, gbnf, None) == gbnf
    assert output_grammar("json", None, lambda: "calls") == "calls"  # the call is the whole output
    with pytest.raises(InvalidRequest, match="not both"):
        output_grammar("json", gbnf, None)
    with pytest.raises(InvalidRequest, match="forced tool_choice"):
        output_grammar(None, gbnf, lambda: "calls")


def test_the_openapi_document_lists_the_output_controls() -> None:
    from cllm_ollama.api.openapi import document

    schemas = document()["components"]["schemas"]
    extra = {"grammar", "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n"}
    extra |= {"dry_sequence_breakers", "xtc_probability", "xtc_threshold"}
    for name in ("ChatCompletionRequest", "CompletionRequest", "ResponsesRequest", "Options"):
        assert extra <= set(schemas[name]["properties"]), name
    for name in ("ChatCompletionRequest", "ResponsesRequest"):
        assert {"tool_choice", "parallel_tool_calls"} <= set(schemas[name]["properties"])


# A tool whose arguments take every kind of value: text (with the family's marks in reach), a
# choice, numbers, a flag, a list, a nested object; only ``path`` is required.
EDIT = {
    "type": "function",
    "function": {
        "name": "edit_file",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "mode": {"type": "string", "enum": ["append", "replace"]},
                "line": {"type": "integer"},
                "scale": {"type": "number"},
                "dry_run": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "range": {
                    "type": "object",
                    "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}},
                    "required": ["start"],
                },
            },
            "required": ["path"],
        },
    },
}
OPTIONAL_ONLY = {
    "type": "function",
    "function": {
        "name": "list_dir",
        "parameters": {"type": "object", "properties": {"all": {"type": "boolean"}, "depth": {"type": "integer"}}},
    },
}
SAMPLED_TOOLS = [WEATHER, NOW, EDIT, OPTIONAL_ONLY]

# Each family's output parser, by Ollama's parser name or, for the JSON syntaxes, by a template's marks.
PARSERS = {
    "gemma4": ("gemma4", None),
    "functiongemma": ("functiongemma", None),
    "ministral": ("ministral", None),
    "lfm2": ("lfm2", None),
    "olmo3": ("olmo3", None),
    "cohere": ("cohere", None),
    "glimmer": ("glimmer", None),
    "qwen3-coder": ("qwen3-coder", None),
    "glm": ("glm-4.7", None),
    "harmony": ("harmony", None),
    "deepseek v3.1": ("deepseek3", "<｜tool▁calls▁begin｜>"),
    "hermes": (None, "{{ '<tool_call>' }}"),
    "llama3": (None, "<|python_tag|> Environment: ipython"),
    "mistral": (None, "[TOOL_CALLS]"),
    "granite": (None, GRANITE),
}


def _read_back(parser: str | None, template: str | None, tools: list[Any], text: str, chunk: int) -> Any:
    from cllm_ollama.chatformat.family_parsers import parser_for
    from cllm_ollama.chatformat.parsers import Delta

    reader = parser_for(template, thinking=False, tools=tools, parser=parser)
    out = Delta()
    for i in range(0, len(text), chunk):
        out.add(reader.feed(text[i : i + chunk]))
    out.add(reader.finish())
    return out


def test_a_forced_gpt_oss_call_names_the_tool_as_its_prompt_shows_it() -> None:
    tools = [{"type": "function", "function": {"name": "get-weather"}}]
    grammar = call_grammar("<|channel|><|message|>", tools, many=False)
    assert "to=functions.get_weather " in grammar and "get-weather" not in grammar
    # Forced among tools whose names collide as identifiers: named as the prompt numbers it.
    shown = [*tools, {"type": "function", "function": {"name": "get_weather"}}]
    grammar = call_grammar("<|channel|><|message|>", shown[1:], many=False, shown=shown)
    assert "to=functions.get_weather_2 " in grammar


@pytest.mark.parametrize("family", PARSERS)
@pytest.mark.parametrize("many", [False, True])
def test_what_a_forced_call_grammar_lets_a_model_write_parses_back_into_its_calls(family: str, many: bool) -> None:
    """Texts drawn at random from each family's forced-call grammar, read by that family's output
    parser (streamed whole and a few characters at a time): calls only, of the given tools, each
    call's arguments valid by its tool's schema."""
    several = _sampled_calls_are_valid(family, SAMPLED_TOOLS, many)
    assert several == (many and family != "harmony")


def _sampled_calls_are_valid(family: str, tools: list[Any], many: bool) -> bool:
    """Checks texts drawn from ``family``'s forced-call grammar for ``tools`` (which llama.cpp parses):
    each reads back as calls of every one of the tools, valid by its schema. Whether one had several."""
    pytest.importorskip("llama_cpp")
    import jsonschema
    from gbnf_sample import Sampler

    from cllm_ollama.engine.binding import grammar_parses

    parser, template = PARSERS[family]
    grammar = call_grammar(template, tools, many=many, parser=parser)
    assert grammar_parses(grammar)
    schemas = {t["function"]["name"]: t["function"].get("parameters") or {"type": "object"} for t in tools}
    seen: set[str] = set()
    several = False
    for seed in range(60):
        text = Sampler(grammar, seed).text()
        whole = _read_back(parser, template, tools, text, len(text))
        assert whole == _read_back(parser, template, tools, text, 3), text
        assert whole.content.strip() == "" and whole.thinking == "", text
        assert whole.tool_calls, text
        several |= len(whole.tool_calls) > 1
        for made in whole.tool_calls:
            name, arguments = made["function"]["name"], made["function"]["arguments"]
            jsonschema.validate(arguments, schemas[name])
            seen.add(name)
    assert seen == set(schemas)
    return several


# Tools whose schemas refer to definitions, as Pydantic's (``openai.pydantic_function_tool``) and
# zod's do: each has an ``Addr`` of its own; a choice (an enum) and a recursive model's root are refs.
PERSON = {
    "type": "function",
    "function": {
        "name": "save_person",
        "parameters": {
            "$defs": {
                "Addr": {
                    "type": "object",
                    "properties": {
                        "street": {"type": "string"},
                        "zip": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                    },
                    "required": ["street"],
                },
                "Kind": {"type": "string", "enum": ["friend", "foe"]},
            },
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "kind": {"$ref": "#/$defs/Kind"},
                "home": {"$ref": "#/$defs/Addr"},
                "work": {"$ref": "#/properties/home"},  # zod's way to repeat a schema
            },
            "required": ["name", "kind", "home"],
        },
    },
}
TREE = {
    "type": "function",
    "function": {
        "name": "plant_tree",
        "parameters": {
            "$defs": {
                "Addr": {"type": "object", "properties": {"plot": {"type": "integer"}}, "required": ["plot"]},
                "Node": {
                    "type": "object",
                    "properties": {
                        "label": {"type": "string"},
                        "at": {"$ref": "#/$defs/Addr"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}, "maxItems": 2},
                    },
                    "required": ["label", "at", "children"],
                },
            },
            "$ref": "#/$defs/Node",
        },
    },
}
REF_TOOLS = [PERSON, TREE]


# Families that write a parameter as bare text, which their parsers type by the parameter's ``type``
# as Ollama's do, following no ref: a value behind one reads back as a string.
TEXT_PARAMETERS = {"glimmer", "qwen3-coder", "glm"}


@pytest.mark.parametrize("family", [f for f in PARSERS if f not in TEXT_PARAMETERS])
def test_forced_calls_of_tools_whose_schemas_refer_to_definitions(family: str) -> None:
    """Each tool's refs resolve to its own definitions, wherever its schema or a parameter's lands."""
    _sampled_calls_are_valid(family, REF_TOOLS, many=True)


def test_text_parameters_behind_refs_are_written_by_what_they_refer_to() -> None:
    pytest.importorskip("llama_cpp")
    from cllm_ollama.engine.binding import grammar_parses

    for family in TEXT_PARAMETERS:
        parser, template = PARSERS[family]
        grammar = call_grammar(template, REF_TOOLS, many=True, parser=parser)
        assert grammar_parses(grammar), grammar
        root = grammar.splitlines()[0]
        assert '("friend" | "foe")' in root  # the enum behind a ref: a choice of texts
        assert "label" in root and "children" in root  # the recursive root's parameters, one by one
    qwen = call_grammar("<function=x><parameter=y>", REF_TOOLS, many=False)
    assert '"<parameter=home>\\n" tc0 "\\n</parameter>\\n"' in qwen
    assert 'tc0 ::= "{" space tc0-street-kv' in qwen  # Addr of save_person, not plant_tree's


def test_a_tool_schema_embedded_in_a_call_keeps_its_definitions_apart() -> None:
    pytest.importorskip("llama_cpp")
    lines = call_grammar(None, REF_TOOLS, many=False).splitlines()
    # save_person's Addr and plant_tree's, each a rule of its own, under names no other rule has.
    assert "tc0-arguments-home ::= tcdef0-1-Addr" in lines
    assert (
        'tcdef0-1-Addr ::= "{" space tcdef0-1-Addr-street-kv ( "," space ( tcdef0-1-Addr-zip-kv ) )? "}" space' in lines
    )
    assert 'tcdef1-1-Addr ::= "{" space tcdef1-1-Addr-plot-kv "}" space' in lines
