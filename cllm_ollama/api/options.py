"""Ollama's ``options`` (api/types.go FromMap) merged over a Modelfile's parameters into typed
``RequestOptions``. Error strings are Ollama's, because clients match on them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..engine.request import SamplingParams
from ..errors import CllmError, InvalidRequest
from ..gostrconv import go_quote
from .schemas.go import go_type

_INT, _FLOAT, _BOOL, _STRINGS, _STRING = "integer", "float32", "boolean", "array", "string"

# Every option Ollama still declares, with its Go kind. Keys outside this table (mirostat, tfs_z,
# numa, use_mlock, ... removed upstream but still sent by ollama-python) are ignored, as Ollama does.
_KINDS: dict[str, str] = {
    "num_keep": _INT,
    "seed": _INT,
    "num_predict": _INT,
    "top_k": _INT,
    "top_p": _FLOAT,
    "min_p": _FLOAT,
    "typical_p": _FLOAT,
    "repeat_last_n": _INT,
    "temperature": _FLOAT,
    "repeat_penalty": _FLOAT,
    "presence_penalty": _FLOAT,
    "frequency_penalty": _FLOAT,
    "stop": _STRINGS,
    # Runner (load-time) options.
    "num_ctx": _INT,
    "num_batch": _INT,
    "num_gpu": _INT,
    "main_gpu": _INT,
    "use_mmap": _BOOL,
    "num_thread": _INT,
    # A DRAFT model's tokens drafted a step (Ollama's speculative decoding): typed, not used here.
    "draft_num_predict": _INT,
    # cllm's own: batch-invariant decoding for this model (CLLM_DETERMINISTIC for all of them).
    "deterministic": _BOOL,
    # Beyond Ollama, with llama-server's names: a GBNF grammar, the DRY and XTC samplers.
    "grammar": _STRING,
    "dry_multiplier": _FLOAT,
    "dry_base": _FLOAT,
    "dry_allowed_length": _INT,
    "dry_penalty_last_n": _INT,
    "dry_sequence_breakers": _STRINGS,
    "xtc_probability": _FLOAT,
    "xtc_threshold": _FLOAT,
}
# llama-server's DRY and XTC sampler options (also read as extra body fields on /v1).
DRY_XTC = (
    "dry_multiplier",
    "dry_base",
    "dry_allowed_length",
    "dry_penalty_last_n",
    "dry_sequence_breakers",
    "xtc_probability",
    "xtc_threshold",
)
_SAMPLING_KEYS = (
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "typical_p",
    "repeat_last_n",
    "repeat_penalty",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    *DRY_XTC,
)
# Each sampler option's allowed range (inclusive) and its refusal, a 400 as llama-server's are.
_RANGES: dict[str, tuple[float, float, str]] = {
    "repeat_last_n": (-1, math.inf, "repeat_last_n must be >= -1"),
    "dry_multiplier": (0.0, math.inf, "dry_multiplier must be >= 0"),
    "dry_base": (1.0, math.inf, "dry_base must be >= 1"),
    "dry_allowed_length": (0, math.inf, "dry_allowed_length must be >= 0"),
    "dry_penalty_last_n": (-1, math.inf, "dry_penalty_last_n must be >= -1"),
    "xtc_probability": (0.0, 1.0, "xtc_probability must be between 0 and 1"),
    "xtc_threshold": (0.0, 1.0, "xtc_threshold must be between 0 and 1"),
}
# llama.cpp's LLAMA_MAX_SEQ: the most sequences (slots) one context can hold.
MAX_PARALLEL = 256


@dataclass(frozen=True)
class RequestOptions:
    """Typed ``options``; the load-time ones are None when neither request nor Modelfile set them."""

    sampling: SamplingParams
    num_predict: int = -1
    stop: tuple[str, ...] = ()
    num_keep: int = 4
    num_ctx: int | None = None
    num_batch: int | None = None
    num_gpu: int | None = None
    num_thread: int | None = None
    # The GPU a model's layers all go to (Ollama's ``--split-mode none --main-gpu``), and whether
    # its weights are read through a memory map (False: copied into memory, Ollama's --no-mmap).
    main_gpu: int | None = None
    use_mmap: bool | None = None
    # The model's own slot count (Modelfile ``PARAMETER num_parallel``); None: OLLAMA_NUM_PARALLEL.
    num_parallel: int | None = None
    # Batch-invariant decoding (Modelfile or request ``deterministic``); None: the server's.
    deterministic: bool | None = None
    # A GBNF grammar the output must match (``options.grammar``, llama-server's ``grammar``).
    grammar: str | None = None

    def sampling_within(self, n_ctx: int) -> SamplingParams:
        """The sampling parameters of a request whose context is ``n_ctx`` tokens.

        llama.cpp's penalty sampler allocates its ring of ``repeat_last_n`` tokens up front
        (2^31-1 took 8 GB and 18 s per request), yet no window sees more than the context: it
        is clamped to it, and -1 means the whole context, as llama.cpp's server reads it.
        """
        sampling = self.sampling
        if sampling.repeat_last_n == -1 or sampling.repeat_last_n > n_ctx:
            sampling = replace(sampling, repeat_last_n=n_ctx)
        if sampling.dry and (sampling.dry_penalty_last_n == -1 or sampling.dry_penalty_last_n > n_ctx):
            sampling = replace(sampling, dry_penalty_last_n=n_ctx)  # DRY's ring, alike
        return sampling


def _convert(key: str, value: object) -> object:
    kind = _KINDS[key]
    if kind == _INT:
        # JSON has only numbers; Go truncates a float into an int field.
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return int(value)
    elif kind == _FLOAT:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif kind == _BOOL:
        if isinstance(value, bool):
            return value
    elif kind == _STRING:
        if isinstance(value, str):
            return value
    else:
        # Ollama wants an array; a bare string is taken as one stop sequence (lenient, loses nothing).
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list):
            raise CllmError(f"option {go_quote(key)} must be of type array", 500)
        if not all(isinstance(item, str) for item in value):
            raise CllmError(f"option {go_quote(key)} must be of an array of strings", 500)
        return tuple(value)
    raise CllmError(f"option {go_quote(key)} must be of type {kind}", 500)


def options_object(value: object, request_type: str) -> Mapping[str, Any]:
    """``options`` as Go decodes it into a map: an object, or nothing (``null``, absent)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidRequest(
            f"json: cannot unmarshal {go_type(value)} into Go struct field {request_type}.options"
            " of type map[string]interface {}"
        )
    return value


def resolve_options(
    request_options: object,
    model_params: Mapping[str, object] | None,
    *,
    request_type: str = "GenerateRequest",
) -> RequestOptions:
    """Merge request ``options`` over the Modelfile's params over Ollama's defaults.

    ``request_type`` names the Go struct in the decode error for a non-object ``options``
    (``GenerateRequest``, ``ChatRequest``, ``EmbedRequest``), as Ollama's message does.
    """
    values: dict[str, Any] = {}
    for source in (model_params or {}, options_object(request_options, request_type)):
        for key, value in source.items():
            # A null value leaves the lower layer's setting in place (FromMap skips nil).
            if key in _KINDS and value is not None:
                values[key] = _convert(key, value)
    check_ranges(values)
    sampling = SamplingParams(**{k: values[k] for k in _SAMPLING_KEYS if k in values})
    # Slots are the model's, never a request's: one client must not reload a model for everyone
    # with another slot count (Ollama has no such option; a request's is ignored like any unknown).
    return RequestOptions(
        sampling=sampling,
        num_predict=values.get("num_predict", -1),
        stop=values.get("stop", ()),
        num_keep=values.get("num_keep", 4),
        num_ctx=values.get("num_ctx"),
        num_batch=values.get("num_batch"),
        num_gpu=values.get("num_gpu"),
        num_thread=values.get("num_thread"),
        main_gpu=values.get("main_gpu"),
        use_mmap=values.get("use_mmap"),
        num_parallel=_num_parallel((model_params or {}).get("num_parallel")),
        deterministic=values.get("deterministic"),
        grammar=values.get("grammar") or None,
    )


def check_ranges(values: Mapping[str, Any]) -> None:
    """Refuse sampler values out of range (llama-server's checks: repeat_last_n's text is the one
    Ollama passes on as a 400); DRY's breakers must be a non-empty list, as llama-server says."""
    for key, (low, high, message) in _RANGES.items():
        value = values.get(key)
        if value is not None and not low <= value <= high:
            raise InvalidRequest(message)
    if values.get("dry_sequence_breakers") == ():
        raise InvalidRequest("dry_sequence_breakers must be a non-empty array of strings")


def _num_parallel(value: object) -> int | None:
    """A model's ``num_parallel``: 1 to ``MAX_PARALLEL`` slots; 0 or less means the server's.

    Slots are the model's, never a request's: one client must not reload a model for everyone
    with another slot count (Ollama has no such option; in a request it is ignored like any key
    Ollama does not know).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CllmError(f"option {go_quote('num_parallel')} must be of type integer", 500)
    return min(int(value), MAX_PARALLEL) if value >= 1 else None
