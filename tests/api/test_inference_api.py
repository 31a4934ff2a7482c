"""/api/generate, /api/chat and /api/ps over HTTP on a real tiny GGUF."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
from starlette.testclient import TestClient

from cllm_ollama.api.services import services
from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.store.create import import_gguf
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_qwen3

MODEL = "tiny"  # installed by conftest.settings

pytestmark = pytest.mark.model

GREEDY = {"temperature": 0, "num_predict": 12}


def lines(response: Any) -> list[dict[str, Any]]:
    raw = response.text
    assert raw.endswith("\n") and "\n\n" not in raw
    return [json.loads(line) for line in raw.splitlines()]


def test_generate_streams_ndjson_with_final_metrics_and_context(client: TestClient) -> None:
    r = client.post("/api/generate", json={"model": MODEL, "prompt": "Hello", "options": GREEDY})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/x-ndjson"
    chunks = lines(r)
    *parts, final = chunks
    assert all(c["done"] is False and c["model"] == MODEL and "created_at" in c for c in parts)
    assert final["done"] is True and final["done_reason"] == "length" and final["response"] == ""
    assert final["eval_count"] == 12
    assert final["prompt_eval_count"] > 3
    for key in ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration"):
        assert isinstance(final[key], int) and final[key] > 0
    assert len(final["context"]) == final["prompt_eval_count"] + 12
    whole = client.post(
        "/api/generate", json={"model": MODEL, "prompt": "Hello", "options": GREEDY, "stream": False}
    ).json()
    assert whole["response"] == "".join(c["response"] for c in parts)
    assert whole["context"] == final["context"]


def test_chat_returns_assistant_messages(client: TestClient) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "USER", "content": "Hi"}],
        "options": GREEDY,
        "think": False,
        "stream": False,
    }
    r = client.post("/api/chat", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["message"]["role"] == "assistant" and out["done"] is True
    assert out["done_reason"] == "length" and out["eval_count"] == 12
    streamed = lines(client.post("/api/chat", json=body | {"stream": True}))
    assert "".join(c["message"]["content"] for c in streamed) == out["message"]["content"]
    assert "context" not in streamed[-1]


def test_multi_turn_chat_carries_the_history(client: TestClient) -> None:
    history = [{"role": "user", "content": "Tell me about the sea."}]
    first = client.post(
        "/api/chat",
        json={"model": MODEL, "messages": history, "options": GREEDY, "stream": False, "think": False},
    ).json()
    history += [first["message"], {"role": "user", "content": "And the sky?"}]
    second = client.post(
        "/api/chat",
        json={"model": MODEL, "messages": history, "options": GREEDY, "stream": False, "think": False},
    ).json()
    assert second["prompt_eval_count"] > first["prompt_eval_count"] + first["eval_count"] // 2


def test_stop_strings_are_not_emitted(client: TestClient) -> None:
    base = client.post(
        "/api/generate",
        json={"model": MODEL, "prompt": "Hi", "options": GREEDY, "stream": False, "raw": True},
    ).json()["response"]
    assert len(base) > 6
    stop = base[3:6]
    out = client.post(
        "/api/generate",
        json={
            "model": MODEL,
            "prompt": "Hi",
            "raw": True,
            "stream": False,
            "options": GREEDY | {"stop": [stop]},
        },
    ).json()
    assert out["done_reason"] == "stop"
    assert out["response"] == base[: base.index(stop)]
    assert "context" not in out  # raw mode


def test_format_json_schema_output_parses_and_validates(client: TestClient) -> None:
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer"}},
        "required": ["ok", "n"],
    }
    out = client.post(
        "/api/generate",
        json={
            "model": MODEL,
            "prompt": "Answer",
            "format": schema,
            "stream": False,
            "options": {"temperature": 0},
        },
    ).json()
    value = json.loads(out["response"])
    assert set(value) == {"ok", "n"} and isinstance(value["ok"], bool) and isinstance(value["n"], int)
    assert out["done_reason"] == "stop"


def test_load_and_unload_sentinels_and_ps(client: TestClient) -> None:
    assert client.get("/api/ps").json() == {"models": []}
    r = client.post("/api/generate", json={"model": MODEL})
    assert r.json()["done_reason"] == "load" and r.json()["response"] == ""
    (loaded,) = client.get("/api/ps").json()["models"]
    assert loaded["name"] == "tiny:latest" and loaded["model"] == "tiny:latest"
    assert loaded["context_length"] == 256 and loaded["size"] > 0 and loaded["expires_at"].endswith("Z")
    assert loaded["details"]["family"] == "qwen3"
    # As Ollama counts a runner: the weights, every slot's KV cache and the compute buffers.
    (entry,) = services(client.app).pool.running()
    model, spec = entry.model.model, entry.model.spec  # type: ignore[attr-defined]
    kv = model.kv_bytes_per_token(spec.kv_cache_type) * spec.n_ctx_slot * spec.n_slots
    assert loaded["size"] > model.size_bytes + kv and loaded["size_vram"] == 0
    r = client.post("/api/chat", json={"model": MODEL, "messages": [], "keep_alive": 0})
    assert r.json()["done_reason"] == "unload" and r.json()["message"] == {"role": "assistant", "content": ""}
    assert client.get("/api/ps").json() == {"models": []}


def test_keep_alive_zero_unloads_after_the_request(client: TestClient) -> None:
    r = client.post(
        "/api/generate",
        json={"model": MODEL, "prompt": "Hi", "options": GREEDY, "stream": False, "keep_alive": 0},
    )
    assert r.status_code == 200
    assert client.get("/api/ps").json() == {"models": []}


def test_use_mmap_false_copies_the_weights_and_answers_the_same(client: TestClient) -> None:
    """Ollama's ``use_mmap`` (its runner's ``--no-mmap``): the GGUF is read into memory, not mapped
    (this process's own maps say which), and another setting reloads the idle model."""
    blob = str(services(client.app).store.get(MODEL).model_path)

    def answer(use_mmap: bool) -> tuple[str, bool]:
        body = {"model": MODEL, "prompt": "Hi", "options": GREEDY | {"use_mmap": use_mmap}, "stream": False}
        r = client.post("/api/generate", json=body)
        assert r.status_code == 200, r.text
        return r.json()["response"], blob in Path("/proc/self/maps").read_text()

    copied, mapped_then = answer(False)
    mapped, mapped_now = answer(True)
    assert (copied, mapped_then, mapped_now) == (mapped, False, True)


def test_smaller_num_ctx_does_not_reload(client: TestClient) -> None:
    client.post("/api/generate", json={"model": MODEL})
    before = client.get("/api/ps").json()["models"][0]
    out = client.post(
        "/api/generate",
        json={"model": MODEL, "prompt": "Hi", "stream": False, "options": GREEDY | {"num_ctx": 64}},
    ).json()
    assert out["done_reason"] == "length"
    after = client.get("/api/ps").json()["models"][0]
    assert after["context_length"] == before["context_length"] == 256


@pytest.mark.parametrize(
    ("path", "body", "status", "error"),
    [
        ("/api/generate", {"model": "nope", "prompt": "x"}, 404, "model 'nope' not found"),
        ("/api/generate", {"prompt": "x"}, 404, "model '' not found"),
        ("/api/chat", {"messages": []}, 400, "model is required"),
        ("/api/chat", {"model": "nope", "messages": []}, 404, "model 'nope' not found"),
        ("/api/generate", {"model": "a/b/c/d"}, 400, "invalid model name"),
        (
            "/api/generate",
            {"model": MODEL, "prompt": "x", "raw": True, "system": "s"},
            400,
            "raw mode does not support template, system, or context",
        ),
        (
            "/api/generate",
            {"model": MODEL, "prompt": "x", "top_logprobs": 21},
            400,
            "top_logprobs must be between 0 and 20",
        ),
        (
            "/api/generate",
            {"model": MODEL, "prompt": "x", "options": {"num_ctx": "big"}},
            500,
            'option "num_ctx" must be of type integer',
        ),
        (
            "/api/generate",
            {"model": MODEL, "prompt": "x", "think": "loud"},
            400,
            'invalid think value: "loud" (must be "high", "medium", "low", "max", true, or false)',
        ),
        (
            "/api/generate",
            {"model": MODEL, "prompt": "x", "keep_alive": "3600"},
            400,
            'time: missing unit in duration "3600"',
        ),
        (
            "/api/generate",
            {"model": MODEL, "prompt": "x", "suffix": "y"},
            400,
            "registry.ollama.ai/library/tiny:latest does not support insert",
        ),
        (
            "/api/generate",
            {"model": MODEL, "prompt": "x" * 3000, "truncate": False},
            400,
            "the prompt is longer than the context length currently available to the model; shorten the "
            "prompt, adjust the context length in settings, or use a model with a longer context length",
        ),
        (  # Ollama cuts a prompt in the middle only where its runner may shift the context
            "/api/chat",
            {"model": MODEL, "messages": [{"role": "user", "content": "x" * 3000}], "shift": False},
            400,
            "the prompt is longer than the context length currently available to the model; shorten the "
            "prompt, adjust the context length in settings, or use a model with a longer context length",
        ),
    ],
)
def test_errors_have_ollamas_status_and_text(
    client: TestClient, path: str, body: dict[str, Any], status: int, error: str
) -> None:
    r = client.post(path, json=body)
    assert (r.status_code, r.json()) == (status, {"error": error})


def test_missing_body_and_bad_json(client: TestClient) -> None:
    r = client.post("/api/generate", content=b"")
    assert (r.status_code, r.json()) == (400, {"error": "missing request body"})
    r = client.post("/api/chat", content=b"{nope")
    assert r.status_code == 400 and "error" in r.json()


def test_long_prompt_is_truncated_by_default(client: TestClient) -> None:
    out = client.post(
        "/api/generate",
        json={"model": MODEL, "prompt": "word " * 1000, "stream": False, "options": GREEDY},
    ).json()
    assert out["done"] is True and 0 < out["prompt_eval_count"] < 256


def test_embed_returns_normalised_vectors_and_legacy_raw_ones(client: TestClient) -> None:
    out = client.post("/api/embed", json={"model": MODEL, "input": ["hello world", "the sea"]}).json()
    assert out["model"] == MODEL and len(out["embeddings"]) == 2 and out["prompt_eval_count"] > 2
    a, b = (np.array(v) for v in out["embeddings"])
    assert a.shape == (64,) and abs(np.linalg.norm(a) - 1) < 1e-5 and not np.allclose(a, b)
    single = client.post("/api/embed", json={"model": MODEL, "input": "hello world"}).json()
    assert np.allclose(single["embeddings"][0], a, atol=1e-5)
    cut = client.post("/api/embed", json={"model": MODEL, "input": "hello world", "dimensions": 8}).json()
    assert len(cut["embeddings"][0]) == 8 and abs(np.linalg.norm(cut["embeddings"][0]) - 1) < 1e-5
    for ignored in (0, -3, 64, 1000):  # as Ollama: only a size between 0 and the vector's cuts it
        whole = client.post("/api/embed", json={"model": MODEL, "input": "hello world", "dimensions": ignored})
        assert whole.status_code == 200 and np.allclose(whole.json()["embeddings"][0], a, atol=1e-5)
    legacy = client.post("/api/embeddings", json={"model": MODEL, "prompt": "hello world"}).json()
    raw = np.array(legacy["embedding"])
    assert np.allclose(raw / np.linalg.norm(raw), a, atol=1e-5)
    assert client.post("/api/embed", json={"model": MODEL, "input": []}).json() == {"model": MODEL, "embeddings": []}


@pytest.mark.parametrize(
    ("path", "body", "status", "error"),
    [
        ("/api/embed", {"model": "nope", "input": "x"}, 404, 'model "nope" not found, try pulling it first'),
        ("/api/embed", {"input": "x"}, 404, "model '' not found"),
        ("/api/embed", {"model": MODEL, "input": 3}, 400, "invalid input type"),
        ("/api/embeddings", {"prompt": "x"}, 400, "model is required"),
        (
            "/api/embed",
            {"model": MODEL, "input": "word " * 400, "truncate": False},
            400,
            "the input length exceeds the context length",
        ),
    ],
)
def test_embed_errors(client: TestClient, path: str, body: dict[str, Any], status: int, error: str) -> None:
    r = client.post(path, json=body)
    assert (r.status_code, r.json()) == (status, {"error": error})


def test_penalties_change_greedy_output(client: TestClient) -> None:
    body = {"model": MODEL, "prompt": "Hi", "raw": True, "stream": False}
    plain = client.post("/api/generate", json=body | {"options": {"temperature": 0, "num_predict": 40}}).json()
    penalized = client.post(
        "/api/generate",
        json=body | {"options": {"temperature": 0, "num_predict": 40, "repeat_penalty": 1.5, "presence_penalty": 1}},
    )
    assert penalized.status_code == 200, penalized.text
    assert penalized.json()["eval_count"] == 40 and penalized.json()["response"] != plain["response"]


def test_load_options_a_client_sends_cannot_exhaust_the_machine(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cllm_ollama.engine import loaded as engine_loaded

    body = {"model": MODEL, "prompt": "Hi", "stream": False}
    # Huge batch and thread counts are clamped (an unclamped batch reserves n_batch x n_vocab logits).
    huge = client.post("/api/generate", json=body | {"options": GREEDY | {"num_batch": 10**7, "num_thread": 10**6}})
    assert huge.status_code == 200 and huge.json()["eval_count"] == 12
    # A context the machine cannot hold is refused before llama.cpp allocates it.
    monkeypatch.setattr(engine_loaded, "available_memory", lambda: 1 << 20)
    r = client.post("/api/generate", json=body | {"options": GREEDY | {"num_ctx": 40960}})
    assert r.status_code == 500 and r.json()["error"].startswith("model requires more system memory")
    monkeypatch.undo()
    assert client.post("/api/generate", json=body | {"options": GREEDY}).status_code == 200


def test_least_recently_used_model_is_evicted_beyond_max_loaded(settings: Settings) -> None:
    with TestClient(create_app(replace(settings, max_loaded_models=1)), base_url="http://localhost") as c:
        c.post("/api/generate", json={"model": MODEL})
        assert [m["name"] for m in c.get("/api/ps").json()["models"]] == ["tiny:latest"]
        c.post("/api/generate", json={"model": "endless", "prompt": "Hi", "stream": False, "options": GREEDY})
        assert [m["name"] for m in c.get("/api/ps").json()["models"]] == ["endless:latest"]


def test_keep_alive_expiry_unloads_the_model(client: TestClient) -> None:
    client.post("/api/generate", json={"model": MODEL, "keep_alive": "100ms"})
    expires = client.get("/api/ps").json()["models"][0]["expires_at"]
    assert expires.startswith("20")
    deadline = time.monotonic() + 20
    while client.get("/api/ps").json()["models"]:
        assert time.monotonic() < deadline, "the model was never unloaded"
        time.sleep(0.05)
    forever = client.post("/api/generate", json={"model": MODEL, "keep_alive": -1})
    assert forever.json()["done_reason"] == "load"
    assert client.get("/api/ps").json()["models"][0]["expires_at"] > "2300"


def test_logprobs_of_each_token_with_top_alternatives(client: TestClient) -> None:
    body = {"model": MODEL, "prompt": "Hi", "logprobs": True, "top_logprobs": 3, "options": GREEDY}
    chunks = lines(client.post("/api/generate", json=body))
    entries = [e for c in chunks for e in c.get("logprobs", [])]
    assert len(entries) == chunks[-1]["eval_count"] == 12
    text = "".join(c["response"] for c in chunks)
    assert bytes(b for e in entries for b in e["bytes"]).decode("utf-8", "replace") == text
    for e in entries:
        assert e["logprob"] <= 0 and len(e["top_logprobs"]) == 3
        # Greedy: the sampled token is the most likely one.
        assert e["top_logprobs"][0]["token"] == e["token"] and e["top_logprobs"][0]["logprob"] == e["logprob"]
        assert sum(np.exp(t["logprob"]) for t in e["top_logprobs"]) <= 1 + 1e-6
    whole = client.post("/api/chat", json={**body, "messages": [{"role": "user", "content": "Hi"}], "stream": False})
    assert len(whole.json()["logprobs"]) == 12 and "top_logprobs" in whole.json()["logprobs"][0]
    plain = client.post("/api/generate", json=body | {"logprobs": False, "stream": False}).json()
    assert "logprobs" not in plain


def test_template_override_is_a_go_template(client: TestClient) -> None:
    body = {"model": MODEL, "prompt": "Hello there", "stream": False, "options": GREEDY}
    raw = client.post("/api/generate", json=body | {"raw": True}).json()
    templated = client.post("/api/generate", json=body | {"template": "{{ .Prompt }}"}).json()
    # The override rendered to exactly the prompt: the same tokens, so the same greedy output.
    assert templated["prompt_eval_count"] == raw["prompt_eval_count"]
    assert templated["response"] == raw["response"]
    framed = client.post("/api/generate", json=body | {"template": "USER: {{ .Prompt }} ASSISTANT:"}).json()
    assert framed["prompt_eval_count"] > raw["prompt_eval_count"]
    broken = client.post("/api/generate", json=body | {"template": "{{ if .Prompt }}"})
    assert broken.status_code == 500 and broken.json()["error"].startswith("template: ")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        # Rejected after the model is held: the reference must still be given back.
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "stream": True, "stream_options": 1}),
        ("/api/generate", {"prompt": "x", "context": [10**9]}),
        ("/api/generate", {"prompt": "x", "format": "yaml"}),
    ],
)
def test_a_rejected_request_gives_its_model_back(client: TestClient, path: str, body: dict[str, Any]) -> None:
    r = client.post(path, json={"model": MODEL, **body})
    assert 400 <= r.status_code < 600
    assert all(entry.refs == 0 for entry in services(client.app).pool.running())
    # A reload (which waits for the model to be idle) still goes through.
    bigger = client.post(
        "/api/generate", json={"model": MODEL, "prompt": "x", "stream": False, "options": GREEDY | {"num_ctx": 512}}
    )
    assert bigger.status_code == 200


def test_options_that_used_to_crash_or_shrink_the_context(client: TestClient) -> None:
    body = {"model": MODEL, "prompt": "Hi", "stream": False}
    assert client.post("/api/generate", json=body | {"options": GREEDY | {"num_batch": 1}}).status_code == 200
    assert client.post("/api/generate", json=body | {"options": GREEDY | {"num_ctx": -5}}).status_code == 200
    # One client's tiny num_ctx does not shrink everyone's context.
    assert client.get("/api/ps").json()["models"][0]["context_length"] == 256
    assert client.post("/api/generate", json=body | {"keep_alive": 1e12}).status_code == 200
    assert client.get("/api/ps").status_code == 200


def test_suffix_fills_in_the_middle_on_a_model_with_fim_tokens(tmp_path: Path, settings: Settings) -> None:
    fim = write_qwen3(tmp_path / "fim.gguf", qtype=gguf.GGMLQuantizationType.Q8_0, fim=True)
    import_gguf(ModelStore(settings.models_dir), "coder", fim)
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        assert "insert" in c.post("/api/show", json={"model": "coder"}).json()["capabilities"]
        body = {"model": "coder", "prompt": "def add(a, b):", "suffix": "return c", "stream": False}
        out = c.post("/api/generate", json=body | {"options": GREEDY})
        assert out.status_code == 200, out.text
        raw_prompt = c.post("/api/generate", json={**body, "suffix": "", "raw": True, "options": GREEDY}).json()
        raw_suffix = c.post(
            "/api/generate", json={**body, "prompt": "return c", "suffix": "", "raw": True, "options": GREEDY}
        )
        # <fim_pre> prompt <fim_suf> suffix <fim_mid>
        expected = raw_prompt["prompt_eval_count"] + raw_suffix.json()["prompt_eval_count"] + 3
        assert out.json()["prompt_eval_count"] == expected
