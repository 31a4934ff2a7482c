"""/api/tokenize, /api/detokenize (Ollama's proposal) and /tokenize, /detokenize (llama-server's)
over HTTP on the tiny qwen3, against the vocabulary read directly through the binding."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cllm_ollama.engine.binding import Model

MODEL = "tiny"
TEXT = "Hello, world! <|im_start|>user"

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def vocab(qwen3_gguf: Path) -> Model:
    model = Model(qwen3_gguf, n_gpu_layers=0)
    yield model
    model.close()


def test_api_tokenize_matches_the_vocabulary_and_round_trips(client: TestClient, vocab: Model) -> None:
    r = client.post("/api/tokenize", json={"model": MODEL, "content": TEXT})
    assert r.status_code == 200, r.text
    out = r.json()
    # As Ollama's runner and llama-server tokenize: no BOS added, special tokens parsed as one id.
    assert out["tokens"] == vocab.tokenize(TEXT, add_special=False, parse_special=True)
    assert out["model"] == MODEL and out["total_duration"] >= out["load_duration"] > 0
    back = client.post("/api/detokenize", json={"model": MODEL, "tokens": out["tokens"]})
    assert back.status_code == 200, back.text
    assert back.json()["content"] == TEXT and back.json()["model"] == MODEL
    empty = client.post("/api/tokenize", json={"model": MODEL, "content": ""}).json()
    assert empty["tokens"] == []


def test_llama_server_tokenize_options_and_pieces(client: TestClient, vocab: Model) -> None:
    plain = client.post("/tokenize", json={"model": MODEL, "content": TEXT}).json()["tokens"]
    assert plain == vocab.tokenize(TEXT, add_special=False, parse_special=True)
    literal = client.post("/tokenize", json={"model": MODEL, "content": TEXT, "parse_special": False}).json()
    assert literal["tokens"] == vocab.tokenize(TEXT, add_special=False, parse_special=False)
    assert len(literal["tokens"]) > len(plain)
    pieces = client.post("/tokenize", json={"model": MODEL, "content": "Hello world", "with_pieces": True}).json()
    ids = vocab.tokenize("Hello world", add_special=False)
    assert [p["id"] for p in pieces["tokens"]] == ids
    assert "".join(p["piece"] for p in pieces["tokens"]) == "Hello world"
    back = client.post("/detokenize", json={"model": MODEL, "tokens": plain})
    assert back.status_code == 200 and back.json() == {"content": TEXT}


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("/api/tokenize", {"content": "hi"}, 400, "model is required"),
        ("/api/tokenize", {"model": "nope", "content": "hi"}, 404, "model 'nope' not found"),
        ("/api/tokenize", {"model": MODEL, "content": 5}, 400, "cannot unmarshal number"),
        ("/api/detokenize", {"model": MODEL, "tokens": [1, "a"]}, 400, "cannot unmarshal string"),
        ("/api/detokenize", {"model": MODEL, "tokens": [10**9]}, 400, "invalid token id"),
        ("/api/detokenize", {"model": MODEL, "tokens": [-1]}, 400, "invalid token id"),
        ("/api/detokenize", {"model": MODEL, "tokens": "12"}, 400, "cannot unmarshal string"),
    ],
)
def test_api_token_errors(client: TestClient, path: str, body: dict[str, object], status: int, message: str) -> None:
    r = client.post(path, json=body)
    assert r.status_code == status
    assert message in r.json()["error"]


def test_llama_server_token_errors(client: TestClient) -> None:
    """In Ollama's error shape, as every path outside /v1 (its middleware's answers too)."""
    r = client.post("/tokenize", json={"model": MODEL})
    assert r.status_code == 400 and "content" in r.json()["error"]
    r = client.post("/detokenize", json={"model": MODEL, "tokens": [10**9]})
    assert r.status_code == 400 and "invalid token id" in r.json()["error"]
    r = client.post("/tokenize", json={"content": "hi"})
    assert r.status_code == 400 and r.json()["error"] == "model is required"
