"""Modelfile parsing and model creation from GGUF blobs or existing models."""

from __future__ import annotations

import codecs
import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import pytest

from cllm_ollama.errors import CllmError, InvalidRequest, NotFound
from cllm_ollama.model_families import renderer_in_use
from cllm_ollama.store import manifests as mt
from cllm_ollama.store.create import CreateRequest, create_model
from cllm_ollama.store.modelfile import create_body, parse_modelfile, parse_parameter, read_modelfile
from cllm_ollama.store.names import parse_name
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.gemma4_ggufs import write_gemma4_text
from cllm_ollama.testing.ggufs import write_qwen3

MODELFILE = '''
# a comment line
FROM ./tiny.gguf
parameter stop "<|im_end|>"
PARAMETER stop <|im_start|>
PARAMETER temperature 0.6
PARAMETER num_ctx 8192
PARAMETER use_mmap false
SYSTEM """You are
a helpful "assistant"."""
TEMPLATE {{ .Prompt }}
LICENSE "MIT"
LICENSE """line one
line two"""
MESSAGE user Hello there
MESSAGE assistant """Hi!
How can I help?"""
'''


def test_parse_modelfile() -> None:
    mf = parse_modelfile(MODELFILE)
    assert mf.from_ == "./tiny.gguf"
    assert mf.parameters == {
        "stop": ["<|im_end|>", "<|im_start|>"],
        "temperature": 0.6,
        "num_ctx": 8192,
        "use_mmap": False,
    }
    assert mf.system == 'You are\na helpful "assistant".'
    assert mf.template == "{{ .Prompt }}"
    assert mf.license == ["MIT", "line one\nline two"]
    assert mf.messages == [
        {"role": "user", "content": "Hello there"},
        {"role": "assistant", "content": "Hi!\nHow can I help?"},
    ]


@pytest.mark.parametrize(
    ("name", "value", "typed"),
    [
        ("stop", "x", ["x"]),
        ("top_k", "20", 20),
        ("top_p", "0.95", 0.95),
        ("seed", "-1", -1),
        ("penalize_newline", "True", True),
        ("numa", "0", False),
        ("repeat_penalty", "1", 1.0),
    ],
)
def test_parameter_types(name: str, value: str, typed: Any) -> None:
    assert parse_parameter(name, value) == typed and type(parse_parameter(name, value)) is type(typed)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("PARAMETER temperature 0.1", "no FROM line"),
        ("FROM m\nPARAMETER bogus 1", "unknown parameter 'bogus'"),
        ("FROM m\nPARAMETER top_k lots", r"invalid int value \[lots\]"),
        ("FROM m\nPARAMETER temperature hot", r"invalid float value \[hot\]"),
        ("FROM m\nPARAMETER use_mmap maybe", r"invalid bool value \[maybe\]"),
        ("FROM m\nMESSAGE robot hi", 'message role must be one of "system", "user", or "assistant"'),
        ('FROM m\nSYSTEM """never closed', "unterminated"),
        ('FROM m\nSYSTEM "open', "unterminated"),
        (
            "FROM m\nFROBNICATE x",
            'command must be one of "from", "license", "template", "system", "adapter", "draft", "renderer", '
            '"parser", "parameter", "message", or "requires"',
        ),
        ("FROM m\nPARAMETER draft_num_predict many", r"invalid int value \[many\]"),
    ],
)
def test_modelfile_errors(text: str, error: str) -> None:
    with pytest.raises(InvalidRequest, match=error):
        parse_modelfile(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        # A value that ends with a quote: closed by the line's last three, as Ollama's parser closes it.
        ('SYSTEM """Reply with "yes""""', 'Reply with "yes"'),
        ('SYSTEM """Say\n"yes""""  \nPARAMETER top_k 1', 'Say\n"yes"'),
        ('SYSTEM """a """ inside"""', 'a """ inside'),
        ('SYSTEM "Reply with "yes""', 'Reply with "yes"'),
        # cllm's escapes in "quoted" values stay: an escaped quote closes nothing.
        ('SYSTEM "a \\"b\\" c:\\\\"', 'a "b" c:\\'),
        ('SYSTEM "ends \\"\nthen"', 'ends "\nthen'),
    ],
)
def test_a_quoted_value_ends_where_ollamas_parser_ends_it(text: str, value: str) -> None:
    assert parse_modelfile(f"FROM m\n{text}\n").system == value


@pytest.mark.parametrize(
    "data",
    [
        codecs.BOM_UTF8 + b"FROM m\nSYSTEM caf\xc3\xa9\n",
        codecs.BOM_UTF16_LE + "FROM m\nSYSTEM café\n".encode("utf-16-le"),
        codecs.BOM_UTF16_BE + "FROM m\nSYSTEM café\n".encode("utf-16-be"),
    ],
)
def test_a_modelfile_with_a_byte_order_mark_is_read_as_ollama_reads_it(tmp_path: Path, data: bytes) -> None:
    """Ollama's ``parser.ParseFile`` (``unicode.BOMOverride``): a UTF-8 mark skipped, UTF-16 decoded."""
    (tmp_path / "Modelfile").write_bytes(data)
    mf = parse_modelfile(read_modelfile(tmp_path / "Modelfile"))
    assert (mf.from_, mf.system) == ("m", "café")


def test_create_body_uploads_local_files(tmp_path: Path) -> None:
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF...")
    uploaded: list[Path] = []

    def upload(path: Path) -> str:
        uploaded.append(path)
        return "sha256:" + "1" * 64

    body = create_body("mine", parse_modelfile(MODELFILE), tmp_path, upload)
    assert uploaded == [tmp_path / "tiny.gguf"]
    assert body["files"] == {"tiny.gguf": "sha256:" + "1" * 64} and "from" not in body
    assert body["parameters"]["stop"] == ["<|im_end|>", "<|im_start|>"]
    assert create_body("m2", parse_modelfile("FROM qwen3:0.6b"), tmp_path, upload) == {
        "model": "m2",
        "from": "qwen3:0.6b",
    }
    # --quantize goes as the ollama CLI sends it.
    assert create_body("m2", parse_modelfile("FROM m"), tmp_path, upload, "q4_K_M")["quantize"] == "q4_K_M"
    with pytest.raises(InvalidRequest, match="no such file"):
        create_body("m3", parse_modelfile("FROM ./missing.gguf"), tmp_path, upload)
    # A folder with no weights in it: the ollama CLI's words.
    (tmp_path / "hf-model").mkdir()
    with pytest.raises(InvalidRequest, match=r"^FROM \./hf-model: no Modelfile or safetensors files found$"):
        create_body("m4", parse_modelfile("FROM ./hf-model"), tmp_path, upload)


def test_create_body_uploads_an_adapter_gguf_or_its_safetensors_with_their_config(tmp_path: Path) -> None:
    """ADAPTER joins ``adapters``: a GGUF, or a safetensors adapter's weights and
    ``adapter_config.json``, named by its folder or its weights file (where Ollama's CLI fails)."""
    (tmp_path / "lora.gguf").write_bytes(b"GGUF...")
    peft, mlx, bare = tmp_path / "peft", tmp_path / "mlx", tmp_path / "bare"
    for folder, weights in (
        (peft, "adapter_model.safetensors"),
        (mlx, "adapters.safetensors"),
        (bare, "x.safetensors"),
    ):
        folder.mkdir()
        (folder / weights).write_bytes(b"weights")
        (folder / "adapter_config.json").write_text("{}")
    (peft / "README.md").write_text("not sent")

    def body(adapter: str) -> dict[str, Any]:
        mf = parse_modelfile(f"FROM qwen3\nADAPTER {adapter}")
        return create_body("m", mf, tmp_path, lambda p: "sha256:" + p.relative_to(tmp_path).as_posix())

    assert body("./lora.gguf") == {"model": "m", "from": "qwen3", "adapters": {"lora.gguf": "sha256:lora.gguf"}}
    peft_files = {"adapter_model.safetensors": "sha256:peft/adapter_model.safetensors"}
    peft_files["adapter_config.json"] = "sha256:peft/adapter_config.json"
    assert body("./peft")["adapters"] == peft_files
    assert body("./peft/adapter_model.safetensors")["adapters"] == peft_files
    assert set(body("./mlx")["adapters"]) == {"adapters.safetensors", "adapter_config.json"}
    with pytest.raises(InvalidRequest, match=r"^ADAPTER \./bare: no adapter_model\.safetensors, adapters\.safe"):
        body("./bare")
    (bare / "adapter_config.json").unlink()
    with pytest.raises(InvalidRequest, match=r"^ADAPTER \./bare/x\.safetensors: no adapter_config\.json beside"):
        body("./bare/x.safetensors")
    with pytest.raises(InvalidRequest, match=r"^no such file: \./gone$"):
        body("./gone")


def test_create_body_uploads_a_draft_as_the_ollama_cli_does(tmp_path: Path) -> None:
    """DRAFT joins ``draft_files`` (Ollama's speculative-decoding draft); --draft-quantize needs one;
    the FROM's own file is refused as a draft, as Ollama's parser refuses it."""
    (tmp_path / "base.gguf").write_bytes(b"GGUF...")
    (tmp_path / "mtp.gguf").write_bytes(b"GGUF...")

    def body(text: str, draft_quantize: str = "") -> dict[str, Any]:
        upload = lambda p: "sha256:" + p.name  # noqa: E731
        return create_body("m", parse_modelfile(text), tmp_path, upload, draft_quantize=draft_quantize)

    mf = parse_modelfile("FROM ./base.gguf\ndraft ./mtp.gguf\nPARAMETER draft_num_predict 3")
    assert mf.drafts == ["./mtp.gguf"] and mf.parameters == {"draft_num_predict": 3}
    got = body("FROM ./base.gguf\nDRAFT ./mtp.gguf", "q8_0")
    assert got == {
        "model": "m",
        "files": {"base.gguf": "sha256:base.gguf"},
        "draft_files": {"mtp.gguf": "sha256:mtp.gguf"},
        "draft_quantize": "q8_0",
    }
    with pytest.raises(InvalidRequest, match=r"^--draft-quantize requires a DRAFT model$"):
        body("FROM ./base.gguf", "q8_0")
    with pytest.raises(InvalidRequest, match=r"^no such file: \./gone\.gguf$"):
        body("FROM qwen3\nDRAFT ./gone.gguf")
    with pytest.raises(InvalidRequest, match=r"^DRAFT must not reference the same local path as FROM: "):
        body("FROM ./base.gguf\nDRAFT base.gguf")


def statuses(store: ModelStore, body: dict[str, Any]) -> list[str]:
    events: list[dict[str, Any]] = []
    create_model(store, CreateRequest.from_json(body), events.append)
    return [e["status"] for e in events]


def upload(store: ModelStore, path: Path) -> str:
    with open(path, "rb") as f:
        return store.write_blob_from(f)


def test_create_from_gguf(model_store: ModelStore, tiny_gguf: Path, tmp_path: Path) -> None:
    (tmp_path / "tiny.gguf").symlink_to(tiny_gguf)
    body = create_body("Mine:v1", parse_modelfile(MODELFILE), tmp_path, lambda p: upload(model_store, p))
    got = statuses(model_store, body)
    digest = body["files"]["tiny.gguf"]
    assert got[0] == "parsing GGUF"
    assert got[1] == f"using existing layer {digest}"
    assert all(s.startswith("creating new layer sha256:") for s in got[2:-2])
    assert got[-2:] == ["writing manifest", "success"]

    record = model_store.get("mine:V1")
    assert [layer.media_type for layer in record.manifest.layers] == [
        mt.MODEL,
        mt.TEMPLATE,
        mt.SYSTEM,
        mt.LICENSE,
        mt.LICENSE,
        mt.MESSAGES,
        mt.PARAMS,
    ]
    assert record.config == {
        "model_format": "gguf",
        "model_family": "qwen3",
        "model_families": ["qwen3"],
        "model_type": "99K",
        "file_type": "F32",
    }
    assert record.params["stop"] == ["<|im_end|>", "<|im_start|>"]
    assert record.template == "{{ .Prompt }}"
    assert record.license == ["MIT", "line one\nline two"]

    # Creating it again reuses every layer.
    again = statuses(model_store, body)
    assert all(s.startswith("using existing layer") for s in again[1:-2])


def test_create_from_existing_model(model_store: ModelStore, tiny_gguf: Path) -> None:
    digest = upload(model_store, tiny_gguf)
    statuses(
        model_store,
        {
            "model": "base",
            "files": {"t.gguf": digest},
            "system": "base system",
            "parameters": {"temperature": 0.6, "top_k": 20},
        },
    )
    got = statuses(
        model_store, {"model": "derived", "from": "BASE", "system": "new system", "parameters": {"temperature": 0.1}}
    )
    assert "parsing GGUF" not in got
    base, derived = model_store.get("base"), model_store.get("derived")
    assert derived.model_path == base.model_path
    assert derived.system == "new system" and base.system == "base system"
    assert derived.params == {"temperature": 0.1, "top_k": 20}
    assert derived.config == base.config
    assert sum(layer.media_type == mt.SYSTEM for layer in derived.manifest.layers) == 1


def test_a_model_made_from_another_names_it_in_its_layers(model_store: ModelStore, tiny_gguf: Path) -> None:
    """Ollama's parseFromModel: each layer taken from the base says so (``from``, the base's short
    name), read back and written again with the manifest; ``:local`` names the stored base."""
    statuses(model_store, {"model": "base", "files": {"t.gguf": upload(model_store, tiny_gguf)}})
    assert CreateRequest.from_json({"model": "x", "from": "base:local"}).from_ == "base"
    statuses(model_store, {"model": "kid", "from": "base:local", "system": "Be brief."})
    base, kid = model_store.get("base"), model_store.get("kid")
    assert (base.parent_model, kid.parent_model) == ("", "base:latest")
    froms = {layer.media_type: layer.from_ for layer in kid.manifest.layers}
    assert froms == {mt.MODEL: "base:latest", mt.SYSTEM: ""}
    assert mt.Manifest.from_bytes(kid.manifest.to_bytes()) == kid.manifest
    model_store.copy("kid", "twin")
    assert model_store.get("twin").parent_model == "base:latest"
    statuses(model_store, {"model": "grandkid", "from": "kid"})
    assert model_store.get("grandkid").parent_model == "kid:latest"


def test_messages_are_stored_as_ollama_stores_them(model_store: ModelStore, tiny_gguf: Path) -> None:
    """Ollama's create keeps each ``api.Message`` whole, whatever its role (lower-cased as Go decodes it)."""
    statuses(model_store, {"model": "base", "files": {"t.gguf": upload(model_store, tiny_gguf)}})
    call = {"function": {"name": "weather", "arguments": {"city": "Paris"}}}
    messages = [
        {"role": "User", "content": "Weather?", "extra": "dropped"},
        {"role": "assistant", "content": "", "thinking": "Ask the tool.", "tool_calls": [call]},
        {"role": "tool", "content": "sunny", "tool_name": "weather"},
    ]
    statuses(model_store, {"model": "m", "from": "base", "messages": messages})
    assert model_store.get("m").messages == [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "thinking": "Ask the tool.", "tool_calls": [call]},
        {"role": "tool", "content": "sunny", "tool_name": "weather"},
    ]


def test_renderer_and_parser_names_go_to_the_config(model_store: ModelStore, tiny_gguf: Path, tmp_path: Path) -> None:
    """Modelfile RENDERER/PARSER/REQUIRES become the create body's fields and the config's, as in
    Ollama; a model made from one keeps them unless it names others."""
    mf = parse_modelfile("FROM qwen3:0.6b\nRENDERER gemma4\nparser gemma4\nREQUIRES 0.20.0\n")
    body = create_body("m", mf, tmp_path, lambda path: "")
    assert (body["renderer"], body["parser"], body["requires"]) == ("gemma4", "gemma4", "0.20.0")
    statuses(model_store, {"model": "base", "files": {"t.gguf": upload(model_store, tiny_gguf)}, "parser": "lfm2"})
    statuses(model_store, {"model": "kept", "from": "base", "renderer": "lfm2"})
    statuses(model_store, {"model": "other", "from": "base", "parser": "olmo3"})
    assert model_store.get("base").parser == "lfm2" and model_store.get("base").renderer == ""
    assert (model_store.get("kept").parser, model_store.get("kept").renderer) == ("lfm2", "lfm2")
    assert model_store.get("other").parser == "olmo3"
    assert "tools" in model_store.get("base").capabilities


def test_a_gemma4_gets_ollamas_renderer_parser_and_stop(model_store: ModelStore, tmp_path: Path) -> None:
    """As Ollama's create: a Gemma 4 made without RENDERER and PARSER names Gemma 4's (``gemma4``,
    which a prompt resolves to its small or large renderer by the model's name, else its size) and
    stops at ``<turn|>``, unless the create gives stop words or names both itself."""
    digest = upload(model_store, write_gemma4_text(tmp_path / "g4.gguf"))
    statuses(model_store, {"model": "tuned", "files": {"g4.gguf": digest}, "parameters": {"temperature": 1}})
    tuned = model_store.get("tuned")
    assert (tuned.renderer, tuned.parser) == ("gemma4", "gemma4")
    assert tuned.params == {"temperature": 1, "stop": ["<turn|>"]}
    assert tuned.renderer_in_use == "gemma4-small"  # neither its name nor its size says large
    statuses(model_store, {"model": "gemma4:31b-tuned", "files": {"g4.gguf": digest}, "parameters": {"stop": ["x"]}})
    large = model_store.get("gemma4:31b-tuned")
    assert large.params == {"stop": ["x"]} and large.renderer_in_use == "gemma4-large"
    named = {"renderer": "gemma4-large", "parser": "gemma4"}
    statuses(model_store, {"model": "named", "files": {"g4.gguf": digest}, **named})
    assert model_store.get("named").params == {} and model_store.get("named").renderer_in_use == "gemma4-large"
    statuses(model_store, {"model": "derived", "from": "named", "system": "Be brief."})  # its base names both
    assert model_store.get("derived").params == {}


@pytest.mark.parametrize(
    ("renderer", "names", "size", "want"),
    [  # Ollama's TestResolveGemma4Renderer
        ("gemma4-small", (), "", "gemma4-small"),
        ("gemma4-large", (), "", "gemma4-large"),
        ("gemma4", ("gemma4:e4b",), "", "gemma4-small"),
        ("gemma4", ("gemma4:31b-cloud",), "", "gemma4-large"),
        ("gemma4", ("gemma-4-12b-it",), "", "gemma4-large"),
        ("gemma4", (), "4.3B", "gemma4-small"),
        ("gemma4", (), "25.2B", "gemma4-large"),
        ("gemma4", (), "12B", "gemma4-large"),
        ("gemma4", (), "", "gemma4-small"),
        ("gemma4", ("tuned", "registry.ollama.ai/library/tuned:latest"), "235K", "gemma4-small"),
        ("lfm2", ("lfm2:31b",), "31B", "lfm2"),
    ],
)
def test_gemma4_s_renderer_is_resolved_as_ollama_resolves_it(
    renderer: str, names: tuple[str, ...], size: str, want: str
) -> None:
    assert renderer_in_use(renderer, names, size) == want


@pytest.mark.parametrize(
    ("body", "error", "kind"),
    [
        ({"model": "../x", "from": "base"}, "^invalid model name$", InvalidRequest),
        ({"model": "x"}, "^neither 'from' or 'files' was specified$", InvalidRequest),
        ({"model": "x", "from": "nothing"}, "^model 'nothing:latest' not found$", NotFound),
        ({"model": "x", "files": {"a.gguf": "sha256:" + "2" * 64}}, "not found", InvalidRequest),
        ({"model": "x", "files": {"a.gguf": "md5:1"}}, "^invalid digest format$", InvalidRequest),
        ({"model": "x", "files": "a.gguf"}, "invalid value for 'files'", InvalidRequest),
        ({"model": "x", "from": "b", "messages": [{"role": 1}]}, "'role' must be a string", InvalidRequest),
        ({"model": "x", "from": "b", "messages": [{"images": ["aGk="]}]}, "images in a model's", InvalidRequest),
        ({"model": "x", "from": "b", "quantize": 4}, "^invalid value for 'quantize': expected str$", InvalidRequest),
    ],
)
def test_create_errors(model_store: ModelStore, body: dict[str, Any], error: str, kind: type) -> None:
    with pytest.raises(kind, match=error):
        statuses(model_store, body)


def test_create_rejects_a_file_that_is_not_gguf(model_store: ModelStore) -> None:
    digest = model_store.write_blob_from([b"PK\x03\x04 a zip, not a model"])
    with pytest.raises(InvalidRequest, match="invalid file magic"):
        statuses(model_store, {"model": "x", "files": {"model.gguf": digest}})
    assert model_store.list_models() == []


def test_modelfile_parameters_for_grammar_dry_and_xtc() -> None:
    mf = parse_modelfile(
        "FROM x\nPARAMETER dry_multiplier 0.8\nPARAMETER dry_allowed_length 3\n"
        'PARAMETER dry_sequence_breakers "."\nPARAMETER dry_sequence_breakers ":"\n'
        'PARAMETER xtc_probability 0.5\nPARAMETER grammar "root ::= [a-z]+"\n'
    )
    assert mf.parameters == {
        "dry_multiplier": 0.8,
        "dry_allowed_length": 3,
        "dry_sequence_breakers": [".", ":"],
        "xtc_probability": 0.5,
        "grammar": "root ::= [a-z]+",
    }
    with pytest.raises(InvalidRequest, match="invalid float value"):
        parse_parameter("dry_base", "high")


class FakeQuantizer:
    """``create_model``'s ``quantize``: writes a prepared GGUF of the wanted type (pure Python, no
    llama.cpp) with progress over three tensors, and says what it was asked."""

    def __init__(self, outputs: dict[str, Path]) -> None:
        self.outputs = outputs
        self.asked: list[tuple[Path, str]] = []

    def __call__(self, src: Path, dst: Path, ftype: str, progress: Callable[[int, int], None]) -> None:
        self.asked.append((src, ftype))
        for done in range(3):
            progress(done, 3)
        dst.write_bytes(self.outputs[ftype].read_bytes())


@pytest.fixture(scope="module")
def quantized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny model (F32, as ``tiny_gguf``) written as Q8_0: what the fake writes for either type
    (gguf's Python writer has no K-quants), so a config must say what the file is, not what was asked."""
    root = tmp_path_factory.mktemp("quantized")
    q8 = write_qwen3(root / "q8.gguf", qtype=gguf.GGMLQuantizationType.Q8_0)
    return {"Q8_0": q8, "Q4_K_M": q8}


def created(store: ModelStore, body: dict[str, Any], quantize: FakeQuantizer | None) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    create_model(store, CreateRequest.from_json(body), events.append, quantize=quantize)
    return events


def test_create_quantizes_a_float_model_with_ollamas_progress(
    model_store: ModelStore, tiny_gguf: Path, quantized: dict[str, Path]
) -> None:
    quantize = FakeQuantizer(quantized)
    digest = upload(model_store, tiny_gguf)
    events = created(model_store, {"model": "q", "files": {"t.gguf": digest}, "quantize": "q8_0"}, quantize)
    size = tiny_gguf.stat().st_size
    progress = [e for e in events if e["status"] == "quantizing F32 model to Q8_0"]
    assert [(e["digest"], e["total"]) for e in progress] == [("0" * 19, size)] * len(progress)
    assert [e["completed"] for e in progress] == [0, 0, size // 3, 2 * size // 3, size]
    record = model_store.get("q")
    model = next(layer for layer in record.manifest.layers if layer.media_type == mt.MODEL)
    assert model.digest == "sha256:" + hashlib.sha256(quantized["Q8_0"].read_bytes()).hexdigest() != digest
    statuses_ = [e["status"] for e in events]
    assert statuses_[statuses_.index("verifying conversion") + 1] == f"creating new layer {model.digest}"
    assert statuses_[-2:] == ["writing manifest", "success"]
    assert quantize.asked == [(model_store.blob_path(digest), "Q8_0")]
    assert record.config["file_type"] == "Q8_0"
    # FROM an existing model (Q4_K is Ollama's Q4_K_M); that model keeps its own weights.
    created(model_store, {"model": "base", "files": {"t.gguf": digest}}, None)
    created(model_store, {"model": "q4", "from": "base", "quantize": "Q4_K"}, quantize)
    assert quantize.asked[-1] == (model_store.blob_path(digest), "Q4_K_M")
    assert model_store.get("q4").config["file_type"] == "Q8_0"  # the file's, not the request's
    assert model_store.get("base").config["file_type"] == "F32"
    # The model's own type: nothing to do, as in Ollama.
    created(model_store, {"model": "same", "from": "base", "quantize": "f32"}, quantize)
    assert len(quantize.asked) == 2 and model_store.get("same").config["file_type"] == "F32"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            {"quantize": "q2_K"},
            "unsupported quantization type Q2_K - supported types are F32, F16, Q4_K_S, Q4_K_M, Q8_0",
        ),
        ({"quantization": "iq4_xs"}, "unsupported quantization type IQ4_XS - supported"),
        ({"from": "q", "quantize": "q4_K_M"}, "quantization is only supported for F16, BF16 and F32 models"),
    ],
)
def test_create_quantize_errors_are_ollamas(
    model_store: ModelStore, tiny_gguf: Path, quantized: dict[str, Path], body: dict[str, Any], error: str
) -> None:
    files = {"files": {"t.gguf": upload(model_store, tiny_gguf)}}
    created(model_store, {"model": "q", "files": {"q.gguf": upload(model_store, quantized["Q8_0"])}}, None)
    with pytest.raises(CllmError, match=f"^{re.escape(error)}") as err:
        created(model_store, {"model": "x", **({} if "from" in body else files), **body}, FakeQuantizer(quantized))
    assert err.value.status_code == 400  # the client's to fix (Ollama answers 500)
    assert model_store.resolve(parse_name("x")) is None


def test_create_stores_a_draft_layer_its_copies_keep_and_draft_quantize_quantizes(
    model_store: ModelStore, tiny_gguf: Path, quantized: dict[str, Path]
) -> None:
    """A DRAFT as Ollama stores it: a ``draft`` layer after the model's, the config's ``draft``; a
    model made FROM it keeps it, a new DRAFT takes its place; --draft-quantize quantizes only it."""
    quantize = FakeQuantizer(quantized)
    weights, draft = upload(model_store, tiny_gguf), upload(model_store, quantized["Q8_0"])
    created(model_store, {"model": "spec", "files": {"m.gguf": weights}, "draft_files": {"d.gguf": draft}}, None)
    record = model_store.get("spec")
    assert [(layer.media_type, layer.digest) for layer in record.manifest.layers] == [
        (mt.MODEL, weights),
        (mt.DRAFT, draft),
    ]
    assert record.config["draft"] == {"model_format": "gguf", "architecture": "qwen3"}
    assert record.draft_path == model_store.blob_path(draft) and record.config["file_type"] == "F32"
    created(model_store, {"model": "kept", "from": "spec", "system": "be brief"}, None)
    kept = model_store.get("kept")
    assert kept.draft_path == record.draft_path and kept.config["draft"] == record.config["draft"]
    # A new DRAFT, quantized: in place of the base's; the model's weights untouched.
    body = {"model": "requant", "from": "spec", "draft_files": {"d.gguf": weights}, "draft_quantize": "q8_0"}
    events = created(model_store, body, quantize)
    assert quantize.asked == [(model_store.blob_path(weights), "Q8_0")]
    assert "quantizing F32 model to Q8_0" in [e["status"] for e in events]
    layers = model_store.get("requant").manifest.layers
    assert [layer.media_type for layer in layers] == [mt.MODEL, mt.DRAFT]
    assert layers[0].digest == weights and layers[-1].digest == draft  # the fake writes the Q8_0 file


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        ({"draft_quantize": "q8_0"}, "--draft-quantize requires a DRAFT model"),
        (
            {"draft_files": {"d.gguf": "Q8_0"}, "draft_quantize": "q4_K_M"},
            "draft quantization requires an unquantized draft model, got Q8_0",
        ),
        (
            {"draft_files": {"d.gguf": "F32"}, "draft_quantize": "q2_K"},
            "unsupported quantization type Q2_K - supported",
        ),
        ({"draft_files": {"d.gguf": "text"}}, "d.gguf: invalid file magic: only GGUF files can be imported"),
        (
            {"draft_files": {"model.safetensors": "F32", "config.json": "text"}},
            "DRAFT from safetensors files is not supported here",
        ),
        ({"draft_files": {"a.gguf": "F32", "b.gguf": "Q8_0"}}, "expected one GGUF draft file, got 2"),
    ],
)
def test_create_draft_errors(
    model_store: ModelStore,
    tiny_gguf: Path,
    quantized: dict[str, Path],
    tmp_path: Path,
    extra: dict[str, Any],
    error: str,
) -> None:
    (tmp_path / "text").write_text("not a model")
    blobs = {"F32": tiny_gguf, "Q8_0": quantized["Q8_0"], "text": tmp_path / "text"}
    if "draft_files" in extra:
        extra = {**extra, "draft_files": {k: upload(model_store, blobs[v]) for k, v in extra["draft_files"].items()}}
    body = {"model": "x", "files": {"m.gguf": upload(model_store, tiny_gguf)}, **extra}
    with pytest.raises(CllmError, match=f"^{re.escape(error)}") as err:
        created(model_store, body, FakeQuantizer(quantized))
    assert err.value.status_code == 400
    assert model_store.resolve(parse_name("x")) is None


def test_a_renderer_or_parser_model_takes_no_tools_or_thinking_from_its_gguf_template(
    model_store: ModelStore, tiny_gguf: Path
) -> None:
    """As Ollama's ``ggufCapabilities``: the chat template's tools and thinking count only where no
    renderer or parser is named; a named parser grants what it can (lfm2: tools, no thinking)."""
    blob = upload(model_store, tiny_gguf)
    statuses(model_store, {"model": "plain", "files": {"t.gguf": blob}})
    statuses(model_store, {"model": "parsed", "files": {"t.gguf": blob}, "parser": "lfm2"})
    statuses(model_store, {"model": "rendered", "files": {"t.gguf": blob}, "renderer": "glm-ocr"})
    assert {"tools", "thinking"} <= set(model_store.get("plain").capabilities)
    assert "tools" in model_store.get("parsed").capabilities
    assert "thinking" not in model_store.get("parsed").capabilities
    assert not {"tools", "thinking"} & set(model_store.get("rendered").capabilities)
