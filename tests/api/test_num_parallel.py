"""A model's own slot count: ``num_parallel`` in /api/create's parameters (or a Modelfile's
PARAMETER), shown by /api/show, and the slots its loaded engine runs."""

from __future__ import annotations

import pytest
from conftest import MODEL
from starlette.testclient import TestClient

from cllm_ollama.api.services import services

pytestmark = pytest.mark.model


def test_a_model_created_with_num_parallel_runs_that_many_slots(client: TestClient) -> None:
    body = {"model": "two", "from": MODEL, "parameters": {"num_parallel": 2}, "stream": False}
    assert client.post("/api/create", json=body).json() == {"status": "success"}
    shown = client.post("/api/show", json={"model": "two"}).json()
    assert "num_parallel                   2" in shown["parameters"].splitlines()
    assert "PARAMETER num_parallel 2" in shown["modelfile"]

    pool = services(client.app).pool
    r = client.post(
        "/api/generate", json={"model": "two", "prompt": "Hi", "stream": False, "options": {"num_predict": 2}}
    )
    assert r.status_code == 200
    (entry,) = pool.running()
    assert entry.model.n_slots == 2 and entry.model.runner.ctx.n_seq_max == 2

    # The same weights as a model without num_parallel: served by what is loaded, not reloaded.
    r = client.post(
        "/api/generate", json={"model": MODEL, "prompt": "Hi", "stream": False, "options": {"num_predict": 2}}
    )
    assert r.status_code == 200
    (entry,) = pool.running()
    assert entry.model.n_slots == 2


def test_a_request_cannot_set_num_parallel(client: TestClient) -> None:
    pool = services(client.app).pool
    options = {"num_predict": 2, "num_parallel": 1}
    r = client.post("/api/generate", json={"model": MODEL, "prompt": "Hi", "stream": False, "options": options})
    assert r.status_code == 200
    (entry,) = pool.running()
    assert entry.model.n_slots == 4  # the server's OLLAMA_NUM_PARALLEL; the option is ignored


@pytest.mark.parametrize("bad", ["two", True, 2.5, [2], {"n": 2}])
def test_a_num_parallel_that_is_no_integer_is_refused_at_create(client: TestClient, bad: object) -> None:
    body = {"model": "bad", "from": MODEL, "parameters": {"num_parallel": bad}, "stream": False}
    r = client.post("/api/create", json=body)
    assert r.status_code == 400
    assert r.json() == {"error": 'option "num_parallel" must be of type integer'}
    assert client.post("/api/show", json={"model": "bad"}).status_code == 404
