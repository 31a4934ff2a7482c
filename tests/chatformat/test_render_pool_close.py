"""The render workers have an owner that stops them: ``RenderPool.close`` (the idle ones at once,
the busy ones as their sessions end), and the app's lifespan closes the shared pool at shutdown."""

from __future__ import annotations

import os
from pathlib import Path

from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.chatformat import jinja_workers
from cllm_ollama.chatformat.jinja_workers import RenderPool
from cllm_ollama.chatformat.render_budget import RenderBudget
from cllm_ollama.config import Settings

TEMPLATE = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
MESSAGES = [{"role": "user", "content": "Hi"}]


def render(pool: RenderPool) -> str:
    with pool.session(TEMPLATE, MESSAGES, RenderBudget(60)) as session:
        return session.render()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_close_stops_the_idle_workers_and_the_pool_stays_usable() -> None:
    pool = RenderPool(2)
    try:
        assert render(pool) == "<|user|>Hi"
        pids = pool.pids()
        assert pids and all(alive(pid) for pid in pids)
        pool.close()
        assert pool.pids() == [] and not any(alive(pid) for pid in pids)
        assert render(pool) == "<|user|>Hi"  # fresh workers
    finally:
        pool.close()


def test_a_worker_busy_at_close_is_stopped_when_its_session_ends() -> None:
    pool = RenderPool(1)
    try:
        with pool.session(TEMPLATE, MESSAGES, RenderBudget(60)) as session:
            assert session.render() == "<|user|>Hi"
            pool.close()
            assert session.render() == "<|user|>Hi"  # a render under way is not cut short
        assert pool.pids() == [] and pool.busy == 0
    finally:
        pool.close()


def test_the_app_s_lifespan_closes_the_shared_pool(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(models_dir=tmp_path / "models"))):
        assert render(jinja_workers.POOL) == "<|user|>Hi"
        pids = jinja_workers.POOL.pids()
        assert pids
    assert jinja_workers.POOL.pids() == []
    assert not any(alive(pid) for pid in pids)
