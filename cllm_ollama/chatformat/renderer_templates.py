"""Ollama's Go renderers (``model/renderers`` in ollama/ollama) that cllm reproduces as Jinja, for
models whose config names the renderer and whose GGUF carries no chat template.

Ollama renders with the named renderer whatever the template says; cllm renders with the GGUF's
own chat template where it has one (the renderers reproduce the published templates), and only a
GGUF without one needs these. Ollama's converter writes a template only from
``tokenizer_config.json`` and drops Laguna's (its renderer replaces it), so models whose makers
ship ``chat_template.jinja`` apart, and Laguna, reach Ollama's registry without one: without a
port their prompts would come from the ``TEMPLATE`` layer, which for a renderer model is no chat
format.

Each template writes what its renderer writes, held to the prompts of Ollama's renderer tests
(``tests/chatformat/test_renderer_templates.py``, ``test_family_templates.py``), except an
assistant prefill, which cllm does not continue in place. Not ported: Qwen 3.5's and 3.8's,
Qwen3-VL's, Ornith's, Cogito's, DeepSeek 3.1's, OLMo 3 Think's, Nemotron 3's, Glimmer's.
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
{%- for tool in tools -%}{{- tool | gojson(spaces=true, order='tool') + '\n' -}}{%- endfor -%}
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
    ~ (value if value is string else value | gojson(spaces=true)) ~ '</arg_value>\n' -}}
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
{%- for tool in tools -%}{{- tool | gojson(spaces=true, order='tool') + '\n' -}}{%- endfor -%}
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
{{- '<arg_key>' + key + '</arg_key><arg_value>'
    + (value if value is string else value | gojson(spaces=true)) + '</arg_value>' -}}
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

# Gemma 4 (renderers "gemma4", "gemma4-small"; "gemma4-large" adds the empty thought channel when
# thinking is off, as the 31B model's template does): declarations and calls in Gemma's own syntax,
# results inside the model turn, past thinking dropped. After a result the model goes on in that
# turn: no generation prompt, but the thought channel opened where thinking is on (Render's).
_GEMMA4 = r"""
{%- set Q = '<|"|>' -%}
{%- macro value(v) -%}{%- if v is string -%}{{- Q + v + Q -}}{%- elif v is mapping -%}{{- '{' -}}
{%- for k, x in v | dictsort(true) -%}{{- k + ':' + value(x) -}}{%- if not loop.last %},{% endif -%}{%- endfor -%}
{{- '}' -}}{%- elif v is sequence -%}{{- '[' -}}{%- for x in v -%}{{- value(x) -}}
{%- if not loop.last %},{% endif -%}{%- endfor -%}{{- ']' -}}{%- elif v is none -%}{{- 'null' -}}
{%- elif v is sameas true -%}{{- 'true' -}}{%- elif v is sameas false -%}{{- 'false' -}}
{%- else -%}{{- v | goprint(whole=true) -}}{%- endif -%}{%- endmacro -%}
{%- macro schema(s) -%}{{- '{' -}}{%- set ns = namespace(parts=[]) -%}
{%- if s['description'] -%}{%- set ns.parts = ns.parts + ['description:' + Q + s['description'] + Q] -%}
{%- endif -%}
{%- if s['properties'] -%}{%- set ps = namespace(items=[]) -%}{%- for k, p in s['properties'] | dictsort(true) -%}
{%- set ps.items = ps.items + [k + ':' + schema(p)] -%}{%- endfor -%}
{%- set ns.parts = ns.parts + ['properties:{' + ps.items | join(',') + '}'] -%}{%- endif -%}
{%- if s['required'] -%}{%- set ns.parts = ns.parts + ['required:' + value(s['required'])] -%}{%- endif -%}
{%- if s['type'] -%}{%- set ns.parts = ns.parts + ['type:' + Q + s['type'] | upper + Q] -%}{%- endif -%}
{{- ns.parts | join(',') + '}' -}}{%- endmacro -%}
{%- macro strip_thinking(text) -%}{%- set ns = namespace(result='') -%}{%- for part in text.split('<channel|>') -%}
{%- if '<|channel>' in part -%}{%- set ns.result = ns.result + part.split('<|channel>')[0] -%}{%- else -%}
{%- set ns.result = ns.result + part -%}{%- endif -%}{%- endfor -%}{{- ns.result | trim -}}{%- endmacro -%}
{%- set thinking = enable_thinking is defined and enable_thinking -%}
{{- bos_token -}}
{%- set loop_messages = messages -%}
{%- if thinking or tools or messages[0]['role'] == 'system' -%}
{{- '<|turn>system\n' -}}
{%- if thinking -%}{{- '<|think|>\n' -}}{%- endif -%}
{%- if messages[0]['role'] == 'system' -%}{{- messages[0]['content'] | trim -}}
{%- set loop_messages = messages[1:] -%}{%- endif -%}
{%- for tool in tools or [] -%}
{{- '<|tool>declaration:' + tool['function']['name'] + '{description:' + Q
    + (tool['function']['description'] or '') + Q + ',parameters:' + schema(tool['function']['parameters'] or {})
    + '}<tool|>' -}}
{%- endfor -%}
{{- '<turn|>\n' -}}
{%- endif -%}
{%- set ns = namespace(open=false, calls=[], answered=0, responded=false) -%}
{%- for message in loop_messages -%}
{%- set ns.responded = message['role'] == 'tool' -%}
{%- if message['role'] == 'tool' -%}
{%- set name = message['name'] or (ns.calls[ns.answered] if ns.answered < ns.calls | length else 'unknown') -%}
{%- set ns.answered = ns.answered + 1 -%}
{{- '<|tool_response>response:' + name + '{value:' + value(message['content']) + '}<tool_response|>' -}}
{%- else -%}
{%- if not (ns.open and message['role'] == 'assistant') -%}
{{- '<|turn>' + ('model' if message['role'] == 'assistant' else message['role']) + '\n' -}}{%- endif -%}
{%- if message['tool_calls'] -%}
{%- set ns.calls = message['tool_calls'] | map(attribute='function') | map(attribute='name') | list -%}
{%- set ns.answered = 0 -%}{%- endif -%}
{%- for tool_call in message['tool_calls'] or [] -%}
{{- '<|tool_call>call:' + tool_call['function']['name'] + value(tool_call['function']['arguments'])
    + '<tool_call|>' -}}
{%- endfor -%}
{{- strip_thinking(message['content'] or '')
    if message['role'] == 'assistant' else (message['content'] or '') | trim -}}
{%- set ns.open = message['role'] == 'assistant' and message['tool_calls'] -%}
{%- if not ns.open -%}{{- '<turn|>\n' -}}{%- endif -%}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{%- if not ns.responded -%}
{{- '<|turn>model\n' -}}
{# the empty thought channel #}
{%- elif thinking -%}{{- '<|channel>thought\n' -}}
{%- endif -%}
{%- endif -%}
"""
GEMMA4 = _GEMMA4.replace("{# the empty thought channel #}", "")
GEMMA4_LARGE = _GEMMA4.replace(
    "{# the empty thought channel #}", "{%- if not thinking -%}{{- '<|channel>thought\\n<channel|>' -}}{%- endif -%}"
)

# LFM2 ("lfm2", "lfm2-thinking"): the function list in the system turn (a nameless function's whole
# tool, as Go's lfm2ToolSchema gives it), calls as Python before the content, results between their
# marks, thinking written back while it is on.
LFM2 = r"""
{{- bos_token -}}
{%- set thinking = enable_thinking is defined and enable_thinking -%}
{%- set has_system = messages and messages[0]['role'] == 'system' -%}
{%- set system = messages[0]['content'] if has_system else '' -%}
{%- set turns = messages[1:] if has_system else messages -%}
{%- if tools -%}
{%- set listed = namespace(text='') -%}
{%- for tool in tools -%}
{%- set listed.text = listed.text + (', ' if not loop.first else '') + (tool.function | gojson(spaces=true,
    order='function', html=false) if tool.function is mapping and tool.function.name
    else tool | gojson(spaces=true, order='tool', html=false)) -%}
{%- endfor -%}
{%- set system = (system + '\n' if system else '') + 'List of tools: <|tool_list_start|>[' + listed.text
    + ']<|tool_list_end|>' -%}
{%- endif -%}
{%- if system -%}{{- '<|im_start|>system\n' + system + '<|im_end|>\n' -}}{%- endif -%}
{%- set ns = namespace(last=-1) -%}
{%- for message in turns -%}{%- if message['role'] == 'assistant' -%}{%- set ns.last = loop.index0 -%}{%- endif -%}
{%- endfor -%}
{%- for message in turns -%}
{{- '<|im_start|>' + message['role'] + '\n' -}}
{%- set content = message['content'] or '' -%}
{%- if message['role'] == 'tool' -%}
{%- set content = '<|tool_response_start|>' + content + '<|tool_response_end|>' -%}{%- endif -%}
{%- if message['role'] == 'assistant' -%}
{%- if message['tool_calls'] -%}
{%- set calls = namespace(text='<|tool_call_start|>[') -%}
{%- for tool_call in message['tool_calls'] -%}
{%- set calls.text = calls.text + tool_call['function']['name'] + '(' -%}
{%- for key, value in tool_call['function']['arguments'] | dictsort(true) -%}
{%- set calls.text = calls.text + key + '=' + value | gojson(spaces=true, html=false)
    + (',' if not loop.last else '') -%}{%- endfor -%}
{%- set calls.text = calls.text + ')' + (',' if not loop.last else '') -%}{%- endfor -%}
{%- set content = calls.text + ']<|tool_call_end|>' + ('\n' + content if content | trim else content) -%}
{%- endif -%}
{%- if thinking and message['thinking'] and '</think>' not in content -%}
{%- set content = '<think>' + message['thinking'] + '</think>' + content -%}{%- endif -%}
{%- if not thinking and loop.index0 != ns.last and '</think>' in content -%}
{%- set content = content.split('</think>')[-1] | trim -%}{%- endif -%}
{%- endif -%}
{{- content + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}
"""

# OLMo 3 ("olmo3"): its default system prompt with or without functions, calls a line each,
# results as the environment.
OLMO3 = r"""
{%- set system = (messages | selectattr('role', 'equalto', 'system') | list | first) if messages else none -%}
{{- '<|im_start|>system\n' -}}
{%- if system -%}{{- system['content'] -}}{%- if tools -%}
{{- '<functions>' + tools | gojson(spaces=true, order='tool') + '</functions>' -}}
{%- endif -%}
{%- else -%}{{- 'You are a helpful function-calling AI assistant. ' -}}
{%- if tools -%}
{{- 'You are provided with function signatures within <functions></functions> XML tags. '
    ~ 'You may call one or more functions to assist with the user query. '
    ~ 'Output any function calls within <function_calls></function_calls> XML tags. '
    ~ 'Do not make assumptions about what values to plug into functions.<functions>'
    ~ tools | gojson(spaces=true, order='tool') ~ '</functions>' -}}
{%- else -%}{{- 'You do not currently have access to any functions. <functions></functions>' -}}{%- endif -%}
{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- for message in messages if message['role'] != 'system' -%}
{%- if message['role'] == 'tool' -%}{{- '<|im_start|>environment\n' + message['content'] + '<|im_end|>\n' -}}
{%- else -%}{{- '<|im_start|>' + message['role'] + '\n' + (message['content'] or '') -}}
{%- if message['tool_calls'] -%}{{- '<function_calls>' -}}{%- for tool_call in message['tool_calls'] -%}
{{- tool_call['function']['name'] + '(' -}}{%- for key, value in tool_call['function']['arguments'] | dictsort(true) -%}
{{- key + '=' + value | gojson -}}{%- if not loop.last %}, {% endif -%}{%- endfor -%}{{- ')' -}}
{%- if not loop.last %}{{ '\n' }}{% endif -%}{%- endfor -%}{{- '</function_calls>' -}}{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}
"""

# OLMo 3.1 ("olmo3.1"): OLMo 3's, its default system prompt Olmo's own.
OLMO3_1 = OLMO3.replace(
    "'You are a helpful function-calling AI assistant. '",
    "'You are Olmo, a helpful AI assistant built by Ai2. Your date cutoff is December 2024, and your model '"
    "\n    ~ 'weights are available at https://huggingface.co/allenai. '",
)

# Command ("cohere", North / Command A 2026): the Available Tools block, thinking and actions in
# the chatbot turn, call ids regenerated in order, consecutive results merged, the generation
# prompt opening the thinking.
COHERE = r"""
{{- bos_token -}}
{%- set reasoning = enable_thinking is not defined or enable_thinking -%}
{%- set has_system = messages and messages[0]['role'] == 'system' -%}
{%- set turns = messages[1:] if has_system else messages -%}
{{- '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TEXT|>' -}}
{%- if has_system and messages[0]['content'] -%}{{- messages[0]['content'] + '\n\n\n\n' -}}{%- endif -%}
{{- '# Available Tools\n```json\n[\n' -}}
{%- for tool in tools or [] -%}
{%- set entry = '{"name": ' ~ (tool['function']['name'] or '') | gojson
    ~ ', "description": ' ~ (tool['function']['description'] or '') | gojson
    ~ ', "parameters": ' ~ tool['function']['parameters'] | gojson(spaces=true, order='parameters')
    ~ ', "responses": null}' -%}
{{- '\n    ' + entry + (',' if not loop.last else '') + '\n\n' -}}
{%- else -%}{{- '\n\n' -}}
{%- endfor -%}
{{- '\n]\n```<|END_TEXT|><|END_OF_TURN_TOKEN|>' -}}
{%- set ns = namespace(calls=0, ids=[]) -%}
{%- for message in turns -%}
{%- if message['role'] == 'system' -%}
{{- '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TEXT|>' + message['content']
    + '<|END_TEXT|><|END_OF_TURN_TOKEN|>' -}}
{%- elif message['role'] == 'user' -%}
{{- '<|START_OF_TURN_TOKEN|><|USER_TOKEN|><|START_TEXT|>' + message['content']
    + '<|END_TEXT|><|END_OF_TURN_TOKEN|>' -}}
{%- elif message['role'] == 'assistant' -%}
{{- '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' -}}
{%- set thought = '<|START_THINKING|>' + message['thinking'] + '<|END_THINKING|>' if message['thinking'] else '' -%}
{%- if message['tool_calls'] -%}
{{- '\n            \n                ' + thought + '<|START_ACTION|>[' -}}
{%- for tool_call in message['tool_calls'] -%}
{%- set ns.ids = ns.ids + [tool_call['id'] or ''] -%}
{{- '\n\n    {"tool_call_id": "' + ns.calls | string + '", "tool_name": "' + tool_call['function']['name']
    + '", "parameters": ' + tool_call['function']['arguments'] | gojson(spaces=true, order='arguments') + '}'
    + (',' if not loop.last else '') -}}
{%- set ns.calls = ns.calls + 1 -%}
{%- endfor -%}
{{- '\n\n]<|END_ACTION|><|END_OF_TURN_TOKEN|>' -}}
{%- else -%}{{- thought + '<|START_TEXT|>' + message['content'] + '<|END_TEXT|><|END_OF_TURN_TOKEN|>' -}}
{%- endif -%}
{%- elif message['role'] == 'tool' -%}
{%- set found = namespace(id=message['tool_call_id'] or '') -%}
{%- for id in ns.ids -%}{%- if id and id == message['tool_call_id'] and found.id == message['tool_call_id'] -%}
{%- set found.id = loop.index0 | string -%}{%- endif -%}{%- endfor -%}
{%- if not loop.previtem or loop.previtem['role'] != 'tool' -%}
{{- '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TOOL_RESULT|>[' -}}{%- else -%}{{- ',' -}}{%- endif -%}
{{- '\n    {\n        "tool_call_id": "' + found.id
    + '",\n        "results": {\n\n            \n            "0": '
    + {'content': message['content']} | gojson(spaces=true)
    + '\n\n        },\n        "is_error": null\n    }' -}}
{%- if not loop.nextitem or loop.nextitem['role'] != 'tool' -%}
{{- '\n\n]<|END_TOOL_RESULT|><|END_OF_TURN_TOKEN|>' -}}{%- endif -%}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>' + ('' if reasoning else '<|END_THINKING|>') -}}
{%- endif -%}
"""

# FunctionGemma ("functiongemma"): declarations in the developer turn, results inside the model
# turn (a prompt ending in one is the model's to go on).
FUNCTIONGEMMA = r"""
{%- set E = '<escape>' -%}
{%- macro value(v) -%}{%- if v is string -%}{{- E + v + E -}}{%- elif v is mapping -%}{{- '{' -}}
{%- for k, x in v | dictsort(true) -%}{{- k + ':' + value(x) -}}{%- if not loop.last %},{% endif -%}{%- endfor -%}
{{- '}' -}}{%- elif v is sequence -%}{{- '[' -}}{%- for x in v -%}{{- value(x) -}}
{%- if not loop.last %},{% endif -%}{%- endfor -%}{{- ']' -}}{%- elif v is sameas true -%}{{- 'true' -}}
{%- elif v is sameas false -%}{{- 'false' -}}{%- elif v is none -%}{{- 'null' -}}
{%- else -%}{{- v | goprint(whole=true) -}}{%- endif -%}{%- endmacro -%}
{%- macro declaration(f) -%}
{%- set p = f['parameters'] or {} -%}
{%- set ns = namespace(parts=[]) -%}
{%- if p['properties'] -%}{%- set props = namespace(items=[]) -%}{%- for k, s in p['properties'] | dictsort(true) -%}
{%- set props.items = props.items + [k + ':{description:' + E + (s['description'] or '') + E + ',type:' + E
    + (s['type'] or 'string') | upper + E + '}'] -%}
{%- endfor -%}{%- set ns.parts = ns.parts + ['properties:{' + props.items | join(',') + '}'] -%}{%- endif -%}
{%- if p['required'] -%}{%- set ns.parts = ns.parts + ['required:' + value(p['required'])] -%}{%- endif -%}
{%- set ns.parts = ns.parts + ['type:' + E + (p['type'] or 'object') | upper + E] -%}
{{- '<start_function_declaration>declaration:' + f['name'] + '{description:' + E + (f['description'] or '') + E
    + ',parameters:{' + ns.parts | join(',') + '}}<end_function_declaration>' -}}
{%- endmacro -%}
{{- bos_token -}}
{%- set has_system = messages and messages[0]['role'] in ['system', 'developer'] -%}
{%- set system = messages[0]['content'] | trim if has_system else '' -%}
{%- set turns = messages[1:] if has_system else messages -%}
{%- if system or tools -%}
{{- '<start_of_turn>developer\n' + system -}}
{%- if tools -%}
{{- ('\n' if system else '')
    + ('You can do function calling with the following functions:'
    if system != 'You can do function calling with the following functions:' else '') -}}
{%- endif -%}
{%- for tool in tools or [] -%}{{- declaration(tool['function']) -}}{%- endfor -%}
{{- '<end_of_turn>\n' -}}
{%- endif -%}
{%- set ns = namespace(prev='', calls=[], answered=0) -%}
{%- for message in turns -%}
{%- if message['role'] == 'assistant' -%}
{%- if ns.prev != 'tool_response' -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}
{%- set ns.prev = '' -%}
{{- (message['content'] or '') | trim -}}
{%- if message['tool_calls'] -%}
{%- set ns.calls = message['tool_calls'] | map(attribute='function') | map(attribute='name') | list -%}
{%- set ns.answered = 0 -%}
{%- for tool_call in message['tool_calls'] -%}
{{- '<start_function_call>call:' + tool_call['function']['name'] + value(tool_call['function']['arguments'])
    + '<end_function_call>' -}}
{%- endfor -%}
{%- if loop.nextitem and loop.nextitem['role'] == 'tool' -%}{{- '<start_function_response>' -}}
{%- set ns.prev = 'tool_call' -%}{%- else -%}{{- '<end_of_turn>\n' -}}{%- endif -%}
{%- else -%}{{- '<end_of_turn>\n' -}}{%- endif -%}
{%- elif message['role'] == 'user' -%}
{%- if ns.prev != 'tool_response' -%}{{- '<start_of_turn>user\n' -}}{%- endif -%}
{%- set ns.prev = '' -%}
{{- message['content'] | trim + '<end_of_turn>\n' -}}
{%- elif message['role'] == 'tool' -%}
{%- set name = ns.calls[ns.answered] if ns.answered < ns.calls | length else '' -%}
{%- set ns.answered = ns.answered + 1 -%}
{%- if ns.prev != 'tool_call' -%}{{- '<start_function_response>' -}}{%- endif -%}
{{- 'response:' + name + '{' + value(message['content']) + '}<end_function_response>' -}}
{%- set ns.prev = 'tool_response' -%}
{%- else -%}{{- '<start_of_turn>' + message['role'] + '\n' + message['content'] | trim + '<end_of_turn>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt and ns.prev != 'tool_response' -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}
"""

# Qwen3-Coder ("qwen3-coder"): tools as XML in the system turn (a default system prompt with
# them), calls as ``<function=NAME><parameter=KEY>``, consecutive results in one user turn. JSON in
# the tool list and in call arguments is compact, as Ollama's renderer writes it.
QWEN3_CODER = r"""
{%- macro compact(v) -%}{{- v | gojson -}}{%- endmacro -%}
{%- macro scalar(v) -%}
{%- if v is none -%}{{- 'null' -}}
{%- elif v is sameas true -%}{{- 'true' -}}
{%- elif v is sameas false -%}{{- 'false' -}}
{%- elif v is string -%}{{- v -}}
{%- elif v is mapping or v is sequence -%}{{- compact(v) -}}
{%- else -%}{{- v | goprint -}}
{%- endif -%}
{%- endmacro -%}
{%- macro extra(obj, handled) -%}
{%- for key, value in obj.items() if key not in handled and value is not none -%}
{{- '\n<' + key + '>' + scalar(value) + '</' + key + '>' -}}
{%- endfor -%}
{%- endmacro -%}
{%- set ns = namespace(system='') -%}
{%- for message in messages -%}
{%- if message['role'] == 'system' and not ns.system -%}{%- set ns.system = message['content'] -%}{%- endif -%}
{%- endfor -%}
{%- if ns.system or tools -%}
{{- '<|im_start|>system\n'
    ~ (ns.system or 'You are Qwen, a helpful AI assistant that can interact with a computer to solve tasks.') -}}
{%- if tools -%}
{{- '\n\n# Tools\n\nYou have access to the following functions:\n\n<tools>' -}}
{%- for tool in tools -%}
{%- set f = tool['function'] -%}
{%- set params = f['parameters'] or {} -%}
{{- '\n<function>\n<name>' + f['name'] + '</name>' -}}
{%- if f['description'] -%}{{- '\n<description>' + f['description'] + '</description>' -}}{%- endif -%}
{{- '\n<parameters>' -}}
{%- for name, prop in (params['properties'] or {}).items() -%}
{{- '\n<parameter>\n<name>' + name + '</name>' -}}
{%- set view = prop | goview('property') -%}
{%- if 'type' in view -%}{{- '\n<type>' + scalar(view['type']) + '</type>' -}}{%- endif -%}
{%- if prop['description'] -%}{{- '\n<description>' + prop['description'] + '</description>' -}}{%- endif -%}
{{- extra(view, ['type', 'description']) + '\n</parameter>' -}}
{%- endfor -%}
{{- extra(params | goview('parameters'), ['type', 'properties']) + '\n</parameters>\n</function>' -}}
{%- endfor -%}
{{- '\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n'
    ~ '<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n'
    ~ '<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n'
    ~ '</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n'
    ~ '- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested '
    ~ 'within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n'
    ~ '- You may provide optional reasoning for your function call in natural language BEFORE the function call, '
    ~ 'but NOT after\n- If there is no function call available, answer the question like normal with your current '
    ~ 'knowledge and do not tell the user about function calls\n</IMPORTANT>' -}}
{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- endif -%}
{%- set turns = messages | rejectattr('role', 'equalto', 'system') | list -%}
{%- for message in turns -%}
{%- if message['role'] == 'assistant' -%}
{{- '<|im_start|>assistant\n' -}}
{%- if message['tool_calls'] -%}
{%- if message['content'] -%}{{- message['content'] + '\n' -}}{%- endif -%}
{%- for tool_call in message['tool_calls'] -%}
{{- '\n<tool_call>\n<function=' + tool_call['function']['name'] + '>' -}}
{%- for key, value in (tool_call['function']['arguments'] or {}).items() -%}
{{- '\n<parameter=' + key + '>\n' + scalar(value) + '\n</parameter>' -}}
{%- endfor -%}
{{- '\n</function>\n</tool_call>' -}}
{%- endfor -%}
{%- else -%}{{- message['content'] or '' -}}{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- elif message['role'] == 'tool' -%}
{%- if loop.first or loop.previtem['role'] != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
{{- '\n<tool_response>\n' + message['content'] + '\n</tool_response>' -}}
{%- if loop.last or loop.nextitem['role'] != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
{%- else -%}{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}
"""

# GLM's tool block, the same in GLM 4.7's and GLM-OCR's renderers: the tools as JSON in a system turn.
_GLM_TOOLS = r"""
{{- '[gMASK]<sop>' -}}
{%- if tools -%}
{{- '<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n'
    ~ 'You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n' -}}
{%- for tool in tools -%}{{- tool | gojson(spaces=true, order='tool') + '\n' -}}{%- endfor -%}
{{- '</tools>\n\nFor each function call, output the function name and arguments within the following XML format:\n'
    ~ '<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value>'
    ~ '<arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>' -}}
{%- endif -%}
"""
# A tool call's arguments, GLM's way (``tool_call`` bound by the loop around it).
_GLM_ARGUMENTS = r"""
{%- for key, value in (tool_call['function']['arguments'] or {}).items() -%}
{{- '<arg_key>' + key + '</arg_key><arg_value>'
    ~ (value if value is string else value | gojson) ~ '</arg_value>' -}}
{%- endfor -%}
"""

# GLM 4.7 ("glm-4.7"): tools as JSON in a system turn, every assistant turn opening with its
# thinking (or a bare ``</think>``), thinking kept across turns and on unless turned off.
GLM_4_7 = (
    r"""
{%- set thinking = enable_thinking is not defined or enable_thinking -%}
"""
    + _GLM_TOOLS
    + r"""
{%- for message in messages -%}
{%- if message['role'] == 'user' -%}{{- '<|user|>' + message['content'] -}}
{%- elif message['role'] == 'assistant' -%}
{{- '<|assistant|>' ~ ('<think>' ~ message['thinking'] ~ '</think>' if message['thinking'] else '</think>')
    ~ (message['content'] or '') -}}
{%- for tool_call in message['tool_calls'] or [] -%}
{{- '<tool_call>' + tool_call['function']['name'] -}}
"""
    + _GLM_ARGUMENTS
    + r"""
{{- '</tool_call>' -}}
{%- endfor -%}
{%- elif message['role'] == 'tool' -%}
{%- if loop.first or loop.previtem['role'] != 'tool' -%}{{- '<|observation|>' -}}{%- endif -%}
{{- '<tool_response>' + message['content'] + '</tool_response>' -}}
{%- elif message['role'] == 'system' -%}{{- '<|system|>' + message['content'] -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>' + ('<think>' if thinking else '</think>') -}}{%- endif -%}
"""
)

# GLM-OCR ("glm-ocr", GlmOcrRenderer): GLM 4.7's tools and turns with a line break after each
# role, thinking off: each assistant turn opens with its thinking block, empty or not; a request
# that turns thinking off explicitly gets ``/nothink`` after each user turn and an empty block
# primed. Images are the ``[img-N]`` tags cllm puts in the content (``api/media.py``).
GLM_OCR = (
    r"""
{%- set nothink = enable_thinking is defined and not enable_thinking -%}
"""
    + _GLM_TOOLS
    + r"""
{%- for message in messages -%}
{%- if message['role'] == 'user' -%}
{{- '<|user|>\n' + message['content'] -}}
{%- if nothink and not message['content'].endswith('/nothink') -%}{{- '/nothink' -}}{%- endif -%}
{%- elif message['role'] == 'assistant' -%}
{{- '<|assistant|>\n<think>' + (message['thinking'] or '') | trim + '</think>' -}}
{%- if message['content'] -%}{{- '\n' + message['content'] | trim -}}{%- endif -%}
{%- for tool_call in message['tool_calls'] or [] -%}
{{- '\n<tool_call>' + tool_call['function']['name'] -}}
"""
    + _GLM_ARGUMENTS
    + r"""
{{- '</tool_call>' -}}
{%- endfor -%}
{{- '\n' -}}
{%- elif message['role'] == 'tool' -%}
{%- if loop.first or loop.previtem['role'] != 'tool' -%}{{- '<|observation|>' -}}{%- endif -%}
{{- '\n<tool_response>\n' + message['content'] + '\n</tool_response>\n' -}}
{%- elif message['role'] == 'system' -%}{{- '<|system|>\n' + message['content'] + '\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>\n' + ('<think></think>\n' if nothink else '') -}}{%- endif -%}
"""
)

RENDERER_TEMPLATES = {
    "laguna": LAGUNA,
    "poolside-v1": POOLSIDE_V1,
    "gemma4": GEMMA4,
    "gemma4-small": GEMMA4,
    "gemma4-large": GEMMA4_LARGE,
    "lfm2": LFM2,
    "lfm2-thinking": LFM2,
    "olmo3": OLMO3,
    "olmo3.1": OLMO3_1,
    "cohere": COHERE,
    "functiongemma": FUNCTIONGEMMA,
    "qwen3-coder": QWEN3_CODER,
    "glm-4.7": GLM_4_7,
    "glm-ocr": GLM_OCR,
}


# Ollama's renderers that place a message's images themselves (``useImgTags``, set by its server,
# or always): each tag ``[img-N]`` before the text with a space after the last
# (``renderContentWithImageTags``), where a model without a renderer gets them pre-tagged, unspaced.
IMAGE_TAGGING_RENDERERS = frozenset(
    {
        "gemma4",
        "gemma4-small",
        "gemma4-large",
        "glimmer",
        "glm-ocr",
        "lfm2",
        "lfm2-thinking",
        "nemotron-3-nano",
        "nemotron-3.5-nano",
        "ornith",
        "qwen3-vl-instruct",
        "qwen3-vl-thinking",
        "qwen3.5",
        "qwen3.8",
    }
)


def renderer_template(renderer: str | None) -> str | None:
    """cllm's Jinja for Ollama's renderer of this name; None where cllm has none."""
    return RENDERER_TEMPLATES.get(renderer or "")
