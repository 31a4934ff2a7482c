"""``tool_choice`` as each dialect spells it, read into one ``ToolChoice`` that the chat enforces.

- ``auto``: the model decides (what a request without the field gets).
- ``none``: no call. The tools are left out of the prompt and the output parser looks for no
  calls, so nothing the model writes becomes one (Anthropic's ``none`` already worked this way;
  OpenAI says the model "will not call any tool and instead generates a message").
- ``required`` (OpenAI; Anthropic's ``any``) and a named function (Anthropic's ``tool``): the
  output is a call, forced by a grammar in the family's call syntax (``call_grammar``): of any of
  the tools, or of the named one only. One call, unless the request asks for parallel calls
  explicitly (``parallel_tool_calls: true``; Anthropic's ``disable_parallel_tool_use: false``), as
  llama-server does: a grammar that lets calls follow one another lets a small model repeat its
  call until the token limit cuts the last one (Qwen2.5-Coder-0.5B did, sampled).
- OpenAI's ``allowed_tools`` (``{"type": "allowed_tools", "allowed_tools": {"mode", "tools"}}``;
  flat in the Responses API): ``auto`` or ``required`` over a subset of ``tools``. The model is
  shown only that subset, so it can call no other.

A choice that names a tool not in ``tools`` is a 400, as OpenAI and Anthropic answer it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InvalidRequest


@dataclass(frozen=True)
class ToolChoice:
    mode: str = "auto"  # auto | none | required | function
    name: str = ""  # the function, for mode "function"
    parallel: bool = False  # several forced calls may follow one another
    only: tuple[str, ...] = ()  # allowed_tools: the tools shown, by name (empty: all of them)

    @property
    def forced(self) -> bool:
        return self.mode in ("required", "function")

    def shown(self, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        """The tools the model is shown (chat-shaped specs): none for ``none``, the allowed subset
        for ``allowed_tools``; 400 where that names a tool not in ``tools``."""
        if self.mode == "none" or not self.only:
            return None if self.mode == "none" else tools
        return _named(tools or [], self.only)

    def allowed(self, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
        """The tools a forced call may be of, out of those shown; 400 where none can be."""
        tools = tools or []
        if not tools:
            raise InvalidRequest("tool_choice requires tools: none were given")
        return _named(tools, (self.name,))[:1] if self.mode == "function" else tools


def _named(tools: list[dict[str, Any]], names: tuple[str, ...]) -> list[dict[str, Any]]:
    """The tools of these names, in ``tools``' order; 400 for a name that is not there."""
    named = [t for t in tools if (t.get("function") or {}).get("name") in names]
    have = {t["function"]["name"] for t in named}
    if missing := [n for n in names if n not in have]:
        raise InvalidRequest(f"tool_choice names a tool that is not in tools: {missing[0]!r}")
    return named


AUTO = ToolChoice()


def openai_tool_choice(value: object, parallel: object, *, flat: bool = False) -> ToolChoice:
    """Chat completions' ``tool_choice`` (``{"type": "function", "function": {"name"}}``), or with
    ``flat`` the Responses API's (``{"type": "function", "name"}``)."""
    parallel_ok = parallel is True
    if value is None:
        return ToolChoice(parallel=parallel_ok)
    if isinstance(value, str):
        if value in ("auto", "none", "required"):
            return ToolChoice(value, parallel=parallel_ok)
        raise InvalidRequest(f"Invalid value for 'tool_choice': {value!r} (must be none, auto, required or a function)")
    if isinstance(value, dict) and value.get("type") == "function":
        holder = value if flat else value.get("function")
        name = holder.get("name") if isinstance(holder, dict) else None
        if isinstance(name, str) and name:
            return ToolChoice("function", name, parallel_ok)
    if isinstance(value, dict) and value.get("type") in ("auto", "none", "required"):
        return ToolChoice(value["type"], parallel=parallel_ok)  # the mode as an object, as some clients send it
    if isinstance(value, dict) and value.get("type") == "allowed_tools":
        return _allowed_tools(value if flat else value.get("allowed_tools"), parallel_ok, flat)
    if isinstance(value, dict) and value.get("type") == "custom":
        raise InvalidRequest("Invalid value for 'tool_choice': custom tools are not supported, only functions")
    raise InvalidRequest("Invalid value for 'tool_choice': a function choice needs a function name")


def _allowed_tools(holder: object, parallel: bool, flat: bool) -> ToolChoice:
    """``allowed_tools``' ``{"mode": "auto" | "required", "tools": [function choices]}``."""
    mode = holder.get("mode") if isinstance(holder, dict) else None
    tools = holder.get("tools") if isinstance(holder, dict) else None
    if mode not in ("auto", "required") or not isinstance(tools, list) or not tools:
        raise InvalidRequest("Invalid value for 'tool_choice': allowed_tools needs a mode (auto or required) and tools")
    names: list[str] = []
    for tool in tools:
        inner = tool if flat else (tool.get("function") if isinstance(tool, dict) else None)
        name = inner.get("name") if isinstance(inner, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(name, str) or not name:
            raise InvalidRequest("Invalid value for 'tool_choice': allowed_tools lists functions by name")
        names.append(name)
    return ToolChoice(mode, parallel=parallel, only=tuple(names))


def anthropic_tool_choice(kind: str | None, name: str | None, disable_parallel: object) -> ToolChoice:
    """Messages' ``{"type": "auto" | "any" | "tool" | "none", "name", "disable_parallel_tool_use"}``."""
    parallel = disable_parallel is False
    if kind is None or kind == "auto":
        return ToolChoice(parallel=parallel)
    if kind == "none":
        return ToolChoice("none")
    if kind == "any":
        return ToolChoice("required", parallel=parallel)
    if kind == "tool":
        if not name:
            raise InvalidRequest("tool_choice.name: Field required")
        return ToolChoice("function", name, parallel)
    raise InvalidRequest(f"invalid tool_choice type: {kind}")
