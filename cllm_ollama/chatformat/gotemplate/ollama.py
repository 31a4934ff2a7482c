"""Ollama's way of executing its templates (``template/template.go``): messages merged by role,
``.Messages`` or the legacy ``.Prompt``/``.Response`` per turn, tools and messages as Go structs."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..render_budget import RenderBudget
from .exec import execute
from .parser import Action, Branch, Command, Field, Parsed, Pipe, TemplateCall, Variable, parse
from .values import GoList, GoMap, GoStruct, Ordered, TemplateError, go_json, struct_json


def identifiers(parsed: Parsed) -> set[str]:
    """Ollama's ``Template.Vars``: every field and variable name the template uses, lower-cased."""
    names: set[str] = set()

    def pipe(p: Pipe | None) -> None:
        if p is None:
            return
        for cmd in p.cmds:
            for arg in cmd.args:
                if isinstance(arg, Field | Variable):
                    names.update(i.lower() for i in arg.idents)
                elif isinstance(arg, Pipe):
                    pipe(arg)

    def walk(nodes: list[Any]) -> None:
        for node in nodes:
            if isinstance(node, Action):
                pipe(node.pipe)
            elif isinstance(node, Branch):
                pipe(node.pipe)
                walk(node.body)
                walk(node.orelse or [])
            elif isinstance(node, TemplateCall):
                if node.pipe is None:
                    raise TemplateError("undefined template specified")
                pipe(node.pipe)

    walk(parsed.nodes)
    for body in parsed.defines.values():
        walk(body)
    return names


@dataclass
class OllamaTemplate:
    parsed: Parsed
    vars: set[str]
    legacy_last: list[Any]  # the tree cut after {{ .Response }}, for a legacy template's last turn


_RESPONSE_ACTION = Action(Pipe(cmds=[Command([Field(["Response"])])]))


@functools.lru_cache(maxsize=64)
def parse_ollama(src: str) -> OllamaTemplate:
    """Ollama's ``template.Parse``: {{ .Response }} is appended to a template that names neither
    ``.Messages`` nor ``.Response``."""
    parsed = parse(src)
    names = identifiers(parsed)
    if "messages" not in names and "response" not in names:
        parsed = Parsed([*parsed.nodes, _RESPONSE_ACTION], parsed.defines)
    return OllamaTemplate(parsed, names, _cut_after_response(parsed.nodes))


def _cut_after_response(nodes: list[Any]) -> list[Any]:
    """Ollama's ``deleteNode``: everything after the first ``.Response`` field goes."""
    cut = False

    def gone(node: Any) -> bool:
        nonlocal cut
        if isinstance(node, Field) and "Response" in node.idents:
            cut = True
            return False
        return cut

    def walk(node: Any) -> Any:
        if gone(node):
            return None
        if isinstance(node, list):
            return [w for child in node if (w := walk(child)) is not None]
        if isinstance(node, Branch):
            node.body = walk(node.body) or []
            if node.orelse is not None:
                node.orelse = walk(node.orelse)
        elif isinstance(node, Action):
            p = walk(node.pipe)
            if p is None:
                return None
            node.pipe = p
        elif isinstance(node, Pipe):
            cmds = []
            for cmd in node.cmds:
                args = [w for arg in cmd.args if (w := walk(arg)) is not None]
                if not args:
                    return None
                cmd.args = args
                cmds.append(cmd)
            if not cmds:
                return None
            node.cmds = cmds
        return node

    return walk(copy.deepcopy(nodes)) or []


def _json_struct(pairs: Callable[[], Ordered]) -> Callable[[], str]:
    return lambda: go_json(pairs())


def tool_property(prop: Any) -> GoStruct:
    """An ``api.ToolProperty`` from a JSON schema property."""
    p = prop if isinstance(prop, dict) else {}
    # Go reads a null type, or a null among several, as "" (PropertyType.UnmarshalJSON).
    raw_type = p.get("type", [])
    listed = raw_type if isinstance(raw_type, list) else [raw_type]
    types = GoList(["" if t is None else t for t in listed if t is None or isinstance(t, str)])
    types.string = lambda: types[0] if len(types) == 1 else ("" if not types else "[" + " ".join(types) + "]")
    any_of = [tool_property(x) for x in p.get("anyOf") or []] if isinstance(p.get("anyOf"), list) else []
    properties = p.get("properties")
    props = _properties(properties) if isinstance(properties, dict) else None
    fields = {
        "AnyOf": any_of,
        "Type": types,
        "Items": p.get("items"),
        "Description": p.get("description") or "",
        "Enum": p.get("enum"),
        "Properties": props,
        "Required": p.get("required"),
    }

    def as_json() -> Ordered:
        typ: Any = types[0] if len(types) == 1 else list(types)
        # omitempty leaves out an `any` field only when nil (an empty object stays), and a
        # PropertyType only when it has no type ([""] stays).
        return struct_json(
            ("anyOf", any_of, True),
            ("type", typ, not types),
            ("items", fields["Items"], fields["Items"] is None),
            ("description", fields["Description"], True),
            ("enum", fields["Enum"], True),
            ("properties", Ordered(list(props.items()), escapes_html=True) if props is not None else None, True),
            ("required", fields["Required"], True),
        )

    return GoStruct("api.ToolProperty", fields, json=as_json)


def _properties(properties: dict[str, Any]) -> GoMap:
    props = GoMap({name: tool_property(value) for name, value in properties.items()})
    props.string = lambda: go_json(props)
    return props


def api_parameters(params: Any) -> Ordered:
    """The JSON of an ``api.ToolFunctionParameters`` (what Ollama's renderers marshal): its fields
    in order, keys it lacks dropped, properties in the request's order, ``null`` when none."""
    p = params if isinstance(params, dict) else {}
    raw = p.get("properties")
    props = None
    if isinstance(raw, dict):
        props = Ordered([(k, tool_property(v)) for k, v in raw.items()], escapes_html=True)
    defs, items = p.get("$defs"), p.get("items")
    return struct_json(
        ("type", p.get("type") or "", False),
        ("$defs", defs, defs is None),  # `any`: left out only when nil
        ("items", items, items is None),
        ("required", p.get("required"), True),
        ("properties", props, False),
    )


def api_function(function: Any) -> Ordered:
    """The JSON of an ``api.ToolFunction``: a name, a description only when there is one."""
    fn = function if isinstance(function, dict) else {}
    return struct_json(
        ("name", fn.get("name") or "", False),
        ("description", fn.get("description") or "", True),
        ("parameters", api_parameters(fn.get("parameters")), False),
    )


def api_tool(tool: Any) -> Ordered:
    """The JSON of an ``api.Tool``, as ``json.Marshal`` writes a request's tool in Ollama's renderers
    (the request's own JSON is not what they see: ``template_tools`` is the templates' view)."""
    t = tool if isinstance(tool, dict) else {}
    items = t.get("items")
    return struct_json(("type", t.get("type") or "", False), ("items", items, items is None),
                       ("function", api_function(t.get("function")), False))  # fmt: skip


def template_tools(tools: list[dict[str, Any]] | None) -> GoList | None:
    """Ollama's ``convertToolsForTemplate``: tools as structs with Go field names, printed as JSON."""
    if tools is None:
        return None
    out = GoList()
    for tool in tools:
        t = tool if isinstance(tool, dict) else {}
        fn: dict[str, Any] = t["function"] if isinstance(t.get("function"), dict) else {}
        params: dict[str, Any] = fn["parameters"] if isinstance(fn.get("parameters"), dict) else {}
        raw_props = params.get("properties")
        props = _properties(raw_props) if isinstance(raw_props, dict) else None
        parameters = GoStruct(
            "template.templateToolFunctionParameters",
            {
                "Type": params.get("type") or "",
                "Defs": params.get("$defs"),
                "Items": params.get("items"),
                "Required": params.get("required"),
                "Properties": props,
            },
        )
        parameters.json = lambda p=parameters: struct_json(  # type: ignore[misc]
            ("type", p.fields["Type"], False),
            ("$defs", p.fields["Defs"], True),
            ("items", p.fields["Items"], True),
            ("required", p.fields["Required"], True),
            ("properties", p.fields["Properties"], False),
        )
        parameters.string = _json_struct(parameters.json)  # type: ignore[arg-type]
        function = GoStruct(
            "template.templateToolFunction",
            {"Name": fn.get("name") or "", "Description": fn.get("description") or "", "Parameters": parameters},
        )
        function.json = lambda f=function: struct_json(  # type: ignore[misc]
            ("name", f.fields["Name"], False),
            ("description", f.fields["Description"], False),
            ("parameters", f.fields["Parameters"], False),
        )
        # Ollama's library templates write {{ .Function }} expecting JSON, as api.ToolFunction prints.
        function.string = _json_struct(function.json)  # type: ignore[arg-type]
        go_tool = GoStruct(
            "template.templateTool", {"Type": t.get("type") or "", "Items": t.get("items"), "Function": function}
        )
        go_tool.json = lambda g=go_tool: struct_json(  # type: ignore[misc]
            ("type", g.fields["Type"], False),
            ("items", g.fields["Items"], True),
            ("function", g.fields["Function"], False),
        )
        go_tool.string = _json_struct(go_tool.json)  # type: ignore[arg-type]
        out.append(go_tool)
    out.string = lambda: go_json(out)
    return out


def _arguments(value: Any) -> GoMap:
    args = GoMap(value if isinstance(value, dict) else {})
    args.string = lambda: go_json(args) if args else "{}"
    return args


def template_message(message: dict[str, Any]) -> GoStruct:
    """Ollama's ``templateMessage``: Role, Content, Thinking, Images, ToolCalls, ToolName, ToolCallID."""
    calls = []
    for call in message.get("tool_calls") or []:
        fn: dict[str, Any] = (
            call["function"] if isinstance(call, dict) and isinstance(call.get("function"), dict) else {}
        )
        calls.append(
            GoStruct(
                "template.templateToolCall",
                {
                    "ID": call.get("id") or "" if isinstance(call, dict) else "",
                    "Function": GoStruct(
                        "template.templateToolCallFunction",
                        {
                            "Index": fn.get("index") or 0,
                            "Name": fn.get("name") or "",
                            "Arguments": _arguments(fn.get("arguments")),
                        },
                    ),
                },
            )
        )
    return GoStruct(
        "*template.templateMessage",
        {
            "Role": message.get("role") or "",
            "Content": message.get("content") or "",
            "Thinking": message.get("thinking") or "",
            "Images": message.get("images") or None,
            "ToolCalls": calls or None,
            "ToolName": message.get("tool_name") or "",
            "ToolCallID": message.get("tool_call_id") or "",
        },
    )


def collate(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Ollama's ``collate``: the system messages joined, and consecutive messages of one role merged
    (tool results excepted)."""
    system = [m.get("content") or "" for m in messages if m.get("role") == "system"]
    out: list[dict[str, Any]] = []
    for message in messages:
        if out and out[-1].get("role") == message.get("role") and message.get("role") != "tool":
            out[-1] = {**out[-1], "content": (out[-1].get("content") or "") + "\n\n" + (message.get("content") or "")}
        else:
            out.append(dict(message))
    return "\n\n".join(system), out


def render_ollama(
    template: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    think: bool = False,
    think_level: str = "",
    think_set: bool = False,
    prompt: str = "",
    suffix: str = "",
    budget: RenderBudget | None = None,
) -> str:
    """Render a model's (or a request's) Go template as Ollama's ``Template.Execute`` does."""
    t = parse_ollama(template)
    budget = budget or RenderBudget()
    think_values = {"Think": think, "ThinkLevel": think_level, "IsThinkSet": think_set}
    system, collated = collate(messages)
    if prompt and suffix:
        return execute(t.parsed, {"Prompt": prompt, "Suffix": suffix, "Response": "", **think_values}, budget)
    if "messages" in t.vars:
        data = {
            "System": system,
            "Messages": [template_message(m) for m in collated],
            "Tools": template_tools(tools),
            "Response": "",
            **think_values,
        }
        return execute(t.parsed, data, budget)
    # An older template: run once per turn, then once more cut after {{ .Response }}.
    out: list[str] = []
    system = prompt_text = response = ""

    def run() -> None:
        nonlocal system, prompt_text, response
        data = {"System": system, "Prompt": prompt_text, "Response": response, **think_values}
        out.append(execute(t.parsed, data, budget))
        system = prompt_text = response = ""

    for message in collated:
        role, content = message.get("role"), message.get("content") or ""
        if role == "system":
            if prompt_text or response:
                run()
            system = content
        elif role == "user":
            if response:
                run()
            prompt_text = content
        elif role == "assistant":
            response = content
    data = {"System": system, "Prompt": prompt_text, "Response": response, **think_values}
    out.append(execute(t.parsed, data, budget, nodes=t.legacy_last))
    return "".join(out)
