"""Ollama's ``options`` through /v1 (Ollama #4447, #2722, #5356): the ``openai`` SDK's
``extra_body`` reaches /v1/chat/completions, /v1/completions, /v1/responses and /v1/embeddings,
where it means what it means on /api, with the same errors."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from conftest import serve_tiny

openai = pytest.importorskip("openai")

pytestmark = pytest.mark.model
MODEL = "tiny"
MESSAGES = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server of its own (these tests reload the model with other contexts) whose ``tiny`` never
    ends a generation by itself: a token count then says which limit held, whatever the CPU's
    kernels sample (an unseeded sample had ended after 3 tokens, under a limit of 5)."""
    with serve_tiny(tmp_path_factory.mktemp("options"), endless=True) as served:
        yield served


@pytest.fixture(scope="module")
def client(url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{url}/v1", api_key="ollama", max_retries=0, timeout=60) as c:
        yield c


def _context_length(url: str) -> int:
    (running,) = httpx.get(f"{url}/api/ps").json()["models"]
    return int(running["context_length"])


def test_num_ctx_and_num_predict_reach_chat_completions(client: openai.OpenAI, url: str) -> None:
    out = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, extra_body={"options": {"num_ctx": 768, "num_predict": 3, "top_k": 1}}
    )
    assert out.usage is not None and out.usage.completion_tokens == 3
    assert _context_length(url) == 768
    # OpenAI's own field wins over the same setting in options.
    out = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=5, extra_body={"options": {"num_ctx": 768, "num_predict": 3}}
    )
    assert out.usage is not None and out.usage.completion_tokens == 5


def test_options_reach_completions_and_responses(client: openai.OpenAI, url: str) -> None:
    text = client.completions.create(model=MODEL, prompt="Once", extra_body={"options": {"num_predict": 2}})
    assert text.usage is not None and text.usage.completion_tokens == 2
    response = client.responses.create(
        model=MODEL, input="Hi", extra_body={"options": {"num_ctx": 1024, "num_predict": 4}}
    )
    assert response.usage is not None and response.usage.output_tokens == 4
    assert _context_length(url) == 1024


def test_num_ctx_reaches_embeddings(client: openai.OpenAI, url: str) -> None:
    """A larger context than loaded reloads the model for it, as /api/embed's options do."""
    out = client.embeddings.create(model=MODEL, input="the sea", extra_body={"options": {"num_ctx": 1280}})
    assert len(out.data) == 1 and out.usage.prompt_tokens > 0
    assert _context_length(url) == 1280


def test_bad_options_get_the_errors_of_api(client: openai.OpenAI, url: str) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, extra_body={"options": "fast"})
    assert bad.value.message.endswith(
        "json: cannot unmarshal string into Go struct field ChatCompletionRequest.options"
        " of type map[string]interface {}"
    )
    native = httpx.post(
        f"{url}/api/chat", json={"model": MODEL, "messages": MESSAGES, "options": {"temperature": "hot"}}
    )
    for call in (
        lambda: client.chat.completions.create(
            model=MODEL, messages=MESSAGES, extra_body={"options": {"temperature": "hot"}}
        ),
        lambda: client.embeddings.create(model=MODEL, input="hi", extra_body={"options": {"num_ctx": "big"}}),
    ):
        with pytest.raises(openai.InternalServerError) as wrong:
            call()
        assert wrong.value.status_code == native.status_code == 500
    assert native.json()["error"] == 'option "temperature" must be of type float32'
    with pytest.raises(openai.BadRequestError) as bad:
        client.embeddings.create(model=MODEL, input="hi", extra_body={"options": [1]})
    assert "EmbedRequest.options" in bad.value.message
