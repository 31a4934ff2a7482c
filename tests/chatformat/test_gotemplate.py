"""The Go text/template subset used for Ollama prompt templates."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cllm_ollama.chatformat.gotemplate import TemplateError, render_go_template
from cllm_ollama.chatformat.render_budget import PromptTooLong, RenderBudget, RenderTimeout

DATA = {
    "System": "Be brief.",
    "Prompt": "Hi",
    "Response": "",
    "Messages": [
        {"Role": "system", "Content": "Be brief."},
        {"Role": "user", "Content": "Hi"},
        {"Role": "assistant", "Content": "Hello"},
        {"Role": "user", "Content": "Bye"},
    ],
    "Tools": None,
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ .System }} USER: {{ .Prompt }} ASSISTANT:", "Be brief. USER: Hi ASSISTANT:"),
        ("{{ if .System }}<s>{{ .System }}</s>{{ end }}{{ .Prompt }}", "<s>Be brief.</s>Hi"),
        ("{{ if .Tools }}tools{{ else }}none{{ end }}", "none"),
        ("A  {{- .Prompt -}}  B", "AHiB"),
        ("{{/* a comment */}}{{ .Prompt }}", "Hi"),
        (
            '{{ range .Messages }}{{ if eq .Role "user" }}U:{{ .Content }};{{ else if eq .Role "assistant" }}'
            "A:{{ .Content }};{{ else }}S;{{ end }}{{ end }}",
            "S;U:Hi;A:Hello;U:Bye;",
        ),
        (
            "{{ range $i, $m := .Messages }}{{ $i }}{{ $m.Role }}{{ $.Prompt }} {{ end }}",
            "0systemHi 1userHi 2assistantHi 3userHi ",
        ),
        ("{{ len .Messages }} {{ and .System .Prompt }} {{ or .Tools .Prompt }} {{ not .Tools }}", "4 Hi Hi true"),
        ("{{ with .System }}[{{ . }}]{{ end }}", "[Be brief.]"),
        ("{{ range .Tools }}x{{ else }}no tools{{ end }}", "no tools"),
        (
            "{{ json .Messages }}",
            # Plain dicts are Go maps: keys in order (Ollama's messages are structs: see test_ollama_templates).
            '[{"Content":"Be brief.","Role":"system"},{"Content":"Hi","Role":"user"},'
            '{"Content":"Hello","Role":"assistant"},{"Content":"Bye","Role":"user"}]',
        ),
    ],
)
def test_renders_like_go(template: str, expected: str) -> None:
    assert render_go_template(template, DATA) == expected


@pytest.mark.parametrize("template", ["{{ if .System }}x", "{{ end }}", "{{ nope .X }}", "{{ .A ( }}", "{{ else }}"])
def test_broken_templates_are_500_errors(template: str) -> None:
    with pytest.raises(TemplateError) as err:
        render_go_template(template, DATA)
    assert err.value.status_code == 500 and err.value.message.startswith("template: ")


@pytest.mark.parametrize(
    ("template", "message"),
    [
        # Go's exec.go: "range can't iterate over %v" for what is neither a collection nor an int.
        ("{{ range .Prompt }}x{{ end }}", "template: range can't iterate over Hi"),
        ("{{ range 2.5 }}x{{ end }}", "template: range can't iterate over 2.5"),
        ("{{ range $i, $c := 3 }}x{{ end }}", "template: can't use 3 to iterate over more than one variable"),
        ("{{ range 5 }}", "template: :1: unexpected EOF: missing {{end}}"),
    ],
)
def test_range_refuses_what_go_refuses(template: str, message: str) -> None:
    with pytest.raises(TemplateError) as err:
        render_go_template(template, DATA)
    assert err.value.status_code == 500 and err.value.message == message


def test_range_over_ints_and_maps_as_go_does() -> None:
    assert render_go_template("{{ range 3 }}{{ . }}{{ end }}|{{ range 0 }}x{{ else }}none{{ end }}", DATA) == "012|none"
    data = {"M": {"b": 1, "a": 2}}
    assert render_go_template("{{ range $k, $v := .M }}{{ $k }}={{ $v }};{{ end }}", data) == "a=2;b=1;"


def nested_ifs(depth: int) -> str:
    return "{{ if .System }}" * depth + "x" + "{{ end }}" * depth


def nested_parentheses(depth: int) -> str:
    return "{{ len " + "(" * depth + ".Messages" + ")" * depth + " }}"


@pytest.mark.parametrize(
    ("nest", "message", "shallow_output"),
    [
        (nested_ifs, "template: blocks nested deeper than 100", "x"),
        (nested_parentheses, "template: max expression depth exceeded", "4"),
    ],
)
def test_deep_nesting_is_refused(nest: Callable[[int], str], message: str, shallow_output: str) -> None:
    with pytest.raises(TemplateError) as err:
        render_go_template(nest(101), DATA)
    assert err.value.message == message
    assert render_go_template(nest(100), DATA) == shallow_output


def test_a_huge_range_stops_at_the_budget() -> None:
    with pytest.raises(RenderTimeout):
        render_go_template("{{ range 1000000000000 }}{{ end }}", DATA, RenderBudget(0.2))
    with pytest.raises(PromptTooLong):
        render_go_template("{{ range 1000000000000 }}{{ . }}{{ end }}", DATA, RenderBudget(60, max_chars=100000))
