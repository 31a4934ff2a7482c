"""The fake server the bench tests send to (a module may define its own ``fake``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from benchfake import FakeServer, serving


@pytest.fixture
def fake() -> Iterator[tuple[FakeServer, str]]:
    server = FakeServer()
    with serving(server) as url:
        yield server, url
