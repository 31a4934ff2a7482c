"""Model names: Ollama's grammar, defaults, display form, and the store-root safety rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from cllm_ollama.errors import InvalidRequest
from cllm_ollama.store.manifests import manifest_path
from cllm_ollama.store.names import ModelName, parse_name


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("qwen3", ("registry.ollama.ai", "library", "qwen3", "latest")),
        ("qwen3:0.6b", ("registry.ollama.ai", "library", "qwen3", "0.6b")),
        ("user/model:v1", ("registry.ollama.ai", "user", "model", "v1")),
        ("example.com/ns/m", ("example.com", "ns", "m", "latest")),
        ("localhost:5000/ns/m", ("localhost:5000", "ns", "m", "latest")),
        ("localhost:5000/ns/m:t", ("localhost:5000", "ns", "m", "t")),
        ("https://example.com/ns/m:t", ("example.com", "ns", "m", "t")),
        ("hf.co/unsloth/Qwen3-0.6B-GGUF:Q4_K_M", ("hf.co", "unsloth", "Qwen3-0.6B-GGUF", "Q4_K_M")),
        (
            "huggingface.co/bartowski/SmolLM2-135M-Instruct-GGUF",
            ("huggingface.co", "bartowski", "SmolLM2-135M-Instruct-GGUF", "latest"),
        ),
        ("hf.co/u/r:Llama-3.2-3B-Instruct-IQ3_M.gguf", ("hf.co", "u", "r", "Llama-3.2-3B-Instruct-IQ3_M.gguf")),
        ("_m:_t", ("registry.ollama.ai", "library", "_m", "_t")),
        ("m" * 80 + ":" + "t" * 80, ("registry.ollama.ai", "library", "m" * 80, "t" * 80)),
    ],
)
def test_parse_valid(text: str, parts: tuple[str, str, str, str]) -> None:
    assert parse_name(text).parts == parts


@pytest.mark.parametrize(
    "text",
    [
        "",
        ":",
        "qwen3:",
        ":latest",
        "/m",
        "ns/",
        "a/b/c/d",
        "../m",
        "ns/..",
        "..",
        ".hidden",
        "m:..",
        "-m",
        "m:-t",
        "ns.with.dot/m",
        "h/ns/m/extra:t",
        "m\\x",
        "m\x00",
        "m:t/x",
        "with space",
        "m" * 81,
        "m:" + "t" * 81,
        "h" * 351 + "/ns/m",
        "/etc/passwd",
        "m@sha256:abc",
    ],
)
def test_parse_invalid(text: str) -> None:
    with pytest.raises(InvalidRequest, match=r"^invalid model name$"):
        parse_name(text)


def test_host_up_to_350_characters() -> None:
    assert parse_name("h" * 350 + "/ns/m").host == "h" * 350


@pytest.mark.parametrize(
    ("text", "shortest"),
    [
        ("qwen3", "qwen3:latest"),
        ("Qwen3:0.6B", "Qwen3:0.6B"),
        ("registry.ollama.ai/library/llama3.2", "llama3.2:latest"),
        ("REGISTRY.OLLAMA.AI/Library/m:t", "m:t"),
        ("user/m:t", "user/m:t"),
        ("registry.ollama.ai/user/m", "user/m:latest"),
        ("hf.co/u/r:Q4_K_M", "hf.co/u/r:Q4_K_M"),
        ("example.com/library/m", "example.com/library/m:latest"),
    ],
)
def test_display_shortest(text: str, shortest: str) -> None:
    assert parse_name(text).display_shortest() == shortest


def test_matching_ignores_case_only() -> None:
    a = parse_name("Qwen3:0.6B")
    assert a.matches(parse_name("qwen3:0.6b"))
    assert a.matches(parse_name("registry.ollama.ai/LIBRARY/QWEN3:0.6b"))
    assert not a.matches(parse_name("qwen3:0.6b-q8"))
    assert parse_name("hf.co/u/r").is_huggingface and parse_name("HuggingFace.co/u/r").is_huggingface
    assert not parse_name("u/r").is_huggingface


def test_manifest_path_stays_under_root(tmp_path: Path) -> None:
    root = tmp_path / "manifests"
    assert manifest_path(root, parse_name("hf.co/u/r:Q4_K_M")) == root / "hf.co" / "u" / "r" / "Q4_K_M"
    for bad in (ModelName("..", "ns", "m", "t"), ModelName("h", "a/b", "m", "t"), ModelName("h", "n", "m", "")):
        with pytest.raises(ValueError, match="escapes the store"):
            manifest_path(root, bad)
