"""Chat templates for GGUFs that carry none (``tokenizer.chat_template``), chosen as llama.cpp
chooses its built-in ones: by the family's special tokens and the architecture, ChatML last.

Each is the family's own format as its makers' template writes it (system turns included), in
Jinja, so it renders through the same bounded workers as a GGUF's template.
"""

from __future__ import annotations

from ..model_families import builtin_family
from ..store.gguf_info import GGUFInfo
from .renderer_templates import renderer_template

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

LLAMA3 = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}"
    "{{ message['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)

# Gemma has no system role: a system message opens the first user turn.
GEMMA = (
    "{{ bos_token }}{% set system = namespace(text='') %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{% set system.text = system.text + message['content'] + '\\n\\n' %}"
    "{% else %}"
    "{% set role = 'model' if message['role'] == 'assistant' else 'user' %}"
    "{{ '<start_of_turn>' + role + '\\n' + system.text + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% set system.text = '' %}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)

# Mistral / Llama 2 [INST]: a system message is prepended to the next user turn.
MISTRAL = (
    "{{ bos_token }}{% set system = namespace(text='') %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{% set system.text = system.text + message['content'] + '\\n\\n' %}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] | trim + eos_token }}"
    "{% else %}{{ '[INST] ' + system.text + message['content'] | trim + ' [/INST]' }}{% set system.text = '' %}"
    "{% endif %}{% endfor %}"
)

PHI3 = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)


_BY_FAMILY = {"chatml": CHATML, "llama3": LLAMA3, "gemma": GEMMA, "mistral": MISTRAL, "phi3": PHI3}


def builtin_name(info: GGUFInfo | None) -> str:
    """The family whose format a GGUF without a chat template gets: its special tokens decide, then
    its architecture (``model_families.builtin_family``); ChatML without either. Named apart from
    the template so that a log line can say which one is used."""
    if info is None:
        return "chatml"
    return builtin_family(info.chat_markers, info.architecture)


def builtin_template(info: GGUFInfo | None) -> str:
    """The family's format for a GGUF without a chat template (``builtin_name`` says which)."""
    return _BY_FAMILY[builtin_name(info)]


# Ollama's ``template.DefaultTemplate``: what a Modelfile shows as the TEMPLATE of a model without
# a template layer (``/api/show``), and what such a Modelfile creates the model with again.
DEFAULT_TEMPLATE = "{{ .Prompt }}"


def go_template_in_use(record_template: str | None, renderer: str, info: GGUFInfo | None) -> str | None:
    """The model's ``TEMPLATE`` (a Go template layer), unless its config names one of Ollama's
    renderers, which Ollama renders with instead of the template: then the GGUF's own chat
    template, where it has one, is the nearest cllm has to that renderer, else cllm's port of the
    renderer (``renderer_templates``), where it has one. Ollama's default template yields to a
    GGUF chat template that knows tools or thinking, as Ollama's ``shouldPreferChatTemplate`` has
    it: what a model shown without a template layer and made again from its Modelfile carries
    (a completion model's GGUF template that knows neither leaves ``{{ .Prompt }}`` as it is)."""
    if renderer and ((info is not None and info.chat_template) or renderer_template(renderer)):
        return None
    default = (record_template or "").strip() == DEFAULT_TEMPLATE
    if default and info is not None and info.chat_template and {"tools", "thinking"} & set(info.capabilities):
        return None
    return record_template or None


def jinja_template(info: GGUFInfo | None, renderer: str = "") -> str | None:
    """The Jinja template a model is rendered with when no Go template is: the GGUF's chat
    template, else cllm's port of the renderer its config names; None: the family's built-in."""
    if info is not None and info.chat_template:
        return info.chat_template
    return renderer_template(renderer)


def template_in_use(record_template: str | None, info: GGUFInfo | None, renderer: str = "") -> str:
    """The template a model's prompts are rendered with, as Ollama ranks them: the model's
    ``TEMPLATE`` (a Go template layer) first (``go_template_in_use``), then the GGUF's chat
    template or the named renderer's port (``jinja_template``), then the family's built-in one."""
    go_template = go_template_in_use(record_template, renderer, info)
    if go_template:
        return go_template
    return jinja_template(info, renderer) or builtin_template(info)
