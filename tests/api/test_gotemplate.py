"""The Go text/template subset used for Ollama prompt templates."""

from __future__ import annotations

import pytest

from cllm_ollama.api.gotemplate import TemplateError, render_go_template

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
            '[{"Role":"system","Content":"Be brief."},{"Role":"user","Content":"Hi"},'
            '{"Role":"assistant","Content":"Hello"},{"Role":"user","Content":"Bye"}]',
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
