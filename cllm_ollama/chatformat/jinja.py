"""Rendering a GGUF's Jinja chat template (``tokenizer.chat_template``) exactly as Hugging Face
transformers does, from messages in Ollama's shape.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..errors import CllmError, InvalidRequest
from .gotemplate.ollama import api_function, api_parameters, api_tool, tool_property
from .gotemplate.values import Ordered, as_decoded, decoded, go_json, go_print, with_spaces
from .parsers import OutputParser
from .render_budget import PromptTooLong


class _GenerationTag(Extension):
    """``{% generation %}…{% endgeneration %}``: transformers marks assistant text with it; here it
    only renders its body, but without it such templates would not parse."""

    tags = {"generation"}  # noqa: RUF012 (jinja2's Extension declares it a plain set)

    def parse(self, parser: Any) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller: Any) -> str:
        return str(caller())


def _raise_exception(message: str) -> None:
    # Templates raise to refuse a conversation (roles out of order...): the client's to fix.
    raise InvalidRequest(message)


def _tojson(
    value: object,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # Jinja's own tojson HTML-escapes and sorts keys; templates are written against transformers'.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


# What a gojson order names: how Ollama's renderers hold the value they marshal.
_GO_SHAPES: dict[str, Callable[[Any], Any]] = {
    "tool": api_tool,
    "function": api_function,
    "parameters": api_parameters,
    "property": tool_property,
}


def _gojson(value: object, spaces: bool = False, order: str = "map", html: bool = True) -> str:
    # Go's json.Marshal, as Ollama's renderers write tools and arguments (cllm's ports of them,
    # renderer_templates.py): <, > and & escaped (unless html is off: SetEscapeHTML(false)), every
    # number a float64. order "map": the value decoded into any (every object's keys sorted);
    # "arguments": api's ordered arguments (the call's keys in order, its values' objects sorted);
    # "tool", "function", "parameters": api's structs (a list of them too). spaces: Ollama's
    # marshalWithSpaces.
    value = None if isinstance(value, jinja2.Undefined) else as_decoded(value)
    if order == "arguments" and isinstance(value, dict):
        value = Ordered([(str(k), v) for k, v in value.items()])
    elif order in _GO_SHAPES:
        shape = _GO_SHAPES[order]
        value = [shape(v) for v in value] if isinstance(value, list) else shape(value)
    text = go_json(value, html)
    return with_spaces(text) if spaces else text


def _goview(value: object, shape: str) -> Any:
    # A request's tool part as Ollama's renderers see it after marshalling its api struct and
    # decoding that into a map (Qwen3-Coder's extra keys): only the struct's fields, in its order.
    return decoded(_GO_SHAPES[shape](value))


def _goprint(value: object, whole: bool = False) -> str:
    # fmt's %v of a JSON value as Go decodes it (a number is a float64: 3.0 prints 3, 1000000
    # prints 1e+06); whole: Gemma's renderers, which print a whole float64 within int64 with %d.
    try:
        value = as_decoded(value)
    except OverflowError:  # an integer past a float64 (Ollama refuses it when it reads the request)
        value = math.copysign(math.inf, value)  # type: ignore[arg-type]
    if whole and isinstance(value, float) and value.is_integer() and -(2**63) <= value < 2**63:
        return str(int(value))
    return go_print(value)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


_env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, loopcontrols])
_env.filters["tojson"] = _tojson
_env.filters["gojson"] = _gojson
_env.filters["goview"] = _goview
_env.filters["goprint"] = _goprint
_env.globals["raise_exception"] = _raise_exception
_env.globals["strftime_now"] = _strftime_now


@functools.lru_cache(maxsize=32)
def _compile(template: str) -> jinja2.Template:
    try:
        return _env.from_string(template)
    except jinja2.TemplateSyntaxError as exc:
        raise CllmError(f"template: line {exc.lineno}: {exc.message}", 500) from exc


def _hf_message(message: dict[str, Any]) -> dict[str, Any]:
    """One Ollama message as transformers-style templates read it."""
    out: dict[str, Any] = {"role": message.get("role", ""), "content": message.get("content") or ""}
    if message.get("thinking"):
        # Qwen3/DeepSeek templates read reasoning_content; gpt-oss reads thinking.
        out["reasoning_content"] = out["thinking"] = message["thinking"]
    if message.get("tool_calls"):
        calls = []
        for call in message["tool_calls"]:
            function = call.get("function") or {}
            hf_call: dict[str, Any] = {
                "type": "function",
                "function": {"name": function.get("name", ""), "arguments": function.get("arguments") or {}},
            }
            if call.get("id"):
                hf_call["id"] = call["id"]
            calls.append(hf_call)
        out["tool_calls"] = calls
    if message.get("tool_name"):
        out["name"] = message["tool_name"]
    if message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    return out


def render_chat(
    template: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    enable_thinking: bool | None = None,
    bos_token: str = "",
    eos_token: str = "",
    max_chars: int | None = None,
    **extra: Any,
) -> str:
    """The prompt text for ``messages``; ``extra`` reaches the template as further variables.

    ``enable_thinking`` is left undefined when None, since templates test ``is defined``.
    Past ``max_chars`` characters of output, rendering stops with ``PromptTooLong``. This runs in
    the calling thread with no time limit: the server renders in ``jinja_workers`` instead.
    """
    compiled = _compile(template)
    variables: dict[str, Any] = {
        "messages": [_hf_message(m) for m in messages],
        "tools": tools,
        "add_generation_prompt": add_generation_prompt,
        "bos_token": bos_token,
        "eos_token": eos_token,
        **extra,
    }
    if enable_thinking is not None:
        variables["enable_thinking"] = enable_thinking
    pieces: list[str] = []
    size = 0
    try:
        for piece in compiled.generate(**variables):
            size += len(piece)
            if max_chars is not None and size > max_chars:
                raise PromptTooLong(max_chars)
            pieces.append(piece)
    except CllmError:
        raise
    except MemoryError as exc:  # 'x' * 10**10, under the render workers' memory limit
        raise CllmError("template: rendering ran out of memory", 500) from exc
    except Exception as exc:  # a template can fail with any Python error (None + str, bad index...)
        raise CllmError(f"template: {type(exc).__name__}: {exc}", 500) from exc
    return "".join(pieces)


def strip_think_tags(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ollama's filterThinkTags: drop the think block of assistant turns before the last user turn.

    Ollama applies it to qwen3 and deepseek-r1 only; old reasoning wastes context and hurts answers.
    """
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    out = []
    for i, message in enumerate(messages):
        if i < last_user and message.get("role") == "assistant" and message.get("content"):
            parser = OutputParser(thinking=True, tools=False)
            content = parser.feed(message["content"]).content + parser.finish().content
            message = {**message, "content": content}
        out.append(message)
    return out
