"""cllm's Jinja ports of Ollama's Go renderers (``chatformat.renderer_templates``) write the prompts
Ollama's renderers write: the cases of ``model/renderers/laguna_test.go`` (its reference-flow tests,
themselves checked against Poolside's published templates), transcribed; and a model whose config
names such a renderer and whose GGUF has no chat template is rendered with the port."""

from __future__ import annotations

from typing import Any

import pytest

from cllm_ollama.chatformat.builtin_templates import go_template_in_use, template_in_use
from cllm_ollama.chatformat.jinja import render_chat
from cllm_ollama.chatformat.renderer_templates import (
    COHERE,
    FUNCTIONGEMMA,
    GEMMA4,
    GEMMA4_LARGE,
    GLM_4_7,
    GLM_OCR,
    LAGUNA,
    LFM2,
    OLMO3,
    OLMO3_1,
    POOLSIDE_V1,
    QWEN3_CODER,
    renderer_template,
)

BOS = "〈|EOS|〉"
DEFAULT = (
    "You are a helpful, conversationally-fluent assistant made by Poolside. You are here to be helpful to users "
    "through natural language conversations."
)
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get weather",
        "parameters": {
            "type": "object",
            "required": ["location"],
            "properties": {"location": {"type": "string", "description": "City"}},
        },
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add numbers",
        "parameters": {
            "type": "object",
            "required": ["a", "b"],
            "properties": {
                "a": {"type": "number", "description": "First number"},
                "b": {"type": "number", "description": "Second number"},
            },
        },
    },
}
WEATHER_JSON = (
    '{"type": "function", "function": {"name": "get_weather", "description": "Get weather", "parameters": '
    '{"type": "object", "required": ["location"], "properties": {"location": {"type": "string", "description": '
    '"City"}}}}}'
)
ADD_JSON = (
    '{"type": "function", "function": {"name": "add", "description": "Add numbers", "parameters": {"type": "object", '
    '"required": ["a", "b"], "properties": {"a": {"type": "number", "description": "First number"}, "b": {"type": '
    '"number", "description": "Second number"}}}}}'
)
TOOLS_INTRO = (
    "### Tools\n\nYou may call functions to assist with the user query.\n"
    "All available function signatures are listed below:\n<available_tools>\n"
)
CALL_FORMAT = (
    "<tool_call>function-name\n<arg_key>argument-key</arg_key>\n<arg_value>value-of-argument-key</arg_value>\n"
    "</tool_call>"
)
NO_THINK_FORMAT = (
    "For each function call, return an unescaped XML-like object with function name and arguments within "
    "'<tool_call>' and '</tool_call>' tags, like here:\n"
)
THINK_FORMAT = (
    "Wrap your thinking in '<think>', '</think>' tags, followed by a function call. For each function call, return "
    "an unescaped XML-like object with function name and arguments within '<tool_call>' and '</tool_call>' tags, "
    "like here:\n<think> your thoughts here </think>\n"
)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


ADD_HISTORY = [
    user("Add these."),
    {
        "role": "assistant",
        "content": "\nCalling the tool.\n",
        "thinking": "Need addition.",
        "tool_calls": [{"function": {"name": "add", "arguments": {"a": 2, "b": 3}}}],
    },
    {"role": "tool", "content": "5"},
    user("Thanks"),
]
MIXED_CALLS = [
    user("Do calls"),
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"function": {"name": "echo", "arguments": {"text": "hello", "count": 2}}},
            {"function": {"name": "configure", "arguments": {"flag": True, "options": {"mode": "fast"}}}},
        ],
    },
    user("Done?"),
]
V2_HEADER = f"{BOS}<system>\n\n{DEFAULT}\n</system>\n"

V2_CASES = [
    ([user("Hello")], None, None, V2_HEADER + "<user>\nHello\n</user>\n<assistant>\n</think>"),
    ([user("Hello")], None, True, V2_HEADER + "<user>\nHello\n</user>\n<assistant>\n<think>"),
    (
        [system("Stay concise.\n\n"), user("Hi")],
        None,
        None,
        f"{BOS}<system>\n\nStay concise.\n</system>\n<user>\nHi\n</user>\n<assistant>\n</think>",
    ),
    ([system(""), user("Hi")], None, None, f"{BOS}<user>\nHi\n</user>\n<assistant>\n</think>"),
    (
        [system("Primary."), user("Hi"), system("Secondary.")],
        None,
        None,
        f"{BOS}<system>\n\nPrimary.\n</system>\n<user>\nHi\n</user>\n<system>\nSecondary.\n</system>\n"
        "<assistant>\n</think>",
    ),
    (
        [system(""), user("Weather?")],
        [WEATHER],
        None,
        f"{BOS}<system>\n\n\n{TOOLS_INTRO}{WEATHER_JSON}\n</available_tools>\n\n{NO_THINK_FORMAT}{CALL_FORMAT}"
        "\n</system>\n<user>\nWeather?\n</user>\n<assistant>\n</think>",
    ),
    (
        [system("Stay concise."), user("Weather?")],
        [WEATHER],
        True,
        f"{BOS}<system>\n\nStay concise.\n\n{TOOLS_INTRO}{WEATHER_JSON}\n</available_tools>\n\n{THINK_FORMAT}"
        f"{CALL_FORMAT}\n</system>\n<user>\nWeather?\n</user>\n<assistant>\n<think>",
    ),
    (
        [user("Add then report weather")],
        [WEATHER, ADD],
        None,
        f"{BOS}<system>\n\n{DEFAULT}\n\n{TOOLS_INTRO}{WEATHER_JSON}\n{ADD_JSON}\n</available_tools>\n\n"
        f"{NO_THINK_FORMAT}{CALL_FORMAT}\n</system>\n<user>\nAdd then report weather\n</user>\n<assistant>\n</think>",
    ),
    (
        ADD_HISTORY,
        None,
        True,
        V2_HEADER + "<user>\nAdd these.\n</user>\n<assistant>\n<think>\nNeed addition.\n</think>\nCalling the tool.\n"
        "<tool_call>add\n<arg_key>a</arg_key>\n<arg_value>2</arg_value>\n<arg_key>b</arg_key>\n<arg_value>3"
        "</arg_value>\n</tool_call>\n</assistant>\n<tool_response>\n5\n</tool_response>\n<user>\nThanks\n</user>\n"
        "<assistant>\n<think>",
    ),
    (
        [user("Explain"), {"role": "assistant", "content": "<think>\nPlan\n</think>\nAnswer\n\n"}, user("Next")],
        None,
        True,
        V2_HEADER + "<user>\nExplain\n</user>\n<assistant>\n<think>\nPlan\n</think>\nAnswer\n</assistant>\n"
        "<user>\nNext\n</user>\n<assistant>\n<think>",
    ),
    (
        [
            user("Explain"),
            {"role": "assistant", "thinking": "Use metadata.", "content": "<think>Ignore this</think>\nAnswer"},
            user("Next"),
        ],
        None,
        None,
        V2_HEADER + "<user>\nExplain\n</user>\n<assistant>\n<think>\nUse metadata.\n</think>\nAnswer\n</assistant>\n"
        "<user>\nNext\n</user>\n<assistant>\n</think>",
    ),
    (
        [user("Continue"), {"role": "assistant", "content": " \n\t "}, user("Next")],
        None,
        None,
        V2_HEADER + "<user>\nContinue\n</user>\n<assistant>\n</think>\n</assistant>\n<user>\nNext\n</user>\n"
        "<assistant>\n</think>",
    ),
    (
        MIXED_CALLS,
        None,
        None,
        V2_HEADER + "<user>\nDo calls\n</user>\n<assistant>\n</think>\n<tool_call>echo\n<arg_key>text</arg_key>\n"
        "<arg_value>hello</arg_value>\n<arg_key>count</arg_key>\n<arg_value>2</arg_value>\n</tool_call>\n"
        "<tool_call>configure\n<arg_key>flag</arg_key>\n<arg_value>true</arg_value>\n<arg_key>options</arg_key>\n"
        '<arg_value>{"mode": "fast"}</arg_value>\n</tool_call>\n</assistant>\n<user>\nDone?\n</user>\n'
        "<assistant>\n</think>",
    ),
]
V8_HEADER = f"{BOS}<system>{DEFAULT}</system>\n"
V8_CASES = [
    ([user("Hello")], None, None, V8_HEADER + "<user>Hello</user>\n<assistant></think>"),
    ([user("Hello")], None, True, V8_HEADER + "<user>Hello</user>\n<assistant><think>"),
    (
        [system("Stay concise.\n\n"), user("Hi")],
        None,
        None,
        f"{BOS}<system>Stay concise.</system>\n<user>Hi</user>\n<assistant></think>",
    ),
    ([system(""), user("Hi")], None, None, f"{BOS}<user>Hi</user>\n<assistant></think>"),
    (
        [system(""), user("Weather?")],
        [WEATHER],
        None,
        f"{BOS}<system>{TOOLS_INTRO}{WEATHER_JSON}\n</available_tools></system>\n<user>Weather?</user>\n"
        "<assistant></think>",
    ),
    ([system(""), user("Hi")], None, True, f"{BOS}<system></system>\n<user>Hi</user>\n<assistant><think>"),
    (
        [system("Primary."), user("Hi"), system("Secondary.")],
        None,
        None,
        f"{BOS}<system>Primary.</system>\n<user>Hi</user>\n<system>Secondary.</system>\n<assistant></think>",
    ),
    (
        [system("Stay concise."), user("Weather?")],
        [WEATHER],
        True,
        f"{BOS}<system>Stay concise.\n\n{TOOLS_INTRO}{WEATHER_JSON}\n</available_tools></system>\n"
        "<user>Weather?</user>\n<assistant><think>",
    ),
    (
        [user("Add then report weather")],
        [WEATHER, ADD],
        None,
        f"{BOS}<system>{DEFAULT}\n\n{TOOLS_INTRO}{WEATHER_JSON}\n{ADD_JSON}\n</available_tools></system>\n"
        "<user>Add then report weather</user>\n<assistant></think>",
    ),
]


@pytest.mark.parametrize(("messages", "tools", "thinking", "expected"), V2_CASES)
def test_laguna_is_ollama_s_laguna_renderer(messages: Any, tools: Any, thinking: Any, expected: str) -> None:
    assert render_chat(LAGUNA, messages, tools=tools, enable_thinking=thinking, bos_token=BOS) == expected


@pytest.mark.parametrize(("messages", "tools", "thinking", "expected"), V8_CASES)
def test_poolside_v1_is_ollama_s_laguna_v8_renderer(messages: Any, tools: Any, thinking: Any, expected: str) -> None:
    assert render_chat(POOLSIDE_V1, messages, tools=tools, enable_thinking=thinking, bos_token=BOS) == expected


def _info(chat_template: str | None) -> Any:
    from cllm_ollama.store.gguf_info import GGUFInfo

    return GGUFInfo(
        architecture="laguna",
        context_length=4096,
        embedding_length=64,
        block_count=2,
        chat_template=chat_template,
        file_type=None,
        quantization_level="Q8_0",
        parameter_count=1,
        parameter_size="1",
        model_info={},
        capabilities=("completion",),
        family="laguna",
        families=("laguna",),
        tensors=(),
    )


def test_a_renderer_model_without_a_chat_template_renders_with_the_port() -> None:
    """Ollama's converter drops Laguna's chat template: the config's renderer names the format.
    A GGUF template, where there is one, still comes first; an unported renderer keeps the
    ``TEMPLATE`` layer, as before."""
    bare = _info(None)
    assert renderer_template("poolside-v1") == POOLSIDE_V1 and renderer_template("nope") is None
    assert go_template_in_use("{{ .Prompt }}", "laguna", bare) is None
    assert template_in_use("{{ .Prompt }}", bare, "laguna") == LAGUNA
    assert template_in_use("{{ .Prompt }}", bare, "poolside-v1") == POOLSIDE_V1
    assert template_in_use("{{ .Prompt }}", bare, "qwen3.5") == "{{ .Prompt }}"
    templated = _info("{{ messages }}")
    assert template_in_use("{{ .Prompt }}", templated, "laguna") == "{{ messages }}"


def test_the_prompt_of_such_a_model_is_the_port_s() -> None:
    """``ChatPrompt`` renders with the port, by Jinja, instead of the ``{{ .Prompt }}`` layer."""
    from types import SimpleNamespace

    from cllm_ollama.chatformat.prompt import ChatPrompt

    model: Any = SimpleNamespace(
        info=_info(None),
        record=SimpleNamespace(renderer_in_use="poolside-v1", template="{{ .Prompt }}"),
        has=lambda cap: cap == "thinking",
        full_name="laguna:latest",
    )
    prompt = ChatPrompt(model, [user("Hi")], thinking=False)
    assert prompt.go_template is None and prompt.template == POOLSIDE_V1


@pytest.mark.parametrize(
    ("renderer", "port"),
    [
        ("gemma4", GEMMA4),
        ("gemma4-small", GEMMA4),
        ("gemma4-large", GEMMA4_LARGE),
        ("lfm2", LFM2),
        ("lfm2-thinking", LFM2),
        ("olmo3", OLMO3),
        ("cohere", COHERE),
        ("functiongemma", FUNCTIONGEMMA),
    ],
)
def test_ollama_s_renderer_names_pick_their_ports(renderer: str, port: str) -> None:
    """As Ollama's ``rendererForName`` names them (the ports are held to Ollama's renderer tests in
    ``test_family_templates``); OLMo 3 Think's renderer is not ported."""
    assert template_in_use("{{ .Prompt }}", _info(None), renderer) == port
    assert renderer_template("olmo3-think") is None


def test_olmo3_1_is_olmo3_with_olmo_s_default_system_prompt() -> None:
    """Ollama's ``olmo3.1`` is its OLMo 3 renderer with ``olmo31DefaultSystemMessage``."""
    hi = [user("Hello!")]
    olmo = (
        "<|im_start|>system\nYou are Olmo, a helpful AI assistant built by Ai2. Your date cutoff is December 2024, "
        "and your model weights are available at https://huggingface.co/allenai. "
    )
    plain = "<|im_start|>system\nYou are a helpful function-calling AI assistant. "
    assert render_chat(OLMO3_1, hi) == render_chat(OLMO3, hi).replace(plain, olmo)
    assert render_chat(OLMO3_1, hi).startswith(olmo + "You do not currently have access to any functions.")
    assert render_chat(OLMO3_1, [system("Be brief."), *hi]) == render_chat(OLMO3, [system("Be brief."), *hi])
    assert renderer_template("olmo3.1") == OLMO3_1


# --- Qwen3-Coder (qwen3coder_test.go, TestQwen3CoderRenderer)

Q_INSTRUCTIONS = """

If you choose to call a function ONLY reply in the following format with NO suffix:

<tool_call>
<function=example_function_name>
<parameter=example_parameter_1>
value_1
</parameter>
<parameter=example_parameter_2>
This is the value for the second parameter
that can span
multiple lines
</parameter>
</function>
</tool_call>

<IMPORTANT>
Reminder:
- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within \
<tool_call></tool_call> XML tags
- Required parameters MUST be specified
- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT \
after
- If there is no function call available, answer the question like normal with your current knowledge and do not \
tell the user about function calls
</IMPORTANT><|im_end|>
"""
Q_TOOLS_INTRO = "\n\n# Tools\n\nYou have access to the following functions:\n\n<tools>"


def _q_tool(name: str, description: str, properties: dict[str, Any], required: list[str] | None = None) -> Any:
    parameters: dict[str, Any] = {"properties": properties}
    if required:
        parameters["required"] = required
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def _q_call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"function": {"name": name, "arguments": arguments}}


@pytest.mark.parametrize(
    ("messages", "tools", "expected"),
    [
        (
            [system("You are a helpful assistant."), user("Hello, how are you?")],
            None,
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello, how are you?"
            "<|im_end|>\n<|im_start|>assistant\n",
        ),
        (
            [
                system("You are a helpful assistant with access to tools."),
                user("What is the weather like in San Francisco?"),
                {
                    "role": "assistant",
                    "content": "I'll check the weather in San Francisco for you.",
                    "tool_calls": [_q_call("get_weather", unit="fahrenheit")],
                },
                {"role": "tool", "content": '{"temperature": 68}'},
                user("That sounds nice! What about New York?"),
            ],
            [
                _q_tool(
                    "get_weather",
                    "Get the current weather in a given location",
                    {
                        "unit": {
                            "type": "string",
                            "enum": ["celsius", "fahrenheit"],
                            "description": "The unit of temperature",
                        }
                    },
                    ["unit"],
                )
            ],
            "<|im_start|>system\nYou are a helpful assistant with access to tools."
            + Q_TOOLS_INTRO
            + "\n<function>\n<name>get_weather</name>\n<description>Get the current weather in a given location"
            "</description>\n<parameters>\n<parameter>\n<name>unit</name>\n<type>string</type>\n<description>The unit "
            'of temperature</description>\n<enum>["celsius","fahrenheit"]</enum>\n</parameter>\n<required>["unit"]'
            "</required>\n</parameters>\n</function>\n</tools>"
            + Q_INSTRUCTIONS
            + "<|im_start|>user\nWhat is the weather like in San Francisco?<|im_end|>\n<|im_start|>assistant\n"
            "I'll check the weather in San Francisco for you.\n\n<tool_call>\n<function=get_weather>\n"
            "<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call><|im_end|>\n<|im_start|>user\n"
            '<tool_response>\n{"temperature": 68}\n</tool_response><|im_end|>\n<|im_start|>user\nThat sounds nice! '
            "What about New York?<|im_end|>\n<|im_start|>assistant\n",
        ),
        (
            [
                system("You are a helpful assistant with access to tools."),
                user("call double(1) and triple(2)"),
                {
                    "role": "assistant",
                    "content": "I'll call double(1) and triple(2) for you.",
                    "tool_calls": [_q_call("double", number="1"), _q_call("triple", number="2")],
                },
                {"role": "tool", "content": '{"number": 2}'},
                {"role": "tool", "content": '{"number": 6}'},
            ],
            [
                _q_tool(
                    "double", "Double a number", {"number": {"type": "string", "description": "The number to double"}}
                ),
                _q_tool(
                    "triple", "Triple a number", {"number": {"type": "string", "description": "The number to triple"}}
                ),
            ],
            "<|im_start|>system\nYou are a helpful assistant with access to tools."
            + Q_TOOLS_INTRO
            + "\n<function>\n<name>double</name>\n<description>Double a number</description>\n<parameters>\n<parameter>"
            "\n<name>number</name>\n<type>string</type>\n<description>The number to double</description>\n</parameter>"
            "\n</parameters>\n</function>\n<function>\n<name>triple</name>\n<description>Triple a number</description>"
            "\n<parameters>\n<parameter>\n<name>number</name>\n<type>string</type>\n<description>The number to triple"
            "</description>\n</parameter>\n</parameters>\n</function>\n</tools>"
            + Q_INSTRUCTIONS
            + "<|im_start|>user\ncall double(1) and triple(2)<|im_end|>\n<|im_start|>assistant\nI'll call double(1) "
            "and triple(2) for you.\n\n<tool_call>\n<function=double>\n<parameter=number>\n1\n</parameter>\n"
            "</function>\n</tool_call>\n<tool_call>\n<function=triple>\n<parameter=number>\n2\n</parameter>\n"
            '</function>\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{"number": 2}\n'
            '</tool_response>\n<tool_response>\n{"number": 6}\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
        ),
        (
            [
                user("call tool"),
                {"role": "assistant", "content": "", "tool_calls": [_q_call("echo", payload={"foo": "bar"})]},
                {"role": "tool", "content": '{"payload": {"foo": "bar"}}'},
            ],
            None,
            "<|im_start|>user\ncall tool<|im_end|>\n<|im_start|>assistant\n\n<tool_call>\n<function=echo>\n"
            '<parameter=payload>\n{"foo":"bar"}\n</parameter>\n</function>\n</tool_call><|im_end|>\n<|im_start|>user\n'
            '<tool_response>\n{"payload": {"foo": "bar"}}\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
        ),
    ],
)
def test_qwen3_coder_is_ollama_s_renderer(messages: Any, tools: Any, expected: str) -> None:
    assert render_chat(QWEN3_CODER, messages, tools=tools) == expected
    assert renderer_template("qwen3-coder") == QWEN3_CODER


# --- GLM 4.7 (glm47_test.go, TestGLM47Renderer)

G_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get weather",
        "parameters": {"type": "object", "required": ["location"], "properties": {"location": {"type": "string"}}},
    },
}
G_HEADER = (
    "[gMASK]<sop><|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    '{"type": "function", "function": {"name": "get_weather", "description": "Get weather", "parameters": '
    '{"type": "object", "required": ["location"], "properties": {"location": {"type": "string"}}}}}\n</tools>\n\n'
    "For each function call, output the function name and arguments within the following XML format:\n"
    "<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value>"
    "<arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>"
)


def _weather(location: str, **more: Any) -> dict[str, Any]:
    return {"function": {"name": "get_weather", "arguments": {"location": location, **more}}}


def _g_called(location: str, **more: Any) -> str:
    extra = "".join(f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>" for k, v in more.items())
    return f"<tool_call>get_weather<arg_key>location</arg_key><arg_value>{location}</arg_value>{extra}</tool_call>"


@pytest.mark.parametrize(
    ("messages", "tools", "thinking", "expected"),
    [
        ([user("Hello")], None, None, "[gMASK]<sop><|user|>Hello<|assistant|><think>"),
        ([user("Hello")], None, False, "[gMASK]<sop><|user|>Hello<|assistant|></think>"),
        (
            [system("You are helpful."), user("Hello")],
            None,
            None,
            "[gMASK]<sop><|system|>You are helpful.<|user|>Hello<|assistant|><think>",
        ),
        (
            [user("Hi"), {"role": "assistant", "content": "Hello there"}, user("How are you?")],
            None,
            None,
            "[gMASK]<sop><|user|>Hi<|assistant|></think>Hello there<|user|>How are you?<|assistant|><think>",
        ),
        (
            [user("Answer with reasoning."), {"role": "assistant", "thinking": "Plan.", "content": "Done."}],
            None,
            None,
            "[gMASK]<sop><|user|>Answer with reasoning.<|assistant|><think>Plan.</think>Done.<|assistant|><think>",
        ),
        (
            [
                user("Weather?"),
                {"role": "assistant", "content": "", "tool_calls": [_weather("Tokyo", unit="celsius")]},
                {"role": "tool", "content": '{"temperature":22}'},
            ],
            [G_TOOL],
            None,
            G_HEADER
            + "<|user|>Weather?<|assistant|></think>"
            + _g_called("Tokyo", unit="celsius")
            + '<|observation|><tool_response>{"temperature":22}</tool_response><|assistant|><think>',
        ),
        (
            [
                user("Weather?"),
                {"role": "assistant", "content": "Let me check", "tool_calls": [_weather("Tokyo")]},
                {"role": "tool", "content": '{"temperature":22}'},
                {"role": "assistant", "content": "It is 22C."},
            ],
            [G_TOOL],
            None,
            G_HEADER
            + "<|user|>Weather?<|assistant|></think>Let me check"
            + _g_called("Tokyo")
            + '<|observation|><tool_response>{"temperature":22}</tool_response><|assistant|></think>It is 22C.'
            "<|assistant|><think>",
        ),
        (
            [
                user("Compare weather"),
                {"role": "assistant", "content": "", "tool_calls": [_weather("Tokyo"), _weather("Paris")]},
                {"role": "tool", "content": '{"temperature":22}'},
                {"role": "tool", "content": '{"temperature":18}'},
            ],
            [G_TOOL],
            None,
            G_HEADER
            + "<|user|>Compare weather<|assistant|></think>"
            + _g_called("Tokyo")
            + _g_called("Paris")
            + '<|observation|><tool_response>{"temperature":22}</tool_response><tool_response>{"temperature":18}'
            "</tool_response><|assistant|><think>",
        ),
        (
            [
                user("Think step by step"),
                {"role": "assistant", "thinking": "Let me think...", "content": "Here's my answer."},
                user("Continue"),
            ],
            None,
            None,
            "[gMASK]<sop><|user|>Think step by step<|assistant|><think>Let me think...</think>Here's my answer."
            "<|user|>Continue<|assistant|><think>",
        ),
    ],
)
def test_glm_4_7_is_ollama_s_renderer(messages: Any, tools: Any, thinking: Any, expected: str) -> None:
    assert render_chat(GLM_4_7, messages, tools=tools, enable_thinking=thinking) == expected
    assert renderer_template("glm-4.7") == GLM_4_7


# --- GLM-OCR (glmocr_test.go, TestGlmOcrRenderer_Images; the rest read off glmocr.go)

O_START = "[gMASK]<sop>"


@pytest.mark.parametrize(
    ("messages", "tools", "thinking", "expected"),
    [
        # Images: cllm tags each message's items ahead of rendering, as Ollama's useImgTags does.
        (
            [user("[img-0] Describe this image.")],
            None,
            None,
            f"{O_START}<|user|>\n[img-0] Describe this image.<|assistant|>\n",
        ),
        (
            [user("[img-0][img-1] Describe these images.")],
            None,
            None,
            f"{O_START}<|user|>\n[img-0][img-1] Describe these images.<|assistant|>\n",
        ),
        (
            [user("[img-0] First image"), {"role": "assistant", "content": "Processed."}, user("[img-1] Second image")],
            None,
            None,
            f"{O_START}<|user|>\n[img-0] First image<|assistant|>\n<think></think>\nProcessed.\n"
            "<|user|>\n[img-1] Second image<|assistant|>\n",
        ),
        ([user("Text only message.")], None, None, f"{O_START}<|user|>\nText only message.<|assistant|>\n"),
        # Thinking turned off explicitly: /nothink after each user turn, an empty block primed.
        (
            [
                {"role": "system", "content": "Be brief."},
                user("Read it"),
                {"role": "assistant", "thinking": " hm ", "content": " Done "},
                user("Again/nothink"),
            ],
            None,
            False,
            f"{O_START}<|system|>\nBe brief.\n<|user|>\nRead it/nothink<|assistant|>\n<think>hm</think>\nDone\n"
            "<|user|>\nAgain/nothink<|assistant|>\n<think></think>\n",
        ),
        # Tools: GLM 4.7's block; calls after the content, answers as observations.
        (
            [
                user("Weather?"),
                {"role": "assistant", "content": "", "tool_calls": [_weather("Paris", days=2)]},
                {"role": "tool", "content": "sunny"},
                {"role": "tool", "content": "warm"},
            ],
            [G_TOOL],
            None,
            G_HEADER + "<|user|>\nWeather?<|assistant|>\n<think></think>\n" + _g_called("Paris", days=2) + "\n"
            "<|observation|>\n<tool_response>\nsunny\n</tool_response>\n\n<tool_response>\nwarm\n</tool_response>\n"
            "<|assistant|>\n",
        ),
    ],
)
def test_glm_ocr_is_ollama_s_renderer(messages: Any, tools: Any, thinking: Any, expected: str) -> None:
    assert render_chat(GLM_OCR, messages, tools=tools, enable_thinking=thinking) == expected
    assert renderer_template("glm-ocr") == GLM_OCR


# --- JSON as Go's json.Marshal writes it (every port whose Go renderer marshals)

HTML_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather <now> & later",
        "parameters": {"type": "object", "properties": {"filter": {"type": "object"}}},
    },
}
HTML_CALL = [
    user("Weather?"),
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "get_weather", "arguments": {"filter": {"b": 1.0, "a": "<x>"}}}}],
    },
    {"role": "tool", "content": "<ok>"},
]
ESCAPED = '"description": "Weather \\u003cnow\\u003e \\u0026 later"'
COMPACT_ARG = '{"a":"\\u003cx\\u003e","b":1}'  # a map's keys sorted, a float64 as Go writes it
SPACED_ARG = '{"a": "\\u003cx\\u003e", "b": 1}'


@pytest.mark.parametrize(
    ("template", "tool", "argument"),
    [
        (GLM_4_7, ESCAPED, f"<arg_value>{COMPACT_ARG}</arg_value>"),
        (GLM_OCR, ESCAPED, f"<arg_value>{COMPACT_ARG}</arg_value>"),
        (LAGUNA, ESCAPED, f"<arg_value>{SPACED_ARG}</arg_value>"),
        (POOLSIDE_V1, ESCAPED, f"<arg_value>{SPACED_ARG}</arg_value>"),
        (OLMO3, ESCAPED, f"filter={COMPACT_ARG}"),
        (COHERE, ESCAPED, f'"parameters": {{"filter": {SPACED_ARG}}}}}'),
        (QWEN3_CODER, "<description>Weather <now> & later</description>", f"<parameter=filter>\n{COMPACT_ARG}\n"),
    ],
)
def test_json_in_a_prompt_is_go_s(template: str, tool: str, argument: str) -> None:
    # Ollama's renderers marshal tools and arguments with encoding/json, which escapes <, > and &
    # (Qwen3-Coder's writes a tool's description as text, and only its arguments as JSON).
    prompt = render_chat(template, HTML_CALL, tools=[HTML_TOOL])
    assert tool in prompt and argument in prompt
    assert "<x>" not in prompt


def test_a_tool_result_as_cohere_s_renderer_marshals_it() -> None:
    assert '"0": {"content": "\\u003cok\\u003e"}' in render_chat(COHERE, HTML_CALL, tools=[HTML_TOOL])


# A tool as clients send it: properties before required, keys api.Tool lacks, an empty description.
CLIENT_TOOL = {
    "type": "function",
    "function": {
        "name": "find",
        "description": "",
        "parameters": {
            "type": "object",
            "properties": {
                "q": {"type": "string", "description": "Query", "default": "x", "enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "string", "minLength": 1}},
            },
            "required": ["q"],
            "additionalProperties": False,
        },
    },
}
# ... as json.Marshal writes its api.Tool: struct order, unknown keys and the empty description gone,
# an `any` field's keys sorted, its numbers float64s.
GO_TOOL = (
    '{"type": "function", "function": {"name": "find", "parameters": {"type": "object", "required": ["q"], '
    '"properties": {"q": {"type": "string", "description": "Query", "enum": ["a", "b"]}, '
    '"tags": {"type": "array", "items": {"minLength": 1, "type": "string"}}}}}}'
)


@pytest.mark.parametrize("template", [GLM_4_7, GLM_OCR, LAGUNA, POOLSIDE_V1])
def test_a_tool_is_written_as_ollama_s_api_tool(template: str) -> None:
    assert GO_TOOL + "\n" in render_chat(template, [user("Find")], tools=[CLIENT_TOOL])


def test_olmo_s_tool_list_and_cohere_s_parameters_are_api_structs() -> None:
    assert f"<functions>[{GO_TOOL}]</functions>" in render_chat(OLMO3, [user("Find")], tools=[CLIENT_TOOL])
    parameters = GO_TOOL[GO_TOOL.index('{"type": "object"') : -2]
    cohere = render_chat(COHERE, [user("Find")], tools=[CLIENT_TOOL])
    assert f'{{"name": "find", "description": "", "parameters": {parameters}, "responses": null}}' in cohere
    bare = {"type": "function", "function": {"name": "now"}}
    assert '"parameters": {"type": "", "properties": null}' in render_chat(COHERE, [user("Now")], tools=[bare])


def test_qwen3_coder_writes_only_the_struct_s_extra_keys_and_numbers_as_go_prints_them() -> None:
    call = {"function": {"name": "find", "arguments": {"q": "a", "n": 3.0, "big": 1000000}}}
    prompt = render_chat(QWEN3_CODER, [user("Find"), {"role": "assistant", "tool_calls": [call]}], tools=[CLIENT_TOOL])
    assert '\n<enum>["a","b"]</enum>' in prompt and '\n<items>{"minLength":1,"type":"string"}</items>' in prompt
    assert '\n<required>["q"]</required>' in prompt
    assert "<default>" not in prompt and "additionalProperties" not in prompt
    assert "<parameter=n>\n3\n</parameter>" in prompt and "<parameter=big>\n1e+06\n</parameter>" in prompt


def test_lfm2_marshals_without_html_escapes_and_keys_sort_as_go_sorts_them() -> None:
    call = {"function": {"name": "find", "arguments": {"q": {"b": "<x>", "a": 2.0}, "B": 1}}}
    messages = [user("Find"), {"role": "assistant", "content": "", "tool_calls": [call]}]
    assert 'find(B=1,q={"a": 2, "b": "<x>"})' in render_chat(LFM2, messages, tools=[CLIENT_TOOL])
    assert "find(B=1, q=" in render_chat(OLMO3, messages, tools=[CLIENT_TOOL])  # sort.Strings: upper case first


@pytest.mark.parametrize("template", [GEMMA4, FUNCTIONGEMMA])
def test_gemma_s_calls_write_a_whole_float_as_an_integer(template: str) -> None:
    # Go's renderers print a float64 that is whole with %d, any other with %v.
    call = {"function": {"name": "find", "arguments": {"n": 2.0, "x": 0.5}}}
    prompt = render_chat(template, [user("Find"), {"role": "assistant", "tool_calls": [call]}], tools=[CLIENT_TOOL])
    assert "n:2," in prompt and "x:0.5" in prompt


def test_go_s_edges_of_a_tool_as_the_renderers_marshal_it() -> None:
    odd = {
        "type": "function",
        "function": {
            "name": "",
            "description": "Lists <all>",
            "parameters": {
                "type": "object",
                "properties": {
                    "tags": {"type": ["array"], "items": {}, "description": "a & b"},
                    "none": {"type": None},
                    "some": {"type": ["string", None]},
                },
            },
        },
    }
    # LFM2's encoder leaves HTML alone, but api's properties map marshals itself with the escapes.
    lfm2 = render_chat(LFM2, [user("List")], tools=[odd])
    assert '"description": "Lists <all>"' in lfm2 and '"description": "a \\u0026 b"' in lfm2
    # A nameless function is listed as its whole tool (Go's lfm2ToolSchema), a named one as itself.
    assert '<|tool_list_start|>[{"type": "function", "function": {"name": "", "description": "Lists' in lfm2
    both = render_chat(LFM2, [user("List")], tools=[CLIENT_TOOL, odd])
    bare = render_chat(LFM2, [user("List")], tools=[{"type": "function"}])  # no function at all
    assert '<|tool_list_start|>[{"type": "function", "function": {"name": "", ' in bare
    assert '<|tool_list_start|>[{"name": "find", ' in both and '}, {"type": "function", "function": {"name": ""' in both
    # An `any` field left out only when nil: an empty object stays; one type prints as itself.
    assert '"tags": {"type": "array", "items": {}, "description": "a \\u0026 b"}' in lfm2
    # A null type is Go's "" (PropertyType reads null as an empty string), in a list too.
    assert '"none": {"type": ""}, "some": {"type": ["string", ""]}' in lfm2
    qwen = render_chat(QWEN3_CODER, [user("List")], tools=[odd])
    assert "\n<type>array</type>" in qwen and "\n<items>{}</items>" in qwen
    assert '{"name": "", "description": "Lists \\u003call\\u003e"' in render_chat(COHERE, [user("List")], tools=[odd])


def test_gemma_prints_a_number_past_int64_as_go_s_float64() -> None:
    call = {"function": {"name": "find", "arguments": {"id": 12345678901234567890, "n": 2**53 + 1}}}
    prompt = render_chat(GEMMA4, [user("Find"), {"role": "assistant", "tool_calls": [call]}], tools=[CLIENT_TOOL])
    assert "id:1.2345678901234567e+19" in prompt and "n:9007199254740992" in prompt
