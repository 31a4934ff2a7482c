"""``ChatPrompt``'s pieces alone: which turns may go, the fewest to drop, the cache marks, the
template tried first and the render's key, each without rendering a real template."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from cllm_ollama.chatformat.builtin_templates import GEMMA
from cllm_ollama.chatformat.gotemplate import TemplateError
from cllm_ollama.chatformat.prompt import ChatPrompt, TurnDropper
from cllm_ollama.chatformat.render_budget import PromptTooLong, RenderBudget

LOADED: Any = SimpleNamespace(bos_text="<s>", eos_text="</s>", tokenize=lambda text, add_special: text.split())
# Turns of three words each, behind a system message; the last message is one word.
MESSAGES = [
    {"role": "system", "content": "sys"},
    *({"role": "user" if i % 2 == 0 else "assistant", "content": f"t{i} t{i} t{i}"} for i in range(6)),
    {"role": "user", "content": "last"},
]


def model(go: str | None = None, jinja: str | None = "JINJA", thinking: bool = False) -> Any:
    return SimpleNamespace(
        info=SimpleNamespace(chat_template=jinja, chat_markers=("<start_of_turn>",), architecture="gemma3"),
        record=SimpleNamespace(renderer_in_use="", template=go, parser=None),
        has=lambda cap: thinking and cap == "thinking",
        full_name="m:latest",
    )


class FakeText:
    """Renders kept messages as their words joined, counting the renders."""

    def __init__(self, messages: list[dict[str, str]], refuse: set[int] | None = None) -> None:
        self.messages = messages
        self.calls: list[list[int] | None] = []
        self.refuse = refuse or set()  # kept counts that raise TemplateError

    def __call__(self, keep: list[int] | None) -> str:
        self.calls.append(keep)
        kept = self.messages if keep is None else [self.messages[i] for i in keep]
        if keep is not None and len(keep) in self.refuse:
            raise TemplateError("no user turn")
        return " ".join(m["content"] for m in kept)


def dropper(limit: int | None, text: FakeText | None = None) -> TurnDropper:
    prompt = ChatPrompt(model(), MESSAGES, thinking=False)
    return TurnDropper(text or FakeText(MESSAGES), str.split, len(MESSAGES), prompt.droppable, limit)


def test_system_messages_and_the_last_message_are_never_droppable() -> None:
    assert ChatPrompt(model(), MESSAGES, thinking=False).droppable == [1, 2, 3, 4, 5, 6]


def test_without_oldest_renders_the_kept_messages_and_says_whether_they_fit() -> None:
    turns = dropper(limit=12)
    assert turns.without_oldest(0) is None  # 1 + 18 + 1 words
    rendered = turns.without_oldest(3)
    assert rendered is not None and rendered.text == "sys t3 t3 t3 t4 t4 t4 t5 t5 t5 last"
    assert turns.without_oldest(6) is not None  # the last resort is returned even if it does not fit


def test_without_oldest_at_the_last_resort_returns_what_does_not_fit() -> None:
    rendered = dropper(limit=1).without_oldest(6)
    assert rendered is not None and rendered.tokens == ["sys", "last"]


def test_fewest_dropped_bisects_and_counts_the_tokens_dropped() -> None:
    text = FakeText(MESSAGES)
    turns = dropper(limit=12, text=text)
    assert turns.without_oldest(0) is None
    rendered = turns.fewest_dropped()
    assert rendered.text == "sys t3 t3 t3 t4 t4 t4 t5 t5 t5 last"  # 11 tokens: three turns gone
    assert rendered.dropped == 20 - 11
    assert len(text.calls) <= 1 + 3  # the whole, then log2(6) renders, none twice


def test_a_render_too_long_counts_as_not_fitting_until_the_last_resort() -> None:
    def too_long(keep: list[int] | None) -> str:
        if keep is None or len(keep) > 2:
            raise PromptTooLong(10)
        return "short"

    turns = TurnDropper(too_long, str.split, len(MESSAGES), [1, 2, 3, 4, 5, 6], 100)
    assert turns.without_oldest(0) is None
    assert turns.fewest_dropped().text == "short"
    with pytest.raises(PromptTooLong):
        TurnDropper(too_long, str.split, len(MESSAGES), [], 100).without_oldest(0)


def test_marks_are_where_each_kept_prefix_ends_in_the_whole() -> None:
    prompt = ChatPrompt(model(), MESSAGES, thinking=False, cache_ends=(0, 1, 3, 99))
    text = FakeText(MESSAGES)
    whole = text(None).split()
    # 1 message after the mark: all but "last"; 3 after: all but the last three.
    assert prompt.marks(whole, text, str.split) == (13, 19, 20)


def test_a_mark_the_template_refuses_is_left_out() -> None:
    prompt = ChatPrompt(model(), MESSAGES, thinking=False, cache_ends=(1, 7))
    text = FakeText(MESSAGES, refuse={1})
    assert prompt.marks(text(None).split(), text, str.split) == (19,)


def test_the_template_tried_first() -> None:
    assert ChatPrompt(model(go="GO"), MESSAGES, thinking=False).template == "GO"
    assert ChatPrompt(model(go="GO"), MESSAGES, thinking=False, go_template="REQ").template == "REQ"
    assert ChatPrompt(model(), MESSAGES, thinking=False).template == "JINJA"
    assert ChatPrompt(model(jinja=None), MESSAGES, thinking=False).template == GEMMA


def test_the_render_key_names_what_the_render_depends_on() -> None:
    def key(limit: int | None = 10, **kwargs: Any) -> str:
        return ChatPrompt(model(), MESSAGES, **{"thinking": False, **kwargs}).render_key(LOADED, limit)

    assert key() == key()
    assert len({key(), key(20), key(thinking=True), key(think_level="high"), key(tools=[{"x": 1}])}) == 5
    other = SimpleNamespace(bos_text="", eos_text="</s>", tokenize=LOADED.tokenize)
    assert ChatPrompt(model(), MESSAGES, thinking=False).render_key(other, 10) != key()


def test_render_go_renders_the_kept_messages_with_the_go_template() -> None:
    prompt = ChatPrompt(model(go="{{ range .Messages }}[{{ .Content }}]{{ end }}"), MESSAGES, thinking=False)
    assert prompt.render_go(RenderBudget(), [0, 7]) == "[sys][last]"


@pytest.mark.parametrize(
    ("think_set", "thinks", "want"), [(True, False, "set:False"), (False, False, "unset"), (False, True, "set:False")]
)
def test_a_request_s_think_reaches_a_jinja_template_even_where_the_model_does_not_think(
    think_set: bool, thinks: bool, want: str
) -> None:
    """As Go templates are told: a renderer's port (GLM-OCR's) writes ``/nothink`` only where the
    request turned thinking off, not where it said nothing."""
    template = "{% if enable_thinking is defined %}set:{{ enable_thinking }}{% else %}unset{% endif %}"
    prompt = ChatPrompt(model(jinja=template, thinking=thinks), MESSAGES, thinking=False, think_set=think_set)
    with prompt.text_renderer(LOADED, RenderBudget(), use_go=False) as render:
        assert render(None) == want


@pytest.mark.parametrize(
    ("think_set", "thinking", "want"), [(True, True, "<think>"), (True, False, "</think>"), (False, False, "</think>")]
)
def test_deepseek_v3_1_s_template_is_told_to_think_through_its_own_variable(
    think_set: bool, thinking: bool, want: str
) -> None:
    """DeepSeek V3.1's template (as its checkpoint ships it) reads ``thinking``, not ``enable_thinking``."""
    template = (
        "{% if not thinking is defined %}{% set thinking = false %}{% endif %}"
        "{{ '<think>' if thinking else '</think>' }}"
    )
    prompt = ChatPrompt(model(jinja=template, thinking=False), MESSAGES, thinking=thinking, think_set=think_set)
    with prompt.text_renderer(LOADED, RenderBudget(), use_go=False) as render:
        assert render(None) == want
