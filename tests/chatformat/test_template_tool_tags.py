"""Tool calls after the tag a model's Go template writes before its calls (Ollama's ``parseTag``,
``tools.Parser``), for templates of no family cllm knows; and gpt-oss's tool names, renamed for its
prompt and read back from its calls (Ollama's ``FunctionNameMap``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from test_ollama_parser_parity import parsed as parsed_text

from cllm_ollama.chatformat.family_parsers import harmony_names, parser_for
from cllm_ollama.chatformat.parsers import Delta, TemplateTag, ToolFormat, template_tool_tag, tool_format_for_template
from cllm_ollama.chatformat.prompt import ChatPrompt
from cllm_ollama.chatformat.render_budget import RenderBudget
from cllm_ollama.engine.binding.core import Model
from cllm_ollama.model_families import preserve_tool_tag, renders_as_text


def tool(name: str) -> dict[str, Any]:
    parameters = {"type": "object", "properties": {"city": {"type": "string"}}}
    return {"type": "function", "function": {"name": name, "description": "", "parameters": parameters}}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"function": {"name": name, "arguments": arguments}}


def parsed(template: str, text: str, tools: list[dict[str, Any]], **config: Any) -> Delta:
    """What ``parser_for`` makes of ``text`` under ``template``, fed whole and a character at a time."""
    return parsed_text(text, tools=tools, template=template, **config)


# Ollama's TestParseTag (tools/template_test.go), case for case.
PARSE_TAG_CASES = [
    ("", "{"),
    ("{{if .ToolCalls}}{{end}}", "{"),
    ("{{if .ToolCalls}}{{range .ToolCalls}}{{ . }}{{end}}{{end}}", "{"),
    ("{{if .ToolCalls}}```json\n{{end}}", "```json"),
    ("{{if .ToolCalls}}[{{range .ToolCalls}}{{ . }}{{end}}]{{end}}", "["),
    ("{{if .ToolCalls}}\n [ {{range .ToolCalls}}{{ . }}{{end}}]{{end}}", "["),
    ("{{if .ToolCalls}}{{range .ToolCalls}}{{ . }}{{end}}]{{end}}", "{"),
    ("{{if .ToolCalls}} {{range .ToolCalls}}{{ . }}{{end}}{{end}}", "{"),
    ("{{if .ToolCalls}}{{range .ToolCalls}}\n{{ . }}\n{{end}}{{end}}", "{"),
    (
        '{{if .ToolCalls}}{{range .ToolCalls}}{"name": "{{ .Function.Name }}", '
        '"arguments": {{ .Function.Arguments }}}{{end}}{{end}}',
        "{",
    ),
    (
        '{{if .ToolCalls}}{{range .ToolCalls}}\r\n{"name": "{{ .Function.Name }}", '
        '"arguments": {{ .Function.Arguments }}}{{end}}{{end}}',
        "{",
    ),
    (
        '{{if .ToolCalls}}\n{{range .ToolCalls}}\n{"name": "{{ .Function.Name }}", '
        '"arguments": {{ .Function.Arguments }}}\r\n{{end}}\r\n{{end}}',
        "{",
    ),
    (
        "{{if .ToolCalls}}<|tool▁calls▁begin|>{{range .ToolCalls}}<|tool▁call▁begin|>functionget_current_weather\n"
        '```json\n{"location": "Tokyo"}\n```<|tool▁call▁end|>\n{{end}}<|tool▁calls▁end|>{{end}}',
        "<|tool▁calls▁begin|>",
    ),
    (
        '{{if .ToolCalls}}\n{{range .ToolCalls}}<tool_call>{"name": "{{ .Function.Name }}", '
        '"arguments": {{ .Function.Arguments }}}</tool_call>{{end}}{{end}}',
        "<tool_call>",
    ),
    ("{{if .ToolCalls}}First text{{if .Something}}inner{{end}}Second text{{end}}", "First text"),
    ("{{if .ToolCalls}}Action: ```json{{end}}", "Action: ```json"),
    ("{{if .ToolCalls}}functools[{{end}}", "functools["),
    ("{{if .ToolCalls}}[TOOL_CALL] [{{end}}", "[TOOL_CALL] ["),
    ("{{if .ToolCalls}}[TOOL_CALL][{{end}}", "[TOOL_CALL]["),
]


@pytest.mark.parametrize(("template", "tag"), PARSE_TAG_CASES)
def test_the_tag_is_read_off_the_go_template_as_ollama_s_parse_tag_reads_it(template: str, tag: str) -> None:
    assert template_tool_tag(template) == tag


# Ollama's Granite 3.x templates: calls after ``<|tool_call|>``, as a JSON list.
GRANITE = """{{- if .Tools }}<|start_of_role|>available_tools<|end_of_role|>
{{- range .Tools }}
{{ . }}
{{ end }}<|end_of_text|>
{{ end }}
{{- range $index, $_ := .Messages }}<|start_of_role|>
{{- if eq .Role "tool" }}tool_response
{{- else }}{{ .Role }}
{{- end }}<|end_of_role|>
{{- if .Content }}{{ .Content }}
{{- else if .ToolCalls }}<|tool_call|>
{{- range .ToolCalls }}{"name": "{{ .Function.Name }}", "arguments": {{ .Function.Arguments }}}
{{- end }}
{{- end }}
{{- if eq (len (slice $.Messages $index)) 1 }}
{{- if ne .Role "assistant" }}<|end_of_text|>
<|start_of_role|>assistant<|end_of_role|>
{{- end }}
{{- else }}<|end_of_text|>
{{ end }}
{{- end }}"""
# Nemotron-Mini's: ``<toolcall> {...} </toolcall>``.
NEMOTRON = """{{- range .Messages }}
{{- if eq .Role "user" }}<extra_id_1>User
{{ .Content }}
{{ else if eq .Role "assistant" }}<extra_id_1>Assistant
{{- if .ToolCalls }}
{{ range .ToolCalls }}<toolcall> {"name": "{{ .Function.Name }}", "arguments": {{ .Function.Arguments }}} </toolcall>
{{- end }}
{{ else }}
{{ .Content }}
{{- end }}
{{- end }}
{{- end }}"""


def tagged(tag: str) -> str:
    """A Go template that writes ``tag`` before its calls."""
    return (
        "{{ range .Messages }}{{ if .ToolCalls }}"
        + tag
        + '{{ range .ToolCalls }}{"name": "x"}{{ end }}{{ end }}{{ end }}'
    )


BRACKETED = tagged("[TOOL_CALL] [")
BARE_LIST = tagged("[")

WEATHER, TIME = tool("get_weather"), tool("get_time")
PARIS = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
NOW = '{"name": "get_time", "arguments": {}}'


def test_a_template_s_tag_opens_its_calls_where_it_holds_no_family_s_marks() -> None:
    assert tool_format_for_template(GRANITE) == TemplateTag("<|tool_call|>", "<|tool_call|>")
    assert tool_format_for_template(NEMOTRON) == TemplateTag("<toolcall>", "<toolcall>")
    # A family's marks decide first; a template with no tag keeps today's syntax.
    assert tool_format_for_template(GRANITE + "<tool_call>") is ToolFormat.HERMES
    assert tool_format_for_template("{{ if .ToolCalls }}{{ end }}") is ToolFormat.HERMES
    # A Jinja template is no Go template: it has no tag.
    jinja = "{% if tools %}<|tool_call|>{{ tool_calls | tojson }}{% endif %}"
    assert (template_tool_tag(jinja), tool_format_for_template(jinja)) == (None, ToolFormat.HERMES)
    # What is no call after the tag, or no tag, stays content.
    assert parsed(GRANITE, "<|tool_call|>[not json]", [WEATHER]) == Delta(content="<|tool_call|>[not json]")
    assert parsed(GRANITE, "It is sunny.", [WEATHER]) == Delta(content="It is sunny.")
    assert parsed(BARE_LIST, f"Sure: [{PARIS}]", [WEATHER]) == Delta(content=f"Sure: [{PARIS}]")


@pytest.mark.parametrize(
    ("template", "text", "expected"),
    [
        (GRANITE, f"<|tool_call|>[{PARIS}]", Delta(tool_calls=[call("get_weather", city="Paris")])),
        (
            GRANITE,
            f"Let me look.<|tool_call|>[{PARIS}, {NOW}]",
            Delta(content="Let me look.", tool_calls=[call("get_weather", city="Paris"), call("get_time")]),
        ),
        (GRANITE, f"<|tool_call|>{PARIS}", Delta(tool_calls=[call("get_weather", city="Paris")])),
        (NEMOTRON, f"<toolcall> {PARIS}", Delta(tool_calls=[call("get_weather", city="Paris")])),
        (
            BRACKETED,
            f"[TOOL_CALL] [{PARIS}, {NOW}]",
            Delta(tool_calls=[call("get_weather", city="Paris"), call("get_time")]),
        ),
        (BARE_LIST, f"[{PARIS}]", Delta(tool_calls=[call("get_weather", city="Paris")])),
    ],
)
def test_calls_after_the_template_s_tag_are_calls(template: str, text: str, expected: Delta) -> None:
    assert parsed(template, text, [WEATHER, TIME]) == expected


def test_the_template_s_tag_is_rendered_as_text_once_a_request_with_tools_reads_it() -> None:
    """Ollama's llama-server runner preserves the generic tool parser's tag
    (``llamaServerPreservedTokensForToolTag``): its leading ``<...>`` or ``[...]`` where it has one."""
    tags = ("<|tag_a|>", "[TAG_B]", "[TAG_B] [", "<|tag_c|>")
    assert not any(renders_as_text(tag) for tag in tags)
    parser_for(tagged("<|tag_a|>"), thinking=False, tools=None)
    assert not renders_as_text("<|tag_a|>")
    for tag in ("<|tag_a|>", "[TAG_B] [", "<|tag_c|>["):
        parser_for(tagged(tag), thinking=False, tools=[WEATHER])
    assert [renders_as_text(tag) for tag in tags] == [True, True, False, True]


def test_the_binding_renders_a_control_token_as_text_once_its_tag_is_preserved() -> None:
    """A piece cached as nothing before the tag was read is rendered as its text after."""
    model = Model.__new__(Model)
    model._pieces = [b"", b"Hi"]
    model._control_texts = {}
    model.token_text = {0: "<tag_d>", 1: "Hi"}.__getitem__  # type: ignore[method-assign]
    assert (model.piece(0), model.piece(1)) == (b"", b"Hi")
    parser_for(tagged("<tag_d>"), thinking=False, tools=[WEATHER])
    assert (model.piece(0), model.piece(1)) == (b"<tag_d>", b"Hi")


# --- gpt-oss's tool names (harmony/harmonyparser.go)

HARMONY = "<|start|>assistant<|channel|>final<|message|>"


def test_tool_names_are_made_identifiers_for_gpt_oss() -> None:
    """Ollama's TestFunctionConvertToValidChars."""
    cases = {
        "get weather": "get_weather",
        "get-weather": "get_weather",
        "get.weather": "get_weather",
        "get weather!": "get_weather",
        "a🫠bc": "abc",
        "🫠": "unnamed",
        "123": "_123",
        "$": "$",
        "𝓸𝓵𝓵𝓪𝓶𝓪": "𝓸𝓵𝓵𝓪𝓶𝓪",
        "ⓞⓛⓛⓐⓜⓐ123": "_123",
    }
    assert {name: harmony_names([name])[0] for name in cases} == cases


@pytest.mark.parametrize(
    ("names", "shown"),
    [  # Ollama's TestFunctionConvertAndAdd.
        (["get weather", "get weather"], ["get_weather", "get_weather_2"]),
        (["get weather", "get_weather", "get-weather"], ["get_weather", "get_weather_2", "get_weather_3"]),
        (list("aabaaba"), ["a", "a_2", "b", "a_3", "a_4", "b_2", "a_5"]),
        (
            ["browser.open", "python", "not.a.built-in.function", "browser.not_a_real_built_in"],
            ["browser.open", "python", "not_a_built_in_function", "browser_not_a_real_built_in"],
        ),
    ],
)
def test_a_request_s_tool_names_as_gpt_oss_is_shown_them(names: list[str], shown: list[str]) -> None:
    assert harmony_names(names) == shown


def harmony_call(name: str) -> str:
    return f'<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{{"city":"Paris"}}<|call|>'


@pytest.mark.parametrize(
    ("tools", "written", "name"),
    [
        (["get-weather"], "get_weather", "get-weather"),
        (["get weather"], "get_weather", "get weather"),
        (["get weather", "get_weather"], "get_weather_2", "get_weather"),
        (["get weather", "get_weather"], "get_weather", "get weather"),
    ],
)
def test_gpt_oss_s_calls_name_the_requested_tool(tools: list[str], written: str, name: str) -> None:
    got = parsed(HARMONY, harmony_call(written), [tool(n) for n in tools])
    assert got == Delta(tool_calls=[call(name, city="Paris")])


def test_a_requested_name_is_read_whole_and_one_never_shown_as_written() -> None:
    """A forced call's grammar writes the tool's own name, space and all; a name the prompt did
    not show (a built-in's, one the model made up) is kept (``OriginalFromConverted``'s fallback)."""
    tools = [tool("get weather"), tool("browser.search")]
    for written in ("get weather", "browser.search", "lookup"):
        assert parsed(HARMONY, harmony_call(written), tools) == Delta(tool_calls=[call(written, city="Paris")])


NAMES_GO = (
    "{{ range .Tools }}{{ .Function.Name }};{{ end }}"
    "{{ range .Messages }}{{ range .ToolCalls }}[{{ .Function.Name }}]{{ end }}{{ end }}"
)
HISTORY = [
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": "", "tool_calls": [call("get-weather", city="Paris")]},
]


def shown(parser: str | None, template: str = NAMES_GO) -> str:
    model: Any = SimpleNamespace(
        info=SimpleNamespace(chat_template=None, chat_markers=(), architecture="gptoss"),
        record=SimpleNamespace(renderer_in_use="", template=template, parser=parser),
        has=lambda cap: False,
        full_name="gpt-oss:20b",
    )
    prompt = ChatPrompt(model, HISTORY, thinking=False, tools=[tool("get-weather"), tool("get.time")])
    return prompt.render_go(RenderBudget(), None)


def test_gpt_oss_s_prompt_shows_the_tools_renamed_and_the_history_s_calls_as_they_were() -> None:
    """Ollama renders the tools ``HarmonyMessageHandler.Init`` returns, and the messages as sent."""
    assert shown("harmony") == "get_weather;get_time;[get-weather]"
    assert (
        shown(None, NAMES_GO + "<|channel|><|message|>") == "get_weather;get_time;[get-weather]<|channel|><|message|>"
    )
    assert shown(None) == "get-weather;get.time;[get-weather]"
    assert shown("passthrough", NAMES_GO + "<|channel|><|message|>").startswith("get-weather;get.time;")


def test_a_turn_marker_is_never_kept_as_a_tool_tag() -> None:
    """A template whose call branch opens with the assistant's header must not make that header
    render as text in every model's chats (the preserved tags are process-wide)."""
    preserve_tool_tag("<|start_header_id|>assistant<|end_header_id|>")
    assert not renders_as_text("<|start_header_id|>")
