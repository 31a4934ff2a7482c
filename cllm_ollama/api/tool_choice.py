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

    @property
    def forced(self) -> bool:
        return self.mode in ("required", "function")

    def allowed(self, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
        """The tools a forced call may be of (chat-shaped specs); 400 where none can be."""
        tools = tools or []
        if not tools:
            raise InvalidRequest("tool_choice requires tools: none were given")
        if self.mode != "function":
            return tools
        named = [t for t in tools if (t.get("function") or {}).get("name") == self.name]
        if not named:
            raise InvalidRequest(f"tool_choice names a tool that is not in tools: {self.name!r}")
        return named[:1]


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
    raise InvalidRequest("Invalid value for 'tool_choice': a function choice needs a function name")


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
