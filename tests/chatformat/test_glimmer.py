"""Glimmer's messages (``chatformat.glimmer``), with the cases of Ollama's ``glimmer_test.go``:
each split at every character where Ollama's test does, the rest whole and a few characters at a time."""

from __future__ import annotations

from typing import Any

import pytest

from cllm_ollama.chatformat.family_parsers import parser_for
from cllm_ollama.chatformat.glimmer import resolve_tool
from cllm_ollama.chatformat.parsers import Delta
from cllm_ollama.model_families import parser_capabilities, parser_family


def tool(name: str, properties: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": properties}}}


def atem(name: str, parameters: str) -> str:
    return f'<atem:function_calls>\n<atem:invoke name="{name}">\n{parameters}</atem:invoke>\n</atem:function_calls>'


def param(name: str, value: str) -> str:
    return f'<atem:parameter name="{name}">{value}</atem:parameter>\n'


def run(chunks: list[str], tools: list[dict[str, Any]] | None = None, thinking: bool = True) -> tuple[str, str, Any]:
    parser = parser_for(None, thinking=thinking, tools=tools, parser="glimmer")
    out = Delta()
    for chunk in chunks:
        out.add(parser.feed(chunk))
    out.add(parser.finish())
    return out.content, out.thinking, [(c["function"]["name"], c["function"]["arguments"]) for c in out.tool_calls]


def every_split(text: str, tools: list[dict[str, Any]] | None = None, thinking: bool = True) -> tuple[str, str, Any]:
    whole = run([text], tools, thinking)
    for at in range(len(text) + 1):
        assert run([text[:at], text[at:]], tools, thinking) == whole, at
    assert run([text[i : i + 3] for i in range(0, len(text), 3)], tools, thinking) == whole
    return whole


WEATHER = tool("get_weather", {"city": {"type": "string"}})
BASH = [tool("muse.bash", {"command": {"type": "string"}})]
BASH_ATEM = atem("muse.bash", param("command", "pwd && ls -la"))
BASH_CALL = [("muse.bash", {"command": "pwd && ls -la"})]


def test_the_family_is_ollama_s_glimmer() -> None:
    assert parser_capabilities("glimmer") == ("tools", "thinking")
    family = parser_family("{{ '<|start|>assistant to=self<|message|>' }}<|eot|> <atem:function_calls>")
    assert family is not None and family.name == "glimmer"


@pytest.mark.parametrize(
    ("text", "thinking", "expected"),
    [
        (" to=user<|message|>Hello", True, ("Hello", "", [])),  # FinalAnswer
        (" to=self<|message|>Check the facts.", True, ("", "Check the facts.", [])),  # SelfRecipientIsThinking
        (  # SuppressesThinking
            " to=self<|message|>Check the facts.<|eom|><|start|>assistant to=user<|message|>Answer<|eot|>",
            False,
            ("Answer", "", []),
        ),
    ],
)
def test_messages_to_the_user_and_to_itself(text: str, thinking: bool, expected: Any) -> None:
    assert every_split(text, thinking=thinking) == expected


def test_a_call_at_every_boundary() -> None:  # StreamingATEMAtEveryBoundary
    text = " to=get_weather<|message|>" + atem("get_weather", param("city", "SF")) + "<|eot|>"
    assert every_split(text, [WEATHER]) == ("", "", [("get_weather", {"city": "SF"})])


def test_values_typed_by_the_schema_and_spaces_kept() -> None:  # ATEMValueTypesAndWhitespace
    run_tool = tool(
        "tools.run",
        {
            "text": {"type": "string"},
            "count": {"type": "integer"},
            "enabled": {"type": "boolean"},
            "items": {"type": "array"},
            "config": {"type": "object"},
            "choice": {"anyOf": [{"type": "null"}, {"type": "string"}]},
        },
    )
    params = (
        param("text", " keep  spaces ")
        + param("count", "3")
        + param("enabled", "true")
        + param("items", '["one", "two"]')
        + param("config", '{"mode":"fast"}')
        + param("choice", "null")
    )
    expected = {"text": " keep  spaces ", "count": 3, "enabled": True, "items": ["one", "two"]}
    expected |= {"config": {"mode": "fast"}, "choice": None}
    assert run([" to=tools.run<|message|>" + atem("tools.run", params)], [run_tool]) == (
        "",
        "",
        [("tools.run", expected)],
    )


@pytest.mark.parametrize(
    "value",
    [
        "literal <|eot|> and <|start|>assistant to=user<|message|> text",  # ValueMayContainControlTokenText
        "keep <|message|> literal",  # MessageTagInParamValueUntouched
    ],
)
def test_a_value_may_hold_the_marks(value: str) -> None:
    echo = tool("echo", {"text": {"type": "string"}})
    text = " to=echo<|message|>" + atem("echo", param("text", value)) + "<|eot|>"
    assert every_split(text, [echo]) == ("", "", [("echo", {"text": value})])


def test_several_messages() -> None:  # MultipleMessagesAndIndices
    tools = [tool("first", {"x": {"type": "integer"}}), tool("second")]
    text = (
        " to=self<|message|>Think<|eom|><|start|>assistant to=first<|message|>"
        + atem("first", param("x", "1"))
        + "<|eom|><|start|>assistant to=second<|message|>"
        + atem("second", "")
        + "<|eot|>"
    )
    assert every_split(text, tools) == ("", "Think", [("first", {"x": 1}), ("second", {})])


@pytest.mark.parametrize(
    "invoke",
    [
        'read<|message|>">\n' + param("path", "go.mod"),  # StrayMessageTagInInvokeName
        "read<|message|>" + param("path", "go.mod"),  # MessageTagReplacesInvokeTerminator
        're<|message|>ad">' + param("path", "go.mod"),
        'read<|message|><|message|>">' + param("path", "go.mod"),
    ],
)
def test_a_message_mark_slipped_into_the_invoke_name(invoke: str) -> None:
    text = ' to=read<|message|><atem:function_calls>\n<atem:invoke name="' + invoke
    text += "</atem:invoke>\n</atem:function_calls><|eot|>"
    read = tool("read", {"path": {"type": "string"}})
    assert run([text], [read]) == ("", "", [("read", {"path": "go.mod"})])


@pytest.mark.parametrize(
    ("recipient", "invoke"), [("read", "read.read"), ("read.read", "read.read"), ("read.read", "read")]
)
def test_a_tool_named_through_its_own_namespace(recipient: str, invoke: str) -> None:  # NamespacedSelfReference
    text = f" to={recipient}<|message|>" + atem(invoke, param("path", "go.mod")) + "<|eot|>"
    read = tool("read", {"path": {"type": "string"}})
    assert run([text], [read]) == ("", "", [("read", {"path": "go.mod"})])


def test_namespaces_resolve_strictly() -> None:  # NamespaceResolutionStaysStrict
    tools = {"read": {}, "repo.read": {}}
    for name, want in [
        ("read", "read"),
        ("read.read", "read"),
        ("repo.read", "repo.read"),
        ("functions.read", None),
        ("write.write", None),
        ("repo.repo.read", "repo.read"),
    ]:
        assert resolve_tool(tools, name) == want, name


def test_a_call_that_does_not_parse_stays_content() -> None:
    """Ollama fails the request (RejectsMismatchedATEMInvoke, RejectsMalformedATEM); cllm keeps
    the body as content, as it keeps every call it cannot read."""
    bare = tool("get_weather")
    mismatched = atem("read_file", "")
    assert run([" to=get_weather<|message|>" + mismatched], [bare]) == (mismatched, "", [])
    assert run([' to=get_weather<|message|>{"city":"SF"}'], [bare]) == ('{"city":"SF"}', "", [])


@pytest.mark.parametrize(
    ("text", "thinking", "content"),
    [
        (" to=muse<|message|>" + BASH_ATEM + "<|eom|>", "", ""),  # namespace recipient
        ("<|message|>" + BASH_ATEM + "<|eom|>", "", ""),  # missing recipient
        (" to=user<|message|>" + BASH_ATEM + "<|eot|>", "", ""),  # user recipient
        (" to=atem:function_calls<|message|>" + BASH_ATEM + "<|eom|>", "", ""),  # wrapper as recipient
        (
            " to=self<|message|>let me look<|eom|><|start|>assistant<|message|>" + BASH_ATEM + "<|eom|>",
            "let me look",
            "",
        ),
        ("<|message|>" + BASH_ATEM + "<|start|>assistant to=user<|message|>Done<|eot|>", "", "Done"),
    ],
)
def test_a_call_to_a_fumbled_recipient_is_still_a_call(text: str, thinking: str, content: str) -> None:
    """FumbledRecipientToolCallFallback (and FumbledRecipientStreaming: no XML leaks at any split)."""
    assert every_split(text, BASH) == (content, thinking, BASH_CALL)


@pytest.mark.parametrize(
    ("tools", "text", "content"),
    [
        (BASH, " to=user<|message|>" + atem("other.run", "") + "<|eot|>", atem("other.run", "")),  # undeclared
        (BASH, " to=user<|message|>Running:\n" + BASH_ATEM + "<|eot|>", "Running:\n" + BASH_ATEM),  # leading prose
        (BASH, " to=user<|message|>" + BASH_ATEM + "\nDone.<|eot|>", BASH_ATEM + "\nDone."),  # trailing prose
        (None, " to=user<|message|>" + BASH_ATEM + "<|eot|>", BASH_ATEM),  # no tools
        (None, " to=not_a_tool<|message|>" + atem("not_a_tool", ""), atem("not_a_tool", "")),  # UndeclaredRecipient
    ],
)
def test_content_that_resembles_a_call_stays_content(tools: Any, text: str, content: str) -> None:
    assert every_split(text, tools) == (content, "", [])


def test_a_next_header_ends_a_message_without_its_end_mark() -> None:  # ImplicitMessageBoundary
    text = " to=self<|message|>Think<|start|>assistant to=get_weather<|message|>"
    text += atem("get_weather", param("city", "SF")) + "<|start|>assistant to=user<|message|>Done<|eot|>"
    assert run([text], [WEATHER]) == ("Done", "Think", [("get_weather", {"city": "SF"})])


def test_a_split_end_mark_is_held_and_text_streams() -> None:  # WithholdsSplitControlToken
    parser = parser_for(None, thinking=True, tools=None, parser="glimmer")
    assert parser.feed(" to=user<|message|>Hello<|eo").content == "Hello"
    assert parser.feed("t|>") == Delta() and parser.finish() == Delta()


@pytest.mark.parametrize(
    ("recipient", "expected"),
    [("user", ("Use `<|start|>` here.", "", [])), ("self", ("", "Use `<|start|>` here.", []))],
)
def test_a_literal_start_mark_in_a_message(recipient: str, expected: Any) -> None:  # LiteralStartTokenInMessages
    assert run([f" to={recipient}<|message|>Use `<", "|", "start", "|>` here."]) == expected
