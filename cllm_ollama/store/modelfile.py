"""Modelfiles: parse Ollama's format and turn it into an ``/api/create`` body, as the ollama CLI does.

Instructions: FROM, PARAMETER, TEMPLATE, SYSTEM, LICENSE, MESSAGE, ADAPTER, DRAFT, RENDERER, PARSER,
REQUIRES (case-insensitive);
values may be bare, "quoted" or \"\"\"triple-quoted\"\"\" (multi-line); ``#`` starts a comment line.
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..convert.hf import Checkpoint, ImportRefused, lora
from ..convert.hf.sentence import module_folders
from ..errors import InvalidRequest
from ..gostrconv import PARSE_BOOL_FALSE, PARSE_BOOL_TRUE
from .gguf_info import shard_files

_INSTRUCTIONS = (
    "from",
    "parameter",
    "template",
    "system",
    "license",
    "message",
    "adapter",
    "draft",
    "renderer",
    "parser",
    "requires",
)
_ROLES = ("system", "user", "assistant")
# A FROM folder's weights, as the ollama CLI looks for them (``filesForModel``): the first pattern
# that matches (a pattern with a folder part looks one folder down, as Go's ``filepath.Glob``).
_WEIGHTS = (("model*.safetensors", "*/model*.safetensors"), ("consolidated*.safetensors",), ("*.gguf",))
# ... and what goes with them: configuration, tokenizer, chat template.
_BESIDE = ("*.json", "*/*.json", "chat_template.jinja", "tokenizer.model", "*/tokenizer.model")
_PICKLES = ("pytorch_model*.bin", "consolidated*.pth")
_INT_PARAMS = {
    "num_keep", "seed", "num_predict", "top_k", "repeat_last_n", "num_ctx", "num_batch", "num_gpu",
    "main_gpu", "num_thread", "mirostat", "draft_num_predict",
    "num_parallel",  # cllm's own: this model's slots (Ollama has only OLLAMA_NUM_PARALLEL)
    "dry_allowed_length", "dry_penalty_last_n",  # llama-server's DRY, as options
}  # fmt: skip
_FLOAT_PARAMS = {
    "top_p", "min_p", "typical_p", "temperature", "repeat_penalty", "presence_penalty",
    "frequency_penalty", "mirostat_tau", "mirostat_eta", "tfs_z",
    "dry_multiplier", "dry_base", "xtc_probability", "xtc_threshold",  # llama-server's DRY and XTC
}  # fmt: skip
_BOOL_PARAMS = {
    "use_mmap", "use_mlock", "numa", "low_vram", "f16_kv", "logits_all", "vocab_only", "penalize_newline",
    "deterministic",  # cllm's own: batch-invariant decoding for this model
}  # fmt: skip
_LIST_PARAMS = {"stop", "dry_sequence_breakers"}
_STRING_PARAMS = {"grammar"}  # GBNF, as ``options.grammar``


@dataclass
class Modelfile:
    from_: str | None = None  # the last FROM
    froms: list[str] = field(default_factory=list)  # every FROM, in order (a model and its projector)
    adapters: list[str] = field(default_factory=list)
    drafts: list[str] = field(default_factory=list)  # DRAFT: a speculative-decoding draft's GGUF
    parameters: dict[str, Any] = field(default_factory=dict)
    template: str | None = None
    system: str | None = None
    license: list[str] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)
    # Ollama's renderer and output parser by name (its ``model/renderers``, ``model/parsers``).
    renderer: str | None = None
    parser: str | None = None
    requires: str | None = None


def parse_parameter(name: str, value: str) -> Any:
    """Type a PARAMETER value as Ollama's ``FormatParams`` does (stop -> list, ints, floats, bools)."""
    key = name.lower()
    try:
        if key in _LIST_PARAMS:
            return [value]
        if key in _INT_PARAMS:
            return int(value)
        if key in _FLOAT_PARAMS:
            return float(value)
    except ValueError:
        kind = "int" if key in _INT_PARAMS else "float"
        raise InvalidRequest(f"invalid {kind} value [{value}]") from None
    if key in _STRING_PARAMS:
        return value
    if key in _BOOL_PARAMS:
        if value in PARSE_BOOL_TRUE | PARSE_BOOL_FALSE:
            return value in PARSE_BOOL_TRUE
        raise InvalidRequest(f"invalid bool value [{value}]")
    raise InvalidRequest(f"unknown parameter '{name}'")


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text.replace("\r\n", "\n")
        self.pos = 0

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def skip(self, chars: str) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in chars:
            self.pos += 1

    def rest_of_line(self) -> str:
        end = self.text.find("\n", self.pos)
        end = len(self.text) if end < 0 else end
        line, self.pos = self.text[self.pos : end], end
        return line

    def word(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and not self.text[self.pos].isspace():
            self.pos += 1
        return self.text[start : self.pos]

    def value(self) -> str:
        """A bare rest-of-line, a "quoted" string (\\" escapes) or a \"\"\"block\"\"\"."""
        self.skip(" \t")
        if self.text.startswith('"""', self.pos):
            return self._quoted('"""', escapes=False)
        if self.text.startswith('"', self.pos):
            return self._quoted('"', escapes=True)
        return self.rest_of_line().strip()

    def _quoted(self, quote: str, *, escapes: bool) -> str:
        """A quoted value. It ends as in Ollama's parser, at the first line end where the text so far
        ends with ``quote``, so a value may end with ``"`` (``\"\"\"Say "yes"\"\"\"\"``, as ``/api/show``
        writes it). With ``escapes`` (cllm's own), ``\\"`` and ``\\\\`` stand for their second character."""
        start = self.pos
        while True:
            end = self.text.find("\n", self.pos)
            end = len(self.text) if end < 0 else end
            quoted = self.text[start:end].rstrip(" \t")
            inner = quoted[len(quote) : len(quoted) - len(quote)]
            escaped = escapes and (len(inner) - len(inner.rstrip("\\"))) % 2 == 1  # the quote is a \"
            if len(quoted) >= 2 * len(quote) and quoted.endswith(quote) and not escaped:
                self.pos = end
                return re.sub(r'\\([\\"])', r"\1", inner) if escapes else inner
            if end == len(self.text):
                raise InvalidRequest(f"unterminated {quote} string in Modelfile")
            self.pos = end + 1


def parse_modelfile(text: str) -> Modelfile:
    """Parse Modelfile text; raise ``InvalidRequest`` with a one-line reason. A byte-order mark
    before it is skipped, as Ollama's parser skips it."""
    mf = Modelfile()
    sc = _Scanner(text.removeprefix("\ufeff"))
    while True:
        sc.skip(" \t\n")
        if sc.at_end():
            break
        if sc.text[sc.pos] == "#":
            sc.rest_of_line()
            continue
        instruction = sc.word().lower()
        if instruction not in _INSTRUCTIONS:
            raise InvalidRequest(
                'command must be one of "from", "license", "template", "system", "adapter", "draft", '
                '"renderer", "parser", "parameter", "message", or "requires"'
            )
        sc.skip(" \t")
        if instruction == "parameter":
            name = sc.word()
            if not name:
                raise InvalidRequest("missing parameter name in Modelfile")
            value = parse_parameter(name, sc.value())
            key = name.lower()
            if isinstance(value, list):
                mf.parameters[key] = [*mf.parameters.get(key, []), *value]
            else:
                mf.parameters[key] = value
        elif instruction == "message":
            role = sc.word().lower()
            if role not in _ROLES:
                raise InvalidRequest('message role must be one of "system", "user", or "assistant"')
            mf.messages.append({"role": role, "content": sc.value()})
        elif instruction == "license":
            mf.license.append(sc.value())
        elif instruction == "adapter":
            mf.adapters.append(sc.value())
        elif instruction == "draft":
            mf.drafts.append(sc.value())
        elif instruction == "from":
            mf.from_ = sc.value()
            mf.froms.append(mf.from_)
        else:
            setattr(mf, instruction, sc.value())
    if not mf.from_:
        raise InvalidRequest("no FROM line")
    return mf


def read_modelfile(path: Path) -> str:
    """A Modelfile's text decoded as Ollama's ``parser.ParseFile`` decodes it (``unicode.BOMOverride``):
    UTF-16 where a UTF-16 byte-order mark says so (Windows editors write one), else UTF-8 with
    bytes it cannot decode replaced rather than refused."""
    data = path.read_bytes()
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", errors="replace")  # the codec reads and drops the mark
    return data.decode("utf-8", errors="replace")


def local_path(reference: str, base_dir: Path) -> Path:
    """The path a FROM/ADAPTER value names: ``~`` expanded, relative to the Modelfile."""
    return base_dir / os.path.expanduser(reference)  # an absolute reference stays as it is


def _module_folders(folder: Path) -> set[str]:
    """The subfolders a sentence-transformers ``modules.json`` names (none where it is absent or unreadable)."""
    modules = folder / "modules.json"
    try:
        return module_folders(Checkpoint(folder.name, {"modules.json": modules} if modules.is_file() else {}))
    except (ImportRefused, OSError):
        return set()


def local_file(reference: str, base_dir: Path) -> Path | None:
    """The file a FROM/ADAPTER value names, if it exists."""
    path = local_path(reference, base_dir)
    return path if path.is_file() else None


def model_folder_files(folder: Path, reference: str) -> dict[str, Path]:
    """The files of a model folder the ollama CLI uploads (its ``filesForModel``), by their paths in
    it: the safetensors weights (or GGUF files) and the JSON, tokenizer and template files beside.
    A subfolder's weights go only where ``modules.json`` names the subfolder (EmbeddingGemma's
    ``2_Dense``): the ollama CLI also sends other formats' (gpt-oss's 13 GB ``original/``), which
    no converter reads."""
    found: list[Path] = []
    modules = _module_folders(folder)
    for patterns in _WEIGHTS:
        found = [p for pattern in patterns for p in sorted(folder.glob(pattern)) if p.is_file()]
        found = [p for p in found if p.parent == folder or p.parent.name in modules]
        if found:
            break
    else:
        if any(next(folder.glob(pattern), None) for pattern in _PICKLES):
            raise InvalidRequest(f"FROM {reference}: PyTorch checkpoints are not supported: save it as safetensors")
        raise InvalidRequest(f"FROM {reference}: no Modelfile or safetensors files found")
    if found[0].suffix != ".gguf":
        found += [p for pattern in _BESIDE for p in sorted(folder.glob(pattern)) if p.is_file()]
    return {p.relative_to(folder).as_posix(): p for p in found}


def adapter_files(path: Path, reference: str) -> dict[str, Path]:
    """The files of an ADAPTER, by name: a GGUF; or a safetensors LoRA (PEFT's, MLX's) with its
    ``adapter_config.json``, named by its folder or by its weights file. Ollama's CLI finds neither
    in a PEFT folder nor the config beside a named file (ollama/ollama#13314); cllm's sends both."""
    folder = path if path.is_dir() else path.parent
    if path.is_dir():
        weights = [p for pattern in (*lora.WEIGHTS, "*.gguf") for p in sorted(folder.glob(pattern)) if p.is_file()]
    else:
        weights = [path]
    if not weights:
        raise InvalidRequest(f"ADAPTER {reference}: no adapter_model.safetensors, adapters.safetensors or GGUF found")
    if weights[0].suffix != ".safetensors":
        return {p.name: p for p in weights}
    config = folder / lora.CONFIG
    if not config.is_file():
        raise InvalidRequest(f"ADAPTER {reference}: no {lora.CONFIG} beside {weights[0].name}")
    return {p.name: p for p in weights if p.suffix == ".safetensors"} | {lora.CONFIG: config}


def create_body(
    name: str,
    mf: Modelfile,
    base_dir: Path,
    upload: Callable[[Path], str],
    quantize: str = "",
    draft_quantize: str = "",
) -> dict[str, Any]:
    """The ``/api/create`` body for ``mf``; ``upload`` puts a local file in the blob store, returns its
    digest. ``quantize``: the ``--quantize`` type, sent as ``quantize`` (as the ollama CLI does);
    ``draft_quantize``: ``--draft-quantize``'s, for the DRAFT model.

    Like the ollama CLI: a FROM that names an existing file joins ``files`` (a GGUF and its projector
    are two FROM lines), a folder its checkpoint's files (converted by the server), anything else is
    ``from``.
    """
    if draft_quantize and not mf.drafts:
        raise InvalidRequest("--draft-quantize requires a DRAFT model")
    body: dict[str, Any] = {"model": name}
    assert mf.from_ is not None
    files: dict[str, str] = {}
    for reference in mf.froms or [mf.from_]:
        path = local_file(reference, base_dir)
        if path is not None:  # one shard of a split model brings the others (as llama.cpp loads them)
            files |= {shard.name: upload(shard) for shard in shard_files(path)}
        elif (folder := local_path(reference, base_dir)).is_dir():  # a Hugging Face checkpoint
            files |= {name: upload(path) for name, path in model_folder_files(folder, reference).items()}
        elif Path(os.path.expanduser(reference)).suffix.lower() == ".gguf" or reference.startswith(("./", "/", "~")):
            raise InvalidRequest(f"no such file: {reference}")
        else:
            body["from"] = reference
    if files:
        body["files"] = files
    adapters: dict[str, str] = {}
    for reference in mf.adapters:
        adapter = local_path(reference, base_dir)
        if not adapter.exists():
            raise InvalidRequest(f"no such file: {reference}")
        adapters |= {name: upload(path) for name, path in adapter_files(adapter, reference).items()}
    if adapters:
        body["adapters"] = adapters
    if drafts := _draft_files(mf, base_dir, upload):
        body["draft_files"] = drafts
    optional = {
        "template": mf.template,
        "system": mf.system,
        "license": mf.license or None,
        "parameters": mf.parameters or None,
        "messages": mf.messages or None,
        "renderer": mf.renderer,
        "parser": mf.parser,
        "requires": mf.requires,
        "quantize": quantize or None,
        "draft_quantize": draft_quantize or None,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    return body


def _draft_files(mf: Modelfile, base_dir: Path, upload: Callable[[Path], str]) -> dict[str, str]:
    """The DRAFT lines' files, uploaded, as the ollama CLI sends them (``draft_files``): a GGUF, or a
    folder's model files; never the FROM's own file (Ollama's ``rejectMatchingLocalPath``)."""
    froms = {path.resolve() for reference in mf.froms if (path := local_path(reference, base_dir)).exists()}
    drafts: dict[str, str] = {}
    for reference in mf.drafts:
        path = local_path(reference, base_dir)
        if not path.exists():
            raise InvalidRequest(f"no such file: {reference}")
        if path.resolve() in froms:
            raise InvalidRequest(f"DRAFT must not reference the same local path as FROM: {path}")
        if path.is_dir():
            drafts |= {name: upload(file) for name, file in model_folder_files(path, reference).items()}
        else:
            drafts[path.name] = upload(path)
    return drafts
