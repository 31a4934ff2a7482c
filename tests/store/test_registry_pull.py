"""Pulls from Ollama's registry, against a loopback stand-in for registry.ollama.ai (tests/fakeregistry.py).

The stand-in takes the place of https://registry.ollama.ai through ``RegistryOptions.registry_url``
(``CLLM_REGISTRY_URL``): names without a host take the same code path as against the real one.
"""

from __future__ import annotations

import base64
import hashlib
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from fakehub import FakeHub
from fakeregistry import TOKEN, FakeRegistry, digest_of, fake_registry, openssh_key, statuses

from cllm_ollama.errors import PullError, RequestCanceled
from cllm_ollama.store import download
from cllm_ollama.store import manifests as mt
from cllm_ollama.store.catalog import Catalog
from cllm_ollama.store.keys import public_key, verify
from cllm_ollama.store.names import parse_name
from cllm_ollama.store.pull import HUB, REGISTRY, REGISTRY_THEN_HUB, pull_model, pull_source
from cllm_ollama.store.registry import Registry
from cllm_ollama.store.registry_pull import RegistryOptions
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_lora

TEMPLATE = "{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}<|im_start|>user\n{{ .Prompt }}"
PARAMS = {"stop": ["<|im_end|>"], "temperature": 0.7}
CONFIG = {"model_format": "gguf", "model_family": "qwen3", "model_families": ["qwen3"], "model_type": "99K"}


@pytest.fixture
def registry() -> Iterator[FakeRegistry]:
    with fake_registry() as state:
        yield state


@pytest.fixture
def gguf_bytes(tiny_gguf: Path) -> bytes:
    return tiny_gguf.read_bytes()


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(download, "RETRY_BASE_S", 0.0)
    monkeypatch.setattr(download, "MAX_RETRIES", 2)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no Ollama key unless a test writes one


def add_tiny(registry: FakeRegistry, gguf: bytes, repo: str = "library/tiny", tag: str = "latest") -> bytes:
    return registry.add_model(
        repo,
        tag,
        [(mt.MODEL, gguf), (mt.TEMPLATE, TEMPLATE.encode()), (mt.PARAMS, orjson.dumps(PARAMS))],
        {**CONFIG, "file_type": "F32"},
    )


def pull(store: ModelStore, registry: FakeRegistry, name: str, **options: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    pull_model(store, name, events.append, options=RegistryOptions(registry_url=registry.url, **options))
    return events


def ranged(registry: FakeRegistry, digest: str) -> list[int]:
    """Where each ranged request for ``digest`` started."""
    return [int(r.headers["Range"][6:].split("-")[0]) for r in registry.seen("GET", digest) if "Range" in r.headers]


def leftovers(store: ModelStore) -> list[str]:
    return sorted(p.name for p in store.blobs_dir.iterdir() if "partial" in p.name or p.name.startswith("."))


def test_a_library_name_comes_from_the_registry_with_its_layers(
    model_store: ModelStore, registry: FakeRegistry, gguf_bytes: bytes
) -> None:
    manifest = add_tiny(registry, gguf_bytes)
    events = pull(model_store, registry, "tiny")

    layers = orjson.loads(manifest)["layers"] + [orjson.loads(manifest)["config"]]
    assert statuses(events) == [
        "pulling manifest",
        *(f"pulling {layer['digest'][7:19]}" for layer in layers),
        "verifying sha256 digest",
        "writing manifest",
        "success",
    ]
    model_digest = digest_of(gguf_bytes)
    progress = [e for e in events if e.get("digest") == model_digest]
    assert progress[0] == {"status": f"pulling {model_digest[7:19]}", "digest": model_digest, "total": len(gguf_bytes)}
    assert progress[-1]["completed"] == len(gguf_bytes)
    assert all(set(e) <= {"status", "digest", "total", "completed"} for e in events)

    record = model_store.get("tiny")
    # Stored as Ollama stores it: the registry's manifest byte for byte, every layer a blob.
    path = model_store.manifests_dir / "registry.ollama.ai" / "library" / "tiny" / "latest"
    assert path.read_bytes() == manifest
    assert record.digest == hashlib.sha256(manifest).hexdigest()
    assert record.template == TEMPLATE and record.params == PARAMS
    assert record.model_path is not None and record.model_path.read_bytes() == gguf_bytes
    assert record.config["model_family"] == "qwen3"
    assert leftovers(model_store) == []
    # The manifest was asked for with Ollama's media type.
    (get,) = registry.seen("GET", "/manifests/")
    assert get.path == "/v2/library/tiny/manifests/latest"
    assert get.headers["Accept"] == mt.MANIFEST_MEDIA_TYPE

    # Pulled again: nothing is downloaded, each layer is reported complete at once.
    before = len(registry.seen("GET", "/blobs/"))
    again = pull(model_store, registry, "tiny:latest")
    assert len(registry.seen("GET", "/blobs/")) == before
    assert [e for e in again if e.get("digest") == model_digest] == [{**progress[0], "completed": len(gguf_bytes)}]
    assert statuses(again)[-3:] == ["verifying sha256 digest", "writing manifest", "success"]


def test_a_registry_on_this_machine_is_reached_past_any_proxy(
    model_store: ModelStore, registry: FakeRegistry, gguf_bytes: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Proxies from the environment are never used for a loopback registry, as Go's
    ProxyFromEnvironment decides; a SOCKS one (ALL_PROXY, a common desktop setup) is understood."""
    add_tiny(registry, gguf_bytes)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, "socks5://127.0.0.1:9")  # nothing listens there
    assert statuses(pull(model_store, registry, "tiny"))[-1] == "success"
    with Registry("https://registry.example") as remote:  # a remote one goes through it (socksio installed)
        assert remote.client is not None


def test_a_model_with_an_adapter_layer_is_pulled_with_it(
    model_store: ModelStore, registry: FakeRegistry, tmp_path: Path
) -> None:
    """Ollama's registry serves models with an ADAPTER: the adapter is a blob the model runs with."""
    base, adapter = write_lora(tmp_path)
    layers = [(mt.MODEL, base.read_bytes()), (mt.ADAPTER, adapter.read_bytes())]
    registry.add_model("library/tuned", "latest", layers, {**CONFIG, "file_type": "F32"})
    assert statuses(pull(model_store, registry, "tuned"))[-1] == "success"
    record = model_store.get("tuned")
    assert [path.read_bytes() for path in record.adapter_paths] == [adapter.read_bytes()]


def test_user_namespaces_and_tags(model_store: ModelStore, registry: FakeRegistry, gguf_bytes: bytes) -> None:
    add_tiny(registry, gguf_bytes, repo="someone/tiny", tag="q8")
    pull(model_store, registry, "someone/tiny:q8")
    assert model_store.get("someone/tiny:q8").short_name == "someone/tiny:q8"
    assert registry.seen("GET", "/manifests/")[0].path == "/v2/someone/tiny/manifests/q8"


def test_blobs_redirected_to_a_cdn_are_fetched_there_without_the_token(
    model_store: ModelStore, registry: FakeRegistry, gguf_bytes: bytes
) -> None:
    add_tiny(registry, gguf_bytes)
    registry.redirect_blobs = True
    registry.require_token = True
    pull(model_store, registry, "tiny")

    assert model_store.get("tiny").model_path.read_bytes() == gguf_bytes  # type: ignore[union-attr]
    cdn = registry.seen("GET", server="cdn")
    assert {r.path.split("?")[0] for r in cdn} == {f"/blobs/{d}" for d in registry.blobs}
    assert all("Range" in r.headers for r in cdn)
    assert not any("Authorization" in r.headers for r in cdn)  # the registry's token stays with it
    # The registry itself saw the token on every request after the challenge.
    after_token = [r for r in registry.seen(server="registry")[1:] if not r.path.startswith("/token")]
    assert after_token and all(r.headers.get("Authorization") == f"Bearer {TOKEN}" for r in after_token)


def test_a_401_bearer_challenge_gets_an_anonymous_token(
    model_store: ModelStore, registry: FakeRegistry, gguf_bytes: bytes
) -> None:
    add_tiny(registry, gguf_bytes)
    registry.require_token = True
    pull(model_store, registry, "tiny")

    (token,) = registry.seen("GET", "^/token")
    assert "service=fake-registry" in token.path and "scope=repository%3Alibrary%2Ftiny%3Apull" in token.path
    assert "ts=" in token.path and "nonce=" in token.path
    assert "Authorization" not in token.headers  # anonymous: no key to sign with
    first, second = registry.seen(server="registry")[0], registry.seen(server="registry")[2]
    assert "Authorization" not in first.headers
    assert second.headers["Authorization"] == f"Bearer {TOKEN}"
    assert model_store.get("tiny").template == TEMPLATE


def test_with_an_ollama_key_the_token_request_is_signed(
    model_store: ModelStore, registry: FakeRegistry, gguf_bytes: bytes, tmp_path: Path
) -> None:
    seed = bytes(range(32))
    (tmp_path / "home" / ".ollama").mkdir(parents=True)
    (tmp_path / "home" / ".ollama" / "id_ed25519").write_text(openssh_key(seed))
    add_tiny(registry, gguf_bytes)
    registry.require_token = True
    pull(model_store, registry, "tiny")
    (token,) = registry.seen("GET", "^/token")
    pub, sig = token.headers["Authorization"].split(":")
    assert base64.b64decode(pub)[-32:] == public_key(seed)
    empty = base64.b64encode(hashlib.sha256(b"").hexdigest().encode()).decode()
    signed = f"GET,{registry.url}{token.path},{empty}".encode()
    assert verify(public_key(seed), signed, base64.b64decode(sig))
    # The URL as Go's url.Values writes it: parameters in key order.
    assert [kv.split("=")[0] for kv in token.path.split("?")[1].split("&")] == ["nonce", "scope", "service", "ts"]


def test_a_realm_on_another_host_is_refused(model_store: ModelStore, registry: FakeRegistry, gguf_bytes: bytes) -> None:
    add_tiny(registry, gguf_bytes)
    registry.require_token = True
    url = registry.url
    registry.url = url.replace("127.0.0.1", "localhost")  # the challenge names another host
    with pytest.raises(PullError, match=r'^pull model manifest: realm host "localhost:\d+" does not match'):
        pull_model(model_store, "tiny", lambda e: None, options=RegistryOptions(registry_url=url))
    assert registry.seen("GET", "^/token") == []


def test_a_name_the_registry_does_not_have(model_store: ModelStore, registry: FakeRegistry) -> None:
    events: list[dict[str, Any]] = []
    with pytest.raises(PullError) as err:
        pull_model(model_store, "no-such-model", events.append, options=RegistryOptions(registry_url=registry.url))
    assert err.value.message == "pull model manifest: file does not exist"
    assert events == [{"status": "pulling manifest"}]
    assert not model_store.manifests_dir.exists() or not any(model_store.manifests_dir.rglob("*"))


def test_no_network_is_one_line(model_store: ModelStore) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(PullError) as err:
        pull_model(
            model_store, "tiny", lambda e: None, options=RegistryOptions(registry_url=f"http://127.0.0.1:{port}")
        )
    message = err.value.message
    assert message.startswith(f'pull model manifest: Get "http://127.0.0.1:{port}/v2/library/tiny/manifests/latest": ')
    assert "\n" not in message and "onnect" in message


def test_a_cut_transfer_is_retried_within_the_pull(
    model_store: ModelStore, registry: FakeRegistry, gguf_bytes: bytes
) -> None:
    add_tiny(registry, gguf_bytes)
    registry.cut_after, registry.cuts_left = 100_000, 1
    pull(model_store, registry, "tiny")
    ranges = [r.headers["Range"] for r in registry.seen("GET", digest_of(gguf_bytes)) if "Range" in r.headers]
    assert ranges == [f"bytes=0-{len(gguf_bytes) - 1}", f"bytes=100000-{len(gguf_bytes) - 1}"]
    assert model_store.get("tiny").model_path.read_bytes() == gguf_bytes  # type: ignore[union-attr]


def test_a_transfer_cut_for_good_fails_cleanly_and_the_next_pull_resumes(
    model_store: ModelStore, registry: FakeRegistry, gguf_bytes: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(download, "MIN_PART_SIZE", 64 * 1024)  # several parts, fetched in parallel
    add_tiny(registry, gguf_bytes)
    registry.cut_after, registry.cuts_left = 10_000, 1000
    events: list[dict[str, Any]] = []
    with pytest.raises(PullError) as err:
        pull_model(model_store, "tiny", events.append, options=RegistryOptions(registry_url=registry.url))
    assert err.value.message.startswith("max retries exceeded: ")
    assert err.value.message.endswith("pull again to resume") and "\n" not in err.value.message
    assert model_store.list_models() == []  # nothing half-written is listed
    hex_ = hashlib.sha256(gguf_bytes).hexdigest()
    parts = sorted(p.name for p in model_store.blobs_dir.glob(f"sha256-{hex_}-partial-*"))
    n_parts = len(download.plan_parts(len(gguf_bytes)))
    assert n_parts > 1 and parts == [f"sha256-{hex_}-partial-{i}" for i in range(n_parts)]
    saved = [orjson.loads((model_store.blobs_dir / p).read_bytes()) for p in parts]
    assert set(saved[0]) == {"N", "Offset", "Size", "Completed"}  # Ollama's part files
    assert sum(p["Completed"] for p in saved) > 0

    registry.cuts_left = 0
    registry.requests.clear()
    pull(model_store, registry, "tiny")
    starts = sorted(ranged(registry, hex_))
    assert starts == [p["Offset"] + p["Completed"] for p in saved if p["Completed"] < p["Size"]]
    assert model_store.get("tiny").model_path.read_bytes() == gguf_bytes  # type: ignore[union-attr]
    assert leftovers(model_store) == []


def test_a_corrupted_blob_is_refused(model_store: ModelStore, registry: FakeRegistry, gguf_bytes: bytes) -> None:
    add_tiny(registry, gguf_bytes)
    good = digest_of(gguf_bytes)
    registry.blobs[good] = gguf_bytes[:-1] + b"\x00"
    events: list[dict[str, Any]] = []
    with pytest.raises(PullError) as err:
        pull_model(model_store, "tiny", events.append, options=RegistryOptions(registry_url=registry.url))
    got = digest_of(registry.blobs[good])
    assert err.value.message == f"digest mismatch, file must be downloaded again: want {good}, got {got}"
    assert statuses(events)[-1] == "verifying sha256 digest"
    assert model_store.list_models() == []
    assert not model_store.has_blob(good) and leftovers(model_store) == []

    registry.blobs[good] = gguf_bytes  # fixed upstream: the next pull downloads it whole
    pull(model_store, registry, "tiny")
    assert model_store.get("tiny").model_path.read_bytes() == gguf_bytes  # type: ignore[union-attr]


def test_two_pulls_of_one_blob_share_the_download(
    model_store: ModelStore, registry: FakeRegistry, gguf_bytes: bytes
) -> None:
    add_tiny(registry, gguf_bytes)
    add_tiny(registry, gguf_bytes, repo="library/tiny-copy")
    registry.gate = threading.Event()
    results: dict[str, list[dict[str, Any]] | BaseException] = {}

    def run(name: str) -> None:
        try:
            results[name] = pull(model_store, registry, name)
        except BaseException as exc:
            results[name] = exc

    threads = [threading.Thread(target=run, args=(name,)) for name in ("tiny", "tiny-copy")]
    for t in threads:
        t.start()
    threading.Event().wait(0.5)
    registry.gate.set()
    for t in threads:
        t.join(30)
    assert all(isinstance(r, list) for r in results.values()), results
    # One ranged request for the bytes: the second pull only waited (both may have asked where they are).
    assert 2 <= len(registry.seen("GET", digest_of(gguf_bytes))) <= 3
    assert ranged(registry, digest_of(gguf_bytes)) == [0]
    for events in results.values():
        assert isinstance(events, list)
        assert any(e.get("completed") == len(gguf_bytes) for e in events if e.get("digest") == digest_of(gguf_bytes))
    assert {m.short_name for m in model_store.list_models()} == {"tiny:latest", "tiny-copy:latest"}


def test_a_client_that_leaves_stops_the_download_and_a_later_pull_resumes(
    model_store: ModelStore, registry: FakeRegistry, gguf_bytes: bytes
) -> None:
    add_tiny(registry, gguf_bytes)
    registry.delay_s = 0.3
    registry.cut_after, registry.cuts_left = 50_000, 1  # the first try stops part way

    def leave(event: dict[str, Any]) -> None:
        if event.get("completed"):
            raise RequestCanceled()

    with pytest.raises(RequestCanceled):
        pull_model(model_store, "tiny", leave, options=RegistryOptions(registry_url=registry.url))
    hex_ = hashlib.sha256(gguf_bytes).hexdigest()
    part = model_store.blobs_dir / f"sha256-{hex_}-partial-0"
    for _ in range(100):  # the download notices within a chunk or a retry
        if not (model_store.blobs_dir / f"sha256-{hex_}-partial.lock").exists():
            break
        threading.Event().wait(0.05)
    assert orjson.loads(part.read_bytes())["Completed"] == 50_000
    registry.delay_s = 0
    registry.requests.clear()
    pull(model_store, registry, "tiny")
    assert ranged(registry, hex_) == [50_000]
    assert model_store.get("tiny").model_path.read_bytes() == gguf_bytes  # type: ignore[union-attr]


def test_a_full_disk_is_one_clear_line_and_the_pull_resumes_later(
    model_store: ModelStore, registry: FakeRegistry, gguf_bytes: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_tiny(registry, gguf_bytes)
    real_pwrite = download.os.pwrite
    written = [0]

    def pwrite(fd: int, data: Any, offset: int) -> int:
        room = 200_000 - written[0]
        if room <= 0:
            raise OSError(28, "No space left on device")
        n = real_pwrite(fd, bytes(data[:room]), offset)
        written[0] += n
        return n

    monkeypatch.setattr(download.os, "pwrite", pwrite)
    with pytest.raises(PullError) as err:
        pull(model_store, registry, "tiny")
    hex_ = hashlib.sha256(gguf_bytes).hexdigest()
    assert err.value.message.startswith(f"no space left on device for {hex_[:12]} (")
    assert err.value.message.endswith("free some space and pull again to resume")
    assert model_store.list_models() == []
    monkeypatch.setattr(download.os, "pwrite", real_pwrite)
    registry.requests.clear()
    pull(model_store, registry, "tiny")
    assert ranged(registry, hex_) == [200_000]
    assert model_store.get("tiny").model_path.read_bytes() == gguf_bytes  # type: ignore[union-attr]


def test_not_enough_space_is_said_before_downloading(
    model_store: ModelStore, registry: FakeRegistry, gguf_bytes: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_tiny(registry, gguf_bytes)

    class Usage:
        free = 1000

    monkeypatch.setattr(download.shutil, "disk_usage", lambda path: Usage())
    with pytest.raises(
        PullError, match=r"^not enough disk space for [0-9a-f]{12}: [\d.]+ KB to download, 1.0 KB free$"
    ):
        pull(model_store, registry, "tiny")
    assert ranged(registry, digest_of(gguf_bytes)) == []
    assert model_store.list_models() == []


def test_a_new_version_removes_the_layers_only_the_old_one_used(
    model_store: ModelStore, registry: FakeRegistry, gguf_bytes: bytes
) -> None:
    add_tiny(registry, gguf_bytes)
    pull(model_store, registry, "tiny")
    old_template = digest_of(TEMPLATE.encode())
    registry.add_model(
        "library/tiny",
        "latest",
        [(mt.MODEL, gguf_bytes), (mt.TEMPLATE, b"{{ .Prompt }}"), (mt.PARAMS, orjson.dumps(PARAMS))],
        {**CONFIG, "file_type": "F32"},
    )
    events = pull(model_store, registry, "tiny")
    assert statuses(events)[-3:] == ["writing manifest", "removing unused layers", "success"]
    assert not model_store.has_blob(old_template)
    assert model_store.get("tiny").template == "{{ .Prompt }}"


def test_models_cllm_cannot_run_are_refused_before_downloading(model_store: ModelStore, registry: FakeRegistry) -> None:
    registry.add_model("library/mlx", "latest", [(mt.TENSOR, b"weights")], CONFIG)
    with pytest.raises(PullError, match="safetensors format"):
        pull(model_store, registry, "mlx")
    registry.add_model("library/cloudy", "latest", [(mt.TEMPLATE, b"{{ .Prompt }}")], CONFIG)
    with pytest.raises(PullError, match="has no GGUF layer"):
        pull(model_store, registry, "cloudy")
    assert registry.seen("GET", "/blobs/") == []


def test_a_name_with_a_host_goes_there_over_https_unless_insecure(
    model_store: ModelStore, registry: FakeRegistry, gguf_bytes: bytes
) -> None:
    add_tiny(registry, gguf_bytes, repo="team/tiny")
    host = registry.url.removeprefix("http://")
    with pytest.raises(PullError) as err:  # https to a plain HTTP server
        pull(model_store, registry, f"{host}/team/tiny")
    assert err.value.message.startswith(f'pull model manifest: Get "https://{host}/v2/team/tiny/manifests/latest": ')
    with pytest.raises(PullError, match=r"^insecure protocol http$"):
        pull(model_store, registry, f"http://{host}/team/tiny")
    pull(model_store, registry, f"{host}/team/tiny", insecure=True)
    assert model_store.get(f"{host}/team/tiny").short_name == f"{host}/team/tiny:latest"


CATALOG = Catalog({"families": {"tiny": {"tags": {"1m": {"repo": "test/Tiny-GGUF", "file": "tiny-Q8_0.gguf"}}}}})


@pytest.mark.parametrize(
    ("name", "prefer", "source"),
    [
        ("tiny:1m", False, HUB),
        ("tiny:1m", True, REGISTRY_THEN_HUB),
        ("registry.ollama.ai/library/tiny:1m", False, HUB),
        ("tiny:2m", False, REGISTRY),
        ("llama3.1", False, REGISTRY),
        ("someone/tiny:1m", False, REGISTRY),
        ("hf.co/test/Tiny-GGUF", True, HUB),
        ("localhost:5000/team/tiny", False, REGISTRY),
    ],
)
def test_where_a_name_is_pulled_from(name: str, prefer: bool, source: str) -> None:
    assert pull_source(parse_name(name), CATALOG, prefer_registry=prefer) == source


def test_preferring_the_registry_for_catalog_names_falls_back_to_the_hub(
    model_store: ModelStore, registry: FakeRegistry, fake_hub: FakeHub, gguf_bytes: bytes
) -> None:
    fake_hub.add("test/Tiny-GGUF", "tiny-Q8_0.gguf", gguf_bytes)
    events: list[dict[str, Any]] = []
    options = RegistryOptions(registry_url=registry.url, prefer_registry=True)
    pull_model(model_store, "tiny:1m", events.append, catalog=CATALOG, options=options)
    assert registry.seen("GET", "/manifests/")[0].path == "/v2/library/tiny/manifests/1m"
    assert len(fake_hub.downloads) == 1 and [e["status"] for e in events].count("pulling manifest") == 1
    # ...and takes it from the registry when the registry has it.
    add_tiny(registry, gguf_bytes, tag="1m")
    pull_model(model_store, "tiny:1m", events.append, catalog=CATALOG, options=options)
    assert len(fake_hub.downloads) == 1
    assert model_store.get("tiny:1m").template == TEMPLATE


def test_a_blob_another_process_is_downloading_is_waited_for(
    model_store: ModelStore, registry: FakeRegistry, gguf_bytes: bytes, tmp_path: Path
) -> None:
    """Another process (a `cllm pull` beside the server) holds the blob's lock: this pull reports
    that download's progress from its part files, then finds the blob there and fetches nothing."""
    add_tiny(registry, gguf_bytes)
    hex_ = hashlib.sha256(gguf_bytes).hexdigest()
    blobs = model_store.blobs_dir
    blobs.mkdir(parents=True)
    (blobs / f"sha256-{hex_}-partial-0").write_bytes(
        orjson.dumps({"N": 0, "Offset": 0, "Size": len(gguf_bytes), "Completed": 1234})
    )
    source = tmp_path / "model.gguf"
    source.write_bytes(gguf_bytes)
    child = textwrap.dedent(
        f"""
        import os, shutil, sys, time
        from pathlib import Path
        from cllm_ollama.store.locking import exclusive
        blobs = Path({str(blobs)!r})
        with exclusive(blobs / "sha256-{hex_}-partial.lock"):
            print("holding", flush=True)
            time.sleep(1.0)
            shutil.copy({str(source)!r}, blobs / ".tmp-done")
            os.replace(blobs / ".tmp-done", blobs / "sha256-{hex_}")
            (blobs / "sha256-{hex_}-partial-0").unlink()
        """
    )
    with subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stdout.readline() == "holding\n"
        events = pull(model_store, registry, "tiny")
        proc.wait(30)
    assert ranged(registry, hex_) == []
    assert {
        "status": f"pulling {hex_[:12]}",
        "digest": f"sha256:{hex_}",
        "total": len(gguf_bytes),
        "completed": 1234,
    } in events
    assert model_store.get("tiny").model_path.read_bytes() == gguf_bytes  # type: ignore[union-attr]
