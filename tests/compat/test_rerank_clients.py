"""LangChain's ``CohereRerank`` (langchain-cohere, over the ``cohere`` SDK's ClientV2), unchanged,
against a live cllm serving the tiny reranker: the documents it keeps, best first, with the
scores /v1/rerank gives."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from serving import serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.store.create import import_gguf
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_reranker

langchain_cohere = pytest.importorskip("langchain_cohere")
cohere = pytest.importorskip("cohere")
documents = pytest.importorskip("langchain_core.documents")

pytestmark = pytest.mark.model
QUERY = "where is the sea"
DOCS = ["the sea is blue", "hello world", "a sky of stars", "rain on the hills"]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("rerank-clients")
    import_gguf(ModelStore(root / "models"), "ranker", write_reranker(root / "reranker.gguf"))
    with serve_in_thread(create_app(Settings(models_dir=root / "models", num_thread=2))) as served:
        yield served


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    """The connections of the test and of the SDK's client, closed after the test (the client
    CohereRerank makes for itself is never closed, its pooled socket left to the collector)."""
    with httpx.Client(timeout=60) as client:
        yield client


def reranker(url: str, http: httpx.Client, model: str, **kwargs: object) -> langchain_cohere.CohereRerank:
    """CohereRerank over the ClientV2 it would make itself (base URL, key), on ``http``."""
    client = cohere.ClientV2("ollama", base_url=url, httpx_client=http)
    return langchain_cohere.CohereRerank(model=model, client=client, **kwargs)


def test_langchain_cohere_rerank(url: str, http: httpx.Client) -> None:
    ours = http.post(f"{url}/v1/rerank", json={"model": "ranker", "query": QUERY, "documents": DOCS})
    expected = ours.json()["results"][:2]
    kept = reranker(url, http, "ranker", top_n=2).compress_documents(
        [documents.Document(page_content=d) for d in DOCS], QUERY
    )
    assert [d.page_content for d in kept] == [DOCS[r["index"]] for r in expected]
    assert [d.metadata["relevance_score"] for d in kept] == pytest.approx([r["relevance_score"] for r in expected])
    with pytest.raises(Exception, match=r"not found"):
        reranker(url, http, "nope").rerank(DOCS, QUERY)
