"""/v1/messages reports Anthropic's prompt cache counters over a real model: tokens read from the
cache (KV reused), written to it where ``cache_control`` breakpoints ask, and the rest."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings

pytestmark = pytest.mark.model

SYSTEM = " ".join(f"Rule {i}: answer in one short sentence about file {i}." for i in range(20))


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(replace(settings, context_length=1024)), base_url="http://localhost") as c:
        yield c


def body(question: str, *, hinted: bool, stream: bool = False) -> dict[str, Any]:
    system: list[dict[str, Any]] = [{"type": "text", "text": SYSTEM}]
    if hinted:
        system[0]["cache_control"] = {"type": "ephemeral"}
    return {
        "model": "tiny",
        "max_tokens": 4,
        "temperature": 0,
        "system": system,
        "messages": [{"role": "user", "content": question}],
        "stream": stream,
    }


def total(usage: dict[str, int]) -> int:
    return usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"]


def test_breakpoints_report_what_was_written_and_read(client: TestClient) -> None:
    cold = client.post("/v1/messages", json=body("Which file?", hinted=True)).json()["usage"]
    # As Anthropic counts: the marked system prompt written to the cache, the question after it not.
    assert cold["cache_read_input_tokens"] == 0 and 0 < cold["input_tokens"] < 32
    assert cold["cache_creation_input_tokens"] > 200
    warm = client.post("/v1/messages", json=body("Which rule?", hinted=True)).json()["usage"]
    # The system prompt's KV was reused; only the new question, after the breakpoint, was computed.
    assert warm["cache_read_input_tokens"] > 200
    assert warm["cache_creation_input_tokens"] == 0 and 0 < warm["input_tokens"] < 32
    # The counters add up to the prompt, as Anthropic's do (the questions differ by a token).
    assert abs(total(warm) - total(cold)) <= 2


def test_without_breakpoints_reused_tokens_are_still_reported_as_read(client: TestClient) -> None:
    client.post("/v1/messages", json=body("Which file?", hinted=False))
    response = client.post("/v1/messages", json=body("Which rule?", hinted=False, stream=True))
    deltas = [
        json.loads(line.removeprefix("data: "))
        for line in response.text.splitlines()
        if line.startswith("data: ") and '"message_delta"' in line
    ]
    usage = deltas[-1]["usage"]
    assert usage["cache_read_input_tokens"] > 200 and usage["cache_creation_input_tokens"] == 0
    assert 0 < usage["input_tokens"] < 32


def test_a_marked_system_prompt_is_kept_where_nothing_else_would_keep_it(settings: Settings, tmp_path: Path) -> None:
    """With the disk tier alone (no host RAM to save a reused slot into) and one slot, a short
    prompt's KV lives only in its slot: an unrelated request then overwrites it. The system
    prompt's breakpoint saved its state at its end, so a later question over it reads it from
    disk; without the breakpoint the same sequence computes it all again."""
    disk_only = replace(
        settings, context_length=1024, num_parallel=1, cache_ram_mib=0, cache_dir=tmp_path / "kv", cache_disk_mib=64
    )
    other = {"model": "tiny", "max_tokens": 2, "messages": [{"role": "user", "content": "Unrelated words here."}]}
    read, said = {}, {}
    for hinted in (False, True):
        with TestClient(
            create_app(replace(disk_only, cache_dir=tmp_path / f"kv{hinted}")), base_url="http://localhost"
        ) as c:
            assert c.post("/v1/messages", json=body("Which file?", hinted=hinted)).status_code == 200
            assert c.post("/v1/messages", json=other).status_code == 200
            reply = c.post("/v1/messages", json=body("Which rule?", hinted=hinted)).json()
            read[hinted] = reply["usage"].get("cache_read_input_tokens", 0)
            said[hinted] = reply["content"]
    assert read[False] < 32  # the template's first tokens at most
    assert read[True] > 200  # the system prompt, from the state saved at its breakpoint
    assert said[True] == said[False]  # greedy: the restored prefix answers as the computed one
