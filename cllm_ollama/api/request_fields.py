"""What /api/generate and /api/chat (and the dialects translated onto them) read alike from their
decoded requests, with Ollama's rules and messages: keep_alive, think, truncate, logprobs, format
(``"json"`` or a JSON Schema), images and audio.

The grammar itself is the engine's (``engine/grammar.py``): this layer never touches llama.cpp.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import ConfigError, parse_keep_alive
from ..engine.grammar import JSON_GRAMMAR, json_schema_grammar
from ..errors import CllmError, InvalidRequest
from ..gostrconv import go_quote
from ..model_families import HARMONY_ARCHS
from .media import Base64Error, Media, decode_media
from .resolve import ResolvedModel
from .schemas.ollama import GenerationRequest

__all__ = ["JSON_GRAMMAR"]  # the grammar for ``format: "json"``, for whoever compiles one

_THINK_LEVELS = ("low", "medium", "high", "max")


def parse_think(value: object) -> bool | None:
    """``think``: None when unset (the caller applies the model's default); a level means on."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value in _THINK_LEVELS:
            return True
        raise InvalidRequest(
            f'invalid think value: {go_quote(value)} (must be "high", "medium", "low", "max", true, or false)'
        )
    raise InvalidRequest('think must be a boolean or string ("high", "medium", "low", "max", true, or false)')


def parse_keep_alive_field(value: object) -> float | None:
    """``keep_alive`` in seconds (``config.FOREVER`` when negative); None when unset."""
    if value is None:
        return None
    try:
        return parse_keep_alive(value)
    except ConfigError as exc:
        raise InvalidRequest(str(exc)) from exc


def keep_alive_of(body: dict[str, Any]) -> float | None:
    return parse_keep_alive_field(body.get("keep_alive"))


def logprobs_of(req: GenerationRequest) -> int:
    """``logprobs``/``top_logprobs`` as the engine takes them: -1 off, else how many alternatives."""
    top_logprobs = req.top_logprobs or 0
    if not 0 <= top_logprobs <= 20:
        raise InvalidRequest("top_logprobs must be between 0 and 20")
    return top_logprobs if req.logprobs else -1


@dataclass(frozen=True)
class SharedFields:
    """What /api/generate and /api/chat requests have in common beyond the model and options."""

    keep_alive: float | None
    truncate: bool
    format: object
    logprobs: int  # -1 off, else how many alternatives per token
    # Ollama's ``shift``: None where the client left it to the model (``cuts_prompt``).
    shift: bool | None = None

    @classmethod
    def of(cls, req: GenerationRequest) -> SharedFields:
        """From a request decoded already (keep_alive and the types failed there, as in Go's JSON
        decode); then top_logprobs, in Ollama's order."""
        keep_alive = parse_keep_alive_field(req.keep_alive)
        return cls(keep_alive, req.truncate is not False, req.format, logprobs_of(req), req.shift)

    def cuts_prompt(self, model: ResolvedModel) -> bool:
        """Whether a prompt too long for its context, after the oldest turns have gone, is cut in
        the middle (Ollama's context-shift runner) or refused with a 400: ``truncate`` and ``shift``
        both on, ``shift`` unset meaning on except for DeepSeek 2's family, which Ollama's
        runner cannot shift (``resolveContextShift`` in server/sched.go)."""
        shift = self.shift if self.shift is not None else "deepseek2" not in model.info.families
        return self.truncate and shift


def thinking_for(model: ResolvedModel, req: GenerationRequest, display_name: str, *, chat: bool = False) -> bool:
    """``think`` resolved: defaults to on for thinking models, 400 where the model cannot.

    A grammar would constrain the thinking too, so with ``grammar`` the model answers directly;
    with ``format`` too, except on a chat (``chat``) with a model whose thinking ends at one tag:
    the format then holds the output after it (``Generation.grammar_after``), as Ollama's
    ChatHandler thinks first and applies the format once the thinking ends."""
    think = parse_think(req.think)
    can_think = model.has("thinking")
    if think and not can_think:
        raise InvalidRequest(f'"{display_name}" does not support thinking')
    if think is None:
        grammar = req.options.get("grammar") if isinstance(req.options, dict) else None
        if grammar or (req.format and not (chat and model.thinking_close)):
            return False
        return can_think
    return think


def think_level(model: ResolvedModel, req: GenerationRequest) -> str | None:
    """``think`` as a level ("low" ... "max") for the template; None for a boolean. /api/generate
    passes it as /api/chat does (Ollama's routes.go sets ``values.ThinkLevel`` for both), except
    gpt-oss's "max", which its harmony format does not take: "high", as Ollama maps it."""
    if not isinstance(req.think, str):
        return None
    return "high" if req.think == "max" and model.info.architecture in HARMONY_ARCHS else req.think


def check_media(model: ResolvedModel, media: Sequence[Media] | None) -> None:
    """Images and audio (decoded already: ``decoded_media``) go only to a model that sees
    or hears: audio (WAV, MP3, FLAC, told by its first bytes) needs the ``audio`` capability,
    anything else ``vision``, each refused in the words of Ollama's capability check.

    Bytes that are neither are the projector's to find (``binding.MediaError``, a 400) when
    the engine tokenizes the prompt, as llama-server finds them for Ollama.
    """
    for item in media or ():
        capability = "audio" if item.is_audio else "vision"
        if not model.has(capability):
            raise InvalidRequest(f"{model.full_name} does not support {capability}")
        if not model.record.projector_paths:
            # A tower inside the GGUF (Ollama's own converter's layout) that nothing here maps
            # to a projector yet: dropping the media silently would answer about nothing.
            what = "audio is" if capability == "audio" else "images are"
            raise InvalidRequest(f"{model.full_name}: {what} not supported without a separate projector file")


def decoded_media(items: list[str] | None) -> list[Media]:
    """``images`` (Go's []api.ImageData: images and audio, strings already) decoded, [] when absent.

    Go decodes the base64 while it decodes the JSON: bad base64 is its error, as it words it.
    """
    try:
        return [decode_media(item) for item in items or ()]
    except Base64Error as exc:
        raise InvalidRequest(str(exc)) from exc


# Largest count a schema may ask for (maxLength, maxItems, ...): the converter spells a bound of
# N as N nested groups; llama.cpp refuses more than ~2000 of them and its recursive parser
# overflows its stack on ~15000 (a crash).
MAX_SCHEMA_COUNT = 1000
_COUNT_KEYS = (
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minContains",
    "maxContains",
)
MAX_SCHEMA_DEPTH = 64


def check_schema_bounds(schema: object, depth: int = 0) -> None:
    """Refuse repetition counts and nesting beyond what a grammar can safely spell out."""
    if depth > MAX_SCHEMA_DEPTH:
        raise InvalidRequest(f"invalid JSON schema in format: nested deeper than {MAX_SCHEMA_DEPTH} levels")
    if isinstance(schema, dict):
        for key in _COUNT_KEYS:
            value = schema.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and value > MAX_SCHEMA_COUNT:
                raise InvalidRequest(
                    f"invalid JSON schema in format: {key} {value} is more than the supported {MAX_SCHEMA_COUNT}"
                )
        children: Iterable[object] = schema.values()
    elif isinstance(schema, list):
        children = schema
    else:
        return
    for child in children:
        check_schema_bounds(child, depth + 1)


def output_grammar(fmt: object, grammar: str | None, forced_calls: Callable[[], str] | None) -> str | None:
    """The grammar the output is held to: a forced tool call's (the whole output is the call, so
    ``format`` has nothing left to shape), else ``grammar`` (GBNF as sent), else ``format``'s.
    ``grammar`` with either of the others is a 400, as llama-server refuses it.

    Can take a while for a big schema: call it off the event loop.
    """
    if grammar is not None:
        if forced_calls is not None:
            raise InvalidRequest("grammar cannot be combined with a forced tool_choice")
        if fmt is not None and fmt != "":
            raise InvalidRequest("either format (response_format) or grammar can be given, not both")
        return grammar
    if forced_calls is not None:
        return forced_calls()
    return grammar_for_format(fmt)


def grammar_for_format(fmt: object) -> str | None:
    """GBNF for a request's decoded ``format`` value; None when output is unconstrained.

    Can take a while for a big schema: call it off the event loop.
    """
    if fmt is None or fmt == "":
        return None
    if fmt == "json":
        return JSON_GRAMMAR
    raw = json.dumps(fmt, ensure_ascii=False, separators=(",", ":"))
    if not isinstance(fmt, dict):
        # Ollama quotes the raw JSON it was sent, so a string arrives with its quotes escaped.
        message = f'invalid format: {go_quote(raw)}; expected "json" or a valid JSON Schema object'
        raise CllmError(message, 500)
    check_schema_bounds(fmt)
    return json_schema_grammar(raw)
