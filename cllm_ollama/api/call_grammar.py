"""The grammar of a forced tool call (``tool_choice`` required or naming a function): the whole
output is one call, or several, in the syntax the model's family writes calls in, as its output
parser reads them (``model_families`` says which family; ``chatformat.family_parsers`` and
``chatformat.parsers`` read them), each call's arguments held to its tool's JSON Schema.

Families whose calls are JSON put the whole argument object under its schema's rules. Qwen3-Coder
and GLM write each parameter as text: a string parameter is any text without ``</``, another one
the JSON its schema allows (the parser types it back by the schema). A family this table does not
know gets a bare JSON call object, ``{"name": ..., "arguments": {...}}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..engine.grammar import grammar_with_schemas
from ..errors import InvalidRequest
from ..model_families import parser_family, tool_syntax

# Text up to a closing tag: no ``</`` inside (Qwen3-Coder's and GLM's string parameters).
_TEXT_VALUE = '([^<] | "<" [^/])*'


def literal(text: str) -> str:
    """A GBNF string literal (JSON's escapes are GBNF's: quotes, backslashes, control characters)."""
    return json.dumps(text, ensure_ascii=False)


@dataclass(frozen=True)
class _Tool:
    name: str
    parameters: dict[str, Any]

    @property
    def properties(self) -> dict[str, Any]:
        properties = self.parameters.get("properties")
        return properties if isinstance(properties, dict) else {}

    @property
    def required(self) -> list[str]:
        required = self.parameters.get("required")
        return [k for k in required if k in self.properties] if isinstance(required, list) else []


class _Rules:
    """The schemas the grammar's rules are made from: each gets a rule name ``tcN``."""

    def __init__(self) -> None:
        self.schemas: list[tuple[str, str]] = []

    def add(self, schema: object) -> str:
        name = f"tc{len(self.schemas)}"
        self.schemas.append((name, json.dumps(schema, ensure_ascii=False, sort_keys=False)))
        return name


def _json_call(tool: _Tool, rules: _Rules, key: str = "arguments") -> str:
    """A call as one JSON object, ``{"name": NAME, KEY: ARGUMENTS}``."""
    schema = {
        "type": "object",
        "properties": {"name": {"const": tool.name}, key: tool.parameters},
        "required": ["name", key],
        "additionalProperties": False,
    }
    return rules.add(schema)


def _text_parameters(tool: _Tool, rules: _Rules, write: Callable[[str, str], str]) -> str:
    """The parameters of a family that writes them one by one as text: the required ones in the
    schema's order, then each optional one or not; ``write(key, value_rule)`` spells one."""
    parts = []
    for key, schema in tool.properties.items():
        schema = schema if isinstance(schema, dict) else {}
        value = f"({_TEXT_VALUE})" if schema.get("type") == "string" else rules.add(schema)
        part = write(key, value)
        parts.append(part if key in tool.required else f"({part})?")
    return " ".join(parts) or '""'


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
        args = rules.add(tool.parameters)
        if fenced:
            head = literal(_DS["call▁begin"] + "function" + _DS["sep"] + tool.name + "\n```json\n")
            return f"{head} {args} " + literal("\n```" + _DS["call▁end"])
        return literal(_DS["call▁begin"] + tool.name + _DS["sep"]) + f" {args} " + literal(_DS["call▁end"])

    return call


def _harmony(tool: _Tool, rules: _Rules) -> str:
    """gpt-oss: a commentary message to the function; ``<|call|>`` (end of generation) closes it."""
    head = literal("<|channel|>commentary to=functions." + tool.name + " <|constrain|>json<|message|>")
    return f"{head} {rules.add(tool.parameters)}"


@dataclass(frozen=True)
class _Syntax:
    """How one family writes calls: each call, what stands between calls, and around them all."""

    call: Callable[[_Tool, _Rules], str]
    separator: str = ""
    opening: str = ""
    closing: str = ""
    many: bool = True  # several calls in one answer


def _syntax(template: str | None) -> _Syntax:
    """The call syntax of the family the template's output parser is chosen by."""
    family = parser_family(template)
    if family is None:
        kind = tool_syntax(template)
        if kind == "HERMES":
            return _Syntax(lambda t, r: f'"<tool_call>\\n" {_json_call(t, r)} "\\n</tool_call>"', '"\\n"')
        if kind == "LLAMA":
            return _Syntax(lambda t, r: _json_call(t, r, "parameters"), '";"')
        if kind == "MISTRAL":
            return _Syntax(_json_call, '","', '"[TOOL_CALLS]["', '"]"')
    elif family.name == "qwen3-coder":
        return _Syntax(_qwen3_coder, '"\\n"')
    elif family.name == "glm":
        return _Syntax(_glm, '"\\n"')
    elif family.name == "deepseek":
        fenced = "```json" in (template or "")
        return _Syntax(_deepseek_call(fenced), opening=literal(_DS["calls▁begin"]), closing=literal(_DS["calls▁end"]))
    elif family.name == "harmony":
        return _Syntax(_harmony, many=False)
    return _Syntax(_json_call, '"\\n"')  # a family whose call syntax is not known here: bare JSON


def _tool(spec: dict[str, Any]) -> _Tool:
    inner = spec.get("function")
    function: dict[str, Any] = inner if isinstance(inner, dict) else spec
    parameters = function.get("parameters")
    if parameters is None or parameters == {}:
        parameters = {"type": "object"}
    if not isinstance(parameters, dict):
        raise InvalidRequest(f"invalid parameters for tool {json.dumps(function.get('name'))}")
    return _Tool(str(function.get("name") or ""), parameters)


def call_grammar(template: str | None, tools: Sequence[dict[str, Any]], *, many: bool) -> str:
    """GBNF for output that is only calls of ``tools`` (chat-shaped tool specs): one, or with
    ``many`` one or more, in the syntax of the family ``template`` belongs to.

    Converts the tools' schemas: call it off the event loop.
    """
    syntax = _syntax(template)
    rules = _Rules()
    alternatives = [syntax.call(_tool(spec), rules) for spec in tools]
    if not alternatives:
        raise InvalidRequest("tool_choice requires tools")
    one = alternatives[0] if len(alternatives) == 1 else "(" + " | ".join(f"({a})" for a in alternatives) + ")"
    calls = f"{one} ({syntax.separator} {one})*" if many and syntax.many and syntax.separator else one
    root = " ".join(part for part in (syntax.opening, f"({calls})", syntax.closing) if part)
    return grammar_with_schemas(root, tuple(rules.schemas))
