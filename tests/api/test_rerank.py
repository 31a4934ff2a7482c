"""Rerank over HTTP on a tiny Qwen3-Reranker (``python -m cllm_ollama.testing.ggufs reranker``):
scores equal llama.cpp's own rank pooling of each pair alone; the shapes of /v1/rerank, /rerank
and /api/rerank; the capability in /api/show; errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.engine.binding import Batch, Context, Model
from cllm_ollama.engine.embedder import _fitted_pair, rerank_tokens
from cllm_ollama.store.create import import_gguf
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import RERANK_TEMPLATE, write_reranker

pytestmark = pytest.mark.model
RERANKER = "ranker"
QUERY = "where is the sea"
DOCS = ["the sea is blue", "hello world", "a sky of stars", "rain on the hills"]


@pytest.fixture(scope="module")
def reranker_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_reranker(tmp_path_factory.mktemp("reranker") / "reranker.gguf")


@pytest.fixture
def client(tmp_path: Path, reranker_gguf: Path, qwen3_gguf: Path) -> Iterator[TestClient]:
    store = ModelStore(tmp_path / "models")
    import_gguf(store, RERANKER, reranker_gguf)
    import_gguf(store, "tiny", qwen3_gguf)
    # Flash attention off, here and in the oracle: llama.cpp's CPU flash-attention kernel rounds a
    # batch of several sequences otherwise than one alone (by ~4e-3 on this peaked tiny model).
    settings = Settings(
        models_dir=tmp_path / "models", num_parallel=4, context_length=256, num_thread=2, flash_attention=False
    )
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        yield c


def oracle(path: Path) -> list[float]:
    """llama.cpp's rank pooling, directly: each pair alone in one decode, as llama-server scores it (embd[0])."""
    model = Model(path, n_gpu_layers=0)
    ctx = Context(model, n_seq_max=1, n_ctx_seq=256, n_batch=256, n_threads=2, embeddings=True, flash_attn=False)
    batch = Batch(256)
    try:
        assert model.chat_template("rerank") == RERANK_TEMPLATE
        scores = []
        for doc in DOCS:
            text = RERANK_TEMPLATE.replace("{query}", QUERY).replace("{document}", doc)
            tokens = model.tokenize(text, add_special=False, parse_special=True)
            assert tokens == rerank_tokens(model, QUERY, doc)
            ctx.clear()
            batch.fill(tokens, range(len(tokens)), [0] * len(tokens), range(len(tokens)))
            ctx.decode(batch)
            scores.append(float(ctx.embedding(0)[0]))
        return scores
    finally:
        ctx.close()
        model.close()


def test_scores_equal_llama_cpp_rank_pooling_and_come_best_first(client: TestClient, reranker_gguf: Path) -> None:
    expected = oracle(reranker_gguf)
    assert len(set(expected)) == len(DOCS) and all(0 < s < 1 for s in expected)  # P(yes): softmaxed labels
    best_first = sorted(range(len(DOCS)), key=lambda i: expected[i], reverse=True)
    body = {"model": RERANKER, "query": QUERY, "documents": DOCS}
    for path in ("/v1/rerank", "/rerank"):
        r = client.post(path, json=body)
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["object"] == "list" and out["model"] == RERANKER and out["usage"]["prompt_tokens"] > 4 * 8
        assert [x["index"] for x in out["results"]] == best_first
        # All four pairs in one decode: the same scores as each alone.
        got = {x["index"]: x["relevance_score"] for x in out["results"]}
        np.testing.assert_allclose([got[i] for i in range(len(DOCS))], expected, atol=1e-5)
    top = client.post(
        "/v1/rerank", json=body | {"top_n": 2, "return_documents": True, "documents": [{"text": d} for d in DOCS]}
    ).json()
    assert [x["index"] for x in top["results"]] == best_first[:2]
    assert top["results"][0]["document"] == {"text": DOCS[best_first[0]]}
    native = client.post("/api/rerank", json=body).json()
    assert [(x["index"], x["document"]) for x in native["results"]] == [(i, DOCS[i]) for i in best_first]
    assert native["prompt_eval_count"] == out["usage"]["prompt_tokens"]
    assert native["total_duration"] >= native["load_duration"] > 0


def test_the_capability_shows_and_other_uses_are_refused(client: TestClient) -> None:
    assert client.post("/api/show", json={"model": RERANKER}).json()["capabilities"] == ["rerank"]
    r = client.post("/api/embed", json={"model": RERANKER, "input": "hi"})
    assert r.status_code == 400 and r.json()["error"] == '"ranker" does not support embeddings'
    r = client.post("/api/generate", json={"model": RERANKER, "prompt": "hi"})
    assert r.status_code == 400
    r = client.post("/v1/rerank", json={"model": "tiny", "query": "q", "documents": ["d"]})
    assert r.status_code == 400 and r.json()["error"]["message"] == '"tiny" does not support rerank'


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"query": "q", "documents": ["d"]}, "model is required"),
        ({"model": RERANKER, "documents": ["d"]}, '"query" must be a non-empty string'),
        ({"model": RERANKER, "query": "q", "documents": []}, '"documents" must be a non-empty array'),
        ({"model": RERANKER, "query": "q", "documents": [1]}, '"documents" must hold strings'),
        ({"model": RERANKER, "query": "q", "documents": ["d"], "top_n": 0}, '"top_n" must be a positive integer'),
        ({"model": RERANKER, "query": "q", "documents": ["d"], "top_n": "2"}, "cannot unmarshal string"),
    ],
)
def test_bad_requests(client: TestClient, body: dict[str, object], message: str) -> None:
    v1 = client.post("/v1/rerank", json=body)
    assert v1.status_code == 400 and message in v1.json()["error"]["message"]
    native = client.post("/api/rerank", json=body)
    assert native.status_code == 400 and message in native.json()["error"]


def test_a_document_longer_than_the_context_loses_its_end(client: TestClient, reranker_gguf: Path) -> None:
    """The pair keeps the template's end, which a causal reranker scores from: no 500, a real score."""
    long = "the sea and the sky and the land " * 60  # ~480 tokens, the context is 256
    out = client.post("/v1/rerank", json={"model": RERANKER, "query": QUERY, "documents": [long, DOCS[0]]})
    assert out.status_code == 200, out.text
    assert out.json()["usage"]["prompt_tokens"] <= 2 * 256
    assert all(0 < r["relevance_score"] < 1 for r in out.json()["results"])
    model = Model(reranker_gguf, n_gpu_layers=0)
    try:
        pair = _fitted_pair(model, QUERY, long, 256)
        tail = model.tokenize("<|im_end|>\n<|im_start|>assistant\n", add_special=False, parse_special=True)
        assert len(pair) <= 256 and pair[-len(tail) :] == tail
    finally:
        model.close()
