"""Go's text/template as Ollama's prompt templates use it, and Ollama's way of executing them.

The language (Go's ``text/template``): text and ``{{ }}`` actions with ``{{-``/``-}}`` trimming and
comments; pipelines (``a | b``); fields (``.A.B``), variables (``$``, ``$x``, ``$x.A``) declared with
``:=`` and assigned with ``=``; string (``"..."``, raw), char, number, bool and ``nil`` literals;
parenthesized pipelines and fields of their result; ``if``/``else if``/``else``, ``range`` (one or
two variables, ``else``, ``break``, ``continue``), ``with``/``else with``, ``define``/``template``/
``block``. Functions: Go's builtins (``and or not len index slice eq ne lt le gt ge print printf
println html js urlquery``) and Ollama's (``json currentDate yesterdayDate toTypeScriptType``).

Ollama's execution (``template/template.go``, ``render_ollama``): consecutive messages of one role
are merged; a template that names ``.Messages`` gets ``.System``, ``.Messages``, ``.Tools``,
``.Think``...; an older one is run once per turn with ``.System``, ``.Prompt``, ``.Response``, the
last run cut after ``{{ .Response }}``; one that names neither ``.Messages`` nor ``.Response`` gets
``{{ .Response }}`` appended. Values are Go's: messages and tools are structs with Go field names
(``{{ .Function.Name }}``) that print as Ollama's do (a tool as its JSON), maps range in key order.

A template may come from a request, so what it may cost is bounded: nesting is limited at parse
time, template calls at run time, and execution stops past the render budget's deadline or size.

Laid out as Go's own package: ``lexer`` (parse/lex.go), ``parser`` (parse/parse.go and node.go),
``exec`` (exec.go), ``funcs`` (funcs.go), ``values`` (Go's values as templates see and print them),
and ``ollama`` (Ollama's template/template.go on top).
"""

from .exec import execute, render_go_template
from .ollama import collate, identifiers, parse_ollama, render_ollama, template_tools
from .parser import Parsed, parse
from .values import TemplateError

__all__ = [
    "Parsed",
    "TemplateError",
    "collate",
    "execute",
    "identifiers",
    "parse",
    "parse_ollama",
    "render_go_template",
    "render_ollama",
    "template_tools",
]
