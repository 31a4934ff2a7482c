"""Push and pull against a real registry server: Debian's ``docker-registry`` (CNCF distribution 2.8).

The test writes its config (filesystem storage in a temp directory, no auth, a loopback port) and
starts it. A model created from a tiny GGUF, with a Go template, a system prompt and parameters,
is pushed (the official ``ollama`` client through cllm's /api/push, then ``cllm push``), deleted
locally, pulled back (``ollama`` client with ``insecure=True``, ``cllm pull --insecure``), checked
layer by layer and run. ``.ci/run`` installs the package with apt-get when it can; without it the
tests are skipped, saying so.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import ollama
import orjson
import pytest
from click.testing import CliRunner
from cllm_ollama.cli.main import cli
from serving import serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.store import manifests as mt
from cllm_ollama.store.store import ModelStore

pytestmark = pytest.mark.model

TEMPLATE = "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n"
SYSTEM = "You are terse."
PARAMETERS = {"temperature": 0.0, "stop": ["<|im_end|>"], "num_predict": 4}
REGISTRY_BINARIES = ("docker-registry", "registry")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def registry_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``127.0.0.1:<port>`` of a docker-registry started for these tests."""
    binary = next((b for b in map(shutil.which, REGISTRY_BINARIES) if b), None)
    if binary is None:
        pytest.skip(
            "no registry server: install Debian's docker-registry package "
            "(apt-get install docker-registry; .ci/run does when apt-get is available)"
        )
    root = tmp_path_factory.mktemp("docker-registry")
    port = _free_port()
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: error\n  accesslog:\n    disabled: true\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n  secret: cllm-tests\n"
    )
    log = open(root / "registry.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v2/", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"docker-registry did not start: {(root / 'registry.log').read_text()[-2000:]}")
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    models = tmp_path / "models"
    settings = Settings(models_dir=models, num_parallel=2, context_length=256, num_thread=2)
    with serve_in_thread(create_app(settings)) as url:
        yield url, models


def registry_manifest(host: str, repo: str, tag: str) -> bytes:
    r = httpx.get(f"http://{host}/v2/{repo}/manifests/{tag}", headers={"Accept": mt.MANIFEST_MEDIA_TYPE})
    assert r.status_code == 200, r.text
    return r.content


def check_layers(models: Path, name: str, pushed: bytes) -> None:
    """The model as pulled: the registry's manifest byte for byte, each layer what was created."""
    store = ModelStore(models)
    record = store.get(name)
    assert store.manifest_bytes(record.name) == pushed
    assert [layer.media_type for layer in record.manifest.layers] == [mt.MODEL, mt.TEMPLATE, mt.SYSTEM, mt.PARAMS]
    assert record.manifest.config.media_type == mt.CONFIG_MEDIA_TYPE
    assert record.template == TEMPLATE and record.system == SYSTEM and record.params == PARAMETERS
    assert record.config["model_family"] == "qwen3" and record.config["model_format"] == "gguf"
    assert all(store.has_blob(layer.digest) for layer in record.manifest.all_layers)


def statuses(events: list[Any]) -> list[str]:
    out: list[str] = []
    for event in events:
        if not out or out[-1] != event.status:
            out.append(event.status)
    return out


def test_push_then_pull_back_with_the_ollama_client_and_the_cli(
    registry_host: str, served: tuple[str, Path], tiny_gguf: Path, tmp_path: Path
) -> None:
    url, models = served
    client = ollama.Client(host=url)
    name = f"{registry_host}/team/tiny:v1"
    digest = client.create_blob(tiny_gguf)
    client.create(name, files={"tiny.gguf": digest}, template=TEMPLATE, system=SYSTEM, parameters=PARAMETERS)
    local = ModelStore(models).manifest_bytes(ModelStore(models).get(name).name)
    layers = orjson.loads(local)["layers"] + [orjson.loads(local)["config"]]

    # Push: every blob uploaded, then the manifest.
    events = list(client.push(name, insecure=True, stream=True))
    assert statuses(events) == [
        "retrieving manifest",
        *(f"pushing {layer['digest'][7:19]}" for layer in layers),
        "pushing manifest",
        "success",
    ]
    model = next(e for e in events if e.digest == layers[0]["digest"] and e.completed)
    assert model.total == tiny_gguf.stat().st_size
    pushed = registry_manifest(registry_host, "team/tiny", "v1")
    assert pushed == local
    # Pushed again, every blob is already there (HEAD): each is reported complete at once.
    again = list(client.push(name, insecure=True, stream=True))
    assert [(e.status, e.completed) for e in again if e.digest] == [
        (f"pushing {layer['digest'][7:19]}", layer["size"]) for layer in layers
    ]

    # Deleted locally, pulled back through the official client.
    client.delete(name)
    assert client.list().models == []
    events = list(client.pull(name, insecure=True, stream=True))
    assert statuses(events) == [
        "pulling manifest",
        *(f"pulling {layer['digest'][7:19]}" for layer in layers),
        "verifying sha256 digest",
        "writing manifest",
        "success",
    ]
    check_layers(models, name, pushed)
    assert [m.model for m in client.list().models] == [name]
    show = client.show(name)
    assert show.template == TEMPLATE and show.modelfile is not None and f"SYSTEM {SYSTEM}" in show.modelfile
    # It runs, with its parameters (num_predict 4).
    answer = client.generate(model=name, prompt="Why is the sky blue?")
    assert answer.done and answer.eval_count is not None and 0 < answer.eval_count <= 4

    # The same through the command line: pull without a server (the store directly, as asked)...
    client.delete(name)
    env = {
        "OLLAMA_HOST": f"127.0.0.1:{_free_port()}",
        "OLLAMA_MODELS": str(tmp_path / "cli-models"),
        "CLLM_LOCAL_STORE": "1",
    }
    result = CliRunner().invoke(cli, ["pull", "--insecure", name], env=env)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == "success"
    check_layers(tmp_path / "cli-models", name, pushed)
    # ...push from there under another tag, and pull that through the running server.
    retagged = f"{registry_host}/team/tiny:v2"
    result = CliRunner().invoke(cli, ["cp", name, retagged], env=env)
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(cli, ["push", "--insecure", retagged], env=env)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-6:] == [
        "pushing manifest",
        "success",
        "",
        "You can find your model at:",
        "",
        f"\t{registry_host}/team/tiny:v2",
    ]
    assert registry_manifest(registry_host, "team/tiny", "v2") == pushed
    server_env = {"OLLAMA_HOST": url, "OLLAMA_MODELS": str(tmp_path / "unused")}
    result = CliRunner().invoke(cli, ["pull", "--insecure", retagged], env=server_env)
    assert result.exit_code == 0, result.output
    check_layers(models, retagged, pushed)


def test_without_insecure_a_plain_http_registry_fails_in_one_line(registry_host: str, served: tuple[str, Path]) -> None:
    url, _ = served
    client = ollama.Client(host=url)
    with pytest.raises(ollama.ResponseError) as err:
        client.pull(f"{registry_host}/team/tiny:v1")
    message = err.value.error
    assert message.startswith(f'pull model manifest: Get "https://{registry_host}/v2/team/tiny/manifests/v1": ')
    assert "\n" not in message
    with pytest.raises(ollama.ResponseError) as err:
        client.pull(f"{registry_host}/team/no-such-model", insecure=True)
    assert err.value.error == "pull model manifest: file does not exist"
