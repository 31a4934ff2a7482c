"""Model names: Ollama's ``[host/][namespace/]model[:tag]`` grammar, defaults and display forms.

A valid name maps onto exactly four path components that can never leave the store root.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import InvalidRequest
from ..gostrconv import go_quote

DEFAULT_HOST = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"
# Ollama accepts both spellings and, like Ollama, each is stored under the host as written.
HF_HOSTS = ("hf.co", "huggingface.co")

_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_NAMESPACE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
_HOST = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]*")
_MAX_PART = 80
_MAX_HOST = 350


@dataclass(frozen=True)
class ModelName:
    """A fully qualified model name; parts keep the case they were written in."""

    host: str
    namespace: str
    model: str
    tag: str

    @property
    def parts(self) -> tuple[str, str, str, str]:
        return (self.host, self.namespace, self.model, self.tag)

    @property
    def key(self) -> tuple[str, ...]:
        """Case-insensitive identity (Ollama compares names with EqualFold)."""
        return tuple(p.lower() for p in self.parts)

    def matches(self, other: ModelName) -> bool:
        return self.key == other.key

    @property
    def is_huggingface(self) -> bool:
        return self.host.lower() in HF_HOSTS

    def display_shortest(self) -> str:
        """``qwen3:latest``, ``user/m:t``, ``hf.co/u/r:Q4_K_M``: defaults dropped, tag always kept."""
        if self.host.lower() != DEFAULT_HOST:
            prefix = f"{self.host}/{self.namespace}/"
        elif self.namespace.lower() != DEFAULT_NAMESPACE:
            prefix = f"{self.namespace}/"
        else:
            prefix = ""
        return f"{prefix}{self.model}:{self.tag}"

    def __str__(self) -> str:
        return f"{self.host}/{self.namespace}/{self.model}:{self.tag}"


def _valid(pattern: re.Pattern[str], part: str, max_len: int) -> bool:
    return 0 < len(part) <= max_len and pattern.fullmatch(part) is not None


def model_reference(text: str) -> str:
    """The stored model a request's name refers to, as Ollama's ``modelref.ParseRef``: space around
    it trimmed and an explicit ``:local`` source suffix (any case) dropped, so ``qwen3:8b:local`` is
    the local ``qwen3:8b``. A ``:cloud`` name is left whole: there is no cloud here to send it to.
    Two source suffixes (``m:local:cloud``) are refused in Ollama's words."""
    s = text.strip() if isinstance(text, str) else ""
    head, source = _source_suffix(s)
    if source and _source_suffix(head)[1]:
        raise InvalidRequest(f"use either :local or :cloud, not both: {go_quote(s)}")
    return head if source == "local" else s


def _source_suffix(name: str) -> tuple[str, str]:
    """``name`` without its source suffix, and which it was ("local", "cloud" or ""): Ollama's
    ``parseSourceSuffix`` (``:local``, ``:cloud``, or a tag ending ``-cloud``)."""
    head, colon, suffix = name.rpartition(":")
    kind = suffix.strip().lower()
    if colon and kind in ("local", "cloud"):
        return head, kind
    if colon and "/" not in suffix and kind.endswith("-cloud"):
        return f"{head}:{suffix.strip()[: -len('-cloud')]}", "cloud"
    return name, ""


def parse_name(text: str) -> ModelName:
    """Parse like Ollama's ``ParseName`` + defaults; raise ``InvalidRequest("invalid model name")``.

    The tag is split at the last ``:`` only when it comes after the last ``/``, so
    ``localhost:5000/m`` keeps its port in the host. A ``scheme://`` before the host is dropped.
    """
    s = text if isinstance(text, str) else ""
    tag = DEFAULT_TAG
    if s.rfind(":") > s.rfind("/"):
        s, _, tag = s.rpartition(":")
    if "://" in s:
        s = s.partition("://")[2]
    pieces = s.split("/")
    host, namespace = DEFAULT_HOST, DEFAULT_NAMESPACE
    if len(pieces) == 1:
        (model,) = pieces
    elif len(pieces) == 2:
        namespace, model = pieces
    elif len(pieces) == 3:
        host, namespace, model = pieces
    else:
        raise InvalidRequest("invalid model name")
    if not (
        _valid(_HOST, host, _MAX_HOST)
        and _valid(_NAMESPACE, namespace, _MAX_PART)
        and _valid(_PART, model, _MAX_PART)
        and _valid(_PART, tag, _MAX_PART)
    ):
        raise InvalidRequest("invalid model name")
    return ModelName(host, namespace, model, tag)
