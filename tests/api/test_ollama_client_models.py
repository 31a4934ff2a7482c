"""The official ollama Python client manages models on a real cllm server (uvicorn in a thread)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import ollama
import pytest
from fakehub import FakeHub
from serving import serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings


@pytest.fixture
def client(store_settings: Settings) -> Iterator[ollama.Client]:
    with serve_in_thread(create_app(store_settings)) as url:
        yield ollama.Client(host=url)


def test_create_list_show_copy_delete(client: ollama.Client, tiny_gguf: Path) -> None:
    digest = client.create_blob(tiny_gguf)
    assert digest.startswith("sha256:")
    progress = client.create(
        "tiny",
        files={"tiny.gguf": digest},
        system="You are terse.",
        parameters={"temperature": 0.6, "stop": ["<|im_end|>"]},
    )
    assert progress.status == "success"
    streamed = [p.status for p in client.create("tiny2", from_="tiny", template="{{ .Prompt }}", stream=True)]
    assert streamed[-2:] == ["writing manifest", "success"]

    listed = {m.model: m for m in client.list().models}
    assert set(listed) == {"tiny:latest", "tiny2:latest"}
    tiny = listed["tiny:latest"]
    assert tiny.details is not None and tiny.details.family == "qwen3" and tiny.details.format == "gguf"
    assert tiny.size and tiny.digest and tiny.modified_at is not None

    show = client.show("tiny")
    assert show.modelinfo is not None and show.modelinfo["general.architecture"] == "qwen3"
    assert show.capabilities == ["completion", "tools", "thinking"]
    assert show.parameters is not None and 'stop                           "<|im_end|>"' in show.parameters
    assert show.details is not None and show.details.parameter_size == "99K"
    assert client.show("tiny2").template == "{{ .Prompt }}"

    assert client.copy("tiny", "me/tiny:copy").status == "success"
    assert client.delete("tiny").status == "success"
    assert {m.model for m in client.list().models} == {"tiny2:latest", "me/tiny:copy"}
    with pytest.raises(ollama.ResponseError) as err:
        client.show("tiny")
    assert (err.value.status_code, err.value.error) == (404, "model 'tiny:latest' not found")
    with pytest.raises(ollama.ResponseError) as err:
        client.delete("tiny")
    assert err.value.status_code == 404


def test_pull(client: ollama.Client, fake_hub: FakeHub, tiny_gguf: Path) -> None:
    fake_hub.add("test/Tiny-GGUF", "tiny-Q4_K_M.gguf", tiny_gguf.read_bytes())
    statuses = [p.status for p in client.pull("hf.co/test/Tiny-GGUF", stream=True)]
    assert statuses[0] == "pulling manifest" and statuses[-1] == "success"
    assert client.pull("hf.co/test/Tiny-GGUF:Q4_K_M").status == "success"
    assert {m.model for m in client.list().models} == {"hf.co/test/Tiny-GGUF:latest", "hf.co/test/Tiny-GGUF:Q4_K_M"}

    with pytest.raises(ollama.ResponseError, match="pull model manifest: file does not exist"):
        list(client.pull("hf.co/nobody/nothing", stream=True))
    with pytest.raises(ollama.ResponseError) as err:
        client.pull("hf.co/nobody/nothing")
    assert err.value.status_code == 500
