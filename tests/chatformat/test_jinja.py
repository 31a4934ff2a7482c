from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import cllm_ollama.testing
from cllm_ollama.chatformat.builtin_templates import CHATML
from cllm_ollama.chatformat.jinja import render_chat, strip_think_tags
from cllm_ollama.errors import CllmError, InvalidRequest

QWEN3 = (Path(cllm_ollama.testing.__file__).parent / "qwen3.jinja").read_text()

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Météo <now>",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
TOOLS_SYSTEM = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    '{"type": "function", "function": {"name": "get_weather", "description": "Météo <now>", '
    '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}\n'
    "</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
)


def test_system_and_user() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert render_chat(QWEN3, messages) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert render_chat(QWEN3, messages, add_generation_prompt=False) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    )


def test_enable_thinking() -> None:
    messages = [{"role": "user", "content": "Hi"}]
    base = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert render_chat(QWEN3, messages, enable_thinking=False) == base + "<think>\n\n</think>\n\n"
    assert render_chat(QWEN3, messages, enable_thinking=True) == base
    assert render_chat(QWEN3, messages) == base


def test_tools_with_system_prompt() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}]
    assert render_chat(QWEN3, messages, tools=TOOLS) == (
        "<|im_start|>system\nBe brief.\n\n"
        + TOOLS_SYSTEM
        + "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"
    )


def test_tool_call_round_trip_in_ollama_shape() -> None:
    messages = [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"function": {"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}}},
                {"function": {"index": 1, "name": "get_weather", "arguments": {"city": "Rome"}}},
            ],
        },
        {"role": "tool", "content": "18C", "tool_name": "get_weather"},
        {"role": "tool", "content": "25C", "tool_name": "get_weather"},
    ]
    assert render_chat(QWEN3, messages, tools=TOOLS) == (
        "<|im_start|>system\n" + TOOLS_SYSTEM + "<|im_start|>user\nWeather in Paris and Rome?<|im_end|>\n"
        "<|im_start|>assistant\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\n18C\n</tool_response>\n<tool_response>\n25C\n</tool_response>"
        "<|im_end|>\n<|im_start|>assistant\n"
    )


def test_thinking_of_the_current_tool_turn_is_rendered() -> None:
    messages = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "thinking": "Need the tool.",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}],
        },
        {"role": "tool", "content": "-3C", "tool_name": "get_weather"},
    ]
    assert render_chat(QWEN3, messages) == (
        "<|im_start|>user\nWeather?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nNeed the tool.\n</think>\n\nChecking.\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\n-3C\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )


def test_extra_variables_and_hf_globals() -> None:
    template = (
        "{{ bos_token }}{{ greeting }}{{ messages[0]['content'] | tojson }}"
        "{{ {'b': 1, 'a': 2} | tojson(indent=1) }}{{ strftime_now('%Y') | length }}"
        "{% for m in messages %}{% if loop.first %}{% continue %}{% endif %}{{ m.content }}{% endfor %}"
        "{% generation %}[{{ eos_token }}]{% endgeneration %}"
    )
    messages = [{"role": "user", "content": "é<b>"}, {"role": "user", "content": "2nd"}]
    out = render_chat(template, messages, bos_token="<s>", eos_token="</s>", greeting="hey ")
    assert out == '<s>hey "é<b>"{\n "b": 1,\n "a": 2\n}42nd[</s>]'


def test_chatml_fallback() -> None:
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    assert render_chat(CHATML, messages) == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    )


def test_raise_exception_is_a_client_error() -> None:
    template = "{% if messages[0]['role'] != 'user' %}{{ raise_exception('roles must alternate') }}{% endif %}"
    with pytest.raises(InvalidRequest) as info:
        render_chat(template, [{"role": "assistant", "content": "x"}])
    assert (info.value.message, info.value.status_code) == ("roles must alternate", 400)


def test_template_errors_are_500() -> None:
    with pytest.raises(CllmError) as info:
        render_chat("{% for m in messages %}", [])
    assert info.value.status_code == 500 and type(info.value) is CllmError
    assert info.value.message.startswith("template: line 1: ")
    with pytest.raises(CllmError) as info:
        render_chat("{{ messages[0].content + 1 }}", [{"role": "user", "content": "x"}])
    assert info.value.status_code == 500 and info.value.message.startswith("template: TypeError: ")
    # The sandbox refuses mutation.
    with pytest.raises(CllmError, match="SecurityError"):
        render_chat("{{ messages.append(1) }}", [])


def test_strip_think_tags() -> None:
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "<think>\nold reasoning\n</think>\n\nFirst answer"},
        {"role": "assistant", "content": "no tags <think>kept</think>"},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": "<think>after the last user turn</think>kept"},
    ]
    out = strip_think_tags(messages)
    assert [m["content"] for m in out] == [
        "a",
        "First answer",
        "no tags <think>kept</think>",
        "b",
        "<think>after the last user turn</think>kept",
    ]
    assert messages[1]["content"].startswith("<think>")  # the input is not modified
