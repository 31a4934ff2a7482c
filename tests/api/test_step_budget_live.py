"""The step budget live: a short chat is answered while someone else's long prompt is still being
read, over the tiny model on a real server (issue 32). Not a timing: the order of two server-side
timestamps shows the long prompt's prefill interleaved with the short one's whole life."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import httpx
import orjson
import pytest
from serving import serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings

pytestmark = pytest.mark.model
# ~12k tokens: at 64 prompt tokens a step, 190-odd steps.
DOCUMENT = "the sea and the sky and the land " * 1500


def stamp(chunk: dict[str, object]) -> datetime:
    return datetime.fromisoformat(str(chunk["created_at"]).replace("Z", "+00:00"))


def test_a_short_chat_is_answered_while_a_long_prompt_is_read(settings: Settings) -> None:
    live = replace(settings, context_length=16384, num_parallel=2, num_batch=64, context_grow=0)
    options = {"temperature": 0, "num_predict": 2}
    with serve_in_thread(create_app(live)) as url, httpx.Client(base_url=url, timeout=300) as client:
        client.post("/api/generate", json={"model": "tiny", "prompt": "", "keep_alive": "5m"}).raise_for_status()
        long_body = {"model": "tiny", "prompt": DOCUMENT, "raw": True, "options": options}
        with client.stream("POST", "/api/generate", json=long_body) as long:
            assert long.status_code == 200  # headers at admission: the document is in the engine's hands
            short_body = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "stream": False}
            short = client.post("/api/chat", json=short_body | {"options": options, "think": False})
            assert short.status_code == 200, short.text
            chunks = [orjson.loads(line) for line in long.iter_lines() if line]
    first_of_long = next(c for c in chunks if c.get("response") or c.get("done"))
    assert chunks[-1]["prompt_eval_count"] > 10_000
    # The short chat ended before the document's first token: its prompt did not wait for the
    # document's (arrival order alone would have made it wait for all of it).
    assert stamp(short.json()) < stamp(first_of_long)
