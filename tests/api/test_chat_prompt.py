"""Chat prompts over the context limit: old turns go first, system and last message stay."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from cllm_ollama.chatformat.prompt import ChatPrompt
from cllm_ollama.testing.ggufs import qwen3_chat_template

# A model with Qwen3's chat template and nothing else (test_render_bounds.py fits its chats over it too).
MODEL: Any = SimpleNamespace(
    info=SimpleNamespace(chat_template=qwen3_chat_template()),
    record=SimpleNamespace(renderer_in_use="", template=None),
    has=lambda cap: False,
)
# One token per whitespace-separated word is enough to exercise the limit.
LOADED: Any = SimpleNamespace(bos_text="", eos_text="", tokenize=lambda text, add_special: text.split())


def history(turns: int) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        messages += [{"role": "user", "content": f"question{i} " * 5}, {"role": "assistant", "content": "answer " * 5}]
    return [*messages, {"role": "user", "content": "last question"}]


def test_under_the_limit_nothing_is_dropped() -> None:
    rendered = ChatPrompt(MODEL, history(3), thinking=False)(LOADED, 1000)
    assert all(f"question{i}" in rendered.text for i in range(3))


def test_oldest_turns_are_dropped_until_it_fits() -> None:
    messages = history(40)
    full = ChatPrompt(MODEL, messages, thinking=False)(LOADED, None)
    rendered = ChatPrompt(MODEL, messages, thinking=False)(LOADED, 100)
    assert len(full.tokens) >= 100 > len(rendered.tokens)
    assert "Be brief." in rendered.text and "last question" in rendered.text
    assert "question0" not in rendered.text and "question39" in rendered.text
    assert messages == history(40)  # the caller's list is left alone


def test_system_and_last_message_are_kept_even_when_still_too_long() -> None:
    rendered = ChatPrompt(MODEL, history(40), thinking=False)(LOADED, 3)
    assert "Be brief." in rendered.text and "last question" in rendered.text
    assert "question" not in rendered.text.replace("last question", "")


def test_a_think_level_reaches_the_template() -> None:
    """gpt-oss's template reads reasoning_effort; Ollama's Go templates read .ThinkLevel."""
    jinja: Any = SimpleNamespace(
        info=SimpleNamespace(chat_template="effort={{ reasoning_effort | default('unset') }}"),
        record=SimpleNamespace(renderer_in_use="", template=None),
        has=lambda cap: True,
    )
    messages = [{"role": "user", "content": "hi"}]
    assert ChatPrompt(jinja, messages, thinking=True, think_level="high")(LOADED, None).text == "effort=high"
    assert ChatPrompt(jinja, messages, thinking=True)(LOADED, None).text == "effort=unset"
    go: Any = SimpleNamespace(
        info=jinja.info, record=SimpleNamespace(renderer_in_use="", template="{{ .ThinkLevel }}"), has=jinja.has
    )
    assert ChatPrompt(go, messages, thinking=True, think_level="low")(LOADED, None).text == "low"


def test_cache_ends_mark_where_the_kept_prefixes_end() -> None:
    """A mark is where the conversation without the messages after it stops sharing tokens with
    the whole: the system message's end, an earlier turn's end, the prompt's end."""
    messages = history(2)  # system, 2 x (user, assistant), last user
    whole = ChatPrompt(MODEL, messages, thinking=False)(LOADED, None)
    rendered = ChatPrompt(MODEL, messages, thinking=False, cache_ends=(0, 3, 5))(LOADED, None)
    assert rendered.tokens == whole.tokens
    system_end, turn_end, end = rendered.marks
    assert end == len(whole.tokens)
    assert " ".join(whole.tokens[:system_end]).endswith("Be brief.<|im_end|>")
    assert "question0" not in " ".join(whole.tokens[:system_end])
    assert "question0" in " ".join(whole.tokens[:turn_end]) and "question1" not in " ".join(whole.tokens[:turn_end])


def test_no_marks_when_turns_were_dropped() -> None:
    rendered = ChatPrompt(MODEL, history(40), thinking=False, cache_ends=(0, 80))(LOADED, 100)
    assert rendered.dropped and rendered.marks == ()
