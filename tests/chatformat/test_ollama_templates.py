"""Ollama's Go templates render as Ollama renders them (template/template.go, template_test.go).

``data/ollama_templates`` holds Ollama's own templates and expected outputs (MIT, see its README):
among them the catalog's families, chatml (qwen3, smollm2), llama3-instruct (llama3.2) and
gemma3-instruct (gemma3). The library's tool-calling templates below are the ones ollama.com
serves for qwen2.5/qwen3 and llama3.2 (as published in its library), with outputs worked out
from Go's text/template semantics.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

import pytest

from cllm_ollama.chatformat.gotemplate import (
    TemplateError,
    collate,
    identifiers,
    parse,
    render_go_template,
    render_ollama,
    template_tools,
)
from cllm_ollama.chatformat.gotemplate.values import json_string, with_spaces

DATA = Path(__file__).parent / "data" / "ollama_templates"
LIBRARY = Path(__file__).parent / "data" / "library_templates"
CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hello, how are you?"}],
    "user-assistant-user": [
        {"role": "user", "content": "Hello, how are you?"},
        {"role": "assistant", "content": "I'm doing great. How can I help you today?"},
        {"role": "user", "content": "I'd like to show off how chat templating works!"},
    ],
    "system-user-assistant-user": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello, how are you?"},
        {"role": "assistant", "content": "I'm doing great. How can I help you today?"},
        {"role": "user", "content": "I'd like to show off how chat templating works!"},
    ],
}
# Ollama's TestTemplate drops one trailing space from these before comparing.
TRAILING_SPACE = {"chatqa.gotmpl", "llama2-chat.gotmpl", "mistral-instruct.gotmpl", "openchat.gotmpl", "vicuna.gotmpl"}
TEMPLATES = sorted(p.name for p in DATA.glob("*.gotmpl"))


def test_the_catalogs_families_are_among_them() -> None:
    assert {"chatml.gotmpl", "llama3-instruct.gotmpl", "gemma3-instruct.gotmpl"} <= set(TEMPLATES)
    assert len(TEMPLATES) == 20


@pytest.mark.parametrize("conversation", sorted(CONVERSATIONS))
@pytest.mark.parametrize("name", TEMPLATES)
def test_ollamas_templates_render_as_ollama_renders_them(name: str, conversation: str) -> None:
    template = (DATA / name).read_text().replace("\r\n", "\n")
    got = render_ollama(template, CONVERSATIONS[conversation])
    if name in TRAILING_SPACE and got.endswith(" "):
        got = got[:-1]
    assert got == (DATA / "testdata" / name / conversation).read_text()


MISTRAL_MESSAGES = [
    {"role": "user", "content": "Hello friend!"},
    {"role": "assistant", "content": "Hello human!"},
    {"role": "user", "content": "What is your name?"},
]


@pytest.mark.parametrize(
    ("templates", "messages", "expected"),
    [
        (
            [
                "[INST] {{ if .System }}{{ .System }}\n\n{{ end }}{{ .Prompt }}[/INST] ",
                "[INST] {{ if .System }}{{ .System }}\n\n{{ end }}{{ .Prompt }}[/INST] {{ .Response }}",
                '[INST] {{ if .System }}{{ .System }}\n\n{{ end }}\n{{- range .Messages }}\n{{- if eq .Role "user" }}'
                '{{ .Content }}[/INST] {{ else if eq .Role "assistant" }}{{ .Content }}[INST] {{ end }}\n{{- end }}',
            ],
            MISTRAL_MESSAGES,
            "[INST] Hello friend![/INST] Hello human![INST] What is your name?[/INST] ",
        ),
        (
            [
                "[INST] {{ if .System }}{{ .System }}\n\n{{ end }}{{ .Prompt }}[/INST] ",
                "[INST] {{ if .System }}{{ .System }}\n\n{{ end }}{{ .Prompt }}[/INST] {{ .Response }}",
                '[INST] {{ if .System }}{{ .System }}\n\n{{ end }}\n{{- range .Messages }}\n{{- if eq .Role "user" }}'
                '{{ .Content }}[/INST] {{ else if eq .Role "assistant" }}{{ .Content }}[INST] {{ end }}\n{{- end }}',
            ],
            [{"role": "system", "content": "You are a helpful assistant!"}, *MISTRAL_MESSAGES],
            "[INST] You are a helpful assistant!\n\nHello friend![/INST] Hello human![INST] What is your name?[/INST] ",
        ),
        (
            [
                "[INST] {{ .Prompt }}[/INST] ",
                "[INST] {{ .Prompt }}[/INST] {{ .Response }}",
                '\n{{- range $i, $m := .Messages }}\n{{- if eq .Role "user" }}[INST] {{ .Content }}[/INST] '
                '{{ else if eq .Role "assistant" }}{{ .Content }}{{ end }}\n{{- end }}',
            ],
            [*MISTRAL_MESSAGES, {"role": "assistant", "content": "My name is Ollama and I"}],
            "[INST] Hello friend![/INST] Hello human![INST] What is your name?[/INST] My name is Ollama and I",
        ),
        (
            [
                "{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}"
                "{{ if .Prompt }}<|im_start|>user\n{{ .Prompt }}<|im_end|>\n{{ end }}"
                "<|im_start|>assistant\n{{ .Response }}<|im_end|>\n",
                "\n{{- range $index, $_ := .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}"
                "<|im_start|>assistant\n",
            ],
            [{"role": "system", "content": "You are a helpful assistant!"}, *MISTRAL_MESSAGES],
            "<|im_start|>system\nYou are a helpful assistant!<|im_end|>\n<|im_start|>user\nHello friend!<|im_end|>\n"
            "<|im_start|>assistant\nHello human!<|im_end|>\n<|im_start|>user\nWhat is your name?<|im_end|>\n"
            "<|im_start|>assistant\n",
        ),
    ],
)
def test_legacy_and_messages_templates_agree(
    templates: list[str], messages: list[dict[str, str]], expected: str
) -> None:
    """Ollama's TestExecuteWithMessages: per-turn (legacy) and .Messages templates give one prompt."""
    for template in templates:
        assert render_ollama(template, messages) == expected, template


def test_suffix() -> None:
    template = "{{- if .Suffix }}<PRE> {{ .Prompt }} <SUF>{{ .Suffix }} <MID>\n{{- else }}{{ .Prompt }}\n{{- end }}"
    assert render_ollama(template, [{"role": "user", "content": "hello"}]) == "hello"
    assert render_ollama(template, [], prompt="def add(", suffix="return x") == "<PRE> def add( <SUF>return x <MID>"


@pytest.mark.parametrize(
    ("template", "names"),
    [
        ("{{ .Prompt }}", {"prompt"}),
        ("{{ with .Tools }}{{ . }}{{ end }} {{ .System }} {{ .Prompt }}", {"prompt", "system", "tools"}),
        ("{{ range .Messages }}{{ .Role }} {{ .Content }}{{ end }}", {"content", "messages", "role"}),
        (
            '{{ range .Messages }}{{ if eq .Role "tool" }}Tool Result: {{ .ToolName }} {{ .Content }}{{ end }}'
            "{{ end }}",
            {"content", "messages", "role", "toolname"},
        ),
        ("{{ range $i, $m := .Messages }}{{ $m.Role }}{{ end }}", {"$m", "role", "messages"}),
    ],
)
def test_the_names_a_template_uses(template: str, names: set[str]) -> None:
    assert identifiers(parse(template)) == names


def test_templates_without_response_get_it_appended() -> None:
    assert render_ollama(
        "{{ .Prompt }}", [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    ) == ("ab")


def test_collate_merges_consecutive_turns_of_one_role_but_not_tool_results() -> None:
    system, merged = collate(
        [
            {"role": "system", "content": "S1"},
            {"role": "system", "content": "S2"},
            {"role": "user", "content": "a"},
            {"role": "user", "content": "b"},
            {"role": "tool", "content": "r1", "tool_name": "f"},
            {"role": "tool", "content": "r2", "tool_name": "g"},
        ]
    )
    assert system == "S1\n\nS2"
    assert [(m["role"], m["content"]) for m in merged] == [
        ("system", "S1\n\nS2"),
        ("user", "a\n\nb"),
        ("tool", "r1"),
        ("tool", "r2"),
    ]


# -- the library's tool-calling templates ------------------------------------------------------

QWEN = (LIBRARY / "qwen2.5.gotmpl").read_text()

LLAMA32 = (LIBRARY / "llama3.2.gotmpl").read_text()

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather <now> & later",
            "parameters": {
                "type": "object",
                "required": ["city"],
                "properties": {
                    "unit": {"type": "string", "enum": ["c", "f"]},
                    "city": {"type": "string", "description": "The city"},
                },
            },
        },
    }
]
TOOL_JSON = (
    '{"type":"function","function":{"name":"get_weather","description":"Weather \\u003cnow\\u003e \\u0026 later",'
    '"parameters":{"type":"object","required":["city"],"properties":{"city":{"type":"string",'
    '"description":"The city"},"unit":{"type":"string","enum":["c","f"]}}}}}'
)
TOOL_CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "get_weather", "arguments": {"unit": "c", "city": "Paris"}}}],
    },
    {"role": "tool", "content": "22", "tool_name": "get_weather"},
]


def test_tools_print_as_ollamas_json() -> None:
    tools = template_tools(TOOLS)
    assert tools is not None
    assert render_go_template("{{ range .Tools }}{{ . }}{{ end }}", {"Tools": tools}) == TOOL_JSON
    assert render_go_template("{{ .Tools }}", {"Tools": tools}) == f"[{TOOL_JSON}]"
    assert render_go_template("{{ json .Tools }}", {"Tools": tools}) == f"[{TOOL_JSON}]"
    function = TOOL_JSON.removeprefix('{"type":"function","function":').removesuffix("}")
    assert render_go_template("{{ range .Tools }}{{ .Function }}{{ end }}", {"Tools": tools}) == function


def test_qwen_library_template_with_tools_and_tool_calls() -> None:
    expected = (
        "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query."
        "\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        '{"type": "function", "function": '
        + TOOL_JSON.removeprefix('{"type":"function","function":').removesuffix("}")
        + "}\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
        '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n'
        "</tool_call><|im_end|>\n"
        "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city":"Paris","unit":"c"}}\n'
        "</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n22\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    assert render_ollama(QWEN, TOOL_CHAT, tools=TOOLS) == expected
    # Without tools or messages past the first: the plain chat shape.
    assert render_ollama(QWEN, [{"role": "user", "content": "Hi"}]) == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_llama32_library_template_with_tools_and_tool_calls() -> None:
    expected = (
        "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n\nBe brief."
        "When you receive a tool call response, use the output to format an answer to the orginal user question."
        "\n\nYou are a helpful assistant with tool calling capabilities.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nWeather in Paris?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
        '{"name": "get_weather", "parameters": {"city":"Paris","unit":"c"}}<|eot_id|>'
        "<|start_header_id|>ipython<|end_header_id|>\n\n22<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    assert render_ollama(LLAMA32, TOOL_CHAT, tools=TOOLS) == expected
    # The last user turn lists the tools.
    got = render_ollama(LLAMA32, TOOL_CHAT[:2], tools=TOOLS)
    assert got.endswith(
        f"Do not use variables.\n\n{TOOL_JSON}\n\nWeather in Paris?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def test_thinking_values() -> None:
    template = (
        "{{- range $i, $_ := .Messages }}{{ .Content }}{{ end }}"
        "{{- if and $.IsThinkSet (not $.Think) }}<think>\n\n</think>{{ end }}"
    )
    messages = [{"role": "user", "content": "q"}]
    assert render_ollama(template, messages) == "q"
    assert render_ollama(template, messages, think=False, think_set=True) == "q<think>\n\n</think>"
    assert render_ollama(template, messages, think=True, think_set=True) == "q"


# -- the language ------------------------------------------------------------------------------------

VALUES = {
    "S": "héllo",
    "N": 3,
    "F": 1000000.0,
    "L": ["a", "b", "c"],
    "M": {"b": 2, "a": 1},
    "E": [],
    "T": True,
    "Nil": None,
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ('{{ .S | len }} {{ len .L }} {{ .L | len | printf "%03d" }}', "6 3 003"),
        ('{{ index .L 1 }}{{ index .M "a" }}{{ slice .L 1 }}{{ slice .L 0 1 }}{{ slice .S 0 1 }}', "b1[b c][a]h"),
        ('{{ printf "%s=%d %v %q %t %5.2f|%-3s|" "x" 7 .L "q" true 3.14159 "ab" }}', 'x=7 [a b c] "q" true  3.14|ab |'),
        ('{{ print 1 2 "a" 3 }} {{ println .N }}', "1 2a3 3\n"),
        ("{{ .F }} {{ 2.5 }} {{ 1e3 }} {{ 0x1F }} {{ 'a' }}", "1e+06 2.5 1000 31 97"),
        ("{{ .M }} {{ .L }} {{ .Nil }} {{ .Missing }}", "map[a:1 b:2] [a b c] <nil> <no value>"),
        ("{{ if and .T .L }}y{{ end }}{{ if or .E .Nil }}n{{ else }}o{{ end }}{{ if not .E }}!{{ end }}", "yo!"),
        ('{{ if lt .N 5 }}lt{{ end }}{{ if ge .N 3 }}ge{{ end }}{{ if eq .S "x" "héllo" }}eq{{ end }}', "ltgeeq"),
        ("{{ $x := 1 }}{{ range .L }}{{ $x = 2 }}{{ end }}{{ $x }}", "2"),
        (
            '{{ range $i, $e := .L }}{{ if eq $i 1 }}{{ continue }}{{ end }}{{ if eq $e "c" }}{{ break }}{{ end }}'
            "{{ $e }}{{ end }}",
            "a",
        ),
        ("{{ with .E }}x{{ else with .L }}{{ index . 0 }}{{ else }}z{{ end }}", "a"),
        (
            '{{ define "T1" }}[{{ . }}]{{ end }}{{ template "T1" .N }}{{ block "T2" .S }}<{{ . }}>{{ end }}',
            "[3]<héllo>",
        ),
        ("a  {{- /* trimmed both sides */ -}}  b", "ab"),
        ("a\n{{- .N }}\n{{- .N -}}\n\tb", "a33b"),
        ("{{ (index .L 2) }}{{ (slice .L 1).x }}", None),
        (
            '{{ json .M }} {{ json "<&>" }} {{ json .F }} {{ json .Nil }}',
            '{"a":1,"b":2} "\\u003c\\u0026\\u003e" 1000000 null',
        ),
        # Go 1.22 on writes \b and \f short, other control characters as \u00XX.
        ('{{ json "\\b\\f\\x01" }}', '"\\b\\f\\u0001"'),
        ('{{ "a\\tb\\u00e9" }}{{ `raw\\n` }}', "a\tbé" + "raw\\n"),
        ('{{ html "<a href=\'x\'>" }} {{ urlquery "a b&c" }}', "&lt;a href=&#39;x&#39;&gt; a+b%26c"),
        ("{{ range 3 }}{{ . }}{{ end }}{{ range $k, $v := .M }}{{ $k }}{{ $v }}{{ end }}", "012a1b2"),
    ],
)
def test_go_semantics(template: str, expected: str | None) -> None:
    if expected is None:
        with pytest.raises(TemplateError, match="can't evaluate field x"):
            render_go_template(template, VALUES)
        return
    assert render_go_template(template, VALUES) == expected


def test_ollamas_functions() -> None:
    today = datetime.date.today()
    assert render_go_template("{{ currentDate }}", {}) == today.isoformat()
    assert render_go_template('{{ currentDate "2006" }}', {}) == today.isoformat()
    assert render_go_template("{{ yesterdayDate }}", {}) == (today - datetime.timedelta(days=1)).isoformat()
    tools = template_tools(
        [
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "n": {"type": "integer"},
                            "tags": {"type": ["array", "null"]},
                            "any": {},
                            "either": {"anyOf": [{"type": "string"}, {"type": "boolean"}]},
                        },
                    },
                },
            }
        ]
    )
    template = (
        "{{ range .Tools }}{{ range $name, $p := .Function.Parameters.Properties }}"
        "{{ $name }}: {{ toTypeScriptType $p }}; {{ end }}{{ end }}{{ toTypeScriptType 3 }}"
    )
    assert render_go_template(template, {"Tools": tools}) == (
        "any: any; either: string | boolean; n: number; tags: any[] | null; any"
    )


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ .Prompt ", "unclosed action"),
        ("{{ $x }}", 'undefined variable "$x"'),
        ("{{ nope 1 }}", 'function "nope" not defined'),
        ('{{define "x"}}{{template "x"}}{{end}}{{template "x"}}', "undefined template specified"),
        ("{{ break }}", "{{break}} outside {{range}}"),
        ("{{ .A | .B }}", "can't give argument to non-function"),
        ('{{ eq "a" 1 }}', "incompatible types for comparison"),
        ("{{ index .L 5 }}", "index out of range: 5"),
        ('{{ define "r" }}{{ template "r" . }}{{ end }}{{ template "r" . }}', "exceeded maximum template depth"),
    ],
)
def test_errors(template: str, message: str) -> None:
    with pytest.raises(TemplateError, match=re.escape(message)) as err:
        render_ollama(template, [{"role": "user", "content": "x"}]) if "template" in template else render_go_template(
            template, {"L": [1], "A": 1, "B": 2}
        )
    assert err.value.status_code == 500 and err.value.message.startswith("template: ")


def test_marshal_with_spaces_spaces_only_outside_strings() -> None:
    # Ollama's addJSONSpaces: a string's own colons, commas and escaped quotes stay as they are.
    key = json_string('a:"b,\\')
    assert with_spaces(f'{{{key}:[1,{{"c":null}}],"d":"\u2028"}}') == f'{{{key}: [1, {{"c": null}}], "d": "\u2028"}}'
    assert json_string("<\u2028>", html=False) == '"<\\u2028>"'
