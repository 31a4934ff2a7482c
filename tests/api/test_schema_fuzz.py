"""The bad-input suite generated from the OpenAPI document (tests/schema_fuzz.py), bounded for CI.

Every operation gets a few valid and a few schema-breaking requests (Hypothesis, derandomized so
CI is repeatable) against a real uvicorn server with the tiny models loaded; no answer may be an
unexpected 5xx, an error in the wrong shape, a broken stream or a hang, no handler may log a
traceback, and afterwards the server still answers and holds no slot.
``python -m tests.schema_fuzz --examples 2000`` is the long, random run of the same checks.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import schema_fuzz
from fakehub import FakeHub
from serving import serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.store.create import import_gguf
from cllm_ollama.store.store import ModelStore

pytestmark = pytest.mark.model
EXAMPLES_WITH_BODY = 10  # per operation and mode
EXAMPLES_WITHOUT_BODY = 3  # GET/HEAD: only path parameters vary, if any


class _Tracebacks(logging.Handler):
    """Log records carrying an exception: an error no handler expected (uvicorn's, the stream's)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


@pytest.fixture(scope="module")
def live(
    tmp_path_factory: pytest.TempPathFactory, qwen3_gguf: Path, endless_gguf: Path
) -> Iterator[tuple[str, _Tracebacks]]:
    models = tmp_path_factory.mktemp("fuzz") / "models"
    store = ModelStore(models)
    import_gguf(store, "tiny", qwen3_gguf)
    import_gguf(store, "endless", endless_gguf)
    settings = Settings(models_dir=models, num_parallel=4, context_length=256, num_thread=2)
    handler = _Tracebacks()
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "cllm")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        with serve_in_thread(create_app(settings)) as url:
            yield url, handler
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


@pytest.mark.parametrize(("label", "mode"), schema_fuzz.runs())
def test_generated_requests(live: tuple[str, _Tracebacks], fake_hub: FakeHub, label: str, mode: str) -> None:
    url, tracebacks = live
    tracebacks.records.clear()  # each test answers for its own requests
    examples = EXAMPLES_WITH_BODY if schema_fuzz.has_body(label) else EXAMPLES_WITHOUT_BODY
    tally = schema_fuzz.Tally()
    schema_fuzz.fuzz_operation(url, label, mode, examples, tally, timeout=30)
    assert tally.tried > 0
    assert not tally.failures, "\n".join(tally.failures)
    assert not tracebacks.records, [r.getMessage() for r in tracebacks.records]


def test_afterwards_the_server_answers_and_holds_no_slot(live: tuple[str, _Tracebacks]) -> None:
    url, tracebacks = live
    assert schema_fuzz.server_answers(url)
    assert schema_fuzz.slots_all_free(url) == []
    assert not tracebacks.records
