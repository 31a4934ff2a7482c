"""Ollama #6214 over HTTP: /api/embed requests from many clients at once share the embedding
thread's decodes (counted, not timed), and each gets the vector it gets alone."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from polling import until
from starlette.testclient import TestClient

from cllm_ollama.api.services import services

pytestmark = pytest.mark.model
MODEL = "tiny"
TEXTS = ["the sea", "hello world", "a sky of stars", "rain", "one two three", "blue", "green hills", "x"]


def test_concurrent_embed_requests_share_decodes(client: TestClient) -> None:
    def embed(text: str) -> list[float]:
        r = client.post("/api/embed", json={"model": MODEL, "input": text})
        assert r.status_code == 200, r.text
        return r.json()["embeddings"][0]  # type: ignore[no-any-return]

    alone = [embed(t) for t in TEXTS]
    (entry,) = services(client.app).pool.running()
    embedder = entry.model.embedder
    rounds, decodes = embedder.rounds, embedder.decodes
    gate = threading.Event()
    embedder._executor.submit(gate.wait)  # the thread busy until every request has queued
    with ThreadPoolExecutor(len(TEXTS)) as clients:
        futures = [clients.submit(embed, t) for t in TEXTS]
        until(lambda: len(embedder._queued) == len(TEXTS))
        gate.set()
        together = [f.result() for f in futures]
    slots = entry.model.n_slots  # sequences per decode
    assert embedder.rounds - rounds == 1
    assert embedder.decodes - decodes == -(-len(TEXTS) // slots) < len(TEXTS)
    for a, b in zip(together, alone, strict=True):
        assert float(np.dot(a, b)) > 0.99999
