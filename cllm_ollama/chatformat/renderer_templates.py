"""Ollama's Go renderers (``model/renderers`` in ollama/ollama) that cllm reproduces as Jinja, for
models whose config names the renderer and whose GGUF carries no chat template.

Ollama renders with the named renderer whatever the template says; cllm renders with the GGUF's
own chat template where it has one (the renderers reproduce the published templates), and only a
GGUF without one needs these. Ollama's converter drops Laguna's template (the renderer replaces
it), so a Laguna model from Ollama's registry has none: without a port its prompts would come from
the ``TEMPLATE`` layer, which for a renderer model is no chat format.

Each template writes what the renderer writes (checked against ``laguna_test.go``'s prompts in
``tests/chatformat/test_renderer_templates.py``), except an assistant prefill, which cllm does not
continue in place.
"""

from __future__ import annotations

# Laguna v2 (renderer "laguna", LagunaRenderer): a default system prompt, tools in the header,
# every assistant turn opening with its reasoning block (or a bare ``</think>``), thinking primed
# by the generation prompt and off unless asked for.
LAGUNA = r"""
{%- set thinking = enable_thinking is defined and enable_thinking -%}
{%- set first_system = messages and messages[0]['role'] == 'system' -%}
{%- set default = 'You are a helpful, conversationally-fluent assistant made by Poolside. '
    ~ 'You are here to be helpful to users through natural language conversations.' -%}
{%- set system = messages[0]['content'] if first_system else default -%}
{{- bos_token -}}
{%- if system | trim or tools -%}
{{- '<system>\n' -}}
{%- if system | trim -%}{{- '\n' + system.rstrip() -}}{%- endif -%}
{%- if tools -%}
{{- '\n\n### Tools\n\nYou may call functions to assist with the user query.\n'
    ~ 'All available function signatures are listed below:\n<available_tools>\n' -}}
{%- for tool in tools -%}{{- tool | tojson + '\n' -}}{%- endfor -%}
{{- '</available_tools>\n\n' -}}
{%- set each_call = "For each function call, return an unescaped XML-like object with function name and "
    ~ "arguments within '<tool_call>' and '</tool_call>' tags, like here:\n" -%}
{%- if thinking -%}
{{- "Wrap your thinking in '<think>', '</think>' tags, followed by a function call. " ~ each_call
    ~ '<think> your thoughts here </think>\n' -}}
{%- else -%}{{- each_call -}}{%- endif -%}
{{- '<tool_call>function-name\n<arg_key>argument-key</arg_key>\n'
    ~ '<arg_value>value-of-argument-key</arg_value>\n</tool_call>' -}}
{%- endif -%}
{{- '\n</system>\n' -}}
{%- endif -%}
{%- for message in messages -%}
{%- if loop.first and first_system -%}
{%- elif message['role'] == 'user' -%}{{- '<user>\n' + message['content'] + '\n</user>\n' -}}
{%- elif message['role'] == 'assistant' -%}
{%- set content = message['content'] or '' -%}
{%- set reasoning = message['thinking'] or '' -%}
{%- if '</think>' in content -%}
{%- set parts = content.split('</think>') -%}
{%- if not reasoning -%}{%- set reasoning = parts[0].rstrip('\n').split('<think>')[-1].lstrip('\n') -%}{%- endif -%}
{%- set content = parts[-1].lstrip('\n') -%}
{%- endif -%}
{{- '<assistant>\n' -}}
{{- ('<think>\n' + reasoning | trim + '\n</think>\n') if reasoning | trim else '</think>\n' -}}
{%- if content | trim -%}{{- content | trim + '\n' -}}{%- endif -%}
{%- for tool_call in message['tool_calls'] or [] -%}
{{- '<tool_call>' + tool_call['function']['name'] + '\n' -}}
{%- for key, value in (tool_call['function']['arguments'] or {}).items() -%}
{{- '<arg_key>' + key + '</arg_key>\n<arg_value>'
    ~ (value if value is string else value | tojson) ~ '</arg_value>\n' -}}
{%- endfor -%}
{{- '</tool_call>\n' -}}
{%- endfor -%}
{{- '</assistant>\n' -}}
{%- elif message['role'] == 'tool' -%}{{- '<tool_response>\n' + message['content'] + '\n</tool_response>\n' -}}
{%- elif message['role'] == 'system' -%}{{- '<system>\n' + message['content'] + '\n</system>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<assistant>\n' + ('<think>' if thinking else '</think>') -}}{%- endif -%}
"""

# Laguna v8 (renderer "poolside-v1", LagunaV8Renderer): the same turns without their line breaks,
# the tools without instructions, past thinking written back only while thinking is on.
POOLSIDE_V1 = r"""
{%- set thinking = enable_thinking is defined and enable_thinking -%}
{%- set first_system = messages and messages[0]['role'] == 'system' -%}
{%- set default = 'You are a helpful, conversationally-fluent assistant made by Poolside. '
    ~ 'You are here to be helpful to users through natural language conversations.' -%}
{%- set system = messages[0]['content'] if first_system else default -%}
{{- bos_token -}}
{%- if system | trim or tools or thinking -%}
{{- '<system>' -}}
{%- if system | trim -%}{{- system.rstrip() + ('\n\n' if tools else '') -}}{%- endif -%}
{%- if tools -%}
{{- '### Tools\n\nYou may call functions to assist with the user query.\n'
    ~ 'All available function signatures are listed below:\n<available_tools>\n' -}}
{%- for tool in tools -%}{{- tool | tojson + '\n' -}}{%- endfor -%}
{{- '</available_tools>' -}}
{%- endif -%}
{{- '</system>\n' -}}
{%- endif -%}
{%- for message in messages -%}
{%- if loop.first and first_system -%}
{%- elif message['role'] == 'user' -%}{{- '<user>' + message['content'] + '</user>\n' -}}
{%- elif message['role'] == 'assistant' -%}
{{- '<assistant>' ~ ('<think>' ~ (message['thinking'] or '') ~ '</think>' if thinking else '</think>')
    ~ (message['content'] or '') -}}
{%- for tool_call in message['tool_calls'] or [] -%}
{{- '<tool_call>' + tool_call['function']['name'] -}}
{%- for key, value in (tool_call['function']['arguments'] or {}).items() -%}
{{- '<arg_key>' + key + '</arg_key><arg_value>' + (value if value is string else value | tojson) + '</arg_value>' -}}
{%- endfor -%}
{{- '</tool_call>' -}}
{%- endfor -%}
{{- '</assistant>\n' -}}
{%- elif message['role'] == 'tool' -%}{{- '<tool_response>' + message['content'] + '</tool_response>\n' -}}
{%- elif message['role'] == 'system' -%}{{- '<system>' + message['content'] + '</system>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<assistant>' + ('<think>' if thinking else '</think>') -}}{%- endif -%}
"""

RENDERER_TEMPLATES = {"laguna": LAGUNA, "poolside-v1": POOLSIDE_V1}


def renderer_template(renderer: str | None) -> str | None:
    """cllm's Jinja for Ollama's renderer of this name; None where cllm has none."""
    return RENDERER_TEMPLATES.get(renderer or "")
