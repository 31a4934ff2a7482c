"""The grammar of a forced tool call (``tool_choice`` required or naming a function): the whole
output is one call, or several, in the syntax the model's family writes calls in, as its output
parser reads them (``model_families`` says which family; ``chatformat.family_parsers`` and
``chatformat.parsers`` read them), each call's arguments held to its tool's JSON Schema.

Families whose calls are JSON put the whole argument object under its schema's rules. The others
write each parameter in their own way, its value as JSON by its schema unless said otherwise:
- Qwen3-Coder and GLM as text between tags: a string parameter is any text without ``</`` (the
  parser types the others back by the schema);
- Gemma 4 and FunctionGemma as ``key:value`` in braces, a string between the family's quote marks
  (``<|"|>``, ``<escape>``), which it may not contain;
- LFM2 and OLMo 3 as Python keyword arguments (JSON's literals are Python's), OLMo 3's on one line;
- Ministral 3 as JSON after ``[ARGS]``, Command as JSON actions.
A family this table does not know gets a bare JSON call object, ``{"name": ..., "arguments": {...}}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..chatformat.family_parsers import harmony_tools
from ..chatformat.parsers import TemplateTag, tool_format_for_template
from ..engine.gbnf import literal
from ..engine.grammar import HoistedSchema, grammar_with_schemas, hoist_refs
from ..errors import InvalidRequest
from ..model_families import parser_family, tool_syntax

# Text up to a closing tag: no ``</`` inside (Qwen3-Coder's and GLM's string parameters). A run of
# ``<`` is followed by anything but ``/`` (or another ``<``), so the text may not end in ``<``.
_TEXT_VALUE = '([^<] | "<"+ [^/<])*'


def _quoted_text(quote: str) -> str:
    """Text between a family's ``quote`` marks (``<|"|>``, ``<escape>``), which it may not hold: a
    run of ``<`` is never followed by the mark's second character."""
    return f'([^<] | "<"+ [^<{quote[1]}])*'


@dataclass(frozen=True)
class _Tool:
    name: str
    # Its parameters' schema, local refs pointing to definitions of its own: the grammar embeds
    # the schema in a call's, or writes its parameters one by one.
    hoisted: HoistedSchema

    @property
    def parameters(self) -> dict[str, Any]:
        """The parameters' schema (what its root refers to, as a recursive Pydantic model's)."""
        return self.hoisted.deref(self.hoisted.schema)

    @property
    def properties(self) -> dict[str, Any]:
        """Each parameter's schema, what a ref refers to (a Pydantic enum's), for its type to be read."""
        properties = self.parameters.get("properties")
        if not isinstance(properties, dict):
            return {}
        return {
            key: self.hoisted.deref(value) if isinstance(value, dict) else value for key, value in properties.items()
        }

    @property
    def required(self) -> list[str]:
        required = self.parameters.get("required")
        return [k for k in required if k in self.properties] if isinstance(required, list) else []


class _Rules:
    """The schemas the grammar's rules are made from: each gets a rule name ``tcN``."""

    def __init__(self) -> None:
        self.schemas: list[tuple[str, str]] = []

    def add(self, schema: dict[str, Any], tool: _Tool) -> str:
        """A rule for ``schema``: ``tool``'s parameters, one of them, or a call's schema that embeds
        them; ``tool``'s definitions go with it, for its refs."""
        name = f"tc{len(self.schemas)}"
        self.schemas.append((name, json.dumps(tool.hoisted.rooted(schema), ensure_ascii=False, sort_keys=False)))
        return name


def _json_call(tool: _Tool, rules: _Rules, key: str = "arguments") -> str:
    """A call as one JSON object, ``{"name": NAME, KEY: ARGUMENTS}``."""
    schema = {
        "type": "object",
        "properties": {"name": {"const": tool.name}, key: tool.parameters},
        "required": ["name", key],
        "additionalProperties": False,
    }
    return rules.add(schema, tool)


def _text_parameters(tool: _Tool, rules: _Rules, write: Callable[[str, str], str]) -> str:
    """The parameters of a family that writes them one by one as text: the required ones in the
    schema's order, then each optional one or not; ``write(key, value_rule)`` spells one."""
    parts = []
    for key, schema in tool.properties.items():
        schema = schema if isinstance(schema, dict) else {}
        value = _text_value(schema) if schema.get("type") == "string" else rules.add(schema, tool)
        part = write(key, value)
        parts.append(part if key in tool.required else f"({part})?")
    return " ".join(parts) or '""'


def _listed(required: list[str], optional: list[str], comma: str) -> str:
    """Parameters between ``comma``: the required ones, then each optional one or not."""
    if required:
        return " ".join([f" {comma} ".join(required)] + [f"({comma} {o})?" for o in optional])
    tails = [" ".join([o] + [f"({comma} {rest})?" for rest in optional[i + 1 :]]) for i, o in enumerate(optional)]
    return "(" + " | ".join(f"({t})" for t in tails) + ")?" if tails else '""'


def _keyword_parameters(tool: _Tool, rules: _Rules, write: Callable[[str, dict[str, Any]], str], comma: str) -> str:
    """The parameters of a family that names each one, between ``comma``: the required ones in the
    schema's order, then the optional ones; ``write(key, schema)`` spells one."""
    required: list[str] = []
    optional: list[str] = []
    for key, schema in tool.properties.items():
        part = write(key, schema if isinstance(schema, dict) else {})
        (required if key in tool.required else optional).append(part)
    return _listed(required, optional, comma)


def _string_values(schema: dict[str, Any]) -> list[str] | None:
    """The strings a string parameter may be, where its schema lists them (``enum``, ``const``)."""
    values = [schema["const"]] if "const" in schema else schema.get("enum")
    if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
        return values
    return None


def _keyed(quote: str, opening: str, closing: str) -> Callable[[_Tool, _Rules], str]:
    """Gemma 4 and FunctionGemma: ``call:NAME{key:value,...}``, a string between ``quote`` marks."""

    def write_value(schema: dict[str, Any], tool: _Tool, rules: _Rules) -> str:
        if schema.get("type") != "string":
            return rules.add(schema, tool)
        values = _string_values(schema)
        text = "(" + " | ".join(literal(v) for v in values) + ")" if values else f"({_quoted_text(quote)})"
        return f"{literal(quote)} {text} {literal(quote)}"

    def call(tool: _Tool, rules: _Rules) -> str:
        def write(key: str, schema: dict[str, Any]) -> str:
            return literal(key + ":") + " " + write_value(schema, tool, rules)

        head = literal(opening + "call:" + tool.name + "{")
        return f"{head} {_keyword_parameters(tool, rules, write, literal(','))} " + literal("}" + closing)

    return call


def _python_call(tool: _Tool, rules: _Rules) -> str:
    """LFM2 and OLMo 3: ``NAME(key=value, ...)``, each value JSON by its schema."""

    def write(key: str, schema: dict[str, Any]) -> str:
        return literal(key + "=") + " " + rules.add(schema, tool)

    return f"{literal(tool.name + '(')} {_keyword_parameters(tool, rules, write, literal(', '))} {literal(')')}"


def _ministral(tool: _Tool, rules: _Rules) -> str:
    """Ministral 3 / Devstral: ``[TOOL_CALLS]NAME[ARGS]{json}``, each call opening its own."""
    return literal("[TOOL_CALLS]" + tool.name + "[ARGS]") + " " + rules.add(tool.parameters, tool)


def _cohere(tool: _Tool, rules: _Rules) -> str:
    """Command: one action, ``{"tool_call_id": "0", "tool_name": NAME, "parameters": {...}}``."""
    schema = {
        "type": "object",
        "properties": {
            "tool_call_id": {"type": "string", "pattern": "^[0-9]{1,3}$"},
            "tool_name": {"const": tool.name},
            "parameters": tool.parameters,
        },
        "required": ["tool_call_id", "tool_name", "parameters"],
        "additionalProperties": False,
    }
    return rules.add(schema, tool)


def _text_value(schema: dict[str, Any]) -> str:
    """A string parameter written as text: one of the strings its schema lists, or any text."""
    values = _string_values(schema)
    return "(" + " | ".join(literal(v) for v in values) + ")" if values else f"({_TEXT_VALUE})"


def _glimmer(tool: _Tool, rules: _Rules) -> str:
    """Glimmer: a message to the tool, its body an ATEM block, a parameter a line (text as is)."""

    def write(key: str, value: str) -> str:
        return literal(f'<atem:parameter name="{key}">') + f" {value} " + literal("</atem:parameter>\n")

    head = literal(f' to={tool.name}<|message|><atem:function_calls>\n<atem:invoke name="{tool.name}">\n')
    return f"{head} {_text_parameters(tool, rules, write)} " + literal("</atem:invoke>\n</atem:function_calls>")


def _qwen3_coder(tool: _Tool, rules: _Rules) -> str:
    def write(key: str, value: str) -> str:
        return literal("<parameter=" + key + ">\n") + f" {value} " + literal("\n</parameter>\n")

    head = literal("<tool_call>\n<function=" + tool.name + ">\n")
    return f"{head} {_text_parameters(tool, rules, write)} " + literal("</function>\n</tool_call>")


def _glm(tool: _Tool, rules: _Rules) -> str:
    def write(key: str, value: str) -> str:
        return literal("<arg_key>" + key + "</arg_key>\n<arg_value>") + f" {value} " + literal("</arg_value>\n")

    head = literal("<tool_call>" + tool.name + "\n")
    return f"{head} {_text_parameters(tool, rules, write)} " + literal("</tool_call>")


_DS = {k: f"<｜tool▁{k}｜>" for k in ("calls▁begin", "calls▁end", "call▁begin", "call▁end", "sep")}


def _deepseek_call(fenced: bool) -> Callable[[_Tool, _Rules], str]:
    """DeepSeek-V3/R1 (``function<sep>NAME`` and fenced JSON) or V3.1 (``NAME<sep>JSON``)."""

    def call(tool: _Tool, rules: _Rules) -> str:
        args = rules.add(tool.parameters, tool)
        if fenced:
            head = literal(_DS["call▁begin"] + "function" + _DS["sep"] + tool.name + "\n```json\n")
            return f"{head} {args} " + literal("\n```" + _DS["call▁end"])
        return literal(_DS["call▁begin"] + tool.name + _DS["sep"]) + f" {args} " + literal(_DS["call▁end"])

    return call


def _harmony(tool: _Tool, rules: _Rules) -> str:
    """gpt-oss: a commentary message to the function; ``<|call|>`` (end of generation) closes it."""
    head = literal("<|channel|>commentary to=functions." + tool.name + " <|constrain|>json<|message|>")
    return f"{head} {rules.add(tool.parameters, tool)}"


@dataclass(frozen=True)
class _Syntax:
    """How one family writes calls: each call, what stands between calls, and around them all."""

    call: Callable[[_Tool, _Rules], str]
    separator: str = ""
    opening: str = ""
    closing: str = ""
    many: bool = True  # several calls in one answer
    # The JSON values' optional whitespace, where the family's parser wants less than JSON allows:
    # no line breaks (OLMo 3: one call a line).
    space: str = ""
    # A parameter is a bare value typed as written (Glimmer, Qwen3-Coder, GLM: Ollama's
    # parseTypedToolValue): no space around it (Go's strconv reads none), and a number's exponent
    # short enough to stay finite (one ParseFloat finds out of range is left as text).
    bare: bool = False


_HARMONY = _Syntax(_harmony, many=False)
_HERMES = _Syntax(lambda t, r: f'"<tool_call>\\n" {_json_call(t, r)} "\\n</tool_call>"', '"\\n"')
_JSON_SYNTAXES = {
    "HERMES": _HERMES,
    "LLAMA": _Syntax(lambda t, r: _json_call(t, r, "parameters"), '";"'),
    "MISTRAL": _Syntax(_json_call, '","', '"[TOOL_CALLS]["', '"]"'),
}
# Each family's own syntax, as its renderer writes calls into the history (Ollama's
# ``model/renderers``) and its parser reads them.
_FAMILY_SYNTAXES = {
    "qwen3-coder": _Syntax(_qwen3_coder, '"\\n"', bare=True),
    "glm": _Syntax(_glm, '"\\n"', bare=True),
    "harmony": _HARMONY,
    "gemma4": _Syntax(_keyed('<|"|>', "<|tool_call>", "<tool_call|>")),
    "functiongemma": _Syntax(_keyed("<escape>", "<start_function_call>", "<end_function_call>")),
    "ministral": _Syntax(_ministral),
    "lfm2": _Syntax(_python_call, literal(","), literal("<|tool_call_start|>["), literal("]<|tool_call_end|>")),
    "olmo3": _Syntax(
        _python_call, literal("\n"), literal("<function_calls>"), literal("</function_calls>"), space='" "?'
    ),
    # After the prompt's ``<|start|>assistant``: `` to=NAME<|message|>``; each further call a message.
    "glimmer": _Syntax(_glimmer, literal("<|eom|><|start|>assistant"), bare=True),
    "cohere": _Syntax(
        _cohere, literal(",\n\n    "), literal("<|START_ACTION|>[\n\n    "), literal("\n\n]<|END_ACTION|>")
    ),
}


def _syntax(template: str | None, parser: str | None) -> _Syntax:
    """The call syntax of the family the model's output parser is chosen by (``parser_family``)."""
    family = parser_family(template, parser)
    if family is None:
        written = tool_format_for_template(template)
        if isinstance(written, TemplateTag):  # the tag the Go template writes, then a JSON list of calls
            opening = written.written if written.written.endswith("[") else written.written + "["
            return _Syntax(_json_call, literal(","), literal(opening), literal("]"))
        return _JSON_SYNTAXES.get(tool_syntax(template), _HERMES)
    if family.name == "deepseek":
        fenced = "```json" in (template or "")
        return _Syntax(_deepseek_call(fenced), opening=literal(_DS["calls▁begin"]), closing=literal(_DS["calls▁end"]))
    # A family whose call syntax is not known here: bare JSON.
    return _FAMILY_SYNTAXES.get(family.name, _Syntax(_json_call, '"\\n"'))


def _tool(spec: dict[str, Any], index: int) -> _Tool:
    """The ``index``th tool of a grammar: its definitions are named apart from the others' (``tcdefN-``)."""
    inner = spec.get("function")
    function: dict[str, Any] = inner if isinstance(inner, dict) else spec
    parameters = function.get("parameters")
    if parameters is None or parameters == {}:
        parameters = {"type": "object"}
    if not isinstance(parameters, dict):
        raise InvalidRequest(f"invalid parameters for tool {json.dumps(function.get('name'))}")
    return _Tool(str(function.get("name") or ""), hoist_refs(parameters, f"tcdef{index}-", "tool parameters"))


def call_grammar(
    template: str | None,
    tools: Sequence[dict[str, Any]],
    *,
    many: bool,
    parser: str | None = None,
    shown: Sequence[dict[str, Any]] | None = None,
) -> str:
    """GBNF for output that is only calls of ``tools`` (chat-shaped tool specs): one, or with
    ``many`` one or more, in the syntax of the family ``template`` belongs to, or that Ollama's
    ``parser`` name (the model's config) picks, as the output parser picks it. ``shown``: all the
    tools the prompt shows, where ``tools`` are some of them (gpt-oss names them over the whole list).

    Converts the tools' schemas: call it off the event loop.
    """
    syntax = _syntax(template, parser)
    if syntax is _HARMONY:  # the names its prompt shows (``harmony_tools``), which its parser maps back
        tools = harmony_tools(list(tools), list(shown) if shown is not None else None)
    rules = _Rules()
    alternatives = [syntax.call(_tool(spec, index), rules) for index, spec in enumerate(tools)]
    if not alternatives:
        raise InvalidRequest("tool_choice requires tools")
    one = alternatives[0] if len(alternatives) == 1 else "(" + " | ".join(f"({a})" for a in alternatives) + ")"
    calls = f"{one} ({syntax.separator} {one})*" if many and syntax.many else one
    root = " ".join(part for part in (syntax.opening, f"({calls})", syntax.closing) if part)
    grammar = grammar_with_schemas(root, tuple(rules.schemas))
    if syntax.bare:
        grammar = _EXPONENT.sub(_SHORT_EXPONENT, _SPACE.sub('space ::= ""', grammar))
    return _SPACE.sub(lambda _: f"space ::= {syntax.space}", grammar) if syntax.space else grammar


# The converter's optional whitespace, which may break lines.
_SPACE = re.compile(r"^space ::= .*$", re.MULTILINE)
# The converter's number exponent (up to 16 digits), and one of at most two.
_EXPONENT = re.compile(r"\(\[eE\] \[-\+\]\? integral-part\)\?")
_SHORT_EXPONENT = "([eE] [-+]? [0-9] [0-9]?)?"
