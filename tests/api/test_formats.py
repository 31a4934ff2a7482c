from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cllm_ollama.api.request_fields import JSON_GRAMMAR, grammar_for_format
from cllm_ollama.errors import CllmError, InvalidRequest


def test_no_format_means_no_grammar() -> None:
    assert grammar_for_format(None) is None
    assert grammar_for_format("") is None


def test_json_format() -> None:
    assert grammar_for_format("json") is JSON_GRAMMAR
    rules = {line.split("::=")[0].strip() for line in JSON_GRAMMAR.splitlines() if "::=" in line}
    assert rules == {"root", "value", "object", "array", "string", "number", "ws"}
    assert "root   ::= object\n" in JSON_GRAMMAR
    assert 'ws ::= | " " | "\\n" [ \\t]{0,20}\n' in JSON_GRAMMAR


@pytest.mark.parametrize(
    ("fmt", "quoted"),
    [
        ("xml", r'"\"xml\""'),
        ("JSON", r'"\"JSON\""'),
        (["a", 1], r'"[\"a\",1]"'),
        (5, '"5"'),
        (True, '"true"'),
        (False, '"false"'),
        ("é\n", r'"\"é\\n\""'),
    ],
)
def test_invalid_format(fmt: object, quoted: str) -> None:
    with pytest.raises(CllmError) as info:
        grammar_for_format(fmt)
    assert type(info.value) is CllmError and info.value.status_code == 500
    assert info.value.message == f'invalid format: {quoted}; expected "json" or a valid JSON Schema object'


def test_json_schema() -> None:
    pytest.importorskip("llama_cpp")
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    grammar = grammar_for_format(schema)
    assert grammar is not None
    lines = grammar.splitlines()
    assert 'root ::= "{" space name-kv "," space age-kv "}" space' in lines
    assert 'name-kv ::= "\\"name\\"" space ":" space string' in lines
    assert 'age-kv ::= "\\"age\\"" space ":" space integer' in lines
    assert grammar_for_format(dict(schema)) == grammar


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "foo"}, "Unrecognized schema"),
        ({"$ref": "https://example.com/s.json"}, "Fetching remote schemas is not allowed"),
        ({"type": "object", "properties": {"a": {"$ref": "other"}}}, "Unsupported ref other"),
        ({"type": "string", "pattern": "abc"}, "Pattern must start with"),
    ],
)
def test_rejected_json_schema(schema: dict[str, object], reason: str) -> None:
    pytest.importorskip("llama_cpp")
    with pytest.raises(InvalidRequest) as info:
        grammar_for_format(schema)
    assert info.value.message.startswith("invalid JSON schema in format: ")
    assert reason in info.value.message


@pytest.mark.model
def test_grammars_parse_in_llama_cpp(tmp_path: Path) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    from cllm_ollama.testing.ggufs import write_qwen3

    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(write_qwen3(tmp_path / "m.gguf")).encode(), params)
    assert model
    try:
        vocab = llama_cpp.llama_model_get_vocab(model)
        schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "number"}}}}
        for grammar in (JSON_GRAMMAR, grammar_for_format(schema), "root ::= broken ("):
            assert grammar is not None
            sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
            assert bool(sampler) is not grammar.startswith("root ::= broken")
            if sampler:
                llama_cpp.llama_sampler_free(sampler)
    finally:
        llama_cpp.llama_model_free(model)


BIG_STRING = {"type": "string", "maxLength": 100000}
BIG_ARRAY = {"type": "array", "items": {"type": "integer"}, "maxItems": 100000}


@pytest.mark.parametrize("schema", [BIG_STRING, BIG_ARRAY, {"type": "object", "properties": {"a": BIG_STRING}}])
def test_schema_counts_past_the_bound_are_refused(schema: dict[str, object]) -> None:
    with pytest.raises(InvalidRequest, match="is more than the supported 1000"):
        grammar_for_format(schema)


def test_schema_nesting_past_the_bound_is_refused() -> None:
    schema: dict[str, object] = {"type": "string"}
    for _ in range(100):
        schema = {"type": "array", "items": schema}
    with pytest.raises(InvalidRequest, match="nested deeper than"):
        grammar_for_format(schema)


@pytest.mark.model
def test_huge_schemas_get_400_on_every_dialect_and_the_server_lives(client: TestClient) -> None:
    """These schemas used to segfault the server while their grammar was parsed."""
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": False}
    for schema in (BIG_STRING, BIG_ARRAY):
        r = client.post("/api/chat", json=chat | {"format": schema})
        assert r.status_code == 400 and "1000" in r.json()["error"]
        r = client.post("/api/generate", json={"model": "tiny", "prompt": "hi", "format": schema, "stream": False})
        assert r.status_code == 400 and "1000" in r.json()["error"]
        r = client.post(
            "/v1/chat/completions",
            json={
                "model": "tiny",
                "messages": [{"role": "user", "content": "hi"}],
                "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
            },
        )
        assert r.status_code == 400 and "1000" in r.json()["error"]["message"]
        r = client.post(
            "/v1/responses",
            json={
                "model": "tiny",
                "input": "hi",
                "text": {"format": {"type": "json_schema", "name": "x", "schema": schema}},
            },
        )
        assert r.status_code == 400 and "1000" in r.json()["error"]["message"]
    # A long but bounded string still constrains the output (from its first token: no thinking first).
    ok = chat | {"format": {"type": "string", "maxLength": 1000}, "options": {"temperature": 0, "num_predict": 8}}
    ok["think"] = False
    r = client.post("/api/chat", json=ok)
    assert r.status_code == 200, r.text
    assert r.json()["message"]["content"].startswith('"')


def test_what_a_schema_format_lets_a_model_write_is_json_of_that_schema() -> None:
    # llama-cpp-python's converter let raw control characters into strings (a raw tab or line
    # break): JSON that json.loads and every client refuses. Texts drawn at random from the
    # grammar must all parse and hold to the schema.
    pytest.importorskip("llama_cpp")
    import json

    import jsonschema
    from gbnf_sample import Sampler

    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["name", "tags"],
    }
    grammar = grammar_for_format(schema)
    assert grammar is not None
    texts = [Sampler(grammar, seed).text() for seed in range(80)]
    for text in texts:
        jsonschema.validate(json.loads(text), schema)
    assert any("\\" in text for text in texts)  # escapes were drawn, and parsed
