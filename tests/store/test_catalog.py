"""The shipped catalog: the names issue 2 promises, resolved from the installed package data."""

from __future__ import annotations

import pytest

from cllm_ollama.store.catalog import default_catalog
from cllm_ollama.store.names import parse_name

REQUIRED = ["qwen3:0.6b", "qwen3:1.7b", "qwen3:4b", "qwen3:8b", "llama3.2:1b", "llama3.2:3b", "gemma3:1b",
            "smollm2:135m", "nomic-embed-text"]  # fmt: skip


@pytest.mark.parametrize("name", REQUIRED)
def test_required_names_resolve(name: str) -> None:
    entry = default_catalog().lookup(parse_name(name))
    assert entry is not None
    assert entry.repo.count("/") == 1 and entry.file.endswith(".gguf")
    assert entry.license


def test_every_listed_name_resolves() -> None:
    names = default_catalog().names()
    assert set(REQUIRED) - {"nomic-embed-text"} <= set(names)
    assert all(default_catalog().lookup(parse_name(n)) is not None for n in names)


def test_latest_and_case() -> None:
    catalog = default_catalog()
    assert catalog.lookup(parse_name("qwen3")) == catalog.lookup(parse_name("qwen3:8b"))
    assert catalog.lookup(parse_name("QWEN3:0.6B")) == catalog.lookup(parse_name("qwen3:0.6b"))
    assert catalog.lookup(parse_name("qwen3:70b")) is None
    assert catalog.lookup(parse_name("someone/qwen3:0.6b")) is None
    assert catalog.lookup(parse_name("hf.co/unsloth/Qwen3-0.6B-GGUF")) is None


def test_qwen3_0_6b_is_pinned() -> None:
    entry = default_catalog().lookup(parse_name("qwen3:0.6b"))
    assert entry is not None
    assert (entry.repo, entry.file) == ("unsloth/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q4_K_M.gguf")
    assert entry.revision == "50968a4468ef4233ed78cd7c3de230dd1d61a56b"
    assert entry.size == 396_705_472
    assert entry.sha256 == "ac2d97712095a558e31573f62f466a3f9d93990898b0ec79d7c974c1780d524a"
    assert entry.params["stop"] == ["<|im_start|>", "<|im_end|>"] and entry.params["temperature"] == 0.6
