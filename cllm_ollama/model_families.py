"""What cllm knows of each model family's chat format, in one table.

The chat format (``chatformat``) picks a family's output parser and built-in template from it, the
binding renders the control tokens that family's parser reads, and the store lists the special
tokens that pick a built-in template. The engine may not import the chat format, and the chat format
knows no llama.cpp, so the table is plain data at the top of the package, importing nothing, where
every layer may read it. A new family is one entry here (and its parser or template where it is
written).

A family is recognised by marks in its chat template, and, for a GGUF without one, by its special
tokens and its architecture. Each question is asked of the families in one order (``PARSER_ORDER``,
``TOOL_SYNTAX_ORDER``, ``BUILTIN_ORDER``): the first that matches answers it.
"""

from __future__ import annotations

from dataclasses import dataclass

# Architectures of gpt-oss (llama.cpp's name, and Ollama's converter's), whose harmony format
# takes the reasoning levels low, medium and high only (Ollama's shouldUseHarmony).
HARMONY_ARCHS = ("gpt-oss", "gptoss")


@dataclass(frozen=True)
class Family:
    name: str
    # The output parser: "harmony" (channels), "glimmer" (messages to recipients), "blocks" (calls
    # between ``tool_block`` marks, parsed by the family's own parser, after the ``<think>``
    # splitter), "marked" (thinking between ``think_tags`` and calls between ``tool_block`` marks,
    # both read by one parser) or "json" (calls as JSON, in ``tool_syntax``).
    parser: str = "json"
    # A chat template that holds all of these is the family's, for the output parser.
    parser_marks: tuple[str, ...] = ()
    # A call's opening and closing marks; no closing mark: the call ends with its JSON arguments.
    tool_block: tuple[str, str] = ("", "")
    # "marked" families: the thinking's marks, a line the thinking opens with that is no thinking
    # (Gemma 4's channel name), marks that are dropped wherever they stand in the content (Command's
    # response wrappers), and marks dropped right after a call (Gemma 4's stray closers).
    think_tags: tuple[str, str] = ("", "")
    think_prefix: str = ""
    dropped_marks: tuple[str, ...] = ()
    after_call_noise: tuple[str, ...] = ()
    # Ollama's parser names (a registry config's ``parser``, a Modelfile's PARSER) that name this
    # family, each with whether that parser thinks (Ollama's HasThinkingSupport).
    ollama_parsers: tuple[tuple[str, bool], ...] = ()
    # The family's JSON tool-call syntax (parsers.ToolFormat's name), and the template marks, any of
    # which teach it.
    tool_syntax: str = ""
    tool_syntax_marks: tuple[str, ...] = ()
    # Control tokens the family's parser splits on: the binding renders them as their text.
    control_tokens: tuple[str, ...] = ()
    # Without a chat template: any of these special tokens in the vocabulary, or an architecture
    # starting with one of ``builtin_arch_prefixes`` or equal to one of ``builtin_archs``, picks
    # the family's built-in template.
    builtin_tokens: tuple[str, ...] = ()
    builtin_arch_prefixes: tuple[str, ...] = ()
    builtin_archs: tuple[str, ...] = ()
    # Ollama's filterThinkTags: think blocks of earlier assistant turns are dropped from the
    # history for models of these architectures (its ``ModelFamily``) or these model names (the
    # name's model part, as ``model.ParseName(m.Name).Model``).
    strip_think_archs: tuple[str, ...] = ()
    strip_think_names: tuple[str, ...] = ()


# Llama 3.1-3.3's templates: the ipython environment line, the tag, the instruction for bare JSON.
_LLAMA_MARKS = ("<|python_tag|>", "Environment: ipython", '"parameters": dictionary')

_GEMMA4_MARKS = ("<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", '<|"|>', "<|tool_response>")
_COHERE_MARKS = ("<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>")

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(  # Gemma 4: ``<|channel>thought\n...<channel|>``, ``<|tool_call>call:NAME{k:v}<tool_call|>``
            "gemma4",
            parser="marked",
            parser_marks=("<|tool_call>", "<|channel>"),
            tool_block=("<|tool_call>", "<tool_call|>"),
            think_tags=("<|channel>", "<channel|>"),
            think_prefix="thought\n",
            after_call_noise=("<tool_call|>", "<|tool_response>"),
            control_tokens=_GEMMA4_MARKS,
            ollama_parsers=(("gemma4", True), ("gemma4-no-thinking", False)),
        ),
        Family(  # FunctionGemma: ``<start_function_call>call:NAME{k:<escape>v<escape>}<end_function_call>``
            "functiongemma",
            parser="marked",
            parser_marks=("<start_function_call>",),
            tool_block=("<start_function_call>", "<end_function_call>"),
            control_tokens=("<start_function_call>", "<end_function_call>", "<escape>"),
            ollama_parsers=(("functiongemma", False),),
        ),
        Family(  # Ministral 3, Devstral 2, Mistral Small 3.2 / Magistral: ``[TOOL_CALLS]NAME[ARGS]{...}``
            "ministral",
            parser="marked",
            parser_marks=("[TOOL_CALLS]", "[ARGS]"),
            tool_block=("[TOOL_CALLS]", ""),
            think_tags=("[THINK]", "[/THINK]"),
            control_tokens=("[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]"),
            ollama_parsers=(("ministral", False),),
        ),
        Family(  # LFM2 / LFM2.5: ``<|tool_call_start|>[f(a=1)]<|tool_call_end|>``
            "lfm2",
            parser="marked",
            parser_marks=("<|tool_call_start|>",),
            tool_block=("<|tool_call_start|>", "<|tool_call_end|>"),
            think_tags=("<think>", "</think>"),
            control_tokens=("<|tool_call_start|>", "<|tool_call_end|>", "<think>", "</think>"),
            ollama_parsers=(("lfm2", False), ("lfm2-thinking", True)),
        ),
        Family(  # Command R7B / A: thinking, then response or action blocks
            "cohere",
            parser="marked",
            parser_marks=("<|START_ACTION|>",),
            tool_block=("<|START_ACTION|>", "<|END_ACTION|>"),
            think_tags=("<|START_THINKING|>", "<|END_THINKING|>"),
            dropped_marks=_COHERE_MARKS,
            control_tokens=(
                "<|START_THINKING|>",
                "<|END_THINKING|>",
                "<|START_ACTION|>",
                "<|END_ACTION|>",
                *_COHERE_MARKS,
            ),
            ollama_parsers=(("cohere", True),),
        ),
        Family(  # OLMo 3: ``<function_calls>f(a=1)\ng(b=2)</function_calls>``
            "olmo3",
            parser="marked",
            parser_marks=("<function_calls>",),
            tool_block=("<function_calls>", "</function_calls>"),
            think_tags=("<think>", "</think>"),
            control_tokens=("<function_calls>", "</function_calls>", "<think>", "</think>"),
            ollama_parsers=(("olmo3", False), ("olmo3-think", True)),
        ),
        Family(  # Glimmer: ``to=self<|message|>...<|eom|><|start|>assistant to=TOOL<|message|><atem:...>``
            "glimmer",
            parser="glimmer",
            parser_marks=("<|message|>", "<|eot|>", "<atem:function_calls>"),
            think_tags=("to=self<|message|>", "<|eom|>"),  # a message to itself is its thinking
            control_tokens=("<|start|>", "<|message|>", "<|eom|>", "<|eot|>"),
            ollama_parsers=(("glimmer", True),),
        ),
        Family(  # gpt-oss
            "harmony",
            parser="harmony",
            parser_marks=("<|channel|>", "<|message|>"),
            control_tokens=("<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|constrain|>"),
            ollama_parsers=(("harmony", True),),
        ),
        Family(
            "qwen3-coder",
            parser="blocks",
            parser_marks=("<function=", "<parameter="),
            tool_block=("<tool_call>", "</tool_call>"),
            control_tokens=("<tool_call>", "</tool_call>"),
            ollama_parsers=(
                ("qwen3-coder", False),
                ("qwen3.5", True),
                ("ornith", True),
                ("nemotron-3-nano", True),
                ("nemotron-3.5-nano", True),
            ),
        ),
        Family(
            "glm",
            parser="blocks",
            parser_marks=("<arg_key>",),
            tool_block=("<tool_call>", "</tool_call>"),
            control_tokens=("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
            # Laguna writes GLM's calls; poolside-v1 is Ollama's name for its v8 (LagunaV8Parser).
            # GLM-OCR's is GLM 4.6's without thinking (GlmOcrParser).
            ollama_parsers=(("glm-4.7", True), ("glm-ocr", False), ("laguna", True), ("poolside-v1", True)),
        ),
        Family(
            "deepseek",
            parser="blocks",
            parser_marks=("tool▁calls▁begin",),
            tool_block=("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"),
            # llama.cpp's converter makes every ``<｜...｜>`` token a control token (its
            # ``does_token_look_special``), so these would render as nothing without being listed
            # (Ollama's DeepSeek3Parser and CogitoParser preserve the same).
            control_tokens=(
                "<｜tool▁calls▁begin｜>",
                "<｜tool▁calls▁end｜>",
                "<｜tool▁call▁begin｜>",
                "<｜tool▁call▁end｜>",
                "<｜tool▁sep｜>",
                "<｜tool▁output▁begin｜>",
                "<｜tool▁output▁end｜>",
                "<｜tool▁outputs▁begin｜>",
                "<｜tool▁outputs▁end｜>",
            ),
            # Ollama matches the name, not the architecture: R1's distills are qwen2 and llama models.
            strip_think_names=("deepseek-r1",),
            ollama_parsers=(("deepseek3", True), ("cogito", True)),
        ),
        Family(  # Qwen 2.5, Hermes
            "hermes",
            tool_syntax="HERMES",
            tool_syntax_marks=("<tool_call>",),
            control_tokens=("<tool_call>", "</tool_call>"),
        ),
        Family(
            "qwen3",
            strip_think_archs=("qwen3",),
            ollama_parsers=(
                ("qwen3", False),
                ("qwen3-thinking", True),
                ("qwen3-vl-instruct", False),
                ("qwen3-vl-thinking", True),
            ),
        ),
        Family(
            "mistral",
            tool_syntax="MISTRAL",
            tool_syntax_marks=("[TOOL_CALLS]",),
            control_tokens=("[TOOL_CALLS]",),
            # A llama with neither Llama 3's header tokens nor ChatML's: Llama 2 / Mistral [INST].
            builtin_tokens=("[INST]",),
            builtin_archs=("llama", "mistral", "mistral3"),
        ),
        Family(
            "llama3",
            tool_syntax="LLAMA",
            tool_syntax_marks=_LLAMA_MARKS,
            control_tokens=("<|python_tag|>",),
            builtin_tokens=("<|start_header_id|>",),
        ),
        Family("gemma", builtin_tokens=("<start_of_turn>",), builtin_arch_prefixes=("gemma",)),
        Family("chatml", builtin_tokens=("<|im_start|>",)),
        Family("phi3", builtin_tokens=("<|assistant|>",), builtin_arch_prefixes=("phi3",)),
    )
}

# The order each question is asked in. Parsers: the most specific marks first (Qwen3-Coder's
# templates also hold <tool_call>). JSON tool syntaxes: Hermes first (Hermes templates for Llama
# models also carry Llama's marks); none found is Hermes. Built-in templates: ChatML last.
# Gemma 4 before FunctionGemma (a Gemma 4 template may teach both marks), Ministral's ``[ARGS]``
# before the older Mistral JSON (``tool_syntax``).
PARSER_ORDER = (
    "glimmer",
    "harmony",
    "qwen3-coder",
    "glm",
    "deepseek",
    "gemma4",
    "functiongemma",
    "ministral",
    "lfm2",
    "cohere",
    "olmo3",
)
TOOL_SYNTAX_ORDER = ("hermes", "mistral", "llama3")
BUILTIN_ORDER = ("gemma", "llama3", "chatml", "phi3", "mistral")

# What a template with no family's marks gets.
DEFAULT_PARSER = "json"
DEFAULT_TOOL_SYNTAX = "HERMES"
DEFAULT_BUILTIN = "chatml"

# Control tokens rendered as their text (every family's); end-of-generation ones (``<|call|>``,
# ``<|return|>``) stop generation before they are rendered.
PARSED_CONTROL_TOKENS = frozenset(t for f in FAMILIES.values() for t in f.control_tokens)
# The tool-call tags that models' Go templates taught the JSON tool parser (``preserve_tool_tag``),
# rendered as their text too. Process-wide and only ever grown: the binding, which renders pieces,
# never sees a model's Go template, so a tag one template teaches is text in every vocabulary that
# holds it as a control token.
_TEMPLATE_TAGS: set[str] = set()

# The special tokens that pick a built-in template, in the order they are looked for.
CHAT_MARKERS = tuple(t for name in BUILTIN_ORDER for t in FAMILIES[name].builtin_tokens)
# The tags a thinking block closes with in a model's output: the generic splitter's and each
# family's. Where one is a whole token of the vocabulary, a format can wait for it (gguf_info
# ``whole_tokens``; the engine's lazy grammar is triggered by that token).
THINK_CLOSES = tuple(dict.fromkeys(["</think>", *(f.think_tags[1] for f in FAMILIES.values() if f.think_tags[1])]))
# Other tokens that frame turns rather than calls (never a template's preserved tool tag).
_TURN_ENDS = ("<|eot_id|>", "<|end_header_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>", "<|user|>", "<|system|>")


# The renderer and parser Ollama's create names for a GGUF of these architectures where the
# model has none (``server/create.go``), and the stop words it then adds unless the create gives some.
ARCH_NAMED: dict[str, tuple[str, str]] = {
    "gemma4": ("gemma4", "gemma4"),
    "laguna": ("laguna", "laguna"),
    "nemotron_h": ("nemotron-3-nano", "nemotron-3-nano"),
    "nemotron_h_moe": ("nemotron-3-nano", "nemotron-3-nano"),
    "nemotron_h_omni": ("nemotron-3-nano", "nemotron-3-nano"),
}
ARCH_STOPS = {"gemma4": ["<turn|>"]}
# Gemma 4's renderer by size (Ollama's ``renderer_resolution.go``): "gemma4" is the one its create
# names, resolved when a prompt is rendered by the model's name, else its parameter count.
_GEMMA4_BY_NAME = {
    "e2b": "gemma4-small",
    "e4b": "gemma4-small",
    "12b": "gemma4-large",
    "26b": "gemma4-large",
    "31b": "gemma4-large",
}
_GEMMA4_LARGE_PARAMETERS = 12_000_000_000
_HUMAN_UNITS = {"K": 1e3, "M": 1e6, "B": 1e9}


def renderer_in_use(renderer: str, names: tuple[str, ...], parameter_size: str) -> str:
    """The renderer a prompt is rendered with (Ollama's ``resolveRendererName``): the config's, but
    Gemma 4's legacy "gemma4" as its small or large renderer, by the first of ``names`` (the
    model's short and full names) that says a size, else by ``parameter_size`` ("31.3B")."""
    if renderer != "gemma4":
        return renderer
    for name in names:
        found = next((r for size, r in _GEMMA4_BY_NAME.items() if size in name.lower()), None)
        if found is not None:
            return found
    unit = _HUMAN_UNITS.get(parameter_size[-1:].upper())
    try:
        count = float(parameter_size[:-1]) * unit if unit is not None else None
    except ValueError:
        count = None
    return "gemma4-large" if count is not None and count >= _GEMMA4_LARGE_PARAMETERS else "gemma4-small"


# Ollama's parser names: the family (None: the JSON tool parser) and whether it thinks.
OLLAMA_PARSERS: dict[str, tuple[str, bool]] = {
    parser: (f.name, thinks) for f in FAMILIES.values() for parser, thinks in f.ollama_parsers
}
# Ollama's parsers that take a leading think block as thinking though the request asked for none:
# GLM 4.6's, which GLM-OCR's is with thinking off (``GlmOcrParser``) and GLM 4.7's starts as
# where thinking is off (``GLM47Parser.Init``), looks for one first.
LEADING_THINK_PARSERS = frozenset({"glm-ocr", "glm-4.7"})


def parser_family(template: str | None, parser: str | None = None) -> Family | None:
    """The family whose own output parser reads a model's output; None: the JSON tool parser.

    ``parser``, Ollama's parser name from the model's config (a registry model's, a Modelfile's
    PARSER), decides when cllm knows it; else the chat template's marks do.
    """
    if parser and parser in OLLAMA_PARSERS:
        family = FAMILIES[OLLAMA_PARSERS[parser][0]]
        return family if family.parser != "json" else None
    template = template or ""
    for name in PARSER_ORDER:
        family = FAMILIES[name]
        if all(mark in template for mark in family.parser_marks):
            return family
    return None


def parser_capabilities(parser: str | None) -> tuple[str, ...]:
    """What a named Ollama parser grants a model (``parserCapabilities``): tools, and thinking
    where that parser thinks; nothing for a name cllm does not know."""
    if not parser or parser not in OLLAMA_PARSERS:
        return ()
    return ("tools", "thinking") if OLLAMA_PARSERS[parser][1] else ("tools",)


def template_thinks(template: str) -> bool:
    """Whether a chat template teaches thinking in a family's own marks (``[THINK]``, Command's,
    Glimmer's messages to itself)."""
    thinkers = (f for f in FAMILIES.values() if f.parser in ("marked", "glimmer"))
    return any(f.think_tags[0] and f.think_tags[0] in template for f in thinkers)


def taught_tool_syntax(template: str | None) -> str | None:
    """The JSON tool-call syntax whose marks a chat template holds (a ``ToolFormat`` name); None
    where it holds no family's.

    A bare ``"parameters"`` is no mark: templates of other syntaxes (Cohere, GigaChat) write tool
    schemas with it.
    """
    for name in TOOL_SYNTAX_ORDER:
        family = FAMILIES[name]
        if template and any(mark in template for mark in family.tool_syntax_marks):
            return family.tool_syntax
    return None


def tool_syntax(template: str | None) -> str:
    """The JSON tool-call syntax a chat template teaches (``taught_tool_syntax``). Templates that
    name no syntax (SmolLM2, ChatML) get Hermes, the most common one for models tuned on their own."""
    return taught_tool_syntax(template) or DEFAULT_TOOL_SYNTAX


def preserve_tool_tag(tag: str) -> None:
    """Have the binding render ``tag``, a call's opening tag read from a model's Go template, as
    its text where it is a control token, as Ollama's llama-server runner preserves the tag of its
    generic tool parser (``llamaServerPreservedTokensForToolTag``): only its leading ``<...>`` or
    ``[...]`` where it has one (``[TOOL_CALLS][`` is the token and a list's bracket), and nothing
    for the bare ``{`` and ``[`` of a template with no tag."""
    if tag in ("", "{", "["):
        return
    close = {"<": ">", "[": "]"}.get(tag[0])
    end = tag.find(close) if close else -1
    kept = tag[: end + 1] if end > 0 else tag
    # Never a turn's marker (a template whose call branch opens with its assistant header):
    # rendered for one model, it would show in every chat of every model that has it.
    if kept not in CHAT_MARKERS and kept not in _TURN_ENDS:
        _TEMPLATE_TAGS.add(kept)


def renders_as_text(text: str) -> bool:
    """Whether a control token whose text is ``text`` is rendered as that text, not as nothing:
    an output parser reads it (a family's, or a tag ``preserve_tool_tag`` kept)."""
    return text in PARSED_CONTROL_TOKENS or text in _TEMPLATE_TAGS


def builtin_family(markers: tuple[str, ...] | set[str], architecture: str) -> str:
    """The family whose built-in template a GGUF without a chat template gets: its special tokens
    decide, then its architecture, as llama.cpp chooses its built-in ones."""
    for name in BUILTIN_ORDER:
        family = FAMILIES[name]
        if (
            any(t in markers for t in family.builtin_tokens)
            or architecture.startswith(family.builtin_arch_prefixes)
            or architecture in family.builtin_archs
        ):
            return name
    return DEFAULT_BUILTIN


def strips_think_history(architecture: str, model_name: str) -> bool:
    """Whether earlier turns lose their think blocks (Ollama's filterThinkTags): by the GGUF's
    architecture or by the model part of the model's name, as Ollama matches each."""
    return any(architecture in f.strip_think_archs or model_name in f.strip_think_names for f in FAMILIES.values())
