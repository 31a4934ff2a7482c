"""``/api/create``: a model from uploaded GGUF blobs or an existing model, plus template/system/params layers.

Blocking; statuses go to a ``report`` callback as Ollama's progress objects.
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..convert import hf
from ..convert.framework import LayoutRefused
from ..errors import CllmError, EngineError, InvalidRequest
from ..gguf_header import GGUFError
from ..model_families import ARCH_STOPS
from . import manifests as mt
from .adapters import check_adapter, check_adapter_names
from .blobs import parse_digest
from .conversion import adapt_layers
from .gguf_info import SHARD_NAME, GGUFInfo, gguf_info, is_gguf, shard_name
from .manifests import Layer
from .names import ModelName, model_reference, parse_name
from .store import Claim, ModelRecord, ModelStore

log = logging.getLogger("cllm.store")
Report = Callable[[dict[str, Any]], None]
# Writes a model file quantized to a type (llama.cpp's name) with progress (tensors done, of):
# ``engine.quantizer.quantize_file``, handed in by the API and the CLI (the store loads no llama.cpp).
Quantize = Callable[[Path, Path, str, Callable[[int, int], None]], None]
# The fields of Ollama's ``api.Message`` a stored message keeps (besides ``role`` and ``content``).
_MESSAGE_FIELDS = ("thinking", "tool_calls", "tool_name", "tool_call_id")

# Ollama's ``ggml.ParseFileType``: the types ``create --quantize`` takes (Q4_K is Q4_K_M), ...
_QUANTIZE_TYPES = {t: t for t in ("F32", "F16", "BF16", "Q8_0", "Q4_K_S", "Q4_K_M")} | {"Q4_K": "Q4_K_M"}
# ... those its error names (BF16 left out, as in Ollama's list), ...
_NAMED_TYPES = ("F32", "F16", "Q4_K_S", "Q4_K_M", "Q8_0")
# ... and the models it quantizes.
_QUANTIZABLE = ("F16", "BF16", "F32")
# The digest Ollama's quantize progress carries (no layer has one yet).
_QUANTIZE_DIGEST = "0" * 19


@dataclass(frozen=True)
class CreateRequest:
    """The modern ``/api/create`` body, validated (Modelfiles are turned into this by the client)."""

    model: ModelName
    from_: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    adapters: dict[str, str] = field(default_factory=dict)
    template: str | None = None
    system: str | None = None
    license: list[str] | None = None
    parameters: dict[str, Any] | None = None
    messages: list[dict[str, Any]] | None = None
    # Ollama's renderer and parser names, kept in the config as Ollama keeps them.
    renderer: str | None = None
    parser: str | None = None
    requires: str | None = None
    quantize: str = ""  # upper case, as given (``quantize``, or the older ``quantization``)
    # A Modelfile's DRAFT (``draft_files``) and ``--draft-quantize``'s type, upper case.
    draft_files: dict[str, str] = field(default_factory=dict)
    draft_quantize: str = ""

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> CreateRequest:
        draft_files = _digest_map(body.get("draft_files"), "draft_files")
        draft_quantize = (_optional(body, "draft_quantize", str) or "").upper()
        if draft_quantize and not draft_files:  # checked before the name, as in Ollama
            raise InvalidRequest("--draft-quantize requires a DRAFT model")
        model = parse_name(body.get("model") or body.get("name") or "")
        license_ = body.get("license")
        return cls(
            model=model,
            from_=model_reference(_optional(body, "from", str) or "") or None,
            files=_digest_map(body.get("files"), "files"),
            adapters=_digest_map(body.get("adapters"), "adapters"),
            template=_optional(body, "template", str),
            system=_optional(body, "system", str),
            license=[license_] if isinstance(license_, str) else _optional(body, "license", list),
            parameters=_parameters(body),
            messages=_messages(body.get("messages")),
            renderer=_optional(body, "renderer", str) or None,
            parser=_optional(body, "parser", str) or None,
            requires=_optional(body, "requires", str) or None,
            quantize=(_optional(body, "quantize", str) or _optional(body, "quantization", str) or "").upper(),
            draft_files=draft_files,
            draft_quantize=draft_quantize,
        )


def _optional(body: dict[str, Any], key: str, kind: type) -> Any:
    value = body.get(key)
    if value is not None and not isinstance(value, kind):
        raise InvalidRequest(f"invalid value for '{key}': expected {kind.__name__}")
    return value


def _parameters(body: dict[str, Any]) -> dict[str, Any] | None:
    """Stored as given, as Ollama stores them; only cllm's own ``num_parallel`` is checked here,
    since no Ollama client sends it and a bad one would fail every later load of the model."""
    parameters = _optional(body, "parameters", dict)
    n = (parameters or {}).get("num_parallel")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int | float) or not float(n).is_integer()):
        raise InvalidRequest('option "num_parallel" must be of type integer')
    return parameters


def _digest_map(value: Any, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise InvalidRequest(f"invalid value for '{key}': expected an object of file name to digest")
    return dict(value)


def _messages(value: Any) -> list[dict[str, Any]] | None:
    """The messages as Ollama's create stores them (``api.Message``, whatever its role): the role
    lower-cased, the other fields Go decodes kept (tool calls, thinking), so that they render as a
    chat's own messages do. Images are refused: a chat would not read them from the model."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidRequest("invalid value for 'messages': expected a list")
    out = []
    for message in value:
        if not isinstance(message, dict):
            raise InvalidRequest("invalid value for 'messages': expected a list of objects")
        for key in ("role", "content", "thinking", "tool_name", "tool_call_id"):
            if not isinstance(message.get(key) or "", str):
                raise InvalidRequest(f"invalid value for 'messages': '{key}' must be a string")
        calls = message.get("tool_calls")
        if calls is not None and not (isinstance(calls, list) and all(isinstance(call, dict) for call in calls)):
            raise InvalidRequest("invalid value for 'messages': 'tool_calls' must be a list of objects")
        if message.get("images"):
            raise InvalidRequest("images in a model's messages are not supported")
        kept = {"role": (message.get("role") or "").lower(), "content": message.get("content") or ""}
        out.append(kept | {key: message[key] for key in _MESSAGE_FIELDS if message.get(key)})
    return out


def create_model(
    store: ModelStore,
    req: CreateRequest,
    report: Report,
    *,
    noprune: bool = False,
    pull: Callable[[str, Report], object] | None = None,
    check_template: Callable[[str], None] | None = None,
    quantize: Quantize | None = None,
) -> ModelRecord:
    """Assemble the layers, write the manifest last; raise ``InvalidRequest``/``NotFound`` on bad input.

    A ``from`` model the store lacks is pulled first with ``pull`` where there is one (its progress
    in the same stream), as Ollama's create does. Every blob used is pinned until the manifest
    names it: a delete meanwhile cannot take it. A model the new one replaces leaves the blobs
    nothing else uses, which go (as in Ollama's create), as does an upload rewritten from Ollama's
    converter's layout (as a pull's download is), unless ``noprune`` (OLLAMA_NOPRUNE).
    ``check_template`` raises on a ``template`` that cannot be used (the store knows no template
    language), before any layer of it is written. ``quantize`` writes the model layer quantized to
    the request's ``quantize`` type (none: such a request fails).
    """
    if pull is not None and req.from_ and not req.files and store.resolve(parse_name(req.from_)) is None:
        pull(req.from_, report)
    with store.claim() as claim:
        old = store.digests_of(req.model)
        record, replaced = _create(store, claim, req, report, check_template, quantize)
    store.remove_unused_layers(old, record, noprune=noprune, replaced=replaced)
    for uploads in (req.files, req.adapters):
        if hf.is_checkpoint(list(uploads)):
            store.discard_unused(uploads.values())  # converted: the uploads are no model's layers
    return record


def _create(
    store: ModelStore,
    claim: Claim,
    req: CreateRequest,
    report: Report,
    check_template: Callable[[str], None] | None,
    quantize: Quantize | None,
) -> tuple[ModelRecord, list[str]]:
    """The model written, and the uploads it rewrote into other blobs (to go once it is written)."""
    converted = hf.is_checkpoint(list(req.files))
    replaced: list[str] = []
    base_params: dict[str, Any] = {}
    named = (req.renderer, req.parser)  # the renderer and parser the create names, or its base model has
    if converted:
        layers, config = _from_checkpoint(store, claim, req.model, req.files, report)
    elif req.files:
        layers, config, replaced = _from_files(store, claim, req.files, report, quantize)
    elif req.from_:
        base = claim.record(req.from_)
        # Each base layer names the model it came from, as in Ollama's parseFromModel (``parent_model``).
        layers = [dataclasses.replace(layer, from_=base.short_name) for layer in base.manifest.layers]
        config, base_params = dict(base.config), base.params
        named = (req.renderer or base.renderer, req.parser or base.parser)
    else:
        raise InvalidRequest("neither 'from' or 'files' was specified")
    reused = set() if converted else {layer.digest for layer in layers}  # converted or quantized now: new
    if req.quantize:
        layers, config = _quantized(store, claim, layers, config, req.quantize, quantize, report)
    config = _named(config, req)

    if req.adapters:
        # Added to the base's (a model made FROM an adapted one keeps its adapter), as in Ollama.
        for layer in _adapter_layers(store, claim, req.adapters, layers, report):
            if layer.digest not in {kept.digest for kept in layers}:
                layers.append(layer)
    if req.draft_files:
        # In place of the base's (Ollama reads the last draft layer; one is kept here).
        draft, architecture = _draft_layer(store, claim, req, quantize, report)
        layers[:] = [*(layer for layer in layers if layer.media_type != mt.DRAFT), draft]
        config = {**config, "draft": {"model_format": "gguf", "architecture": architecture}}
        log.warning(
            "%s has a DRAFT (%s): it is stored and pushed with it; cllm decodes without it",
            req.model.display_shortest(),
            architecture,
        )

    def add(data: bytes, media_type: str) -> None:
        layer, existed = claim.add_layer(data, media_type)
        if all(kept.digest != layer.digest or kept.media_type != media_type for kept in layers):
            layers.append(layer)
        if existed:
            reused.add(layer.digest)

    def replace(media_type: str, blobs: list[bytes]) -> None:
        layers[:] = [layer for layer in layers if layer.media_type != media_type]
        for data in blobs:
            add(data, media_type)

    # As Ollama's createModel: an empty template, system or messages keeps the base model's; a
    # license is added to the base's, not put in its place.
    if req.template:
        if check_template is not None:
            check_template(req.template)
        replace(mt.TEMPLATE, [req.template.encode()])
    if req.system:
        replace(mt.SYSTEM, [req.system.encode()])
    for text in req.license or ():
        if text:
            add(str(text).encode(), mt.LICENSE)
    if req.messages:
        replace(mt.MESSAGES, [orjson.dumps(req.messages)])
    parameters = _with_arch_stops(req.parameters, str(config.get("model_family")), named)
    if parameters:
        # New values win; the base model's other parameters are kept, as in Ollama.
        replace(mt.PARAMS, [orjson.dumps({**base_params, **parameters})])

    for layer in layers:
        verb = "using existing" if layer.digest in reused else "creating new"
        report({"status": f"{verb} layer {layer.digest}"})
    report({"status": "writing manifest"})
    record = store.write_manifest(req.model, config, layers)
    report({"status": "success"})
    return record, replaced


def _with_arch_stops(
    parameters: dict[str, Any] | None, architecture: str, named: tuple[str | None, str | None]
) -> dict[str, Any] | None:
    """The create's parameters, with the stop words Ollama's create adds where it names an
    architecture's renderer and parser (Gemma 4's ``<turn|>``): unless the create, or the model it
    is made from, names both (``named``), or the create gives its own stop words."""
    stops = ARCH_STOPS.get(architecture)
    given = parameters or {}
    if stops is None or all(named) or "stop" in given:
        return parameters
    return {**given, "stop": list(stops)}


def _quantized(
    store: ModelStore,
    claim: Claim,
    layers: list[Layer],
    config: dict[str, Any],
    wanted: str,
    quantize: Quantize | None,
    report: Report,
) -> tuple[list[Layer], dict[str, Any]]:
    """The layers with the model's quantized to ``wanted``, and the config that says so, as Ollama's
    create does: only an F16, BF16 or F32 model is quantized (to its own type, nothing is done),
    with Ollama's progress (``quantizing F16 model to Q4_K_M``, then ``verifying conversion``).
    A level or a model it cannot quantize gets Ollama's words after the stream's first status, as
    there, but as the client's error (400) where Ollama answers 500."""
    want = _quantize_type(wanted)
    at, layer = next((i, layer) for i, layer in enumerate(layers) if layer.media_type == mt.MODEL)
    have = gguf_info(store.blob_path(layer.digest)).quantization_level
    if have not in _QUANTIZABLE:
        raise InvalidRequest("quantization is only supported for F16, BF16 and F32 models")
    if have == want:
        return layers, config
    quantized, info = _quantize_layer(store, claim, layer, have, want, quantize, report)
    return [*layers[:at], quantized, *layers[at + 1 :]], {**config, **mt.model_config(info, kept=config)}


def _quantize_type(wanted: str) -> str:
    """The llama.cpp type a ``quantize`` (or ``draft_quantize``) names; Ollama's refusal otherwise."""
    want = _QUANTIZE_TYPES.get(wanted)
    if want is None:
        raise InvalidRequest(f"unsupported quantization type {wanted} - supported types are {', '.join(_NAMED_TYPES)}")
    return want


def _quantize_layer(
    store: ModelStore, claim: Claim, layer: Layer, have: str, want: str, quantize: Quantize | None, report: Report
) -> tuple[Layer, GGUFInfo]:
    """``layer``'s GGUF quantized from ``have`` to ``want`` into a new layer of its media type."""
    if quantize is None:
        raise CllmError("quantization is not available here")
    progress = _progress(report, f"quantizing {have} model to {want}", layer.size)
    progress(0, 1)
    with store.scratch_file("quantize") as out:
        quantize(store.blob_path(layer.digest), out, want, progress)
        progress(1, 1)
        report({"status": "verifying conversion"})
        try:
            info = gguf_info(out)
        except GGUFError as exc:
            raise CllmError(f"quantizing the model to {want} wrote no model: {exc}") from exc
        return claim.adopt_file(out, layer.media_type), info


def _progress(report: Report, status: str, size: int) -> Callable[[int, int], None]:
    """A quantize's progress (tensors done, of) as Ollama's: ``status`` with the bytes of ``size``
    done so far, under the digest its quantize progress carries (no layer has one yet)."""

    def progress(done: int, total: int) -> None:
        completed = size * done // max(total, 1)
        report({"status": status, "digest": _QUANTIZE_DIGEST, "total": size, "completed": completed})

    return progress


def _named(config: dict[str, Any], req: CreateRequest) -> dict[str, Any]:
    """The config with the request's renderer, parser and required version (new values win, the
    base model's are kept, as in Ollama)."""
    named = {"renderer": req.renderer, "parser": req.parser, "requires": req.requires}
    return {**config, **{k: v for k, v in named.items() if v}}


def _blob_layer(store: ModelStore, claim: Claim, digest: str, media_type: str) -> Layer:
    hex_digest = parse_digest(digest)
    if not claim.existing(digest):
        raise InvalidRequest(f'blob "{digest}" not found: upload it with POST /api/blobs/{digest}')
    return Layer(media_type, f"sha256:{hex_digest}", store.blob_path(digest).stat().st_size)


def _gguf_upload(store: ModelStore, filename: str, digest: str, *, verbose: bool = False) -> GGUFInfo:
    """The header of an uploaded GGUF; a 400 for anything else, whose blob is then removed (no
    create can use it, so a copy of, say, /etc/passwd is not left behind)."""
    path = store.blob_path(digest)
    try:
        if not is_gguf(path):
            raise InvalidRequest(f"{filename}: invalid file magic: only GGUF files can be imported")
        try:
            return gguf_info(path, verbose=verbose)
        except GGUFError as exc:
            raise InvalidRequest(f"{filename}: {exc}") from exc
    except InvalidRequest:
        store.discard_unused([digest])
        raise


def _adapter_layers(
    store: ModelStore, claim: Claim, adapters: dict[str, str], layers: list[Layer], report: Report
) -> list[Layer]:
    """The request's adapter as an ``adapter`` layer, checked against the base model in ``layers``:
    one GGUF, or a safetensors adapter's files converted ("converting adapter", as Ollama's create)."""
    base_layer = next(layer for layer in layers if layer.media_type == mt.MODEL)
    base = gguf_info(store.blob_path(base_layer.digest), verbose=True)
    if hf.is_checkpoint(list(adapters)):
        return [_converted_adapter(store, claim, adapters, base, report)]
    check_adapter_names(adapters)
    out = []
    for filename, digest in adapters.items():
        layer = _blob_layer(store, claim, digest, mt.ADAPTER)
        check_adapter(filename, _gguf_upload(store, filename, digest, verbose=True), base)
        out.append(layer)
    return out


def _draft_layer(
    store: ModelStore, claim: Claim, req: CreateRequest, quantize: Quantize | None, report: Report
) -> tuple[Layer, str]:
    """The request's DRAFT as a ``draft`` layer and its architecture: one GGUF (an MTP head or a
    DFlash drafter, for Ollama's llama-server runner), quantized where ``draft_quantize`` asks, as
    Ollama's create does. A safetensors draft, which Ollama converts (Qwen 3.5's MTP head), is
    refused: cllm does not decode with a draft, so it keeps only what it can store as given."""
    if hf.is_checkpoint(list(req.draft_files)):
        raise InvalidRequest("DRAFT from safetensors files is not supported here: give the draft model as a GGUF file")
    if len(req.draft_files) != 1:
        raise InvalidRequest(f"expected one GGUF draft file, got {len(req.draft_files)}")
    ((filename, digest),) = req.draft_files.items()
    layer = _blob_layer(store, claim, digest, mt.DRAFT)
    info = _gguf_upload(store, filename, digest)
    if req.draft_quantize:
        want, have = _quantize_type(req.draft_quantize), info.quantization_level
        if have not in _QUANTIZABLE:
            raise InvalidRequest(f"draft quantization requires an unquantized draft model, got {have}")
        if have != want:
            layer, info = _quantize_layer(store, claim, layer, have, want, quantize, report)
    return layer, info.architecture


def _is_projector(info: GGUFInfo) -> bool:
    """Ollama's test (server/create.go ``isProjectorGGUF``): a GGUF that says it is one, a vision
    tower without a text model, or a CLIP file with an encoder and no text blocks."""
    kv, arch = info.model_info, info.architecture
    if kv.get("general.type") in ("projector", "mmproj"):
        return True
    if not kv.get(f"{arch}.block_count") and (kv.get(f"{arch}.vision.block_count") or 0) > 0:
        return True
    has_encoder = kv.get("clip.has_vision_encoder") or kv.get("clip.has_audio_encoder")
    return arch == "clip" and not kv.get("clip.block_count") and bool(has_encoder)


def _from_files(
    store: ModelStore, claim: Claim, files: dict[str, str], report: Report, quantize: Quantize | None
) -> tuple[list[Layer], dict[str, Any], list[str]]:
    """One model GGUF (or the shards of one, merged: ``_merged``) and optional projector GGUFs
    from uploaded blobs; config from the model's header; the uploads rewritten (from Ollama's
    layout, or merged), which the model no longer needs."""
    report({"status": "parsing GGUF"})
    models: list[tuple[Layer, GGUFInfo]] = []
    projectors: list[Layer] = []
    shards: dict[tuple[str, int], list[tuple[int, Layer]]] = {}  # (name, shards) -> each (index, upload)
    for filename, digest in sorted(files.items()):
        layer = _blob_layer(store, claim, digest, mt.MODEL)
        info = _gguf_upload(store, filename, digest)
        if info.problems:
            raise InvalidRequest(f"{filename}: llama.cpp cannot load this model: {'; '.join(info.problems)}")
        if (shard := _shard(filename, info)) is not None:
            key, index = shard
            shards.setdefault(key, []).append((index, layer))
        elif _is_projector(info):
            projectors.append(Layer(mt.PROJECTOR, layer.digest, layer.size))
        else:
            models.append((layer, info))
    if len(models) + len(shards) != 1:  # before any merge: shards are copied out whole
        raise InvalidRequest(f"expected one GGUF model file, got {len(models) + len(shards)}")
    models += [_merged(store, claim, count, parts, quantize, report) for (_, count), parts in shards.items()]
    ((model_layer, info),) = models
    shard_uploads = [layer.digest for parts in shards.values() for _, layer in parts]
    layers = [model_layer, *projectors]
    try:  # a GGUF laid out by Ollama's converter: rewritten for llama.cpp now, or refused
        adapted = adapt_layers(store, claim, layers, report)
    except LayoutRefused as exc:
        raise InvalidRequest(str(exc)) from exc
    if adapted is None:
        return layers, mt.model_config(info), shard_uploads
    return adapted.layers, mt.model_config(adapted.model), adapted.replaced + shard_uploads


def _shard(filename: str, info: GGUFInfo) -> tuple[tuple[str, int], int] | None:
    """Where an upload is one shard of a split model (``split.count`` above 1): its model's key
    (its name and shard count) and its index, checked as Ollama's ``splitGGUFGroupKey`` checks
    them; None for a whole file."""
    count = info.model_info.get("split.count")
    if not isinstance(count, int) or count <= 1:
        return None
    name = SHARD_NAME.match(Path(filename).name)
    if name is None:
        raise InvalidRequest(f'split GGUF "{filename}" must use llama.cpp split filename pattern')
    index, named_count = int(name[2]) - 1, int(name[3])
    if named_count != count:
        raise InvalidRequest(
            f'split GGUF "{filename}" filename count {named_count} does not match metadata count {count}'
        )
    number = info.model_info.get("split.no")
    if not isinstance(number, int):
        raise InvalidRequest(f'split GGUF "{filename}" is missing split.no metadata')
    if number != index:
        raise InvalidRequest(f'split GGUF "{filename}" filename index {index} does not match metadata index {number}')
    return (name[1], count), index


def _merged(
    store: ModelStore,
    claim: Claim,
    count: int,
    parts: list[tuple[int, Layer]],
    quantize: Quantize | None,
    report: Report,
) -> tuple[Layer, GGUFInfo]:
    """A split model's shards merged into one GGUF, as Ollama's create merges them: llama.cpp's
    loader reads the shards from their names (linked in a folder of their own) and a COPY
    quantize writes them as one file ("validating GGUF model", as Ollama's progress says)."""
    indexes = [index for index, _ in parts]
    if len(set(indexes)) != len(indexes):
        raise InvalidRequest("split GGUF has duplicate shard index")
    if missing := sorted(set(range(count)) - set(indexes)):
        raise InvalidRequest(f"split GGUF is missing shard {missing[0]}")
    if quantize is None:
        raise CllmError("merging a split GGUF is not available here")
    progress = _progress(report, "validating GGUF model", sum(layer.size for _, layer in parts))
    with tempfile.TemporaryDirectory(prefix="cllm-split-") as folder, store.scratch_file("merge") as out:
        in_order = sorted(parts, key=lambda part: part[0])
        names = [Path(folder, shard_name("model", index, count)) for index, _ in in_order]
        for link, (_, layer) in zip(names, in_order, strict=True):
            link.symlink_to(store.blob_path(layer.digest))
        progress(0, 1)
        try:
            quantize(names[0], out, "COPY", progress)
        except EngineError as exc:  # shards llama.cpp cannot read together: the upload's fault
            raise InvalidRequest(f"split GGUF could not be merged: {exc}") from exc
        progress(1, 1)
        try:
            info = gguf_info(out)
        except GGUFError as exc:
            raise CllmError(f"merging the split GGUF wrote no model: {exc}") from exc
        return claim.adopt_file(out, mt.MODEL), info


def _from_checkpoint(
    store: ModelStore, claim: Claim, name: ModelName, files: dict[str, str], report: Report
) -> tuple[list[Layer], dict[str, Any]]:
    """A Hugging Face checkpoint's uploaded files (safetensors, ``config.json``, ``tokenizer.json``...)
    converted to a GGUF model layer, and a projector layer for a model that sees, as Ollama's
    create converts them ("converting model")."""
    checkpoint = _uploaded(store, claim, name.model, files)
    report({"status": "converting model"})
    with store.scratch_file("convert") as out, store.scratch_file("convert") as projector:
        try:
            converted = hf.convert(checkpoint, out, projector)
        except hf.ImportRefused as exc:
            raise InvalidRequest(str(exc)) from exc
        for note in converted.notes:
            report({"status": note})
        info = gguf_info(out)
        if info.problems:
            raise InvalidRequest(f"llama.cpp cannot load the converted model: {'; '.join(info.problems)}")
        layers = [claim.adopt_file(out, mt.MODEL)]
        if converted.sees:
            layers.append(claim.adopt_file(projector, mt.PROJECTOR))
    return layers, mt.model_config(info)


def _converted_adapter(store: ModelStore, claim: Claim, files: dict[str, str], base: GGUFInfo, report: Report) -> Layer:
    """A safetensors LoRA's uploaded files (PEFT's or MLX's, with ``adapter_config.json``) converted
    to one GGUF adapter layer for ``base``, checked against it as an uploaded GGUF adapter is."""
    adapter = _uploaded(store, claim, "adapter", files)
    report({"status": "converting adapter"})
    with store.scratch_file("convert") as out:
        try:
            for note in hf.convert_lora(adapter, base, out):
                report({"status": note})
        except hf.ImportRefused as exc:
            raise InvalidRequest(str(exc)) from exc
        check_adapter("the converted adapter", gguf_info(out, verbose=True), base)
        return claim.adopt_file(out, mt.ADAPTER)


def _uploaded(store: ModelStore, claim: Claim, name: str, files: dict[str, str]) -> hf.Checkpoint:
    """Uploaded files as a checkpoint to convert, each blob there and pinned."""
    paths = {}
    for filename, digest in files.items():
        _blob_layer(store, claim, digest, mt.MODEL)
        paths[filename] = store.blob_path(digest)
    return hf.Checkpoint(name, paths)


def import_gguf(
    store: ModelStore,
    name: str,
    path: Path,
    *,
    parameters: dict[str, Any] | None = None,
    system: str | None = None,
) -> ModelRecord:
    """A local GGUF file as a model: what ``cllm create NAME`` does with ``FROM file.gguf``."""
    with open(path, "rb") as f:
        digest = store.write_blob_from(f)
    req = CreateRequest(model=parse_name(name), files={path.name: digest}, parameters=parameters, system=system)
    return create_model(store, req, lambda status: None)
