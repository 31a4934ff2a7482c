"""Output control on the real Qwen2.5-Coder-0.5B-Instruct (issue 34): ``tool_choice`` required and
a named function give a call valid against the tool's schema for every prompt, even prompts that ask
for no tool; ``none`` gives no call even where the prompt asks for one; a GBNF grammar's output
always matches it. Sampled (temperature 0.7, a seed per prompt), short, four requests at a time on
the one server of the tier."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import jsonschema
import openai
import pytest

MODEL = "coder"  # as tests/real/conftest.py installs it
T = TypeVar("T")

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "The city"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
ADD = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
SCHEMAS = {"get_weather": WEATHER, "add": ADD}
TOOLS = [
    {"type": "function", "function": {"name": name, "description": f"The {name} tool", "parameters": schema}}
    for name, schema in SCHEMAS.items()
]
# Prompts that ask for no tool: a forced call must come all the same.
CHATTY = [
    "Write a haiku about the sea.",
    "What is the capital of Japan?",
    "Explain recursion in one sentence.",
    "Say hello in French.",
    "Name three primary colors.",
    "What does HTTP stand for?",
    "Give me a synonym for happy.",
    "How many legs does a spider have?",
    "Write a Python one-liner that reverses a string.",
    "What is a linked list?",
    "Tell me a short joke.",
    "What year did the Second World War end?",
    "Describe the color blue to someone who cannot see.",
    "What is the boiling point of water in Celsius?",
    "Suggest a name for a pet goldfish.",
    "What is the difference between a list and a tuple in Python?",
    "Translate 'good morning' into Spanish.",
    "What is 12 times 12?",
    "Why is the sky blue? One sentence.",
    "List two uses of a paperclip.",
]
# Prompts that ask for a tool: ``none`` must keep them calls-free.
ASKING = [f"What is the weather in {city}? Use the tool." for city in ("Paris", "Tokyo", "Lima", "Oslo", "Cairo")]
ASKING += [f"Add {a} and {b} with the add tool." for a, b in ((1, 2), (40, 2), (7, 35), (100, 23), (9, 9))]


@pytest.fixture(scope="module")
def sdk(real_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=real_url + "/v1", api_key="unused", timeout=300)


def _each(work: Callable[[int, str], T], prompts: list[str]) -> list[T]:
    """``work(i, prompt)`` for every prompt, four at a time (the server's slots)."""
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(work, range(len(prompts)), prompts))


def _chat(sdk: openai.OpenAI, seed: int, prompt: str, max_tokens: int = 64, **extra: Any) -> Any:
    messages = [{"role": "user", "content": prompt}]
    return sdk.chat.completions.create(
        model=MODEL, messages=messages, tools=TOOLS, temperature=0.7, seed=seed, max_tokens=max_tokens, **extra
    ).choices[0]


def _valid_calls(choice: Any, names: set[str]) -> list[str]:
    """The calls' names, each checked against its tool's schema."""
    calls = choice.message.tool_calls
    assert calls, f"no call: {choice.message.content!r}"
    assert choice.finish_reason == "tool_calls"
    for call in calls:
        assert call.function.name in names
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
    return [call.function.name for call in calls]


def test_required_always_calls_a_tool_by_its_schema(sdk: openai.OpenAI) -> None:
    replies = _each(lambda i, p: _chat(sdk, i, p, tool_choice="required"), CHATTY)
    assert all(len(_valid_calls(r, set(SCHEMAS))) == 1 for r in replies)


def test_a_named_function_is_always_the_one_called(sdk: openai.OpenAI) -> None:
    named = {"type": "function", "function": {"name": "add"}}
    replies = _each(lambda i, p: _chat(sdk, i, p, tool_choice=named), CHATTY)
    assert [_valid_calls(r, {"add"}) for r in replies] == [["add"]] * 20


def test_none_never_calls(sdk: openai.OpenAI) -> None:
    replies = _each(lambda i, p: _chat(sdk, i, p, tool_choice="none", max_tokens=48), ASKING + CHATTY[:10])
    for reply in replies:
        assert not reply.message.tool_calls, reply.message.tool_calls
        assert reply.finish_reason in ("stop", "length")


# A comma-separated list of one to five lowercase words, and the same as a regular expression.
WORDS_GRAMMAR = 'root ::= word (", " word){0,4}\nword ::= [a-z]{1,12}'
WORDS = re.compile(r"[a-z]{1,12}(, [a-z]{1,12}){0,4}")


def test_a_grammar_always_holds(sdk: openai.OpenAI) -> None:
    def ask(seed: int, prompt: str) -> Any:
        return sdk.completions.create(
            model=MODEL,
            prompt=prompt,
            temperature=0.7,
            seed=seed,
            max_tokens=96,  # more than the grammar's longest output: it always ends by itself
            extra_body={"grammar": WORDS_GRAMMAR, "dry_multiplier": 0.8, "xtc_probability": 0.3},
        ).choices[0]

    for reply in _each(ask, CHATTY):
        assert reply.finish_reason == "stop"
        assert WORDS.fullmatch(reply.text), reply.text
