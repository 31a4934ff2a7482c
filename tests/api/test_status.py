"""GET /api/status: Ollama's cloud switch, which ``ollama launch`` reads before offering cloud models."""

from __future__ import annotations

from dataclasses import replace

import pytest
from starlette.testclient import TestClient

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings


@pytest.mark.parametrize(("no_cloud", "source"), [(False, "none"), (True, "env")])
def test_the_cloud_is_always_off(store_settings: Settings, no_cloud: bool, source: str) -> None:
    """cllm has no cloud to offer, so a client never lists models it cannot serve; the source is
    Ollama's reading of OLLAMA_NO_CLOUD."""
    with TestClient(create_app(replace(store_settings, no_cloud=no_cloud)), base_url="http://localhost") as client:
        r = client.get("/api/status")
    assert r.status_code == 200
    assert r.json() == {"cloud": {"disabled": True, "source": source}}


def test_no_cloud_is_read_as_ollama_reads_it() -> None:
    assert Settings.from_env({"OLLAMA_NO_CLOUD": "1"}).no_cloud
    assert Settings.from_env({"CLLM_NO_CLOUD": "true"}).no_cloud
    assert not Settings.from_env({"OLLAMA_NO_CLOUD": "0"}).no_cloud
    assert not Settings.from_env({}).no_cloud
