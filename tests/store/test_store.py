"""The model store: layout, atomic writes, verified blobs, case-insensitive names, garbage collection."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from cllm_ollama.errors import InvalidRequest, NotFound
from cllm_ollama.store import manifests as mt
from cllm_ollama.store.blobs import DigestMismatch, parse_digest
from cllm_ollama.store.names import parse_name
from cllm_ollama.store.store import ModelStore


def install(store: ModelStore, name: str, gguf: Path, extra: dict[str, bytes] | None = None) -> None:
    with open(gguf, "rb") as f:
        digest = store.write_blob_from(f)
    layers = [mt.Layer(mt.MODEL, digest, gguf.stat().st_size)]
    layers += [store.add_layer(data, media_type)[0] for media_type, data in (extra or {}).items()]
    store.write_manifest(name, {"model_format": "gguf", "model_family": "qwen3"}, layers)


def visible_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_layout_and_record(model_store: ModelStore, tiny_gguf: Path) -> None:
    install(model_store, "tiny:v1", tiny_gguf, {mt.PARAMS: b'{"stop":["<|im_end|>"]}', mt.SYSTEM: b"Be brief."})
    path = model_store.root / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "v1"
    raw = path.read_bytes()
    manifest = json.loads(raw)
    assert manifest["schemaVersion"] == 2
    assert manifest["mediaType"] == "application/vnd.docker.distribution.manifest.v2+json"
    assert manifest["config"]["mediaType"] == "application/vnd.docker.container.image.v1+json"
    assert [layer["mediaType"] for layer in manifest["layers"]] == [mt.MODEL, mt.PARAMS, mt.SYSTEM]
    for layer in [manifest["config"], *manifest["layers"]]:
        blob = model_store.root / "blobs" / layer["digest"].replace(":", "-")
        assert hashlib.sha256(blob.read_bytes()).hexdigest() == layer["digest"].split(":")[1]
        assert blob.stat().st_size == layer["size"]

    record = model_store.get("tiny:v1")
    assert record.short_name == "tiny:v1"
    assert record.digest == hashlib.sha256(raw).hexdigest()
    assert record.size == sum(layer["size"] for layer in [manifest["config"], *manifest["layers"]])
    assert record.modified_at.tzinfo is not None
    assert record.model_path == model_store.blob_path(manifest["layers"][0]["digest"])
    assert record.params == {"stop": ["<|im_end|>"]}
    assert record.system == "Be brief."
    assert record.template is None and record.license == [] and record.messages == []
    assert record.capabilities == ["completion", "tools", "thinking"]


def test_names_resolve_ignoring_case(model_store: ModelStore, tiny_gguf: Path) -> None:
    install(model_store, "Tiny:Q8", tiny_gguf)
    assert model_store.get("tiny:q8").name.parts == ("registry.ollama.ai", "library", "Tiny", "Q8")
    assert model_store.get("REGISTRY.ollama.ai/LIBRARY/TINY:q8").short_name == "Tiny:Q8"
    # Writing the same name in another case (a pull, a create) replaces the model under its own
    # spelling, as Ollama's getExistingName: no twin, and no rename.
    install(model_store, "TINY:q8", tiny_gguf, {mt.SYSTEM: b"new"})
    assert [(r.short_name, r.system) for r in model_store.list_models()] == [("Tiny:Q8", "new")]
    # So is a copy: onto its own name in another case, it changes nothing.
    before = model_store.get("tiny:q8").digest
    assert model_store.copy("Tiny:Q8", "TINY:Q8").short_name == "Tiny:Q8"
    assert [(r.short_name, r.digest) for r in model_store.list_models()] == [("Tiny:Q8", before)]
    assert (model_store.manifests_dir / "registry.ollama.ai/library/Tiny/Q8").is_file()


def test_a_manifest_with_a_malformed_digest_is_an_unreadable_one(model_store: ModelStore, tiny_gguf: Path) -> None:
    """Left out of the list (not a 400 for the whole of it) and deletable, as any unreadable manifest."""
    install(model_store, "good", tiny_gguf)
    good = model_store.get("good")
    raw = json.loads(model_store.manifest_bytes(good.name))
    raw["layers"].append({"mediaType": mt.SYSTEM, "digest": "sha256:abc", "size": 3})
    bad = model_store.manifests_dir / "registry.ollama.ai/library/bad/latest"
    bad.parent.mkdir()
    bad.write_text(json.dumps(raw))
    with pytest.raises(mt.ManifestError, match="invalid layer digest 'sha256:abc'"):
        mt.Manifest.from_bytes(bad.read_bytes())
    assert [r.short_name for r in model_store.list_models(broken=True)] == ["good:latest"]
    model_store.delete("bad")
    assert not bad.exists()
    assert all(model_store.has_blob(layer.digest) for layer in good.manifest.all_layers)  # the good model's


def test_get_errors(model_store: ModelStore) -> None:
    with pytest.raises(NotFound, match=r"^model 'nope:latest' not found$"):
        model_store.get("nope")
    with pytest.raises(InvalidRequest, match=r"^invalid model name$"):
        model_store.get("../../etc/passwd")


def test_list_is_newest_first_and_skips_junk(model_store: ModelStore, tiny_gguf: Path) -> None:
    install(model_store, "old", tiny_gguf)
    install(model_store, "new", tiny_gguf)
    old = model_store.root / "manifests/registry.ollama.ai/library/old/latest"
    os.utime(old, (1_000_000_000, 1_000_000_000))
    junk = model_store.root / "manifests/registry.ollama.ai/library/new"
    (junk / ".tmp-latest-1234").write_bytes(b"{half a manif")
    (junk / "broken").write_bytes(b"not json")
    assert [r.short_name for r in model_store.list_models()] == ["new:latest", "old:latest"]


def test_blob_writes_are_verified(model_store: ModelStore) -> None:
    data = b"hello blob"
    good = "sha256:" + hashlib.sha256(data).hexdigest()
    bad = "sha256:" + "0" * 64
    with pytest.raises(DigestMismatch) as err:
        model_store.write_blob_from([data], bad)
    assert err.value.message == f'digest mismatch, expected "{bad}", got "{good}"'
    assert visible_files(model_store.root) == []  # the temp file went with the failure
    assert model_store.write_blob_from([b"hello ", b"blob"], good.replace(":", "-")) == good
    assert model_store.blob_path(good).read_bytes() == data
    assert visible_files(model_store.root) == [f"blobs/sha256-{parse_digest(good)}"]
    with pytest.raises(InvalidRequest, match="invalid digest format"):
        model_store.blob_path("sha256:xyz")


def test_manifest_write_is_atomic(model_store: ModelStore, tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(model_store, "tiny", tiny_gguf)
    before = model_store.get("tiny")
    path = model_store.root / "manifests/registry.ollama.ai/library/tiny/latest"
    original = path.read_bytes()

    def crash(src: object, dst: object) -> None:
        raise OSError("power cut")

    monkeypatch.setattr(os, "replace", crash)
    layer = before.manifest.layers[0]
    with pytest.raises(OSError, match="power cut"):
        model_store.write_manifest("tiny", {"model_family": "changed"}, [layer])
    monkeypatch.undo()
    assert path.read_bytes() == original
    assert not [p for p in path.parent.iterdir() if p.name != "latest"]  # no temp file left behind
    assert model_store.get("tiny").digest == before.digest


def test_manifest_needs_its_blobs(model_store: ModelStore) -> None:
    missing = mt.Layer(mt.MODEL, "sha256:" + "a" * 64, 10)
    with pytest.raises(NotFound, match="not found"):
        model_store.write_manifest("ghost", {}, [missing])
    assert model_store.list_models() == []


def test_a_copy_keeps_the_manifest_byte_for_byte(model_store: ModelStore, tiny_gguf: Path) -> None:
    """As Ollama's CopyModel: the copy's digest (its ID in `ollama list`) is the source's, whatever
    the source's manifest holds that cllm would not write itself (Ollama's trailing newline)."""
    install(model_store, "tiny", tiny_gguf, {mt.SYSTEM: b"one"})
    pulled = model_store.manifest_bytes(parse_name("tiny")) + b"\n"
    model_store.write_manifest_bytes("pulled", pulled)
    model_store.copy("pulled", "copied")
    assert model_store.manifest_bytes(parse_name("copied")) == pulled
    assert model_store.get("copied").digest == model_store.get("pulled").digest


def test_copy_shares_blobs_and_gc_keeps_what_is_used(model_store: ModelStore, tiny_gguf: Path) -> None:
    install(model_store, "tiny", tiny_gguf, {mt.SYSTEM: b"one"})
    model_store.copy("TINY", "me/tiny-copy:v2")
    install(model_store, "other", tiny_gguf, {mt.SYSTEM: b"two"})
    unrelated = model_store.write_blob_from([b"uploaded, not used yet"])
    blobs = set(visible_files(model_store.root / "blobs"))

    model_store.delete("tiny")  # its blobs are all still used by the copy
    assert set(visible_files(model_store.root / "blobs")) == blobs
    assert {r.short_name for r in model_store.list_models()} == {"other:latest", "me/tiny-copy:v2"}

    model_store.delete("me/tiny-copy:v2")  # "one" and the first config go; the shared GGUF stays
    left = set(visible_files(model_store.root / "blobs"))
    other = model_store.get("other")
    assert {f"sha256-{layer.hex}" for layer in other.manifest.all_layers} | {
        f"sha256-{parse_digest(unrelated)}"
    } == left
    assert not (model_store.root / "manifests/registry.ollama.ai/me").exists()  # emptied dirs pruned

    model_store.delete("other")
    assert visible_files(model_store.root / "blobs") == [f"sha256-{parse_digest(unrelated)}"]
    with pytest.raises(NotFound):
        model_store.delete("other")


def test_gc_keeps_everything_when_a_manifest_is_unreadable(model_store: ModelStore, tiny_gguf: Path) -> None:
    install(model_store, "a", tiny_gguf)
    install(model_store, "b", tiny_gguf)
    (model_store.root / "manifests/registry.ollama.ai/library/b/latest").write_bytes(b"garbage")
    blobs = visible_files(model_store.root / "blobs")
    model_store.delete("a")
    assert visible_files(model_store.root / "blobs") == blobs


def test_reads_an_existing_ollama_store(tmp_path: Path, tiny_gguf: Path) -> None:
    """A store laid out by Ollama itself (OLLAMA_MODELS) lists and resolves as is."""
    root = tmp_path / "ollama-models"
    (root / "blobs").mkdir(parents=True)

    def blob(data: bytes, media_type: str) -> dict[str, object]:
        digest = hashlib.sha256(data).hexdigest()
        (root / "blobs" / f"sha256-{digest}").write_bytes(data)
        return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}

    config = json.dumps(
        {
            "model_format": "gguf",
            "model_family": "qwen3",
            "model_families": ["qwen3"],
            "model_type": "751.63M",
            "file_type": "Q4_K_M",
            "architecture": "amd64",
            "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": []},
        }
    ).encode()
    go_template = b"{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}"
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": blob(config, "application/vnd.docker.container.image.v1+json"),
        "layers": [
            blob(tiny_gguf.read_bytes(), "application/vnd.ollama.image.model"),
            blob(go_template, "application/vnd.ollama.image.template"),
            blob(b"Apache License 2.0 ...", "application/vnd.ollama.image.license"),
            blob(
                b'{"repeat_penalty":1,"stop":["<|im_start|>","<|im_end|>"],"temperature":0.6}',
                "application/vnd.ollama.image.params",
            ),
            blob(b'[{"role":"user","content":"hi"}]', "application/vnd.ollama.image.messages"),
        ],
    }
    raw = json.dumps(manifest, indent=2).encode()  # Ollama's exact bytes are what the digest covers
    path = root / "manifests/registry.ollama.ai/library/qwen3/0.6b"
    path.parent.mkdir(parents=True)
    path.write_bytes(raw)
    hf = root / "manifests/hf.co/unsloth/Qwen3-0.6B-GGUF/Q4_K_M"
    hf.parent.mkdir(parents=True)
    hf.write_bytes(raw)

    store = ModelStore(root)
    assert sorted(r.short_name for r in store.list_models()) == ["hf.co/unsloth/Qwen3-0.6B-GGUF:Q4_K_M", "qwen3:0.6b"]
    record = store.get("Qwen3:0.6B")
    assert record.digest == hashlib.sha256(raw).hexdigest()
    assert record.size == sum(layer["size"] for layer in [manifest["config"], *manifest["layers"]])
    assert record.config["model_type"] == "751.63M"
    assert record.template == go_template.decode()
    assert record.license == ["Apache License 2.0 ..."]
    assert record.params == {"repeat_penalty": 1, "stop": ["<|im_start|>", "<|im_end|>"], "temperature": 0.6}
    assert record.messages == [{"role": "user", "content": "hi"}]
    assert record.model_path is not None and record.model_path.read_bytes()[:4] == b"GGUF"
    assert store.get("hf.co/unsloth/qwen3-0.6b-gguf:q4_k_m").short_name == "hf.co/unsloth/Qwen3-0.6B-GGUF:Q4_K_M"
