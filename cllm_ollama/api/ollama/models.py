"""Model management endpoints: tags, show, copy, delete, create, blobs, pull, push.

Each handler validates with Ollama's error strings, then calls the store off the event loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from ...chatformat.gotemplate import TemplateError, parse_ollama
from ...engine.quantizer import quantize_file
from ...errors import InvalidRequest, NotFound, RequestCanceled
from ...gostrconv import go_quote
from ...store.blobs import parse_digest
from ...store.create import CreateRequest, Report, create_model
from ...store.names import model_reference, parse_name
from ...store.pull import pull_model
from ...store.push import push_model
from ...store.registry_pull import RegistryOptions
from ...store.store import ModelStore
from ..encoders import JSONResponse
from ..errors import read_json
from ..options import options_object
from ..schemas.ollama import CopyRequest, DeleteRequest, PullRequest, PushRequest, ShowRequest
from ..schemas.ollama import CreateRequest as CreateStream
from ..services import services
from .errors import decode
from .model_views import show_response, tag_entry
from .progress import progress_events, progress_response

_UPLOAD_BATCH = 1 << 20  # bytes gathered before each hop to the writer thread
_COPILOT_CHAT = "GitHubCopilotChat/"  # the User-Agent prefix of GitHub Copilot Chat


def _store(request: Request) -> ModelStore:
    return services(request).store


async def tags(request: Request) -> Response:
    # Broken models (a blob missing) are listed too, marked, so that they can be seen and deleted.
    records = await run_in_threadpool(lambda: _store(request).list_models(broken=True))
    return JSONResponse({"models": [tag_entry(r) for r in records]})


async def show(request: Request) -> Response:
    req = decode(await read_json(request, ShowRequest), ShowRequest)
    name, system, verbose = model_reference(req.model_name), req.system or None, bool(req.verbose)
    options = options_object(req.options, "ShowRequest")
    if not name:
        raise InvalidRequest("model is required")
    store = _store(request)

    def answer() -> dict[str, Any]:
        with store.claim() as claim:  # its blobs stay while they are read, even if it is deleted meanwhile
            return show_response(claim.record(name), verbose=verbose, system=system, options=options)

    shown = await run_in_threadpool(answer)
    if request.headers.get("user-agent", "").startswith(_COPILOT_CHAT):
        # Copilot Chat lists a model by its ``general.basename`` (``Qwen3`` for every qwen3 tag):
        # Ollama's ShowHandler echoes the name asked for there instead.
        shown["model_info"] = {**shown["model_info"], "general.basename": req.model_name}
    return JSONResponse(shown)


async def copy(request: Request) -> Response:
    req = decode(await read_json(request, CopyRequest), CopyRequest)
    source, destination = req.source or "", req.destination or ""
    for label, value in (("source", source), ("destination", destination)):
        try:
            parse_name(value)
        except InvalidRequest:
            raise InvalidRequest(f"{label} {go_quote(value)} is invalid") from None
    try:
        await run_in_threadpool(_store(request).copy, source, destination)
    except NotFound:
        raise NotFound(f"model {go_quote(source)} not found") from None
    return Response(status_code=200)


async def delete(request: Request) -> Response:
    asked = decode(await read_json(request, DeleteRequest), DeleteRequest).model_name
    name = model_reference(asked)
    if not name:  # Ollama's ``modelref.ErrModelRequired``
        raise InvalidRequest("model is required")
    try:
        parse_name(name)
    except InvalidRequest:
        raise InvalidRequest(f"name {go_quote(asked)} is invalid") from None
    store = _store(request)

    def remove() -> tuple[str, Path | None]:
        found = store.resolve(name)
        return (found.display_shortest() if found else name), store.delete(name)

    try:
        stored_name, removed = await run_in_threadpool(remove)
    except NotFound:
        raise NotFound(f"model '{asked}' not found") from None
    # A deleted model leaves memory once its running requests end: its file, when no other
    # name shares it, else what runs under its name (another name using the weights keeps them).
    pool = services(request).pool
    if removed is not None:
        await pool.unload(removed)
    await pool.unload_name(stored_name)
    return Response(status_code=200)


async def blob_exists(request: Request) -> Response:
    digest = request.path_params["digest"]
    if not await run_in_threadpool(_store(request).has_blob, digest):
        raise NotFound(f"blob {go_quote(digest)} not found")
    return Response(status_code=200)


async def blob_upload(request: Request) -> Response:
    """Stream the body to a temp file while hashing; 201 when stored, 200 if it already was."""
    store = _store(request)
    digest = request.path_params["digest"]
    parse_digest(digest)
    if await run_in_threadpool(store.has_blob, digest):
        return Response(status_code=200)
    writer = await run_in_threadpool(store.blob_writer)
    try:
        pending = bytearray()
        async for chunk in request.stream():
            pending += chunk
            if len(pending) >= _UPLOAD_BATCH:
                await run_in_threadpool(writer.write, bytes(pending))
                pending.clear()
        await run_in_threadpool(writer.write, bytes(pending))
        await run_in_threadpool(writer.commit, digest)
    except ClientDisconnect:
        # Gone mid-upload (as ``read_json`` says of a body): nobody to answer, nothing went wrong here.
        raise RequestCanceled() from None
    finally:
        writer.abort()
    return Response(status_code=201)


async def create(request: Request) -> Response:
    body = await read_json(request, CreateStream)
    stream = decode(body, CreateStream).stream is not False
    req = CreateRequest.from_json(body)
    store = _store(request)
    settings = services(request).settings
    options = RegistryOptions.from_settings(settings, insecure=False)

    def pull(name: str, report: Report) -> object:
        return pull_model(store, name, report, options=options)

    def create(report: Report) -> object:
        return create_model(
            store,
            req,
            report,
            noprune=settings.noprune,
            pull=pull,
            check_template=_parsable_template,
            quantize=quantize_file,
        )

    return await progress_response(progress_events(create), stream=stream)


def _parsable_template(template: str) -> None:
    """As Ollama's create: a template Go cannot parse is refused (400 ``template error: ...``)
    rather than stored in a model whose every chat would fail."""
    try:
        parse_ollama(template)
    except TemplateError as e:
        raise InvalidRequest(f"template error: {e.message}") from None


async def pull(request: Request) -> Response:
    req = decode(await read_json(request, PullRequest), PullRequest)
    name, stream = model_reference(req.model_name), req.stream is not False
    options = _registry_options(request, req)
    parse_name(name)
    store = _store(request)
    events = progress_events(lambda report: pull_model(store, name, report, options=options))
    return await progress_response(events, stream=stream)


async def push(request: Request) -> Response:
    req = decode(await read_json(request, PushRequest), PushRequest)
    name, stream = req.model_name, req.stream is not False
    options = _registry_options(request, req)
    if not name:
        raise InvalidRequest("model is required")
    store = _store(request)
    events = progress_events(lambda report: push_model(store, name, report, options=options))
    return await progress_response(events, stream=stream)


def _registry_options(request: Request, req: PullRequest | PushRequest) -> RegistryOptions:
    """``insecure`` (plain HTTP to a registry named in the model name) and the server's registry settings."""
    return RegistryOptions.from_settings(services(request).settings, insecure=bool(req.insecure))
