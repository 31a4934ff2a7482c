"""Which model a request means: its name resolved in the store, the GGUF's facts, what loading it takes."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool

from ..chatformat.builtin_templates import template_in_use
from ..chatformat.family_parsers import thinking_close
from ..engine.pool import LoadRequest
from ..errors import CllmError, EngineError, InvalidRequest, NotFound
from ..store.gguf_info import GGUFInfo, gguf_info
from ..store.names import model_reference, parse_name
from ..store.store import ModelRecord, ModelStore
from .options import RequestOptions

log = logging.getLogger("cllm.api")


@dataclass(frozen=True)
class ResolvedModel:
    record: ModelRecord
    info: GGUFInfo
    capabilities: tuple[str, ...]
    requested: str = ""  # the name as the client sent it (Ollama echoes it in "not found")

    @property
    def full_name(self) -> str:
        return str(self.record.name)

    def has(self, capability: str) -> bool:
        return capability in self.capabilities

    @property
    def template(self) -> str:
        """The template its prompts are rendered with and its output is read by (``template_in_use``)."""
        return template_in_use(self.record.template, self.info, self.record.renderer_in_use)

    @property
    def thinking_close(self) -> str | None:
        """The tag its output's thinking ends with (``family_parsers.thinking_close``), where it is a
        whole token of its vocabulary: a format holds the output after that token, so that the model
        thinks first. A tag written in pieces could share its last with the answer's first letters,
        which the grammar, fed them at once, would refuse (llama.cpp throws there)."""
        tag = thinking_close(self.template, self.record.parser)
        return tag if tag is not None and tag in self.info.whole_tokens else None


def checked_reference(name: str, *, empty_message: str, empty_status: int) -> str:
    """The stored name ``name`` refers to, checked as Ollama's parseAndValidateModelRef checks it
    before any lookup: empty (``empty_message``), then of bad syntax ("invalid model name")."""
    stored = model_reference(name)
    if not stored:
        raise CllmError(empty_message, empty_status)
    parse_name(stored)
    return stored


async def resolve_model(store: ModelStore, name: str, *, empty_message: str, empty_status: int) -> ResolvedModel:
    """Find a model as Ollama's handlers do: empty name, bad syntax, then not found (the name as
    the client sent it in the message, ``:local`` and all)."""
    stored = checked_reference(name, empty_message=empty_message, empty_status=empty_status)
    try:
        record = await run_in_threadpool(store.get, stored)
    except NotFound:
        raise NotFound(f"model '{name}' not found") from None
    if record.model_path is None:
        raise InvalidRequest(f"model '{name}' has no GGUF weights")
    try:
        info = await run_in_threadpool(gguf_info, record.model_path)
        capabilities = tuple(record.capabilities)
    except FileNotFoundError:  # deleted since it was looked up: the name has vanished
        raise NotFound(f"model '{name}' not found") from None
    if info.problems:
        raise EngineError(f"model '{name}' cannot be loaded: {'; '.join(info.problems)}")
    return ResolvedModel(record, info, capabilities, requested=name)


def load_request(model: ResolvedModel, options: RequestOptions) -> LoadRequest:
    assert model.record.model_path is not None
    return LoadRequest(
        path=model.record.model_path,
        name=model.record.short_name,
        digest=model.record.digest,
        num_ctx=options.num_ctx,
        num_batch=options.num_batch,
        num_gpu=options.num_gpu,
        num_thread=options.num_thread,
        main_gpu=options.main_gpu,
        use_mmap=options.use_mmap,
        num_parallel=options.num_parallel,
        deterministic=options.deterministic,
        embedding_only=model.info.is_embedding,
        projector=model.record.projector_paths[0] if model.record.projector_paths else None,
        adapters=model.record.adapter_paths,
    )


@contextmanager
def naming_the_model(model: ResolvedModel) -> Iterator[None]:
    """Errors from loading name the model, not its file: the server's paths go to the log only.

    A load that failed because the model was deleted meanwhile answers as Ollama does for a vanished name.
    """
    path = model.record.model_path
    try:
        yield
    except (CllmError, FileNotFoundError) as exc:
        if path is not None and not path.exists():
            raise NotFound(f"model '{model.requested or model.record.short_name}' not found") from None
        if not isinstance(exc, CllmError):
            raise
        file = next((f for f in (str(path), getattr(path, "name", None)) if f and f in exc.message), None)
        if file is None:
            raise
        log.error("loading %s (%s) failed: %s", model.full_name, path, exc.message)
        raise CllmError(exc.message.replace(file, model.record.short_name), exc.status_code) from exc
