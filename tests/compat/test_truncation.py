"""A prompt cut to fit the context says so (Ollama #4967, #3839): ``truncated_prompt_tokens`` in
the native done chunk, and in the usage the ``openai`` and ``anthropic`` SDKs parse, counting
exactly the tokens the model did not see (the whole prompt's tokens less those evaluated)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

pytestmark = pytest.mark.model
MODEL = "tiny"
FIELD = "truncated_prompt_tokens"
LONG = "the sea and the sky and the land " * 80  # ~640 tokens: more than the 512 loaded
SMALL = {"num_ctx": 256, "num_predict": 2, "temperature": 0}


def _native(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(f"{url}{path}", json={"model": MODEL, "stream": False, **body}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_native_generate_and_chat_count_what_was_cut(own_url: str) -> None:
    short = _native(own_url, "/api/generate", {"prompt": "Hi", "options": SMALL})
    assert FIELD not in short  # an uncut response is exactly Ollama's
    cut = _native(own_url, "/api/generate", {"prompt": LONG, "options": SMALL})
    # The conversation, oldest turns first, with a long one in the middle: turns go, then tokens.
    turns = [{"role": "user", "content": LONG}, {"role": "assistant", "content": "Yes."}]
    turns += [{"role": "user", "content": "And the moon?"}]
    chat = _native(own_url, "/api/chat", {"messages": turns, "options": SMALL, "think": False})
    # The whole prompts, evaluated uncut in a context large enough for them (this reloads the model).
    big = SMALL | {"num_ctx": 2048}
    whole = _native(own_url, "/api/generate", {"prompt": LONG, "options": big})
    whole_chat = _native(own_url, "/api/chat", {"messages": turns, "options": big, "think": False})
    assert FIELD not in whole and FIELD not in whole_chat
    assert cut[FIELD] == whole["prompt_eval_count"] - cut["prompt_eval_count"] > 0
    assert chat[FIELD] == whole_chat["prompt_eval_count"] - chat["prompt_eval_count"] > 0
    refused = httpx.post(
        f"{own_url}/api/generate",
        json={"model": MODEL, "prompt": LONG * 4, "options": SMALL, "truncate": False, "stream": False},
    )
    assert refused.status_code == 400


def test_the_sdks_read_the_count_in_usage(own_url: str) -> None:
    messages = [{"role": "user", "content": LONG * 4}]  # beyond any context loaded here
    with openai.OpenAI(base_url=f"{own_url}/v1", api_key="ollama", max_retries=0, timeout=60) as client:
        out = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=2)
        assert out.usage is not None and (out.usage.model_extra or {}).get(FIELD, 0) > 0
        stream = client.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=2, stream=True, stream_options={"include_usage": True}
        )
        usage = [c.usage for c in stream if c.usage is not None]
        assert len(usage) == 1 and (usage[0].model_extra or {}).get(FIELD) == out.usage.model_extra[FIELD]
        response = client.responses.create(model=MODEL, input=LONG * 4, max_output_tokens=2)
        assert response.usage is not None and (response.usage.model_extra or {}).get(FIELD, 0) > 0
        with client.responses.stream(model=MODEL, input=LONG * 4, max_output_tokens=2) as responses:
            streamed = responses.get_final_response()
        assert streamed.usage is not None
        assert (streamed.usage.model_extra or {}).get(FIELD) == response.usage.model_extra[FIELD]
        plain = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
        assert plain.usage is not None and FIELD not in (plain.usage.model_extra or {})
    claude = anthropic.Anthropic(base_url=own_url, api_key="ollama", max_retries=0, timeout=60)
    msg = claude.messages.create(model=MODEL, max_tokens=2, messages=messages)  # type: ignore[arg-type]
    assert (msg.usage.model_extra or {}).get(FIELD) == out.usage.model_extra[FIELD]
    with claude.messages.stream(model=MODEL, max_tokens=2, messages=messages) as events:  # type: ignore[arg-type]
        final = events.get_final_message()
    assert (final.usage.model_extra or {}).get(FIELD) == out.usage.model_extra[FIELD]
