"""cllm's Jinja ports of Ollama's renderers for the 2026 families (``chatformat.renderer_templates``)
render what the references render, transcribed: Gemma 4's the published templates (the 31B
model's and the smaller ones', as Ollama's renderer testdata has them); LFM2's, OLMo 3's,
Command's and FunctionGemma's Ollama's renderers (their ``model/renderers/*_test.go`` cases that
end in a generation prompt). The family tests serve the same templates as a GGUF's."""

from __future__ import annotations

from typing import Any

import pytest

from cllm_ollama.chatformat.jinja import render_chat
from cllm_ollama.chatformat.renderer_templates import COHERE, FUNCTIONGEMMA, GEMMA4, GEMMA4_LARGE, LFM2, OLMO3

# --- Gemma 4

G_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "A city"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    },
    {"type": "function", "function": {"name": "now", "description": "The time", "parameters": {"type": "object"}}},
]


def _call(city: str, **more: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "get_weather", "arguments": {"city": city, **more}}}


G_TALK = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "thinking": "hmm", "tool_calls": [_call("Paris", days=2), _call("Rome")]},
    {"role": "tool", "content": "Sunny"},
    {"role": "tool", "content": "Rain"},
    {"role": "assistant", "content": "Sunny and rain."},
    {"role": "user", "content": "Thanks"},
    {"role": "assistant", "content": "<|channel>thought\nok<channel|>Welcome."},
    {"role": "user", "content": "Bye"},
]
Q = '<|"|>'
G_SYSTEM = (
    f"Be brief.<|tool>declaration:get_weather{{description:{Q}The weather in a city{Q},parameters:{{properties:"
    f"{{city:{{description:{Q}A city{Q},type:{Q}STRING{Q}}},days:{{type:{Q}INTEGER{Q}}}}},required:[{Q}city{Q}],"
    f"type:{Q}OBJECT{Q}}}}}<tool|><|tool>declaration:now{{description:{Q}The time{Q},parameters:{{type:{Q}OBJECT{Q}}}}}"
    "<tool|><turn|>\n"
)
G_TURNS = (
    "<|turn>user\nWeather in Paris?<turn|>\n<|turn>model\n"
    f"<|tool_call>call:get_weather{{city:{Q}Paris{Q},days:2}}<tool_call|>"
    f"<|tool_call>call:get_weather{{city:{Q}Rome{Q}}}<tool_call|>"
    f"<|tool_response>response:get_weather{{value:{Q}Sunny{Q}}}<tool_response|>"
    f"<|tool_response>response:get_weather{{value:{Q}Rain{Q}}}<tool_response|>Sunny and rain.<turn|>\n"
    "<|turn>user\nThanks<turn|>\n<|turn>model\nWelcome.<turn|>\n<|turn>user\nBye<turn|>\n<|turn>model\n"
)


@pytest.mark.parametrize(
    ("messages", "tools", "thinking", "expected"),
    [
        (
            [{"role": "user", "content": "Weather in Paris?"}],
            None,
            False,
            "<bos><|turn>user\nWeather in Paris?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>",
        ),
        (
            [{"role": "user", "content": "Weather in Paris?"}],
            None,
            True,
            "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nWeather in Paris?<turn|>\n<|turn>model\n",
        ),
        (G_TALK, G_TOOLS, False, "<bos><|turn>system\n" + G_SYSTEM + G_TURNS + "<|channel>thought\n<channel|>"),
        (G_TALK, G_TOOLS, True, "<bos><|turn>system\n<|think|>\n" + G_SYSTEM + G_TURNS),
    ],
)
def test_gemma4_renders_as_the_published_template(messages: Any, tools: Any, thinking: bool, expected: str) -> None:
    """Declarations in Gemma's own syntax, calls and their results in one model turn, past
    thinking dropped, and the empty thought channel when thinking is off (the 31B template)."""
    assert render_chat(GEMMA4_LARGE, messages, tools=tools, enable_thinking=thinking, bos_token="<bos>") == expected
    # The smaller models' (Ollama's "gemma4"): no empty thought channel when thinking is off.
    small = expected.removesuffix("<|channel>thought\n<channel|>")
    assert render_chat(GEMMA4, messages, tools=tools, enable_thinking=thinking, bos_token="<bos>") == small


# --- LFM2 (lfm2_test.go, TestLFM2Renderer_ChatTemplateParity, the cases with a generation prompt)

S = "<|startoftext|>"
CALL = [{"function": {"name": "get_weather", "arguments": {"location": "Paris"}}}]
CALLED = '<|tool_call_start|>[get_weather(location="Paris")]<|tool_call_end|><|im_end|>\n'
ANSWERED = "<|im_start|>tool\n<|tool_response_start|>22C<|tool_response_end|><|im_end|>\n<|im_start|>assistant\n"


def _tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def _listed(*names: str) -> str:
    # api.ToolFunctionParameters' properties are not omitempty: a tool without them says null.
    return ", ".join(f'{{"name": "{n}", "parameters": {{"type": "object", "properties": null}}}}' for n in names)


@pytest.mark.parametrize(
    ("messages", "tools", "thinking", "expected"),
    [
        ([{"role": "user", "content": "Hello"}], None, False, S + "<|im_start|>user\nHello<|im_end|>\n"),
        (
            [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hi"}],
            None,
            False,
            S + "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
        ),
        (
            [{"role": "user", "content": "Use tools"}],
            [_tool("get_weather")],
            False,
            S + f"<|im_start|>system\nList of tools: <|tool_list_start|>[{_listed('get_weather')}]<|tool_list_end|>"
            "<|im_end|>\n<|im_start|>user\nUse tools<|im_end|>\n",
        ),
        (
            [{"role": "system", "content": "Follow instructions."}, {"role": "user", "content": "Do work"}],
            [_tool("tool_a"), _tool("tool_b")],
            False,
            S + "<|im_start|>system\nFollow instructions.\nList of tools: "
            f"<|tool_list_start|>[{_listed('tool_a', 'tool_b')}]<|tool_list_end|><|im_end|>\n"
            "<|im_start|>user\nDo work<|im_end|>\n",
        ),
        (
            [{"role": "developer", "content": "Do X"}, {"role": "user", "content": "Hi"}],
            None,
            False,
            S + "<|im_start|>developer\nDo X<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
        ),
        (
            [
                {"role": "user", "content": "Q1"},
                {"role": "assistant", "content": "A1"},
                {"role": "user", "content": "Q2"},
            ],
            None,
            True,
            S + "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n",
        ),
    ],
)
def test_lfm2_renders_as_ollama_s_renderer(messages: Any, tools: Any, thinking: bool, expected: str) -> None:
    got = render_chat(LFM2, messages, tools=tools, enable_thinking=thinking, bos_token=S)
    assert got == expected + "<|im_start|>assistant\n"


@pytest.mark.parametrize("thinking", [False, True])
def test_lfm2_calls_results_and_thinking(thinking: bool) -> None:
    """Calls before content, results between their marks, the thinking written back when asked."""
    messages = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "thinking": "Let me check the weather.", "tool_calls": CALL},
        {"role": "tool", "content": "22C"},
    ]
    think = "<think>Let me check the weather.</think>" if thinking else ""
    expected = S + "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n" + think + CALLED + ANSWERED
    assert render_chat(LFM2, messages, enable_thinking=thinking, bos_token=S) == expected


# --- OLMo 3 (olmo3_test.go, TestOlmo3Renderer)

O_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather",
        "parameters": {
            "type": "object",
            "required": ["location"],
            "properties": {"location": {"type": "string", "description": "The city"}},
        },
    },
}
O_FUNCTIONS = (
    '<functions>[{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather", '
    '"parameters": {"type": "object", "required": ["location"], "properties": {"location": {"type": "string", '
    '"description": "The city"}}}}}]</functions>'
)
O_DEFAULT = "<|im_start|>system\nYou are a helpful function-calling AI assistant. "
O_SYSTEM = "<|im_start|>system\nYou are a helpful assistant."
O_INSTRUCTION = (
    "You are provided with function signatures within <functions></functions> XML tags. You may call one or more "
    "functions to assist with the user query. Output any function calls within <function_calls></function_calls> XML "
    "tags. Do not make assumptions about what values to plug into functions."
)
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
WEATHER_CALL = {"function": {"name": "get_weather", "arguments": {"location": "San Francisco"}}}


@pytest.mark.parametrize(
    ("messages", "tools", "expected"),
    [
        (
            [{"role": "user", "content": "Hello!"}],
            None,
            O_DEFAULT + "You do not currently have access to any functions. <functions></functions><|im_end|>\n"
            "<|im_start|>user\nHello!<|im_end|>\n",
        ),
        (
            [SYSTEM, {"role": "user", "content": "Hello!"}],
            None,
            O_SYSTEM + "<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n",
        ),
        (
            [SYSTEM, {"role": "user", "content": "What is the weather?"}],
            [O_TOOL],
            O_SYSTEM + O_FUNCTIONS + "<|im_end|>\n<|im_start|>user\nWhat is the weather?<|im_end|>\n",
        ),
        (
            [{"role": "user", "content": "What is the weather?"}],
            [O_TOOL],
            O_DEFAULT + O_INSTRUCTION + O_FUNCTIONS + "<|im_end|>\n<|im_start|>user\nWhat is the weather?<|im_end|>\n",
        ),
        (
            [
                SYSTEM,
                {"role": "user", "content": "What is the weather in SF?"},
                {"role": "assistant", "content": "Let me check the weather.", "tool_calls": [WEATHER_CALL]},
                {"role": "tool", "content": '{"temperature": 68}'},
            ],
            [O_TOOL],
            O_SYSTEM + O_FUNCTIONS + "<|im_end|>\n<|im_start|>user\nWhat is the weather in SF?<|im_end|>\n"
            '<|im_start|>assistant\nLet me check the weather.<function_calls>get_weather(location="San Francisco")'
            '</function_calls><|im_end|>\n<|im_start|>environment\n{"temperature": 68}<|im_end|>\n',
        ),
        (
            [
                SYSTEM,
                {"role": "user", "content": "Hello"},
                {"role": "assistant", "content": "Hi there!"},
                {"role": "user", "content": "How are you?"},
            ],
            None,
            O_SYSTEM + "<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there!<|im_end|>\n"
            "<|im_start|>user\nHow are you?<|im_end|>\n",
        ),
    ],
)
def test_olmo3_renders_as_ollama_s_renderer(messages: Any, tools: Any, expected: str) -> None:
    assert render_chat(OLMO3, messages, tools=tools) == expected + "<|im_start|>assistant\n"


# --- Command (cohere_test.go: Ollama's renderer, itself checked against North-Mini-Code-1.0's template)

C_SYSTEM = "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TEXT|>"
C_NO_TOOLS = "# Available Tools\n```json\n[\n\n\n\n]\n```<|END_TEXT|><|END_OF_TURN_TOKEN|>"
C_USER = "<|START_OF_TURN_TOKEN|><|USER_TOKEN|><|START_TEXT|>{}<|END_TEXT|><|END_OF_TURN_TOKEN|>"
C_BOT = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"


def _cohere(messages: Any, tools: Any = None, thinking: bool | None = None) -> str:
    return render_chat(COHERE, messages, tools=tools, enable_thinking=thinking)


def test_command_user_history_and_thinking() -> None:
    assert _cohere([{"role": "user", "content": "USERMSG"}]) == (
        C_SYSTEM + C_NO_TOOLS + C_USER.format("USERMSG") + C_BOT + "<|START_THINKING|>"
    )
    history = [
        {"role": "system", "content": "DEVPREAMBLE"},
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1", "thinking": "THINK1"},
        {"role": "user", "content": "Q2"},
    ]
    assert _cohere(history) == (
        C_SYSTEM
        + "DEVPREAMBLE\n\n\n\n"
        + C_NO_TOOLS
        + C_USER.format("Q1")
        + C_BOT
        + "<|START_THINKING|>THINK1<|END_THINKING|><|START_TEXT|>A1<|END_TEXT|><|END_OF_TURN_TOKEN|>"
        + C_USER.format("Q2")
        + C_BOT
        + "<|START_THINKING|>"
    )
    assert _cohere([{"role": "user", "content": "Q"}], thinking=False).endswith(
        C_BOT + "<|START_THINKING|><|END_THINKING|>"
    )


def _result(call_id: str, content: str) -> str:
    return (
        f'\n    {{\n        "tool_call_id": "{call_id}",\n        "results": {{\n\n            \n            "0": '
        f'{{"content": "{content}"}}\n\n        }},\n        "is_error": null\n    }}'
    )


def test_command_tools_actions_and_results() -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get weather",
            "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}},
        },
    }
    call = {"id": "call_x", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    got = _cohere(
        [
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": "", "thinking": "I should call the tool", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_x", "content": "15C sunny"},
            {"role": "user", "content": "thanks"},
        ],
        [tool],
    )
    tools = (
        '# Available Tools\n```json\n[\n\n    {"name": "get_weather", "description": "Get weather", "parameters": '
        '{"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}, "responses": null}'
        "\n\n\n]\n```"
    )
    action = (
        C_BOT + "\n            \n                <|START_THINKING|>I should call the tool<|END_THINKING|>"
        '<|START_ACTION|>[\n\n    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}}'
        "\n\n]<|END_ACTION|><|END_OF_TURN_TOKEN|>"
    )
    result = (
        "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TOOL_RESULT|>["
        + _result("0", "15C sunny")
        + "\n\n]<|END_TOOL_RESULT|><|END_OF_TURN_TOKEN|>"
    )
    assert tools in got and action in got and result in got


def test_command_several_actions_and_merged_results() -> None:
    calls = [
        {"id": "a", "function": {"name": "t1", "arguments": {}}},
        {"id": "b", "function": {"name": "t2", "arguments": {"x": 1}}},
    ]
    got = _cohere(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "tool_calls": calls},
            {"role": "tool", "tool_call_id": "a", "content": "r1"},
            {"role": "tool", "tool_call_id": "b", "content": "r2"},
        ]
    )
    action = (
        '<|START_ACTION|>[\n\n    {"tool_call_id": "0", "tool_name": "t1", "parameters": {}},\n\n    '
        '{"tool_call_id": "1", "tool_name": "t2", "parameters": {"x": 1}}\n\n]<|END_ACTION|>'
    )
    results = "<|START_TOOL_RESULT|>[" + _result("0", "r1") + "," + _result("1", "r2") + "\n\n]<|END_TOOL_RESULT|>"
    assert action in got and results in got


# --- FunctionGemma (functiongemma_test.go, TestFunctionGemmaRenderer)

F_INTRO = "<start_of_turn>developer\nYou can do function calling with the following functions:"
F_WEATHER_DECL = (
    "<start_function_declaration>declaration:get_weather{description:<escape>Get weather<escape>,parameters:"
    "{properties:{city:{description:<escape>City<escape>,type:<escape>STRING<escape>}},type:<escape>OBJECT<escape>}}"
    "<end_function_declaration>"
)
F_TIME_DECL = (
    "<start_function_declaration>declaration:get_time{description:<escape>Get current time<escape>,parameters:"
    "{properties:{timezone:{description:<escape>Timezone<escape>,type:<escape>STRING<escape>}},"
    "type:<escape>OBJECT<escape>}}<end_function_declaration>"
)


def _f_tool(name: str, description: str, properties: dict[str, Any], required: list[str] | None = None) -> Any:
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


F_WEATHER = _f_tool("get_weather", "Get weather", {"city": {"type": "string", "description": "City"}})
F_TIME = _f_tool("get_time", "Get current time", {"timezone": {"type": "string", "description": "Timezone"}})


def _f_call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"function": {"name": name, "arguments": arguments}}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _called(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": list(calls)}


def _result_of(text: str) -> dict[str, Any]:
    return {"role": "tool", "content": text}


F_MODEL = "<start_of_turn>model\n"


@pytest.mark.parametrize(
    ("messages", "tools", "expected"),
    [
        ([_user("Hello!")], None, "<start_of_turn>user\nHello!<end_of_turn>\n" + F_MODEL),
        (
            [{"role": "system", "content": "You are helpful"}, _user("Hello!")],
            None,
            "<start_of_turn>developer\nYou are helpful<end_of_turn>\n<start_of_turn>user\nHello!<end_of_turn>\n"
            + F_MODEL,
        ),
        (
            [{"role": "developer", "content": "Be concise."}, _user("Weather?")],
            [F_WEATHER],
            "<start_of_turn>developer\nBe concise.\nYou can do function calling with the following functions:"
            + F_WEATHER_DECL
            + "<end_of_turn>\n<start_of_turn>user\nWeather?<end_of_turn>\n"
            + F_MODEL,
        ),
        (
            [_user("Hi"), {"role": "assistant", "content": "Hello!"}, _user("More")],
            None,
            "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nMore<end_of_turn>\n" + F_MODEL,
        ),
        (  # tool_call: the result closes the prompt, the model answers in its own turn
            [_user("Weather?"), _called(_f_call("get_weather", city="Paris")), _result_of("Sunny")],
            [F_WEATHER],
            F_INTRO
            + F_WEATHER_DECL
            + "<end_of_turn>\n<start_of_turn>user\nWeather?<end_of_turn>\n"
            + F_MODEL
            + "<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>"
            "<start_function_response>response:get_weather{<escape>Sunny<escape>}<end_function_response>",
        ),
        (  # numeric_arguments
            [_user("Add"), _called(_f_call("add", a=1.0, b=2.0)), _result_of("3")],
            [_f_tool("add", "Add numbers", {"a": {"type": "number"}, "b": {"type": "number"}})],
            F_INTRO + "<start_function_declaration>declaration:add{description:<escape>Add numbers<escape>,parameters:"
            "{properties:{a:{description:<escape><escape>,type:<escape>NUMBER<escape>},b:{description:<escape><escape>,"
            "type:<escape>NUMBER<escape>}},type:<escape>OBJECT<escape>}}<end_function_declaration><end_of_turn>\n"
            "<start_of_turn>user\nAdd<end_of_turn>\n" + F_MODEL + "<start_function_call>call:add{a:1,b:2}"
            "<end_function_call><start_function_response>response:add{<escape>3<escape>}<end_function_response>",
        ),
        (  # tool_with_required_params
            [_user("Weather?")],
            [
                _f_tool(
                    "get_weather",
                    "Gets the weather for a given city",
                    {
                        "city": {"type": "string", "description": "City Name"},
                        "country": {"type": "string", "description": "Country Name"},
                    },
                    ["city"],
                )
            ],
            F_INTRO + "<start_function_declaration>declaration:get_weather{description:<escape>Gets the weather for a "
            "given city<escape>,parameters:{properties:{city:{description:<escape>City Name<escape>,type:<escape>STRING"
            "<escape>},country:{description:<escape>Country Name<escape>,type:<escape>STRING<escape>}},required:"
            "[<escape>city<escape>],type:<escape>OBJECT<escape>}}<end_function_declaration><end_of_turn>\n"
            "<start_of_turn>user\nWeather?<end_of_turn>\n" + F_MODEL,
        ),
        (  # parallel_tool_calls
            [
                _user("Weather and time?"),
                _called(_f_call("get_weather", city="Paris"), _f_call("get_time", timezone="UTC")),
                _result_of("Sunny"),
                _result_of("12:00"),
            ],
            [F_WEATHER, F_TIME],
            F_INTRO + F_WEATHER_DECL + F_TIME_DECL + "<end_of_turn>\n<start_of_turn>user\nWeather and time?"
            "<end_of_turn>\n" + F_MODEL + "<start_function_call>call:get_weather{city:<escape>Paris<escape>}"
            "<end_function_call><start_function_call>call:get_time{timezone:<escape>UTC<escape>}<end_function_call>"
            "<start_function_response>response:get_weather{<escape>Sunny<escape>}<end_function_response>"
            "<start_function_response>response:get_time{<escape>12:00<escape>}<end_function_response>",
        ),
        (  # user_after_tool_response
            [
                _user("Weather?"),
                _called(_f_call("get_weather", city="Paris")),
                _result_of("Sunny"),
                _user("Thanks! What about London?"),
            ],
            [F_WEATHER],
            F_INTRO
            + F_WEATHER_DECL
            + "<end_of_turn>\n<start_of_turn>user\nWeather?<end_of_turn>\n"
            + F_MODEL
            + "<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>"
            "<start_function_response>response:get_weather{<escape>Sunny<escape>}<end_function_response>"
            "Thanks! What about London?<end_of_turn>\n" + F_MODEL,
        ),
        (  # tool_empty_properties
            [_user("Test")],
            [{"type": "function", "function": {"name": "test_fn", "parameters": {"type": "object"}}}],
            F_INTRO + "<start_function_declaration>declaration:test_fn{description:<escape><escape>,parameters:"
            "{type:<escape>OBJECT<escape>}}<end_function_declaration><end_of_turn>\n<start_of_turn>user\nTest"
            "<end_of_turn>\n" + F_MODEL,
        ),
        (  # boolean_argument
            [_user("Set flag"), _called(_f_call("set_flag", enabled=True)), _result_of("done")],
            [_f_tool("set_flag", "Set a flag", {"enabled": {"type": "boolean", "description": "Flag value"}})],
            F_INTRO + "<start_function_declaration>declaration:set_flag{description:<escape>Set a flag<escape>,"
            "parameters:{properties:{enabled:{description:<escape>Flag value<escape>,type:<escape>BOOLEAN<escape>}},"
            "type:<escape>OBJECT<escape>}}<end_function_declaration><end_of_turn>\n<start_of_turn>user\nSet flag"
            "<end_of_turn>\n" + F_MODEL + "<start_function_call>call:set_flag{enabled:true}<end_function_call>"
            "<start_function_response>response:set_flag{<escape>done<escape>}<end_function_response>",
        ),
    ],
)
def test_functiongemma_renders_as_ollama_s_renderer(messages: Any, tools: Any, expected: str) -> None:
    assert render_chat(FUNCTIONGEMMA, messages, tools=tools, bos_token="<bos>") == "<bos>" + expected
