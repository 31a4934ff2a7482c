"""What /api/generate and /api/chat (and the dialects translated onto them) read alike from their
decoded requests: keep_alive, truncate, format, logprobs, think, images (and audio)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidRequest
from .media import Media
from .options import parse_keep_alive_field, parse_think
from .resolve import ResolvedModel
from .schemas.ollama import GenerationRequest


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

    @classmethod
    def of(cls, req: GenerationRequest) -> SharedFields:
        """From a request decoded already (keep_alive and the types failed there, as in Go's JSON
        decode); then top_logprobs, in Ollama's order."""
        keep_alive = parse_keep_alive_field(req.keep_alive)
        return cls(keep_alive, req.truncate is not False, req.format, logprobs_of(req))


def thinking_for(model: ResolvedModel, req: GenerationRequest, display_name: str) -> bool:
    """``think`` resolved: defaults to on for thinking models, 400 where the model cannot."""
    think = parse_think(req.think)
    can_think = model.has("thinking")
    if think and not can_think:
        raise InvalidRequest(f'"{display_name}" does not support thinking')
    if think is None:
        # A grammar would constrain the thinking too: with `format`, answer directly.
        return can_think and not req.format
    return think


def think_level(req: GenerationRequest) -> str | None:
    """``think`` as a level ("low" ... "max") for the template's ``ThinkLevel``; None for a boolean.
    /api/generate passes it as /api/chat does (Ollama's routes.go sets ``values.ThinkLevel`` for both)."""
    return req.think if isinstance(req.think, str) else None


def check_media(model: ResolvedModel, media: Sequence[Media] | None) -> None:
    """Images and audio (decoded already: ``wire.decoded_media``) go only to a model that sees
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
