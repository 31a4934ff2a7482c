"""Renders no single model can monopolise: a flood to a model whose template never ends leaves
another model's chat answering as fast as it does alone."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import gguf
import pytest
from polling import until
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.chatformat.jinja_workers import POOL
from cllm_ollama.config import Settings
from cllm_ollama.store.create import import_gguf
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_qwen3

LOOPING = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
FLOOD = 40
TIMEOUT_S = 3.0  # past the 1 s margin: a chat that waited for one looping render would fail


@pytest.mark.model
def test_a_flood_to_a_looping_template_leaves_another_model_answering(
    settings: Settings, tmp_path: Path, tiny_gguf: Path
) -> None:
    looping_gguf = write_qwen3(tmp_path / "looping.gguf", qtype=gguf.GGMLQuantizationType.Q8_0, chat_template=LOOPING)
    import_gguf(ModelStore(settings.models_dir), "looping", looping_gguf)
    flooded = {"model": "looping", "messages": [{"role": "user", "content": "Hi"}], "stream": False}
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "stream": False}
    chat["options"] = {"num_predict": 2}

    with TestClient(create_app(replace(settings, render_timeout=TIMEOUT_S)), base_url="http://localhost") as client:

        def timed_chat() -> float:
            start = time.monotonic()
            answer = client.post("/api/chat", json=chat)
            assert answer.status_code == 200, answer.text
            return time.monotonic() - start

        timed_chat()  # loads the model
        # Loads the looping model; its render, which a fresh worker takes, is over in microseconds.
        assert client.post("/api/chat", json={**flooded, "messages": []}).status_code == 200
        # The fastest of a few: the machine may be busy with other work than this test's.
        alone = min(timed_chat() for _ in range(5))

        with ThreadPoolExecutor(FLOOD) as pool:
            start = time.monotonic()
            flood = [pool.submit(client.post, "/api/chat", json=flooded) for _ in range(FLOOD)]
            until(lambda: POOL.busy >= 1)  # the looping template renders
            under_flood = timed_chat()
            for _ in range(2):  # the fastest of a few taken while the flood renders, as for ``alone``
                if POOL.busy:
                    under_flood = min(under_flood, timed_chat())
            answers = [f.result() for f in flood]
            flood_s = time.monotonic() - start

    print(f"chat alone {alone:.3f}s, under a flood of {FLOOD}: {under_flood:.3f}s; the flood took {flood_s:.1f}s")
    assert under_flood < alone + 1.0
    for answer in answers:
        assert (answer.status_code, answer.json()) == (
            500,
            {"error": f"template: rendering timed out after {TIMEOUT_S:g}s"},
        )
    # The same render is refused at once once it timed out: the flood costs a couple of timeouts,
    # not 40 / workers of them (60 s here).
    assert flood_s < 4 * TIMEOUT_S
