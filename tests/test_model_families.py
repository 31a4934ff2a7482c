"""The one table of model families: what each layer reads from it."""

from __future__ import annotations

from cllm_ollama import model_families as mf


def test_think_history_is_stripped_by_architecture_or_by_name_as_ollama_matches() -> None:
    # Ollama: m.Config.ModelFamily == "qwen3" || model.ParseName(m.Name).Model == "deepseek-r1".
    assert mf.strips_think_history("qwen3", "anything")
    assert mf.strips_think_history("qwen2", "deepseek-r1")  # R1's Qwen distill
    assert mf.strips_think_history("llama", "deepseek-r1")  # R1's Llama distill
    assert not mf.strips_think_history("deepseek2", "deepseek-v3")  # an architecture is no name
    assert not mf.strips_think_history("qwen2", "deepseek-r1-custom")
    assert not mf.strips_think_history("llama", "llama3.2")


def test_every_ordered_family_is_in_the_table_and_answers_its_question() -> None:
    assert all(mf.FAMILIES[name].parser_marks for name in mf.PARSER_ORDER)
    assert all(mf.FAMILIES[name].tool_syntax for name in mf.TOOL_SYNTAX_ORDER)
    assert all(mf.FAMILIES[name].builtin_tokens for name in mf.BUILTIN_ORDER)


def test_the_binding_renders_the_control_tokens_the_parsers_split_on() -> None:
    assert {"<|channel|>", "<|message|>", "<|python_tag|>", "[TOOL_CALLS]"} <= mf.PARSED_CONTROL_TOKENS
    # End-of-generation tokens stop generation: they are never rendered.
    assert not {"<|call|>", "<|return|>"} & mf.PARSED_CONTROL_TOKENS


def test_builtin_family_by_tokens_then_architecture() -> None:
    assert mf.builtin_family((), "gemma3") == "gemma"
    assert mf.builtin_family(("<|start_header_id|>",), "llama") == "llama3"
    assert mf.builtin_family((), "llama") == "mistral"
    assert mf.builtin_family(("<|im_start|>",), "qwen2") == "chatml"
    assert mf.builtin_family((), "unknown") == "chatml"


def test_families_render_every_mark_their_parser_splits_on() -> None:
    """A mark the binding rendered as nothing (a control token) would never reach the parser: a
    GGUF may make any of them a control token (llama.cpp's converter does so to every DeepSeek
    ``<｜...｜>``)."""
    for family in mf.FAMILIES.values():
        if family.parser == "marked":
            marks = {*family.tool_block, *family.think_tags, *family.dropped_marks, *family.after_call_noise} - {""}
            assert marks <= set(family.control_tokens), family.name
        if family.parser == "blocks" or family.tool_syntax == "HERMES":
            assert (set(family.tool_block) - {""} or {"<tool_call>"}) <= set(family.control_tokens), family.name
    assert {"<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<arg_key>"} <= mf.PARSED_CONTROL_TOKENS


def test_a_family_s_own_thinking_marks_grant_thinking() -> None:
    assert mf.template_thinks("...[THINK]...") and mf.template_thinks("<|START_THINKING|>")
    assert not mf.template_thinks("{{ .Prompt }}")
