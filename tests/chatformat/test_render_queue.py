"""Renders queued fairly across models, and renders that timed out refused at once."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from cllm_ollama.chatformat import jinja_workers
from cllm_ollama.chatformat.prompt import ChatPrompt, TimedOut
from cllm_ollama.chatformat.render_budget import RenderBudget, RenderTimeout
from cllm_ollama.chatformat.render_queue import FairQueue

LOOPING = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
LOADED: Any = SimpleNamespace(bos_text="", eos_text="", tokenize=lambda text, add_special: text.split())


def model(template: str) -> Any:
    return SimpleNamespace(
        info=SimpleNamespace(chat_template=template),
        record=SimpleNamespace(renderer_in_use="", template=None),
        has=lambda cap: False,
        full_name="looping",
    )


def test_models_take_turns_and_none_holds_every_slot() -> None:
    async def run() -> list[str]:
        queue = FairQueue(3)
        order: list[str] = []

        async def render(key: str, gate: asyncio.Event) -> None:
            await queue.acquire(key)
            order.append(key)
            await gate.wait()
            queue.release(key)

        gate = asyncio.Event()
        flood = [asyncio.create_task(render("a", gate)) for _ in range(5)]
        await asyncio.sleep(0)
        assert queue.held == {"a": 2}  # all slots but one, though model a waits for more
        other = asyncio.create_task(render("b", gate))
        await asyncio.sleep(0)
        assert queue.held == {"a": 2, "b": 1}  # b finds the slot a could not take
        gate.set()
        await asyncio.gather(*flood, other)
        assert queue.running == 0 and not queue.held
        return order

    assert asyncio.run(run()) == ["a", "a", "b", "a", "a", "a"]


def test_a_freed_slot_goes_to_the_next_model_that_waits() -> None:
    async def run() -> list[str]:
        queue = FairQueue(2)  # one slot per model
        order: list[str] = []
        await queue.acquire("x")  # held by a third model until the end
        await queue.acquire("a")
        waiters = [asyncio.create_task(queue.acquire(k)) for k in ("a", "a", "b", "c")]
        await asyncio.sleep(0)
        for _ in range(4):
            granted = [k for k, held in queue.held.items() if k != "x" for _ in range(held)]
            order += granted
            for key in granted:
                queue.release(key)
            await asyncio.sleep(0)
        await asyncio.gather(*waiters)
        return order

    assert asyncio.run(run()) == ["a", "b", "c", "a"]


def test_a_cancelled_waiter_leaves_the_queue() -> None:
    async def run() -> None:
        queue = FairQueue(1)
        await queue.acquire("a")
        waiter = asyncio.create_task(queue.acquire("b"))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        queue.release("a")
        assert queue.running == 0 and not queue.held
        await asyncio.wait_for(queue.acquire("c"), 1)

    asyncio.run(run())


def test_a_render_that_timed_out_is_refused_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = [{"role": "user", "content": "Hi"}]
    render = ChatPrompt(model(LOOPING), messages, thinking=False)
    with pytest.raises(RenderTimeout):
        render(LOADED, None, RenderBudget(0.3))
    sessions: list[str] = []
    real = jinja_workers.POOL.session
    monkeypatch.setattr(jinja_workers.POOL, "session", lambda *a, **k: sessions.append("x") or real(*a, **k))
    with pytest.raises(RenderTimeout) as err:
        render(LOADED, None, RenderBudget(0.3))
    assert err.value.message == "template: rendering timed out after 0.3s"
    assert not sessions  # refused without a worker
    # Another conversation with the same template is rendered (one client must not make a model's
    # template refused for all), and so is the same one under a longer timeout.
    other = ChatPrompt(model(LOOPING), [{"role": "user", "content": "Hello"}], thinking=False)
    with pytest.raises(RenderTimeout):
        other(LOADED, None, RenderBudget(0.3))
    with pytest.raises(RenderTimeout):
        render(LOADED, None, RenderBudget(0.6))
    assert len(sessions) == 2


def test_timed_out_renders_are_bounded() -> None:
    timed_out = TimedOut()
    for i in range(TimedOut.MAX_TEMPLATES + 5):
        for j in range(TimedOut.MAX_RENDERS + 5):
            timed_out.add(f"t{i}", f"r{j}", 1.0)
    assert not timed_out.has("t0") and timed_out.has(f"t{TimedOut.MAX_TEMPLATES + 4}")
    assert not timed_out.exceeded(f"t{TimedOut.MAX_TEMPLATES + 4}", "r0", 1.0)
    assert timed_out.exceeded(f"t{TimedOut.MAX_TEMPLATES + 4}", "r6", 0.5)
    assert not timed_out.exceeded(f"t{TimedOut.MAX_TEMPLATES + 4}", "r6", 2.0)
