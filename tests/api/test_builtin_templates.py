"""GGUFs without a chat template get their family's format; a model's TEMPLATE outranks the GGUF's."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cllm_ollama.chatformat import builtin_templates as bt
from cllm_ollama.chatformat.jinja import render_chat
from cllm_ollama.chatformat.prompt import ChatPrompt
from cllm_ollama.store.gguf_info import GGUFInfo, gguf_info
from cllm_ollama.testing.ggufs import qwen3_chat_template, write_qwen3

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "Why?"},
]


def info(
    architecture: str, *markers: str, chat_template: str | None = None, capabilities: tuple[str, ...] = ()
) -> GGUFInfo:
    fields = {f.name: None for f in dataclasses.fields(GGUFInfo)}
    given = {"architecture": architecture, "chat_markers": markers, "chat_template": chat_template}
    return GGUFInfo(**{**fields, **given, "capabilities": capabilities})


@pytest.mark.parametrize(
    ("model", "template"),
    [
        (info("gemma3"), bt.GEMMA),
        (info("llama", "<start_of_turn>"), bt.GEMMA),
        (info("llama", "<|start_header_id|>"), bt.LLAMA3),
        (info("qwen2", "<|im_start|>"), bt.CHATML),
        (info("phi3"), bt.PHI3),
        (info("llama"), bt.MISTRAL),
        (info("mistral", "[INST]"), bt.MISTRAL),
        (info("gpt2"), bt.CHATML),
        (None, bt.CHATML),
    ],
)
def test_builtin_template_by_tokens_then_architecture(model: GGUFInfo | None, template: str) -> None:
    assert bt.builtin_template(model) == template


def test_the_vocabulary_s_markers_are_read(tmp_path: Path) -> None:
    path = write_qwen3(tmp_path / "m.gguf")
    info = gguf_info(path)
    assert info.chat_markers == ("<|im_start|>",)
    # Whole tokens only: Qwen's vocabulary holds </think> as one, no other family's closing tag.
    assert info.whole_tokens == ("</think>",)


def test_builtin_formats_render_as_their_families_write_them() -> None:
    def render(template: str) -> str:
        return render_chat(template, MESSAGES, bos_token="<s>", eos_token="</s>")

    assert render(bt.GEMMA) == (
        "<s><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
        "<start_of_turn>user\nWhy?<end_of_turn>\n<start_of_turn>model\n"
    )
    assert render(bt.LLAMA3).endswith(
        "<|start_header_id|>user<|end_header_id|>\n\nWhy?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    assert render(bt.MISTRAL) == "<s>[INST] Be brief.\n\nHi [/INST] Hello!</s>[INST] Why? [/INST]"
    assert render(bt.PHI3).endswith("<|user|>\nWhy?<|end|>\n<|assistant|>\n")


def test_template_in_use_ranks_template_layer_then_gguf_then_builtin() -> None:
    assert bt.template_in_use("{{ .Prompt }}", info("qwen3", chat_template="jinja")) == "{{ .Prompt }}"
    # Ollama's default yields to a GGUF template that knows tools or thinking (shouldPreferChatTemplate).
    for caps in (("completion", "tools"), ("completion", "thinking")):
        assert bt.template_in_use("{{ .Prompt }}", info("qwen3", chat_template="jinja", capabilities=caps)) == "jinja"
    assert bt.template_in_use("{{ .System }}{{ .Prompt }}", info("qwen3", chat_template="j", capabilities=caps)) != "j"
    assert bt.template_in_use(None, info("qwen3", chat_template="jinja")) == "jinja"
    assert bt.template_in_use(None, info("gemma")) == bt.GEMMA


LOADED: Any = SimpleNamespace(bos_text="<s>", eos_text="</s>", tokenize=lambda text, add_special: text.split())


def test_a_template_layer_outranks_the_gguf_s_template() -> None:
    model: Any = SimpleNamespace(
        info=SimpleNamespace(chat_template=qwen3_chat_template(), capabilities=("completion", "tools")),
        record=SimpleNamespace(renderer_in_use="", template="[{{ .Prompt }}]"),
        has=lambda cap: False,
    )
    # Ollama renders a .Prompt-only template once per turn (older turns with their answers).
    assert ChatPrompt(model, MESSAGES, thinking=False)(LOADED, None).text == "[Hi]Hello![Why?]"


def test_no_template_renders_the_family_s_builtin() -> None:
    model: Any = SimpleNamespace(
        info=info("gemma3"), record=SimpleNamespace(renderer_in_use="", template=None), has=lambda cap: False
    )
    text = ChatPrompt(model, MESSAGES, thinking=False)(LOADED, None).text
    assert text.startswith("<s><start_of_turn>user\nBe brief.") and "<|im_start|>" not in text
