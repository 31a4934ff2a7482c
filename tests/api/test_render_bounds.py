"""Prompt rendering is bounded: templates that never end stop at the render timeout, a client
that leaves stops its render, and a long chat is fitted in O(log n) renders."""

from __future__ import annotations

import json
import logging
import math
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import gguf
import pytest
from serving import serve_in_thread
from starlette.testclient import TestClient
from test_chat_prompt import LOADED, MODEL

from cllm_ollama.app import create_app
from cllm_ollama.chatformat import jinja_workers
from cllm_ollama.chatformat.jinja import render_chat
from cllm_ollama.chatformat.jinja_workers import POOL, RenderSession
from cllm_ollama.chatformat.prompt import ChatPrompt
from cllm_ollama.chatformat.render_budget import PromptTooLong, RenderBudget, RenderTimeout
from cllm_ollama.config import ConfigError, Settings
from cllm_ollama.errors import CllmError, InvalidRequest
from cllm_ollama.store.create import import_gguf
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import qwen3_chat_template, write_qwen3

MESSAGES = [{"role": "user", "content": "Hi"}]
CHATML = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
NESTED_LOOPS = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
# A loop over a literal makes no call the sandbox could intercept.
LITERAL_LOOP = "{% for i in range(100000) %}{% for c in '" + "x" * 5000 + "' %}{% endfor %}{% endfor %}"
EXPONENTIAL_MACRO = "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}"
# A generous bound on a call that must return by itself: it turns a hang into a failure.
HANG_GUARD_S = 120


def finishes(call: Callable[[], Any]) -> Any:
    """``call()``'s result, or its exception; a failure if it has not returned within the guard."""
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(call)
        try:
            return future.result(HANG_GUARD_S)
        except TimeoutError:
            pytest.fail("still rendering")


def render_in_pool(template: str, budget: RenderBudget) -> str:
    with POOL.session(template, MESSAGES, budget) as session:
        return session.render()


@pytest.mark.parametrize(
    "template",
    [NESTED_LOOPS, LITERAL_LOOP, EXPONENTIAL_MACRO],
    ids=["nested-ranges", "literal-loop", "macro-recursion"],
)
def test_a_looping_jinja_template_stops_at_the_timeout(template: str) -> None:
    with pytest.raises(RenderTimeout) as err:
        finishes(lambda: render_in_pool(template, RenderBudget(0.3)))
    assert err.value.status_code == 500 and err.value.message == "template: rendering timed out after 0.3s"
    # The pinned worker was killed; the next render gets a fresh one.
    assert finishes(lambda: render_in_pool(CHATML, RenderBudget(10))) == "<|user|>Hi"


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ 'x' * 10**10 }}", "template: rendering ran out of memory"),
        ("{{ '{:>99999999999}'.format(1) }}", "template: rendering ran out of memory"),
        ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "template: RecursionError"),
    ],
)
def test_a_template_that_explodes_in_one_step_fails_cleanly(template: str, message: str) -> None:
    with pytest.raises(CllmError) as err:
        finishes(lambda: render_in_pool(template, RenderBudget(10)))
    assert err.value.status_code == 500 and err.value.message.startswith(message)


def test_output_is_capped() -> None:
    template = "{% for i in range(1000) %}0123456789{% endfor %}"
    assert len(finishes(lambda: render_in_pool(template, RenderBudget(10, max_chars=10000)))) == 10000
    with pytest.raises(PromptTooLong):
        finishes(lambda: render_in_pool(template, RenderBudget(10, max_chars=9999)))
    with pytest.raises(PromptTooLong):
        render_chat(template, MESSAGES, max_chars=9999)


def test_workers_render_as_the_server_process_would() -> None:
    qwen3 = qwen3_chat_template()
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Héllo <tag> \u2028"}]
    with POOL.session(qwen3, messages, RenderBudget(), enable_thinking=False, tools=None) as session:
        assert session.render() == render_chat(qwen3, messages, enable_thinking=False)
        assert session.render([1]) == render_chat(qwen3, messages[1:], enable_thinking=False)
    with (
        pytest.raises(InvalidRequest, match=r"^roles$"),
        POOL.session("{{ raise_exception('roles') }}", [], RenderBudget()) as s,
    ):
        s.render()


def test_a_waiting_render_stops_when_cancelled() -> None:
    budget = RenderBudget(60)
    threading.Timer(0.2, budget.cancel.set).start()
    with pytest.raises(CllmError) as err:
        finishes(lambda: render_in_pool(NESTED_LOOPS, budget))
    assert err.value.status_code == 499


# --- fitting a long chat (over test_chat_prompt.py's qwen3 stub, one token per word) --------------


def history(turns: int) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        messages += [
            {"role": "user", "content": f"question{i} " * (1 + i % 7)},
            {"role": "system", "content": f"note{i}"} if i % 10 == 3 else {"role": "assistant", "content": "answer"},
        ]
    return [*messages, {"role": "user", "content": "last question"}]


def one_turn_at_a_time(messages: list[dict[str, str]], limit: int) -> str:
    """The former fitting: re-render after each dropped turn."""
    kept = list(messages)
    while True:
        text = render_chat(qwen3_chat_template(), kept)
        oldest = next((i for i, m in enumerate(kept[:-1]) if m["role"] != "system"), None)
        if len(text.split()) < limit or oldest is None:
            return text
        del kept[oldest]


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many renders ran, counted as they run (they may run on another thread)."""
    count = [0]
    real = RenderSession.render

    def counting(self: RenderSession, keep: list[int] | None = None) -> str:
        count[0] += 1
        return real(self, keep)

    monkeypatch.setattr(RenderSession, "render", counting)
    return count


@pytest.mark.parametrize("limit", [3, 40, 150, 151, 400, 2000])
def test_fitting_drops_the_same_turns_as_one_at_a_time(limit: int) -> None:
    messages = history(30)
    assert ChatPrompt(MODEL, messages, thinking=False)(LOADED, limit).text == one_turn_at_a_time(messages, limit)


def test_a_thousand_turn_chat_is_fitted_in_log_n_renders(renders: list[int]) -> None:
    messages = history(1000)
    rendered = ChatPrompt(MODEL, messages, thinking=False)(LOADED, 300)
    assert len(rendered.tokens) < 300 and "question999" in rendered.text and "question0 " not in rendered.text
    assert renders[0] <= math.ceil(math.log2(2000)) + 2


# --- Go templates ---------------------------------------------------------------------------------


def test_cubic_go_template_stops_at_the_timeout() -> None:
    from cllm_ollama.chatformat.gotemplate import render_go_template

    template = "{{range .Messages}}{{range $.Messages}}{{range $.Messages}}{{.Role}}{{end}}{{end}}{{end}}"
    data = {"Messages": [{"Role": "user"}] * 300}
    with pytest.raises(RenderTimeout):
        finishes(lambda: render_go_template(template, data, RenderBudget(0.3)))
    with pytest.raises(PromptTooLong):
        finishes(lambda: render_go_template(template, data, RenderBudget(60, max_chars=1000)))


# --- over HTTP ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def looping_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gguf") / "looping.gguf"
    return write_qwen3(path, qtype=gguf.GGMLQuantizationType.Q8_0, chat_template=NESTED_LOOPS)


@pytest.fixture
def looping(settings: Settings, looping_gguf: Path) -> Settings:
    import_gguf(ModelStore(settings.models_dir), "looping", looping_gguf)
    return replace(settings, render_timeout=0.3)


@pytest.mark.model
def test_a_looping_chat_template_is_a_500_and_the_server_keeps_answering(looping: Settings) -> None:
    body = {"model": "looping", "messages": MESSAGES, "stream": False}
    with TestClient(create_app(looping), base_url="http://localhost") as client:
        with ThreadPoolExecutor(6) as pool:
            chats = [pool.submit(client.post, "/api/chat", json=body) for _ in range(6)]
            # Renders wait for a render worker, not for the threads every endpoint shares.
            assert client.get("/api/tags").status_code == 200
            answers = [finishes(chat.result) for chat in chats]
        for answer in answers:
            assert answer.status_code == 500
            assert answer.json() == {"error": "template: rendering timed out after 0.3s"}
        assert client.get("/api/tags").status_code == 200
        ok = client.post("/api/chat", json={**body, "model": "tiny", "options": {"num_predict": 2}})
        assert ok.status_code == 200


@pytest.mark.model
@pytest.mark.parametrize(
    ("template", "error"),
    [
        ("{{range 5}}", "template: :1: unexpected EOF: missing {{end}}"),
        ("{{range .Prompt}}{{.}}{{end}}", "template: range can't iterate over Hi"),
        ("{{range .Messages}}" * 101 + "{{end}}" * 101, "template: blocks nested deeper than 100"),
    ],
    ids=["unclosed", "string", "deep"],
)
def test_a_request_go_template_gives_a_clean_500(client: TestClient, template: str, error: str) -> None:
    answer = client.post("/api/generate", json={"model": "tiny", "prompt": "Hi", "template": template, "stream": False})
    assert (answer.status_code, answer.json()) == (500, {"error": error})


@pytest.mark.model
def test_a_thousand_turn_chat_over_a_small_context(settings: Settings, renders: list[int]) -> None:
    messages = history(1000)
    body = {"model": "tiny", "messages": messages, "stream": False, "options": {"num_ctx": 128, "num_predict": 1}}
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        answer = client.post("/api/chat", json=body)
    assert answer.status_code == 200, answer.text
    assert 0 < answer.json()["prompt_eval_count"] < 128
    assert renders[0] <= math.ceil(math.log2(2000)) + 2


@pytest.mark.model
def test_a_client_that_leaves_stops_its_render(
    looping: Settings, caplog: pytest.LogCaptureFixture, wait_until: Callable[[Callable[[], bool]], None]
) -> None:
    payload = json.dumps({"model": "looping", "messages": MESSAGES, "stream": False}).encode()
    with serve_in_thread(create_app(replace(looping, render_timeout=600))) as url, caplog.at_level(logging.WARNING):
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as impatient:
            impatient.sendall(
                b"POST /api/chat HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(payload)}\r\n\r\n".encode()
                + payload
            )
            wait_until(lambda: POOL.busy == 1)
        wait_until(lambda: POOL.busy == 0)
    assert any("killed: request canceled" in r.getMessage() for r in caplog.records)


@pytest.fixture
def wait_until() -> Callable[[Callable[[], bool]], None]:
    def wait(condition: Callable[[], bool]) -> None:
        event = threading.Event()
        for _ in range(HANG_GUARD_S * 100):
            if condition():
                return
            event.wait(0.01)
        pytest.fail("condition not reached")

    return wait


def test_render_timeout_setting() -> None:
    assert Settings().render_timeout == 5.0
    assert Settings.from_env({"CLLM_RENDER_TIMEOUT": "500ms"}).render_timeout == 0.5
    assert Settings.from_env({"OLLAMA_RENDER_TIMEOUT": "2"}).render_timeout == 2.0
    with pytest.raises(ConfigError):
        Settings.from_env({"CLLM_RENDER_TIMEOUT": "0"})
    assert jinja_workers.WORKERS >= 1


@pytest.fixture(autouse=True)
def _idle_pool() -> Iterator[None]:
    yield
    assert POOL.busy == 0
